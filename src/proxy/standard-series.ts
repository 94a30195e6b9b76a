// Istio's standard metrics, counted on the data path: one series object per label set, found by
// lookups on values the request already holds (the cluster's name, the peer's principal, the peer's
// exchanged metadata as it came, a packed integer of code, gRPC status and flags), never built per
// request. The label values are worked out at scrape time from the series' key (src/metrics).
// Bounded: past the limits below, new peers and codes fold into an `unknown` series, so a burst of
// distinct clients cannot grow the series without end.
import { Histogram } from './stats-histogram.js';

/** Request-duration buckets in milliseconds (Istio's, so dashboards carry over). */
export const DURATION_BUCKETS_MS: readonly number[] = [
  0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000,
];

/** Istio's request_bytes / response_bytes buckets: powers of ten, 1 B to 1 GB. */
export const SIZE_BUCKETS_BYTES: readonly number[] = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000];

/** Distinct principals per service, exchanged peers per principal, codes per peer: past them, `unknown`/folded. */
export const MAX_PRINCIPALS_PER_SERVICE = 256;
export const MAX_PEERS_PER_PRINCIPAL = 16;
export const MAX_CODES_PER_PEER = 512;
/** The key a series falls back to past a bound (its labels read `unknown`). */
export const OVERFLOW = '';

/** gRPC status in the packed key: 0 not gRPC, 1 a gRPC call without a status, n + 2 status n (n < 30). */
export function packRequest(status: number, grpc: number | null | undefined, flags: number): number {
  const g = grpc === undefined ? 0 : grpc === null ? 1 : grpc >= 0 && grpc < 30 ? grpc + 2 : 1;
  const s = status >= 0 && status < 1024 ? status : 0;
  return ((flags & 0x7fff) * 32 + g) * 1024 + s;
}

export function unpackRequest(packed: number): { status: number; grpc: number | null | undefined; flags: number } {
  const status = packed % 1024;
  const g = Math.floor(packed / 1024) % 32;
  const flags = Math.floor(packed / 32768);
  return { status, grpc: g === 0 ? undefined : g === 1 ? null : g - 2, flags };
}

/** One HTTP label set's counts. Plain numbers and arrays: a worker's copy crosses threads as it is. */
export class HttpSeries {
  count = 0;
  requestMessages = 0;
  responseMessages = 0;
  readonly duration = new Histogram(DURATION_BUCKETS_MS);
  readonly requestBytes = new Histogram(SIZE_BUCKETS_BYTES);
  readonly responseBytes = new Histogram(SIZE_BUCKETS_BYTES);
}

/** One TCP label set's counts (Istio's four TCP metrics). */
export class TcpSeries {
  opened = 0;
  closed = 0;
  sentBytes = 0;
  receivedBytes = 0;
}

type ByPacked = Map<number, HttpSeries>;
type ByPeer<T> = Map<string, T>;
type ByPrincipal<T> = Map<string, ByPeer<T>>;

/** Finds (or makes, within the bounds) the map of `key` in `outer`; past `max`, the OVERFLOW entry's. */
function level<T>(outer: Map<string, T>, key: string, max: number, make: () => T): T {
  let inner = outer.get(key);
  if (inner === undefined) {
    if (outer.size >= max) key = OVERFLOW;
    inner = outer.get(key);
    if (inner === undefined) outer.set(key, (inner = make()));
  }
  return inner;
}

/**
 * The standard series of one direction (reporter): service (the cluster's name, '' for the
 * original destination or inbound) → peer principal ('' none) → peer metadata ('' none) → series.
 */
export class StandardSeries {
  readonly http = new Map<string, ByPrincipal<ByPacked>>();
  readonly tcp = new Map<string, ByPrincipal<TcpSeries>>();

  httpSeries(service: string, principal: string, peer: string, packed: number): HttpSeries {
    const byPeer = level(level(this.http, service, Number.MAX_SAFE_INTEGER, () => new Map()), principal, MAX_PRINCIPALS_PER_SERVICE, () => new Map());
    const byPacked = level(byPeer, peer, MAX_PEERS_PER_PRINCIPAL, () => new Map<number, HttpSeries>());
    let series = byPacked.get(packed);
    if (series === undefined) {
      if (byPacked.size >= MAX_CODES_PER_PEER) packed = packRequest(0, undefined, 0);
      series = byPacked.get(packed);
      if (series === undefined) byPacked.set(packed, (series = new HttpSeries()));
    }
    return series;
  }

  /** One completed request (body bytes each way; gRPC messages each way, 0 for plain HTTP). */
  recordHttp(service: string, principal: string, peer: string, packed: number, durationMs: number,
    bytesIn: number, bytesOut: number, messagesIn: number, messagesOut: number): void {
    const s = this.httpSeries(service, principal, peer, packed);
    s.count++;
    s.duration.observe(durationMs);
    s.requestBytes.observe(bytesIn);
    s.responseBytes.observe(bytesOut);
    s.requestMessages += messagesIn;
    s.responseMessages += messagesOut;
  }

  /** A TCP connection's series; the caller bumps `opened` now and the rest as it closes. */
  tcpSeries(service: string, principal: string, peer: string): TcpSeries {
    const byPeer = level(level(this.tcp, service, Number.MAX_SAFE_INTEGER, () => new Map()), principal, MAX_PRINCIPALS_PER_SERVICE, () => new Map());
    return level(byPeer, peer, MAX_PEERS_PER_PRINCIPAL, () => new TcpSeries());
  }

  clear(): void {
    this.http.clear();
    this.tcp.clear();
  }

  /** Adds another's counts (a worker's copy: plain objects of the same shapes). */
  add(other: StandardSeries): void {
    for (const [service, byPrincipal] of other.http) {
      for (const [principal, byPeer] of byPrincipal) {
        for (const [peer, byPacked] of byPeer) {
          for (const [packed, o] of byPacked) {
            const s = this.httpSeries(service, principal, peer, packed);
            s.count += o.count;
            s.requestMessages += o.requestMessages;
            s.responseMessages += o.responseMessages;
            s.duration.add(o.duration);
            s.requestBytes.add(o.requestBytes);
            s.responseBytes.add(o.responseBytes);
          }
        }
      }
    }
    for (const [service, byPrincipal] of other.tcp) {
      for (const [principal, byPeer] of byPrincipal) {
        for (const [peer, o] of byPeer) {
          const s = this.tcpSeries(service, principal, peer);
          s.opened += o.opened;
          s.closed += o.closed;
          s.sentBytes += o.sentBytes;
          s.receivedBytes += o.receivedBytes;
        }
      }
    }
  }

  /** Every HTTP series with its key, for the scrape. */
  *httpEntries(): Generator<[service: string, principal: string, peer: string, packed: number, series: HttpSeries]> {
    for (const [service, byPrincipal] of this.http) {
      for (const [principal, byPeer] of byPrincipal) {
        for (const [peer, byPacked] of byPeer) for (const [packed, s] of byPacked) yield [service, principal, peer, packed, s];
      }
    }
  }

  *tcpEntries(): Generator<[service: string, principal: string, peer: string, series: TcpSeries]> {
    for (const [service, byPrincipal] of this.tcp) {
      for (const [principal, byPeer] of byPrincipal) for (const [peer, s] of byPeer) yield [service, principal, peer, s];
    }
  }
}
