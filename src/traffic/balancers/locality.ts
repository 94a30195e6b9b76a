// A cluster with a locality plan (locality.ts): Envoy's two-step choice. First a priority, by the
// share of traffic each takes given the healthy share of each (priorityLoads: overprovisioning 1.4,
// spill to the next priority, panic per priority); then, within it, a locality by its weight times
// its availability (distribute); then an endpoint of that group by the cluster's own algorithm (one
// inner balancer per group, over that group's endpoints). Only clusters whose plan has more than one
// group use it: every other cluster keeps its plain balancer and pays nothing for locality.
import type { Random } from '../clock.js';
import { OVERPROVISIONING_PERCENT, priorityLoads, type LocalityPlan } from '../locality.js';
import { NONE, type Balancer, type HostSet, type PickContext, type TriedEndpoint } from './balancer.js';

export interface LocalityBalancerOptions {
  readonly hosts: HostSet;
  readonly plan: LocalityPlan;
  readonly random: Random;
  readonly panicThresholdPercent: number;
  /** Makes the balancer of one group, over its own HostSet (threshold 0: panic is decided here). */
  readonly inner: (hosts: HostSet) => Balancer | undefined;
}

const SPREAD = 1_000_003;
/** Istio's update_frequency of Envoy's previous_priorities retry priority. */
export const PRIORITY_UPDATE_FREQUENCY = 2;

export class LocalityBalancer implements Balancer {
  private readonly hosts: HostSet;
  private readonly plan: LocalityPlan;
  private readonly random: Random;
  private readonly threshold: number;
  private readonly inner: (Balancer | undefined)[];
  /** Index of each endpoint within its group (for the tried list of a retry). */
  private readonly local: Int32Array;
  private version = Number.NaN;
  /** Bumped at each refresh: the inner balancers' health version. */
  private epoch = 0;
  private readonly healthyPerGroup: Int32Array;
  private readonly healthyPerPriority: Int32Array;
  private readonly totalPerPriority: Int32Array;
  /** Cumulative percent per priority (last = 100). */
  private cumulative: Int32Array = new Int32Array(0);
  private panicPerPriority: Uint8Array = new Uint8Array(0);
  private none = false;
  /** Per group: cumulative effective locality weight within its priority. */
  private readonly groupCumulative: Float64Array;
  /** Per priority: its first group and one past its last. */
  private readonly firstGroup: Int32Array;
  private readonly endGroup: Int32Array;
  panic = false;
  /** The priority of the last pick (for the decisions trail: a pick past priority 0 is a failover). */
  lastPriority = 0;

  constructor(o: LocalityBalancerOptions) {
    this.hosts = o.hosts;
    this.plan = o.plan;
    this.random = o.random;
    this.threshold = o.panicThresholdPercent;
    const groups = o.plan.groups;
    this.local = new Int32Array(o.hosts.size).fill(-1);
    this.healthyPerGroup = new Int32Array(groups.length);
    this.groupCumulative = new Float64Array(groups.length);
    this.healthyPerPriority = new Int32Array(o.plan.priorities);
    this.totalPerPriority = new Int32Array(o.plan.priorities);
    this.firstGroup = new Int32Array(o.plan.priorities).fill(-1);
    this.endGroup = new Int32Array(o.plan.priorities);
    groups.forEach((g, k) => {
      if (this.firstGroup[g.priority] === -1) this.firstGroup[g.priority] = k;
      this.endGroup[g.priority] = k + 1;
      this.totalPerPriority[g.priority]! += g.members.length;
      g.members.forEach((i, j) => { this.local[i] = j; });
    });
    this.inner = groups.map((g, k) => o.inner(this.groupHosts(g.members, k)));
  }

  pick(ctx: PickContext): number {
    this.refresh();
    if (this.none) return NONE;
    const hash = ctx.hash;
    // A consistent hash chooses its priority and locality from the hash too, so a key stays put.
    const u = hash === undefined ? this.random() : (hash % SPREAD) / SPREAD;
    const point = Math.floor(u * 100);
    const attempted = ctx.attempted;
    const cumulative = attempted !== undefined && attempted.length >= PRIORITY_UPDATE_FREQUENCY ? this.withoutAttempted(attempted) : this.cumulative;
    let p = 0;
    while (p < cumulative.length - 1 && point >= cumulative[p]!) p++;
    this.lastPriority = p;
    this.panic = this.panicPerPriority[p] === 1;
    let g = this.firstGroup[p]!;
    if (g < 0) return NONE;
    const end = this.endGroup[p]!;
    if (end - g > 1) {
      const top = this.groupCumulative[end - 1]!;
      const v = (hash === undefined ? this.random() : (Math.floor(hash / SPREAD) % SPREAD) / SPREAD) * top;
      while (g < end - 1 && v >= this.groupCumulative[g]!) g++;
    }
    const b = this.inner[g];
    if (b === undefined) return NONE;
    const tried = ctx.tried;
    const local = b.pick(tried === undefined || tried.length === 0 ? ctx : { hash, tried: this.localTried(tried, g) });
    return local === NONE ? NONE : this.plan.groups[g]!.members[local]!;
  }

