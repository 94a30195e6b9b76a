// Istio's LocalityLoadBalancerSetting, read where it is written: a DestinationRule's
// `loadBalancer.localityLbSetting` and the mesh config's `localityLbSetting`. Checked as Istio's
// validation checks it (distribute or failover, never both; weights 1..100 summing to 100; localities
// `region[/zone[/subzone]]` with at most one `*`, at the end, none overlapping; failover regions only).
// What it does with the endpoints is src/traffic/locality.ts.
import type { LocalityLbSetting } from './types.js';
import { checkFields, child, FieldError, int, item, obj, optBool, optList, show, str, strList, type Warn } from './fields.js';

/** The topology labels Istio reads a locality from (and compares localities by in failoverPriority). */
export const TOPOLOGY_LABELS = Object.freeze({
  region: 'topology.kubernetes.io/region',
  zone: 'topology.kubernetes.io/zone',
  subzone: 'topology.istio.io/subzone',
});

/** Istio's pod label that overrides a workload's locality, with `.` for `/` (labels cannot hold `/`). */
export const LOCALITY_LABEL = 'istio-locality';

// Istio's overlap check: a locality must not be covered by an earlier one (or cover it).
function checkLocalities(localities: readonly { locality: string; at: string }[]): void {
  const seen: string[][] = [];
  for (const { locality, at } of localities) {
    const stars = locality.split('*').length - 1;
    if (stars > 1 || (stars === 1 && !locality.endsWith('*'))) {
      throw new FieldError(at, `${show(locality)}: a wildcard '*' may appear once, at the end`);
    }
    const parts = locality.split('/');
    if (parts.length > 3 || parts.some((p) => p === '')) {
      throw new FieldError(at, `${show(locality)} is not region[/zone[/subzone]] (no empty part)`);
    }
    const covers = (a: readonly string[], b: readonly string[]): boolean => {
      for (let k = 0; k < Math.min(a.length, b.length); k++) {
        if (a[k] === '*' || b[k] === '*') return true;
        if (a[k] !== b[k]) return false;
      }
      return true;
    };
    const clash = seen.find((s) => covers(s, parts));
    if (clash !== undefined) throw new FieldError(at, `${show(locality)} overlaps ${show(clash.join('/'))} given before it`);
    seen.push(parts);
  }
}

/**
 * A `localityLbSetting`. `outlierDetection`: whether the same policy has one; failover without it
 * does nothing (Istio's rule: no ejection, no spill to another priority), which Istio warns about.
 */
export function parseLocalityLbSetting(raw: unknown, field: string, warn: Warn, outlierDetection: boolean): LocalityLbSetting {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['enabled', 'distribute', 'failover', 'failoverPriority'] });
  const enabled = optBool(o['enabled'], child(field, 'enabled'));
  const distributeAt = child(field, 'distribute');
  const failoverAt = child(field, 'failover');
  const rawDistribute = optList(o['distribute'], distributeAt);
  const rawFailover = optList(o['failover'], failoverAt);
  if (rawDistribute.length > 0 && rawFailover.length > 0) {
    throw new FieldError(failoverAt, 'cannot be given with distribute (Istio\'s rule): one or the other');
  }
  const failoverPriority = o['failoverPriority'] === undefined ? [] : strList(o['failoverPriority'], child(field, 'failoverPriority'), { nonEmptyItems: true });
  failoverPriority.forEach((label, i) => {
    const at = item(child(field, 'failoverPriority'), i);
    const name = label.split('=')[0]!;
    if (name === '' || label.split('=').length > 2) throw new FieldError(at, `${show(label)} is not a label name or name=value`);
    if (rawFailover.length > 0 && (Object.values(TOPOLOGY_LABELS) as string[]).includes(name)) {
      throw new FieldError(at, `${show(name)}: a topology label cannot be given with failover (Istio's rule)`);
    }
  });

  const sources: { locality: string; at: string }[] = [];
  const distribute = rawDistribute.map((d, i) => {
    const at = item(distributeAt, i);
    const e = obj(d, at);
    checkFields(e, at, { supported: ['from', 'to'] });
    const from = str(e['from'], child(at, 'from'), { nonEmpty: true });
    sources.push({ locality: from, at: child(at, 'from') });
    const toAt = child(at, 'to');
    const to = Object.entries(obj(e['to'], toAt)).map(([locality, weight]) => ({ locality, weight: int(weight, item(toAt, locality), 1, 100) }));
    const total = to.reduce((n, t) => n + t.weight, 0);
    if (total !== 100) throw new FieldError(toAt, `the weights sum to ${total}; they must sum to 100 (percent)`);
    checkLocalities(to.map((t) => ({ locality: t.locality, at: item(toAt, t.locality) })));
    return { from, to };
  });
  checkLocalities(sources);

  const failover = rawFailover.map((f, i) => {
    const at = item(failoverAt, i);
    const e = obj(f, at);
    checkFields(e, at, { supported: ['from', 'to'] });
    const from = str(e['from'], child(at, 'from'), { nonEmpty: true });
    const to = str(e['to'], child(at, 'to'), { nonEmpty: true });
    for (const [k, v] of [['from', from], ['to', to]] as const) {
      if (v.includes('/')) throw new FieldError(child(at, k), `${show(v)}: failover names regions only (no zone)`);
      if (v.includes('*')) throw new FieldError(child(at, k), `${show(v)}: a failover region cannot be a wildcard`);
    }
    if (from === to) throw new FieldError(child(at, 'to'), `${show(to)} is the same region as from (Istio's rule)`);
    return { from, to };
  });

  if ((failover.length > 0 || failoverPriority.length > 0) && !outlierDetection) {
    warn(failover.length > 0 ? failoverAt : child(field, 'failoverPriority'),
      'has no effect without outlierDetection in the same policy (Istio\'s rule: without ejections traffic never leaves the first priority)');
  }
  return { ...(enabled !== undefined ? { enabled } : {}), distribute, failover, failoverPriority };
}
