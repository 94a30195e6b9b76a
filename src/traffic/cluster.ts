// One cluster at run time, for the engine: the endpoints in force, the balancer, the circuit
// breakers, outlier detection and the retry bookkeeping, over the shared traffic memory. One
// instance per worker thread and cluster (each with its own balancer schedule); every instance of
// the same cluster shares its counts, limits and ejections through the TrafficStore.
//
// The engine's contract (README.md "Engine API"): every pick() that returns an Endpoint is
// followed by exactly one attemptEnded() (or attemptResent() for a keep-alive race); every
// acquired connection by one releaseConnection(); decideRetry() after every attempt of a request
// that has a retry policy; retryAbandoned() when a request gives up while a retry is scheduled.
import { createBalancer, NONE, type Balancer, type HostSet, type PickContext, type TriedEndpoint } from './balancers/index.js';
import { LocalityBalancer } from './balancers/locality.js';
import { planLocality, type LocalityPlan } from './locality.js';
import { slowStartFactor } from './slow-start.js';
import { processClock, type Clock, type Random } from './clock.js';
import { hostPortOf, splitLocality, type ClusterStatus, type HostStatus } from './cluster-status.js';
import { ClusterLimits, limitValues } from './limits.js';
import type { OutlierEvent } from './outlier-event.js';
import { grpcToHttpStatus, LOCAL_ORIGIN, OutlierDetector, type OutlierMember } from './outlier.js';
import { decideRetry, NO_RETRY, type AttemptOutcome, type RetryDecision, type RetryFacts } from './retry.js';
import {
  CLUSTER_COUNTER as C, CLUSTER_COUNTERS, ENDPOINT_COUNTER as E, type ClusterCounter, type ClusterSlot, type EndpointSlot, type TrafficStore,
} from './shared-state.js';
import type { ClusterSpec, EndpointSpec, HashKey, RetrySpec } from './spec.js';

/** One endpoint of the cluster, as the engine holds it for an attempt. */
export class Endpoint implements TriedEndpoint, OutlierMember {
  /** Position in the current endpoint list; -1 once removed (it then takes no new request). */
  index: number;
  spec: EndpointSpec;
  readonly address: string;
  readonly port: number;
  readonly hostPort: string;
  /** This runtime's attempts and connections in flight to the endpoint (a removed one is let go at 0). */
  inFlight = 0;
  /** When it joined the cluster (process clock, ms); -Infinity: it was there from the start (no slow start). */
  joinedAt = Number.NEGATIVE_INFINITY;

  constructor(spec: EndpointSpec, index: number, readonly slot: EndpointSlot) {
    this.spec = spec;
    this.index = index;
    this.address = spec.address;
    this.port = spec.port;
    this.hostPort = hostPortOf(spec.address, spec.port);
  }
}

/** ejectedEndpoints() without outlier detection (every routed request asks, for /debug/decisions). */
const NONE_EJECTED: readonly string[] = Object.freeze([]);

/** Why pick() found no endpoint: the engine's local reply. */
export interface PickFailure {
  readonly failure: 'no-healthy-upstream' | 'overflow';
  /** Envoy's response flag. */
  readonly flag: 'UH' | 'UO';
  readonly status: 503;
  /** Envoy's local-reply body. */
  readonly body: string;
  /** Add `x-envoy-overloaded: true` to the reply. */
  readonly overloaded: boolean;
}

export const NO_HEALTHY_UPSTREAM: PickFailure = Object.freeze({
  failure: 'no-healthy-upstream', flag: 'UH', status: 503, body: 'no healthy upstream', overloaded: false,
});
export const OVERFLOW: PickFailure = Object.freeze({
  failure: 'overflow', flag: 'UO', status: 503, body: 'upstream connect error or disconnect/reset before headers. reset reason: overflow',
  overloaded: true,
});

export function isPickFailure(r: Endpoint | PickFailure): r is PickFailure {
  return !(r instanceof Endpoint);
}

