// Locality-aware load balancing, as Istio configures Envoy and Envoy acts on it, as pure parts:
// - which setting applies (the DestinationRule's `localityLbSetting`, else the mesh config's), and
//   whether it does anything for this proxy (resolveLocalityLb, at configuration time);
// - the endpoints' priorities (failover by locality, `failover` regions, `failoverPriority` labels)
//   or their locality groups and weights (`distribute`), once per endpoint list (planLocality);
// - Envoy's share of traffic per priority from the healthy share of each (overprovisioning factor
//   1.4) and its panic rule (priorityLoads), recomputed only when an endpoint's health changes.
// The balancer that runs a plan per request is balancers/locality.ts.
import type { LocalityLbSetting } from '../config/resources/types.js';
import { TOPOLOGY_LABELS } from '../config/resources/locality-lb-setting.js';
import type { EndpointSpec } from './spec.js';

/** Envoy's default overprovisioning factor (140 %): a priority with 72 % of its endpoints healthy still takes all of the traffic. */
export const OVERPROVISIONING_PERCENT = 140;

export interface Locality {
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

/** `region/zone/subzone` (missing parts empty). */
export function parseLocality(text: string | undefined): Locality {
  const [region = '', zone = '', subzone = ''] = (text ?? '').split('/');
  return { region, zone, subzone };
}

/** Istio's LocalityMatch: `rule` (`region[/zone[/subzone]]`, `*` for any part, missing parts any) covers `l`. */
export function localityMatch(l: Locality, rule: string): boolean {
  const [region = '', zone = '', subzone = ''] = rule.split('/');
  return (region === '*' || region === l.region)
    && (zone === '*' || zone === '' || zone === l.zone)
    && (subzone === '*' || subzone === '' || subzone === l.subzone);
}

/** Istio's LbPriority: 0 same region, zone and subzone; 1 same region and zone; 2 same region; 3 another region. */
export function lbPriority(proxy: Locality, ep: Locality): number {
  if (proxy.region !== ep.region) return 3;
  if (proxy.zone !== ep.zone) return 2;
  return proxy.subzone === ep.subzone ? 0 : 1;
}

/** What the proxy's side of a plan needs: its locality and its labels (for failoverPriority). */
export interface ProxyFacts {
  /** `region/zone/subzone`, '' when unknown. */
  readonly locality: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** A cluster's locality balancing, resolved at configuration time; absent from a ClusterPolicy when it changes nothing. */
export type LocalityLbSpec =
  /** `distribute`: the `to` of the entry whose `from` covers the proxy's locality. */
  | { readonly kind: 'distribute'; readonly proxy: ProxyFacts; readonly to: readonly { readonly locality: string; readonly weight: number }[] }
  /** Failover (outlierDetection is set): priorities by locality, `failover` regions, `failoverPriority` labels. */
  | {
    readonly kind: 'failover'; readonly proxy: ProxyFacts;
    readonly failover: readonly { readonly from: string; readonly to: string }[]; readonly failoverPriority: readonly string[];
  };

/**
 * Istio's choice (GetLocalityLbSetting, then ApplyLocalityLBSetting): the rule's setting wins over
 * the mesh's; `enabled: false` on the rule (or on the mesh with no rule setting) turns it off;
 * `distribute` applies when one of its `from` covers the proxy's locality (and nothing else does
 * then); otherwise failover applies only with outlierDetection (without ejections Envoy never
 * leaves the first priority).
 */
export function resolveLocalityLb(
  rule: LocalityLbSetting | undefined, mesh: LocalityLbSetting | undefined, outlierDetection: boolean, proxy: ProxyFacts,
): LocalityLbSpec | undefined {
  let setting: LocalityLbSetting | undefined;
  if (rule !== undefined) setting = rule.enabled === false ? undefined : rule;
  else if (mesh !== undefined && mesh.enabled !== false) setting = mesh;
  if (setting === undefined) return undefined;
  if (setting.distribute.length > 0) {
    const own = parseLocality(proxy.locality);
    const entry = setting.distribute.find((d) => localityMatch(own, d.from));
    return entry === undefined ? undefined : { kind: 'distribute', proxy, to: entry.to };
  }
  if (!outlierDetection) return undefined;
  return { kind: 'failover', proxy, failover: setting.failover, failoverPriority: setting.failoverPriority };
}

/**
 * The endpoints grouped as the balancer uses them: each group one priority (failover) or one
 * locality of priority 0 (distribute), with its locality weight.
 */
export interface LocalityPlan {
  /** Per endpoint (list order): its priority, 0 first; -1 when `distribute` sends it nothing. */
  readonly priority: Int32Array;
  /** Per endpoint: its group, -1 when none. */
  readonly group: Int32Array;
  readonly groups: readonly LocalityGroup[];
  /** Number of priorities (groups are in priority order). */
  readonly priorities: number;
}

export interface LocalityGroup {
  readonly priority: number;
  /** Envoy's locality weight (distribute); 1 in failover, where a priority's endpoints are balanced together. */
  readonly weight: number;
  /** Endpoint indices (list order). */
  readonly members: Int32Array;
  /** The locality, for /clusters and the decisions (`region/zone/subzone`, or `priority N`). */
  readonly name: string;
}

// Istio adds the topology labels to every endpoint's and proxy's labels from their locality.
function withTopology(labels: Readonly<Record<string, string>>, l: Locality): Readonly<Record<string, string>> {
  if (l.region === '' && l.zone === '' && l.subzone === '') return labels;
  return {
    ...(l.region !== '' ? { [TOPOLOGY_LABELS.region]: l.region } : {}),
    ...(l.zone !== '' ? { [TOPOLOGY_LABELS.zone]: l.zone } : {}),
    ...(l.subzone !== '' ? { [TOPOLOGY_LABELS.subzone]: l.subzone } : {}),
    ...labels,
  };
}

// Istio's failoverPriority: the number of leading labels an endpoint shares with the proxy decides
// (all: 0, ... none: n); `name=value` gives the proxy's value.
function labelPriority(proxyLabels: Readonly<Record<string, string>>, ep: Readonly<Record<string, string>>, priorities: readonly string[]): number {
  for (let j = 0; j < priorities.length; j++) {
    const [name, override] = priorities[j]!.split('=') as [string, string | undefined];
    const want = override ?? (Object.hasOwn(proxyLabels, name) ? proxyLabels[name] : undefined);
    const have = Object.hasOwn(ep, name) ? ep[name] : undefined;
    if (want !== have) return priorities.length - j;
  }
  return 0;
}

function failoverPriorityOf(proxy: Locality, ep: Locality, failover: LocalityLbSpec & { kind: 'failover' }): number {
  let p = lbPriority(proxy, ep);
  if (p === 3) {
    const rule = failover.failover.find((f) => f.from === proxy.region);
    // Another region than the one `failover` names for the proxy's region: after it.
    if (rule !== undefined && ep.region !== rule.to) p = 4;
  }
  return p;
}

/**
 * The plan for one endpoint list, or undefined when it would balance exactly as no plan does (one
 * priority, one group): such a cluster pays nothing per pick.
 */
export function planLocality(spec: LocalityLbSpec, endpoints: readonly EndpointSpec[]): LocalityPlan | undefined {
  const n = endpoints.length;
  const priority = new Int32Array(n);
  const group = new Int32Array(n).fill(-1);
  const proxy = parseLocality(spec.proxy.locality);
  // Groups keyed by their raw rank (before the ranks are made dense) and locality name.
  const keyOf: (string | undefined)[] = new Array<string | undefined>(n);
  const rank = new Float64Array(n);
  const weightOf = new Map<string, number>();
  if (spec.kind === 'failover') {
    const proxyLabels = withTopology(spec.proxy.labels, proxy);
    const byLabels = spec.failoverPriority.length > 0 && Object.keys(proxyLabels).length > 0;
    for (let i = 0; i < n; i++) {
      const e = endpoints[i]!;
      const l = parseLocality(e.locality);
      // As Istio: failoverPriority first (5 locality ranks per label rank), then the locality's.
      const labelRank = byLabels ? labelPriority(proxyLabels, withTopology(e.labels, l), spec.failoverPriority) : 0;
      const localityRank = byLabels && spec.failover.length === 0 ? 0 : failoverPriorityOf(proxy, l, spec);
      rank[i] = labelRank * 5 + localityRank;
      keyOf[i] = `p${rank[i]}`;
    }
  } else {
    // distribute: each `to` covers the localities it matches; its weight is shared among them in
    // proportion to their endpoints' weights (Istio's applyLocalityWeight, rounded up); endpoints
    // no `to` covers get nothing.
    const shares = spec.to.map(() => new Map<string, number>());
    for (let i = 0; i < n; i++) {
      const e = endpoints[i]!;
      const l = parseLocality(e.locality);
      const t = spec.to.findIndex((to) => localityMatch(l, to.locality));
      if (t < 0) continue;
      const name = e.locality ?? '';
      keyOf[i] = name;
      shares[t]!.set(name, (shares[t]!.get(name) ?? 0) + e.weight);
    }
    spec.to.forEach((to, t) => {
      let total = 0;
      for (const w of shares[t]!.values()) total += w;
      for (const [name, w] of shares[t]!) weightOf.set(name, Math.ceil((w * to.weight) / total));
    });
  }
  // Dense priorities 0..N-1 in rank order (Istio renumbers without gaps).
  const ranks = [...new Set(spec.kind === 'failover' ? rank : [0])].sort((a, b) => a - b);
  const groupIndex = new Map<string, number>();
  const members: number[][] = [];
  const groups: { priority: number; weight: number; name: string }[] = [];
  for (let i = 0; i < n; i++) {
    const key = keyOf[i];
    if (key === undefined) {
      priority[i] = -1;
      continue;
    }
    const p = spec.kind === 'failover' ? ranks.indexOf(rank[i]!) : 0;
    priority[i] = p;
    let g = groupIndex.get(key);
    if (g === undefined) {
      g = groups.length;
      groupIndex.set(key, g);
      groups.push({ priority: p, weight: spec.kind === 'failover' ? 1 : weightOf.get(key)!, name: spec.kind === 'failover' ? `priority ${p}` : key });
      members.push([]);
    }
    group[i] = g;
    members[g]!.push(i);
  }
  const order = groups.map((_, g) => g).sort((a, b) => groups[a]!.priority - groups[b]!.priority || a - b);
  const renumber = new Int32Array(groups.length);
  order.forEach((g, k) => { renumber[g] = k; });
  for (let i = 0; i < n; i++) if (group[i]! >= 0) group[i] = renumber[group[i]!]!;
  const planGroups: LocalityGroup[] = order.map((g) => ({ ...groups[g]!, members: Int32Array.from(members[g]!) }));
  const priorities = ranks.length;
  const everyoneInOneGroup = planGroups.length === 1 && planGroups[0]!.members.length === n;
  if (everyoneInOneGroup || n === 0) return undefined;
  return { priority, group, groups: planGroups, priorities };
}

/** Envoy's health of a priority: min(100, 1.4 × healthy / total), in percent (integers, as Envoy). */
export function priorityHealth(healthy: number, total: number): number {
  return total === 0 ? 0 : Math.min(100, Math.floor((OVERPROVISIONING_PERCENT * healthy) / total));
}

export interface PriorityLoads {
  /** Percent of the picks per priority (sums to 100). */
  readonly load: Int32Array;
  /** Per priority: balance over every endpoint of it, ejected ones included (Envoy's panic). */
  readonly panic: Uint8Array;
  /** No endpoint may be picked (every one ejected, no panic threshold). */
  readonly none: boolean;
}

/**
 * Envoy's priority load: each priority takes as much of the traffic as its health allows, the rest
 * spills to the next; when the total health is under 100 the healths are scaled up to fill 100.
 * Panic (threshold > 0): with the total under 100, a priority whose healthy share is under the
 * threshold balances over all of its endpoints; all in panic, the load follows the endpoint counts.
 */
export function priorityLoads(healthy: ArrayLike<number>, total: ArrayLike<number>, panicThresholdPercent: number): PriorityLoads {
  const n = total.length;
  const load = new Int32Array(n);
  const panic = new Uint8Array(n);
  const health = new Int32Array(n);
  let sum = 0;
  let hosts = 0;
  for (let p = 0; p < n; p++) {
    sum += health[p] = priorityHealth(healthy[p]!, total[p]!);
    hosts += total[p]!;
  }
  const normalized = Math.min(100, sum);
  // No endpoint at all (distribute covering none), or none healthy without a panic threshold.
  if (hosts === 0 || (normalized === 0 && panicThresholdPercent === 0)) {
    load[0] = 100;
    return { load, panic, none: true };
  }
  if (panicThresholdPercent > 0 && normalized < 100) {
    let all = true;
    for (let p = 0; p < n; p++) {
      panic[p] = total[p]! > 0 && healthy[p]! * 100 < panicThresholdPercent * total[p]! ? 1 : 0;
      if (panic[p] === 0) all = false;
    }
    if (all) {
      let left = 100;
      for (let p = 0; p < n; p++) left -= load[p] = Math.floor((total[p]! * 100) / hosts);
      load[0]! += left;
      return { load, panic, none: false };
    }
  }
  let left = 100;
  for (let p = 0; p < n; p++) left -= load[p] = Math.min(left, Math.floor((health[p]! * 100) / normalized));
  // Rounding: the rest goes to the first priority with any health.
  if (left > 0) for (let p = 0; p < n; p++) if (health[p]! > 0) { load[p]! += left; break; }
  return { load, panic, none: false };
}
