// The data plane's counters: plain numbers the hot path bumps (no allocation, no prom-client call
// per packet). The admin API renders them as Envoy-style `/stats`, the metrics module exports them
// as Prometheus series at scrape time. One source, two views.

export type Direction = 'inbound' | 'outbound';
export const DIRECTIONS: readonly Direction[] = ['outbound', 'inbound'];

/** Request-duration buckets in milliseconds (Istio's, so dashboards carry over). */
export const DURATION_BUCKETS_MS: readonly number[] = [
  0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000,
];

/** A fixed-bucket histogram: counts per upper bound (non-cumulative), plus sum and count. */
export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(value: number): void {
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** Counters of one direction of traffic (one listener and the upstreams it reaches). */
export class DirectionStats {
  // Downstream connections (accepted by the listener).
  cxTotal = 0;
  cxActive = 0;
  /** Connections that ended in an error (reset, socket error, protocol error) rather than a close. */
  cxErrors = 0;
  /** Bytes read from and written to downstream sockets. */
  rxBytes = 0;
  txBytes = 0;
  /** Connections carried as raw TCP (not HTTP/1.x). */
  tcpCxTotal = 0;

  // HTTP requests (L7 path).
  rqTotal = 0;
  rqActive = 0;
  /** Completed requests by response status code. */
  readonly rqByCode = new Map<number, number>();
  /** Malformed requests answered 400. */
  rqProtocolErrors = 0;
  readonly rqDurationMs = new Histogram(DURATION_BUCKETS_MS);
  /** HTTP body bytes received from clients / sent back to them. */
  rqBodyBytes = 0;
  rsBodyBytes = 0;

  // Upstream connections (to the original destination).
  upstreamCxTotal = 0;
  upstreamCxActive = 0;
  upstreamCxConnectFail = 0;
  upstreamCxConnectTimeout = 0;
  /** Requests failed for an upstream reason (refused, reset, timeout): answered 503 or reset. */
  upstreamRqErrors = 0;
  /** Requests answered 504 because the route's timeout passed before the upstream's response head. */
  upstreamRqTimeouts = 0;

  recordResponse(status: number, durationMs: number): void {
    this.rqByCode.set(status, (this.rqByCode.get(status) ?? 0) + 1);
    this.rqDurationMs.observe(durationMs);
  }
}

export class ProxyStats {
  readonly outbound = new DirectionStats();
  readonly inbound = new DirectionStats();
  /** Connections refused because their original destination was one of the proxy's own ports. */
  loopsRefused = 0;
  /** Errors that escaped every handler (logged; the process goes on). */
  uncaughtErrors = 0;

  of(direction: Direction): DirectionStats {
    return direction === 'inbound' ? this.inbound : this.outbound;
  }
}