export interface ClusterRuntimeOptions {
  readonly spec: ClusterSpec;
  readonly endpoints: readonly EndpointSpec[];
  readonly store: TrafficStore;
  readonly clock?: Clock | undefined;
  readonly random?: Random | undefined;
  /** EJECT / UNEJECT events this thread caused, for the outlier log (formatOutlierEvent). */
  readonly onOutlierEvent?: ((e: OutlierEvent) => void) | undefined;
  /** The runtime this one replaces (same cluster, new spec): its endpoints keep their join times (slow start). */
  readonly previous?: ClusterRuntime | undefined;
}

const EMPTY_CONTEXT: PickContext = Object.freeze({});

// Per-status-class counters (upstream_rq_1xx..5xx), indexed by status / 100.
const CLASS_COUNTERS: readonly number[] = [-1, C.upstream_rq_1xx, C.upstream_rq_2xx, C.upstream_rq_3xx, C.upstream_rq_4xx, C.upstream_rq_5xx];

export class ClusterRuntime {
  readonly spec: ClusterSpec;
  readonly name: string;
  /** PASSTHROUGH: the engine sends to the original destination and never calls pick(). */
  readonly passthrough: boolean;
  /** The consistent-hash key of the policy (requestHash(key, facts) gives ctx.hash), if any. */
  readonly hashKey: HashKey | undefined;
  readonly limits: ClusterLimits;
  private readonly store: TrafficStore;
  private readonly slot: ClusterSlot;
  private readonly clock: Clock;
  private readonly random: Random;
  private readonly outlier: OutlierDetector | undefined;
  private members: Endpoint[] = [];
  /** Removed endpoints this thread still has attempts or connections on: detached when they reach 0. */
  private readonly retired = new Set<Endpoint>();
  private balancer: Balancer | undefined;
  /** The endpoints' priorities and locality groups; undefined: one priority (no locality balancing). */
  private plan: LocalityPlan | undefined;
  private localityBalancer: LocalityBalancer | undefined;
  private closed = false;
  /** The first endpoint list is in force: endpoints added from now on are in slow start. */
  private started = false;
  /** While replacing a runtime: the join times of its endpoints. */
  private joined: Map<string, number> | undefined;

  constructor(o: ClusterRuntimeOptions) {
    this.spec = o.spec;
    this.name = o.spec.name;
    this.store = o.store;
    this.clock = o.clock ?? processClock;
    this.random = o.random ?? Math.random;
    const lb = o.spec.policy.loadBalancer;
    this.passthrough = lb.kind === 'simple' && lb.simple === 'PASSTHROUGH';
    this.hashKey = lb.kind === 'consistentHash' ? lb.key : undefined;
    this.slot = o.store.attachCluster(o.spec.name);
    this.limits = new ClusterLimits(this.slot, limitValues(o.spec.policy.connectionPool));
    const od = o.spec.policy.outlierDetection;
    const emit = o.onOutlierEvent ?? (() => undefined);
    this.outlier = od === undefined ? undefined : new OutlierDetector(od, this.slot, o.spec.name, this.clock, emit);
    // Endpoints of the first list were there from the start; after it (or when replacing a runtime), newcomers join now.
    if (o.previous !== undefined) {
      this.joined = new Map(o.previous.endpoints.map((m) => [m.hostPort, m.joinedAt]));
    }
    this.setEndpoints(o.endpoints);
    this.joined = undefined;
    this.started = true;
    // Schedules the first sweep, or runs one already due (a sweep claimed must be run).
    this.sweepIfDue();
  }

  /** Replaced by a newer version of the cluster, or removed: its pooled connections are not reused. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** The endpoints in force, in list order. */
  get endpoints(): readonly Endpoint[] {
    return this.members;
  }

