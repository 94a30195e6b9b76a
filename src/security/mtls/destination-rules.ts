// Which DestinationRule applies to a connection from this workload, by Istio's lookup. Pure.
//
// Namespaces are searched in order, the first with a match deciding: the client's own, then the
// destination service's (from a `<svc>.<ns>.svc.<domain>` name, or the namespace of a ServiceEntry
// declaring one of the names), then the root namespace. A rule is seen from another namespace only
// if its exportTo names that namespace or `*`; a rule with a workloadSelector applies only to the
// matching workloads of its own namespace. Within one namespace: the most specific host match wins
// (exact over wildcard, longer wildcard over shorter), then a rule whose workloadSelector matches
// over one without, then file order (Istio: the oldest).
import type { DestinationRule, ServiceEntry, Workload } from '../../config/resources/types.js';
import { ROOT_NAMESPACE } from '../../config/resources/types.js';
import { selects } from '../../config/resources/workload.js';
import { hostMatchRank, serviceNamespaceOf } from './host-names.js';

export interface RuleMatch {
  readonly rule: DestinationRule;
  /** The connection's name the rule's host matched (a name, never a pattern). */
  readonly name: string;
}

/** Istio reads a short rule host (`reviews`) in the rule's namespace: `reviews.<ns>.svc.<domain>`. */
export function ruleHost(rule: DestinationRule, clusterDomain: string): string {
  const h = rule.host;
  return h.includes('.') || h === '*' || h.includes(':') ? h : `${h}.${rule.meta.namespace}.svc.${clusterDomain}`;
}

function visibleTo(rule: DestinationRule, client: Workload): boolean {
  if (rule.workloadSelector !== undefined) return rule.meta.namespace === client.namespace && selects(rule.workloadSelector, client.labels);
  return rule.meta.namespace === client.namespace || rule.exportTo.includes('*') || rule.exportTo.includes(client.namespace);
}

/** The namespaces searched for `names`, in Istio's order, without repeats. */
export function lookupNamespaces(names: readonly string[], client: Workload, serviceEntries: readonly ServiceEntry[],
  clusterDomain: string, rootNamespace = ROOT_NAMESPACE): string[] {
  const order = [client.namespace];
  const add = (ns: string | undefined): void => { if (ns !== undefined && !order.includes(ns)) order.push(ns); };
  for (const n of names) {
    add(serviceNamespaceOf(n, clusterDomain));
    for (const se of serviceEntries) if (se.hosts.some((h) => hostMatchRank(h, n) !== undefined)) add(se.meta.namespace);
  }
  // The root namespace last, even when a service lives there.
  const root = order.indexOf(rootNamespace);
  if (root >= 0) order.splice(root, 1);
  order.push(rootNamespace);
  return order;
}

/** The best rule of one namespace for these names, or undefined. */
function bestIn(namespace: string, rules: readonly DestinationRule[], names: readonly string[], client: Workload, clusterDomain: string): RuleMatch | undefined {
  let best: { match: RuleMatch; rank: number; selected: boolean } | undefined;
  for (const rule of rules) {
    if (rule.meta.namespace !== namespace || !visibleTo(rule, client)) continue;
    const host = ruleHost(rule, clusterDomain);
    for (const name of names) {
      const rank = hostMatchRank(host, name);
      if (rank === undefined) continue;
      const selected = rule.workloadSelector !== undefined;
      // Strictly better only: equal candidates keep the earlier (names in the caller's order, rules in file order).
      if (!best || rank > best.rank || (rank === best.rank && selected && !best.selected)) best = { match: { rule, name }, rank, selected };
    }
  }
  return best?.match;
}

/** The DestinationRule for a connection known by `names` (normalized; see connectionNames), or undefined. */
export function destinationRuleFor(names: readonly string[], client: Workload, rules: readonly DestinationRule[],
  serviceEntries: readonly ServiceEntry[], clusterDomain: string, rootNamespace = ROOT_NAMESPACE): RuleMatch | undefined {
  if (names.length === 0 || rules.length === 0) return undefined;
  for (const ns of lookupNamespaces(names, client, serviceEntries, clusterDomain, rootNamespace)) {
    const found = bestIn(ns, rules, names, client, clusterDomain);
    if (found) return found;
  }
  return undefined;
}
