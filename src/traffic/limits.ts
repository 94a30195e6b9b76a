// A cluster's circuit breakers (Istio's connectionPool, Envoy's default-priority thresholds): one
// count per cluster for the whole process, every worker drawing on it, so that maxConnections: 1
// means one connection, not one per worker. try/release pairs; a refusal takes nothing and is
// counted under Envoy's overflow stat. The engine answers an overflow with 503, flag UO and
// `x-envoy-overloaded: true`.
//
// Per cluster, as Envoy and Istio apply them (Istio's docs say "per host"; the thresholds are the
// cluster's circuit breakers): maxConnections counts connections to every endpoint of the cluster.
// One difference from Envoy, on purpose: Envoy lets every endpoint of a pool have one connection
// even past maxConnections; here the limit is strict (the issue: "a limit of 1 connection means 1").
import type { ClusterSlot, LimitGauge } from './shared-state.js';
import type { ConnectionPoolSpec } from './spec.js';

export interface LimitValues {
  readonly maxConnections: number;
  readonly maxPendingRequests: number;
  readonly maxRequests: number;
  readonly maxRetries: number;
  /** Replaces maxRetries when set: Envoy's retry budget. */
  readonly retryBudget?: { readonly percent: number; readonly minRetryConcurrency: number } | undefined;
}

/** The four thresholds of a ConnectionPoolSpec. */
export function limitValues(pool: ConnectionPoolSpec): LimitValues {
  return {
    maxConnections: pool.tcp.maxConnections,
    maxPendingRequests: pool.http.http1MaxPendingRequests,
    // Envoy's max_requests bounds every request in flight to the cluster, HTTP/1.1 too (Istio's
    // comment that it is HTTP/2 only predates Envoy applying it to both).
    maxRequests: pool.http.http2MaxRequests,
    maxRetries: pool.http.maxRetries,
    ...(pool.http.retryBudget !== undefined ? { retryBudget: pool.http.retryBudget } : {}),
  };
}

/** Envoy's thresholds for the high priority Istio never configures (shown in /clusters as Envoy shows them). */
export const ENVOY_HIGH_PRIORITY_LIMITS: LimitValues = Object.freeze({ maxConnections: 1024, maxPendingRequests: 1024, maxRequests: 1024, maxRetries: 3 });

export class ClusterLimits {
  constructor(readonly slot: ClusterSlot, readonly max: LimitValues) {}

  /** A new upstream connection (any endpoint); false: upstream_cx_overflow (the request waits or is refused). */
  tryAcquireConnection(): boolean {
    if (this.slot.tryAcquire('cx', this.max.maxConnections)) return true;
    this.slot.count('upstream_cx_overflow');
    return false;
  }

  /** A connection closed (wakes the workers waiting for a connection slot). */
  releaseConnection(): void {
    this.slot.release('cx');
  }

  /** A request queued for a connection; false: upstream_rq_pending_overflow, 503 UO. */
  tryAcquirePending(): boolean {
    if (this.slot.tryAcquire('pending', this.max.maxPendingRequests)) {
      this.slot.count('upstream_rq_pending_total');
      return true;
    }
    this.slot.count('upstream_rq_pending_overflow');
    return false;
  }

  releasePending(): void {
    this.slot.release('pending');
  }

  /** A request in flight to the cluster; false: Envoy counts max_requests overflows as upstream_rq_pending_overflow too. */
  tryAcquireRequest(): boolean {
    if (this.slot.tryAcquire('rq', this.max.maxRequests)) return true;
    this.slot.count('upstream_rq_pending_overflow');
    return false;
  }

  releaseRequest(): void {
    this.slot.release('rq');
  }

  /** A retry scheduled or in flight; false: upstream_rq_retry_overflow (the retry is not sent, flag UO). */
  tryAcquireRetry(): boolean {
    if (this.slot.tryAcquire('retries', this.retryLimit())) return true;
    this.slot.count('upstream_rq_retry_overflow');
    return false;
  }

  /**
   * How many retries may be in flight now: maxRetries, or with a retry budget Envoy's
   * max(minRetryConcurrency, percent % of the requests in flight and pending), truncated as Envoy
   * does. Read per retry only (a retry is rare); the counts are the whole sidecar's.
   */
  retryLimit(): number {
    const b = this.max.retryBudget;
    if (b === undefined) return this.max.maxRetries;
    return retryBudgetLimit(b, this.slot.gauge('rq') + this.slot.gauge('pending'));
  }

  releaseRetry(): void {
    this.slot.release('retries');
  }

  /**
   * Waits until any worker releases a connection of this cluster, or `timeoutMs`; true when woken.
   * The caller then tries tryAcquireConnection again: another waiter may have won it.
   */
  waitForConnection(timeoutMs: number): Promise<boolean> {
    return this.slot.waitForConnectionRelease(timeoutMs);
  }

  /**
   * Requests of other workers waiting for a connection slot: a worker whose connection to this
   * cluster goes idle should close it rather than keep it, or a limit of 1 would starve them.
   */
  connectionWaiters(): number {
    return this.slot.connectionWaiters();
  }

  active(gauge: LimitGauge): number {
    return this.slot.gauge(gauge);
  }
}

/** Whether a connection has served its maxRequestsPerConnection (0: unlimited) and must not take another request. */
export function connectionExhausted(requestsServed: number, maxRequestsPerConnection: number): boolean {
  return maxRequestsPerConnection > 0 && requestsServed >= maxRequestsPerConnection;
}

/** Envoy's retry budget: retries in flight allowed with `active` requests in flight or pending. */
export function retryBudgetLimit(b: { readonly percent: number; readonly minRetryConcurrency: number }, active: number): number {
  return Math.max(b.minRetryConcurrency, Math.floor((b.percent / 100) * active));
}