  /**
   * Puts a new endpoint list in force. Endpoints kept (same address:port) keep their state; new ones
   * take traffic from the next pick; removed ones take no new request, and their attempts in flight
   * still end through attemptEnded. New slots are attached before old ones are let go, so an
   * endpoint kept across the change never loses its state.
   */
  setEndpoints(endpoints: readonly EndpointSpec[]): void {
    if (this.closed) throw new Error(`cluster ${this.name} is closed`);
    const old = new Map(this.members.map((m) => [m.hostPort, m]));
    const next: Endpoint[] = [];
    const seen = new Set<string>();
    for (const spec of endpoints) {
      const hp = hostPortOf(spec.address, spec.port);
      // The same address twice in one list is one endpoint (Envoy dedupes hosts by address).
      if (seen.has(hp)) continue;
      seen.add(hp);
      const kept = old.get(hp) ?? this.revive(hp);
      if (kept !== undefined) {
        kept.spec = spec;
        kept.index = next.length;
        next.push(kept);
      } else {
        const ep = new Endpoint(spec, next.length, this.store.attachEndpoint(this.name, hp));
        const before = this.joined?.get(hp);
        ep.joinedAt = before ?? (this.started || this.joined !== undefined ? this.clock.now() : Number.NEGATIVE_INFINITY);
        next.push(ep);
      }
    }
    for (const m of this.members) {
      if (seen.has(m.hostPort)) continue;
      m.index = -1;
      this.retire(m);
    }
    this.members = next;
    const policy = this.spec.policy;
    const panicThresholdPercent = policy.outlierDetection?.minHealthPercent ?? 0;
    const hosts = this.hostSet(next);
    // Built per endpoint list, never per pick: a cluster whose plan is one group keeps its plain balancer.
    this.plan = policy.locality === undefined || policy.loadBalancer.kind === 'simple' && policy.loadBalancer.simple === 'PASSTHROUGH'
      ? undefined : planLocality(policy.locality, next.map((m) => m.spec));
    if (this.plan === undefined) {
      this.localityBalancer = undefined;
      this.balancer = createBalancer(policy.loadBalancer, { hosts, random: this.random, panicThresholdPercent });
      return;
    }
    this.localityBalancer = new LocalityBalancer({
      hosts, plan: this.plan, random: this.random, panicThresholdPercent,
      inner: (group) => createBalancer(policy.loadBalancer, { hosts: group, random: this.random, panicThresholdPercent: 0 }),
    });
    this.balancer = this.localityBalancer;
  }

  /** The priority of the last pick when the cluster balances by locality (0: the first; above: a failover); undefined otherwise. */
  get lastPickPriority(): number | undefined {
    return this.localityBalancer?.lastPriority;
  }

  /**
   * The endpoint for an attempt, with the attempt started (the cluster's request slot taken, the
   * endpoint's requests in flight counted); or why none: no healthy upstream (UH) or the cluster's
   * maxRequests reached (UO). `ctx.tried`: the request's earlier endpoints, only when the retry
   * policy has ignorePreviousHosts.
   */
  pick(ctx: PickContext = EMPTY_CONTEXT): Endpoint | PickFailure {
    if (this.balancer === undefined) throw this.noBalancer();
    const i = this.balancer.pick(ctx);
    if (i === NONE) {
      this.slot.count('upstream_cx_none_healthy');
      return NO_HEALTHY_UPSTREAM;
    }
    return this.startAttempt(this.members[i]!);
  }

  /**
   * Starts an attempt on a given endpoint, without balancing: the re-send of a keep-alive race goes
   * to the endpoint it was meant for, on a fresh connection. OVERFLOW past maxRequests.
   */
  startAttempt(ep: Endpoint): Endpoint | PickFailure {
    if (!this.limits.tryAcquireRequest()) return OVERFLOW;
    ep.inFlight++;
    ep.slot.requestStarted();
    this.slot.countAt(C.upstream_rq_total);
    return ep;
  }

  /**
   * The endpoint for a TCP connection (no request is counted: Envoy's TCP proxy counts connections
   * only), or NO_HEALTHY_UPSTREAM. The engine then takes tryAcquireConnection (UO when refused) and
   * reports how the connect went with connectEnded.
   */
  pickConnection(ctx: PickContext = EMPTY_CONTEXT): Endpoint | PickFailure {
    if (this.balancer === undefined) throw this.noBalancer();
    const i = this.balancer.pick(ctx);
    if (i === NONE) {
      this.slot.count('upstream_cx_none_healthy');
      return NO_HEALTHY_UPSTREAM;
    }
    return this.members[i]!;
  }