  // Recomputed only when an endpoint's health may have changed (one shared load per pick otherwise).
  private refresh(): void {
    const v = this.hosts.healthVersion();
    if (v === this.version) return;
    this.version = v;
    this.epoch++;
    const groups = this.plan.groups;
    this.healthyPerPriority.fill(0);
    for (let k = 0; k < groups.length; k++) {
      let h = 0;
      const m = groups[k]!.members;
      for (let j = 0; j < m.length; j++) if (this.hosts.isHealthy(m[j]!)) h++;
      this.healthyPerGroup[k] = h;
      this.healthyPerPriority[groups[k]!.priority]! += h;
    }
    const loads = priorityLoads(this.healthyPerPriority, this.totalPerPriority, this.threshold);
    this.none = loads.none;
    this.panicPerPriority = loads.panic;
    const cumulative = new Int32Array(loads.load.length);
    let sum = 0;
    for (let p = 0; p < cumulative.length; p++) cumulative[p] = sum += loads.load[p]!;
    this.cumulative = cumulative;
    // Envoy's effective locality weight: weight × min(1, 1.4 × healthy / total) (all of it in panic).
    for (let p = 0; p < this.firstGroup.length; p++) {
      let acc = 0;
      for (let k = this.firstGroup[p]!; k >= 0 && k < this.endGroup[p]!; k++) {
        const g = groups[k]!;
        const availability = loads.panic[p] === 1 ? 1 : Math.min(1, (OVERPROVISIONING_PERCENT * this.healthyPerGroup[k]!) / (100 * g.members.length));
        acc += g.weight * availability;
        this.groupCumulative[k] = acc;
      }
    }
  }

  // Envoy's previous_priorities (update frequency 2, Istio's): the first two attempts use the loads
  // as they are; later ones leave out the priorities of the attempts before the last even count, the
  // loads recomputed over the others; when that leaves none, the loads as they are. Only retries of a
  // route with retryRemoteLocalities come here, so its allocations cost nothing elsewhere.
  private withoutAttempted(attempted: readonly TriedEndpoint[]): Int32Array {
    const excluded = new Uint8Array(this.totalPerPriority.length);
    const upTo = attempted.length - (attempted.length % PRIORITY_UPDATE_FREQUENCY);
    for (let k = 0; k < upTo; k++) {
      const i = attempted[k]!.index;
      if (i >= 0 && this.plan.priority[i]! >= 0) excluded[this.plan.priority[i]!] = 1;
    }
    const healthy = Int32Array.from(this.healthyPerPriority, (h, p) => (excluded[p] === 1 ? 0 : h));
    const loads = priorityLoads(healthy, this.totalPerPriority, 0);
    if (loads.none) return this.cumulative;
    const cumulative = new Int32Array(loads.load.length);
    let sum = 0;
    for (let p = 0; p < cumulative.length; p++) cumulative[p] = sum += loads.load[p]!;
    return cumulative;
  }

  // Why an allocation: only a retry of a request to a cluster with a plan maps its tried endpoints.
  private localTried(tried: readonly TriedEndpoint[], g: number): TriedEndpoint[] {
    const out: TriedEndpoint[] = [];
    for (const t of tried) if (t.index >= 0 && this.plan.group[t.index] === g) out.push({ index: this.local[t.index]! });
    return out;
  }

  // One group's endpoints as a HostSet of their own; in panic every one of them is a candidate.
  private groupHosts(members: Int32Array, k: number): HostSet {
    const hosts = this.hosts;
    const priority = this.plan.groups[k]!.priority;
    return {
      size: members.length,
      weight: (i) => hosts.weight(members[i]!),
      key: (i) => hosts.key(members[i]!),
      isHealthy: (i) => this.panicPerPriority[priority] === 1 || hosts.isHealthy(members[i]!),
      activeRequests: (i) => hosts.activeRequests(members[i]!),
      healthVersion: () => this.epoch,
    };
  }
}
