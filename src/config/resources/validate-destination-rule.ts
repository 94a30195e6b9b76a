// DestinationRule (networking.mesh.io): how connections from this workload to a host are originated
// and balanced: which rule applies (src/security/mtls/destination-rules.ts), its TLS (the mTLS
// resolver), and its traffic policy per port and subset, merged into each cluster's policy by
// src/traffic/clusters.ts. Everything Istio's validation checks is checked here.
import type { DestinationRule, DestinationRuleSubset, ResourceMeta } from './types.js';
import { checkFields, child, FieldError, IGNORE_WARNINGS, item, obj, optList, show, str, type Warn } from './fields.js';
import { checkHostPattern, parseExportTo } from './names.js';
import { checkSelectorLabels, labelMap, parseWorkloadSelector } from './selector.js';
import { parseTrafficPolicy } from './validate-traffic-policy.js';

/** A subset: a DNS-label name, Kubernetes labels, and its own traffic policy (TLS included: subsets are routed to). */
function parseSubset(raw: unknown, field: string, warn: Warn): DestinationRuleSubset {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['name', 'labels', 'trafficPolicy'] });
  const name = checkSubsetName(str(o['name'], child(field, 'name'), { nonEmpty: true }), child(field, 'name'));
  const labels = o['labels'] === undefined ? {} : labelMap(o['labels'], child(field, 'labels'));
  const trafficPolicy = parseTrafficPolicy(o['trafficPolicy'], child(field, 'trafficPolicy'), warn);
  return { name, labels, ...(trafficPolicy !== undefined ? { trafficPolicy } : {}) };
}

/** Istio's rule for subset names (and a route's `destination.subset`): a DNS label. */
export function checkSubsetName(name: string, field: string): string {
  if (name.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    throw new FieldError(field, `${show(name)} is not a valid subset name (a DNS label: lower-case letters, digits and '-', at most 63)`);
  }
  return name;
}

export function validateDestinationRule(spec: unknown, meta: ResourceMeta, warn: Warn = IGNORE_WARNINGS): DestinationRule {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', { supported: ['host', 'trafficPolicy', 'subsets', 'exportTo', 'workloadSelector'] });
  const host = checkHostPattern(str(s['host'], 'spec.host', { nonEmpty: true }), 'spec.host');
  const trafficPolicy = parseTrafficPolicy(s['trafficPolicy'], 'spec.trafficPolicy', warn);
  const tls = trafficPolicy?.tls;
  const portLevelTls = (trafficPolicy?.portLevelSettings ?? []).flatMap((p) => (p.tls !== undefined ? [{ port: p.port, tls: p.tls }] : []));
  const names = new Set<string>();
  const subsets = optList(s['subsets'], 'spec.subsets').map((raw, i) => {
    const subset = parseSubset(raw, item('spec.subsets', i), warn);
    if (names.has(subset.name)) throw new FieldError(`${item('spec.subsets', i)}.name`, `${show(subset.name)} is already the name of an earlier subset`);
    names.add(subset.name);
    return subset;
  });
  const exportTo = parseExportTo(s['exportTo'], 'spec.exportTo', meta.namespace) ?? ['*'];
  const workloadSelector = parseWorkloadSelector(s['workloadSelector'], 'spec.workloadSelector');
  if (workloadSelector !== undefined) {
    checkSelectorLabels(workloadSelector, 'spec.workloadSelector.matchLabels', warn,
      'has no labels: the rule applies to every workload of its namespace (Istio warns about this too)');
    // Istio's rule: a rule for some workloads of a namespace is not exported beyond it.
    if (s['exportTo'] !== undefined && (exportTo.length !== 1 || exportTo[0] !== meta.namespace)) {
      throw new FieldError('spec.exportTo', `a rule with a workloadSelector is exported to its own namespace only (${show('.')} or ${show(meta.namespace)}), got ${show(s['exportTo'])}`);
    }
  }
  return {
    meta, host, ...(tls !== undefined ? { tls } : {}), portLevelTls, ...(trafficPolicy !== undefined ? { trafficPolicy } : {}), subsets, exportTo,
    ...(workloadSelector !== undefined ? { workloadSelector } : {}),
  };
}