  /** How a TCP connection's connect ended: `connected`, `connect-failure` or `connect-timeout` (counts, outlier detection). */
  connectEnded(ep: Endpoint, outcome: AttemptOutcome): void {
    if (outcome.kind !== 'connected') this.countConnectFailure(ep, outcome);
    if (this.outlier !== undefined) this.report(ep, outcome);
  }

  /**
   * The endpoints a pick passes over now: ejected ones (unless in panic, when every one is a
   * candidate). For /debug/decisions only: it walks the list.
   */
  ejectedEndpoints(): readonly string[] {
    if (this.outlier === undefined || this.panic) return NONE_EJECTED;
    return this.members.filter((m) => m.slot.isEjected()).map((m) => m.hostPort);
  }

  /** Whether the last pick balanced over every endpoint, ejected ones included (Envoy's panic mode). */
  get panic(): boolean {
    return this.balancer?.panic ?? false;
  }

  /** The attempt on `ep` ended: counts, outlier detection, the request slot given back. */
  attemptEnded(ep: Endpoint, outcome: AttemptOutcome): void {
    this.finishAttempt(ep);
    const s = ep.slot;
    const c = this.slot;
    let status = 0;
    switch (outcome.kind) {
      case 'response':
        status = outcome.status ?? 0;
        c.countAt(C.upstream_rq_completed);
        if (status >= 100 && status < 600) c.countAt(CLASS_COUNTERS[Math.floor(status / 100)]!);
        break;
      case 'connect-failure': case 'connect-timeout':
        this.countConnectFailure(ep, outcome);
        break;
      case 'per-try-timeout':
        s.count('rq_timeout');
        c.count('upstream_rq_per_try_timeout');
        break;
      case 'timeout':
        s.count('rq_timeout');
        c.count('upstream_rq_timeout');
        break;
      case 'reset': case 'refused-stream': case 'connected':
        break;
    }
    // Envoy's host rq_success / rq_error: a gRPC call by its grpc-status, anything else by its HTTP status.
    const effective = outcome.grpcStatus !== undefined ? grpcToHttpStatus(outcome.grpcStatus) : status;
    s.countAt(outcome.kind === 'connected' || (outcome.kind === 'response' && effective < 500) ? E.rq_success : E.rq_error);
    if (this.outlier !== undefined) this.report(ep, outcome);
  }

  /**
   * The attempt on `ep` was a keep-alive race (isKeepAliveRace): it is sent again and is no failure
   * of the endpoint, so it is neither counted as one nor fed to outlier detection.
   */
  attemptResent(ep: Endpoint): void {
    this.finishAttempt(ep);
  }

  /**
   * The attempt on `ep` ended for a reason that is not the endpoint's: its client went away, or TLS
   * to it could not even be set up. Its request slot is given back; nothing is counted against it.
   */
  attemptAbandoned(ep: Endpoint): void {
    this.finishAttempt(ep);
  }

  /** A new connection to `ep` within maxConnections; false: upstream_cx_overflow. Released by releaseConnection. */
  tryAcquireConnection(ep: Endpoint): boolean {
    if (!this.limits.tryAcquireConnection()) return false;
    ep.inFlight++;
    ep.slot.connectionOpened();
    this.slot.count('upstream_cx_total');
    return true;
  }

  /** A connection to `ep` closed (or failed to open). */
  releaseConnection(ep: Endpoint): void {
    ep.inFlight--;
    ep.slot.connectionClosed();
    this.limits.releaseConnection();
    if (ep.index < 0) this.maybeDetach(ep);
  }

  /** A request waits for a connection (http1MaxPendingRequests); false: upstream_rq_pending_overflow, 503 UO. */
  tryAcquirePending(): boolean {
    return this.limits.tryAcquirePending();
  }

  releasePending(): void {
    this.limits.releasePending();
  }

  /** Waits until a connection of this cluster is released by any worker (or the time-out): then try again. */
  waitForConnection(timeoutMs: number): Promise<boolean> {
    return this.limits.waitForConnection(timeoutMs);
  }

  /** Other workers' requests waiting for a connection slot: an idle connection should be closed for them. */
  connectionWaiters(): number {
    return this.limits.connectionWaiters();
  }

  /**
   * Whether the attempt that just ended is retried (retry.ts decideRetry, with this cluster's
   * maxRetries). Call it after every attempt of a request with a retry policy: when `retriesDone`
   * > 0 the attempt was a retry, whose share of maxRetries is given back here, and a final answer
   * after a retry counts upstream_rq_retry_success as Envoy does.
   */
  decideRetry(policy: RetrySpec | undefined, outcome: AttemptOutcome, retriesDone: number, facts: RetryFacts): RetryDecision {
    if (retriesDone > 0) this.limits.releaseRetry();
    const d = decideRetry(policy, outcome, retriesDone, facts, this.random, this.limits);
    if (d.stat !== undefined && d.stat !== 'upstream_rq_retry_overflow') this.slot.count(d.stat);
    // Envoy's retry success: the attempt after a retry was not retriable (not: spent, overflowed, timed out).
    if (d === NO_RETRY.notRetriable && retriesDone > 0) this.slot.count('upstream_rq_retry_success');
    return d;
  }

  /** The request gave up during a retry's back-off: the retry's share of maxRetries is given back. */
  retryAbandoned(): void {
    this.limits.releaseRetry();
  }

  /**
   * Runs the outlier detection sweep if one is due for this cluster (once per interval for the whole
   * process, whichever worker calls first). Returns the ms until the next is due (the engine's timer),
   * or undefined without outlier detection.
   */
  sweepIfDue(): number | undefined {
    const od = this.spec.policy.outlierDetection;
    if (this.outlier === undefined || od === undefined) return undefined;
    const now = this.clock.now();
    if (this.slot.claimSweep(now, od.intervalMs)) this.outlier.sweep(this.members);
    const next = this.slot.nextSweepAt();
    return next === undefined ? od.intervalMs : Math.max(0, next - now);
  }

  /** The cluster as /clusters and /stats show it (from every worker's counts). */
  status(): ClusterStatus {
    const counters = {} as Record<ClusterCounter, number>;
    for (const k of CLUSTER_COUNTERS) counters[k] = this.slot.total(k);
    const plan = this.plan;
    const hosts = this.members.map((m, i): HostStatus => {
      const s = m.slot;
      return {
        address: m.address, port: m.port, hostPort: m.hostPort, weight: m.spec.weight, ...splitLocality(m.spec.locality),
        priority: plan === undefined ? 0 : plan.priority[i]!,
        ...(plan !== undefined && plan.group[i]! >= 0 ? { localityWeight: plan.groups[plan.group[i]!]!.weight } : {}),
        ejected: this.outlier !== undefined && s.isEjected(),
        stats: {
          cx_active: s.activeConnections(), cx_connect_fail: s.total('cx_connect_fail'), cx_total: s.total('cx_total'),
          rq_active: s.activeRequests(), rq_error: s.total('rq_error'), rq_success: s.total('rq_success'),
          rq_timeout: s.total('rq_timeout'), rq_total: s.total('rq_total'),
        },
      };
    });
    return {
      name: this.name, outlierDetection: this.outlier !== undefined, limits: this.limits.max, hosts, counters,
      active: { cx: this.limits.active('cx'), pending: this.limits.active('pending'), rq: this.limits.active('rq'), retries: this.limits.active('retries') },
    };
  }

  /**
   * This runtime is replaced or the cluster removed: its endpoints are let go as their attempts and
   * connections end. Build the replacement (same cluster name) before closing this one, so that the
   * shared state carries over.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    // All retired first: the cluster slot is let go only once none of them has anything in flight.
    for (const m of this.members) {
      m.index = -1;
      this.retired.add(m);
    }
    this.members = [];
    this.balancer = undefined;
    for (const m of [...this.retired]) this.maybeDetach(m);
    this.maybeDetachCluster();
  }

  // ---- internals

  // A caller's mistake: picking on a PASSTHROUGH or closed cluster.
  private noBalancer(): TypeError {
    return new TypeError(this.closed ? `cluster ${this.name} is closed`
      : `cluster ${this.name} is PASSTHROUGH: send to the original destination`);
  }

  private finishAttempt(ep: Endpoint): void {
    ep.inFlight--;
    ep.slot.requestEnded();
    this.limits.releaseRequest();
    if (ep.index < 0) this.maybeDetach(ep);
  }

  private countConnectFailure(ep: Endpoint, o: AttemptOutcome): void {
    ep.slot.count('cx_connect_fail');
    this.slot.count('upstream_cx_connect_fail');
    if (o.kind === 'connect-timeout') this.slot.count('upstream_cx_connect_timeout');
  }

  // Envoy's outlier results for an attempt's outcome (router.cc and the connection pools).
  private report(ep: Endpoint, o: AttemptOutcome): void {
    const od = this.outlier!;
    switch (o.kind) {
      case 'response':
        od.report(ep, LOCAL_ORIGIN.CONNECT_SUCCESS, this.members);
        od.report(ep, o.grpcStatus !== undefined && o.grpcInTrailers !== true ? grpcToHttpStatus(o.grpcStatus) : o.status ?? 200, this.members);
        return;
      case 'connect-failure': case 'reset': case 'refused-stream':
        od.report(ep, LOCAL_ORIGIN.CONNECT_FAILED, this.members);
        return;
      case 'connect-timeout': case 'per-try-timeout': case 'timeout':
        od.report(ep, LOCAL_ORIGIN.TIMEOUT, this.members);
        return;
      case 'connected':
        od.report(ep, LOCAL_ORIGIN.CONNECT_SUCCESS_FINAL, this.members);
        return;
    }
  }

  // The HostSet the balancer reads: weights and keys from the list, health and load from shared memory.
  private hostSet(list: readonly Endpoint[]): HostSet {
    const slot = this.slot;
    const hosts: HostSet = {
      size: list.length,
      weight: (i) => list[i]!.spec.weight,
      key: (i) => list[i]!.hostPort,
      // Without outlier detection nothing is ejected: an ejection made under an earlier version of
      // the cluster's policy (the slot outlives the runtime) does not apply any more.
      isHealthy: this.outlier === undefined ? () => true : (i) => !list[i]!.slot.isEjected(),
      activeRequests: (i) => list[i]!.slot.activeRequests(),
      healthVersion: () => slot.healthVersion(),
    };
    const lb = this.spec.policy.loadBalancer;
    const ss = lb.kind === 'simple' ? lb.slowStart : undefined;
    if (ss === undefined) return hosts;
    let until = Number.NEGATIVE_INFINITY;
    for (const m of list) until = Math.max(until, m.joinedAt + ss.windowMs);
    // Nobody in slow start: the plain set, nothing more per pick.
    if (until <= this.clock.now()) return hosts;
    const clock = this.clock;
    return {
      ...hosts,
      // Read at each pick (EDF re-add), so the weight grows as time passes.
      weight: (i) => {
        const m = list[i]!;
        return m.spec.weight * slowStartFactor(ss, clock.now() - m.joinedAt);
      },
      // The window's end changes the version: the balancer rebuilds (equal weights again: P2C).
      healthVersion: () => slot.healthVersion() + (clock.now() < until ? 0.5 : 0),
    };
  }

  // A removed endpoint that comes back while its old attempts are still in flight keeps its slot.
  private revive(hostPort: string): Endpoint | undefined {
    for (const r of this.retired) {
      if (r.hostPort !== hostPort) continue;
      this.retired.delete(r);
      return r;
    }
    return undefined;
  }

  private retire(m: Endpoint): void {
    this.retired.add(m);
    this.maybeDetach(m);
  }

  private maybeDetach(m: Endpoint): void {
    if (m.inFlight > 0 || !this.retired.has(m)) return;
    this.retired.delete(m);
    this.store.detachEndpoint(m.slot);
    if (this.closed) this.maybeDetachCluster();
  }

  private clusterDetached = false;

  private maybeDetachCluster(): void {
    if (this.clusterDetached || this.retired.size > 0) return;
    this.clusterDetached = true;
    this.store.detachCluster(this.slot);
  }
}
