// The data plane's counters: plain numbers the hot path bumps (no allocation, no prom-client call
// per packet). The admin API renders them as Envoy-style `/stats`, the metrics module exports them
// as Prometheus series at scrape time. One source, two views.
import { flagsText } from '../log/access-record.js';
import { DURATION_BUCKETS_MS, StandardSeries } from './standard-series.js';
import { Histogram } from './stats-histogram.js';

export type Direction = 'inbound' | 'outbound';
export const DIRECTIONS: readonly Direction[] = ['outbound', 'inbound'];

export { DURATION_BUCKETS_MS } from './standard-series.js';
export { Histogram } from './stats-histogram.js';

export const MTLS_FAILURE_REASONS = ['peer_certificate', 'handshake', 'timeout'] as const;
export type MtlsFailureReason = (typeof MTLS_FAILURE_REASONS)[number];

// rqLabelled keys, cached: a labelled request (gRPC, mutual TLS, response flags) looks its key up
// instead of building a string. Packed: status (< 1024), grpc status (undefined 0, null 1, n → n + 2,
// n < 30) and the FLAG bits (< 2^15) in one small integer; per peer principal (undefined: none).
const KEYS_BY_PEER = new Map<string | undefined, Map<number, string>>();
/** Bounds on what is cached (distinct peers; keys per peer); beyond them a key is built each time. */
const MAX_CACHED_PEERS = 1024;
const MAX_KEYS_PER_PEER = 4096;

function buildKey(status: number, grpc: number | null | undefined, peer: string | undefined, flags: number): string {
  return `${status} ${grpc === undefined ? 'http' : 'grpc'} ${grpc ?? '-'} ${flagsText(flags) ?? '-'} ${peer ?? '-'}`;
}

/**
 * The key of DirectionStats.rqLabelled: `<code> <http|grpc> <grpc status|-> <response flags|-> <peer|->`
 * (flags in Envoy's short form, `UF,URX`; the peer last, as the one field that could hold anything).
 */
export function requestKey(status: number, grpc: number | null | undefined, peer: string | undefined, flags = 0): string {
  const g = grpc === undefined ? 0 : grpc === null ? 1 : grpc + 2;
  if (status < 0 || status > 1023 || g < 0 || g > 31 || flags < 0 || flags > 0x7fff || !Number.isInteger(g)) return buildKey(status, grpc, peer, flags);
  const packed = (flags * 32 + g) * 1024 + status;
  let keys = KEYS_BY_PEER.get(peer);
  if (keys === undefined) {
    if (KEYS_BY_PEER.size >= MAX_CACHED_PEERS) return buildKey(status, grpc, peer, flags);
    keys = new Map();
    KEYS_BY_PEER.set(peer, keys);
  }
  let key = keys.get(packed);
  if (key === undefined) {
    key = buildKey(status, grpc, peer, flags);
    if (keys.size < MAX_KEYS_PER_PEER) keys.set(packed, key);
  }
  return key;
}

export interface RequestLabels {
  readonly code: number;
  readonly protocol: 'http' | 'grpc';
  /** '' when none. */
  readonly grpcStatus: string;
  /** Envoy's short response flags (`UH`, `UF,URX`), `-` when none (Istio's `response_flags`). */
  readonly flags: string;
  readonly peer: string | undefined;
}

/** Istio's labels of one rqLabelled key. */
export function requestLabels(key: string): RequestLabels {
  const [code, protocol, grpc, flags, ...peer] = key.split(' ') as [string, 'http' | 'grpc', string, string, ...string[]];
  const p = peer.join(' ');
  return { code: Number(code), protocol, grpcStatus: grpc === '-' ? '' : grpc, flags, peer: p === '-' ? undefined : p };
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
  /** Connections not HTTP/1.x that policy refused (Istio's TCP semantics): closed before a byte went on. */
  tcpCxDenied = 0;
  /** Outbound connections closed under REGISTRY_ONLY: no service covers their destination (the BlackHoleCluster's). */
  blackHoleCx = 0;
  /** Connections of a gateway TCP / TLS PASSTHROUGH port that no route took (Envoy: no filter chain matched): closed, NR. */
  tcpCxNoRoute = 0;
  /** Connections refused at accept: the process held MESH_MAX_DOWNSTREAM_CONNECTIONS already. */
  cxOverflow = 0;

  // TLS terminated here (the gateway's HTTPS ports).
  /** Handshakes completed. */
  tlsHandshakes = 0;
  /**
   * TLS connections closed for a TLS reason: a failed handshake, bytes that are not a ClientHello, a
   * handshake time-out, a renegotiation attempt (each also in its own counter below when it has one).
   */
  tlsErrors = 0;
  /** Handshakes not complete within MESH_TLS_HANDSHAKE_TIMEOUT (also in tlsErrors). */
  tlsHandshakeTimeouts = 0;
  /** Connections closed because the client tried to renegotiate (also in tlsErrors). */
  tlsRenegotiations = 0;
  /** ClientHellos whose server name (or its absence) matched no server of the port: refused. */
  tlsNoServerMatch = 0;

  // Mutual TLS between sidecars (inbound: terminated here; outbound: originated here).
  /** Mesh handshakes completed. */
  mtlsHandshakes = 0;
  /** Mesh handshakes that failed (a peer certificate refused, a TLS error, a time-out): the connection closed. */
  mtlsHandshakeFailures = 0;
  /** The same by reason: `peer_certificate` (chain, dates, SPIFFE id, trust domain, none), `handshake` (a TLS error), `timeout`. */
  readonly mtlsFailuresByReason = new Map<MtlsFailureReason, number>();

  countMtlsFailure(reason: MtlsFailureReason): void {
    this.mtlsHandshakeFailures++;
    this.mtlsFailuresByReason.set(reason, (this.mtlsFailuresByReason.get(reason) ?? 0) + 1);
  }
  /** Inbound: connections refused because PeerAuthentication says STRICT and they were not mesh TLS (reset). */
  mtlsPlaintextRefused = 0;
  /** Inbound: mesh TLS arrived but no identity is held to answer it (reset). Outbound: mTLS configured, none held (503). */
  mtlsNoIdentity = 0;

  // HTTP requests (L7 path).
  rqTotal = 0;
  rqActive = 0;
  /** Completed requests by response status code. */
  readonly rqByCode = new Map<number, number>();
  /**
   * Of those, the ones that were gRPC, came over mutual TLS or carry response flags, by Istio's labels:
   * `<code> <http|grpc> <grpc status|-> <flags|-> <peer principal|->` → count (requestKey() makes the key).
   */
  readonly rqLabelled = new Map<string, number>();
  /** HTTP/2 connections (h2c prior knowledge, or ALPN h2 / istio-h2) and the requests (streams) they carried. */
  cxHttp2 = 0;
  rqHttp2 = 0;
  /** HTTP/2 connections closed for a protocol violation or a flood (nghttp2's limits, a GOAWAY with an error). */
  cxHttp2ProtocolErrors = 0;
  /** Malformed requests answered 400 (and the parser's 414, 431, 501, 505). */
  rqProtocolErrors = 0;
  /** Request heads not complete within the head time-out (408, connection closed). */
  rqHeadTimeouts = 0;
  /** Requests whose protocol switch the upstream confirmed (101 to an Upgrade, 2xx to CONNECT): tunnels. */
  rqTunnels = 0;
  readonly rqDurationMs = new Histogram(DURATION_BUCKETS_MS);
  /** Istio's standard metrics of this direction (reporter), by label set (src/proxy/standard-series.ts). */
  readonly standard = new StandardSeries();
  /** HTTP body bytes received from clients / sent back to them. */
  rqBodyBytes = 0;
  rsBodyBytes = 0;

  // Upstream connections (to the original destination).
  upstreamCxTotal = 0;
  upstreamCxActive = 0;
  /** Requests (HTTP/1.1 requests, HTTP/2 streams, tunnels they became) open on upstream connections now. */
  upstreamRqActive = 0;
  upstreamCxConnectFail = 0;
  upstreamCxConnectTimeout = 0;
  /** Requests failed for an upstream reason (refused, reset, timeout): answered 503 or reset. */
  upstreamRqErrors = 0;
  /** Requests answered 504 because the route's timeout passed before the upstream's response head. */
  upstreamRqTimeouts = 0;
  /** Attempts sent again by a route's retry policy (traffic management). */
  upstreamRqRetries = 0;
  /**
   * The part of the counts above that went to traffic clusters (a ServiceEntry's endpoints) rather
   * than to the original destination: what is left is Envoy's PassthroughCluster (admin /clusters).
   */
  routedRqTotal = 0;
  routedCxTotal = 0;
  routedCxActive = 0;
  routedCxConnectFail = 0;
  /** Mirrored copies (a route's mirrors): sent; not sent (a limit, no endpoint, TLS not to be had); failed or timed out once sent; not made, the body being over MIRROR_BODY_LIMIT. */
  mirrorRqTotal = 0;
  mirrorRqDropped = 0;
  mirrorRqFailed = 0;
  mirrorRqTooLarge = 0;

  /**
   * One completed request: its status, how long it took, the peer's principal (mutual TLS), for
   * a gRPC call its `grpc-status` (null: a gRPC call that ended without one), and Envoy's response
   * flags (FLAG bits, 0: none). A plain request (none of the three) costs one Map update, as before.
   */
  recordResponse(status: number, durationMs: number, peer?: string, grpc?: number | null, flags = 0): void {
    this.rqByCode.set(status, (this.rqByCode.get(status) ?? 0) + 1);
    if (peer !== undefined || grpc !== undefined || flags !== 0) {
      const key = requestKey(status, grpc, peer, flags);
      this.rqLabelled.set(key, (this.rqLabelled.get(key) ?? 0) + 1);
    }
    this.rqDurationMs.observe(durationMs);
  }

  clear(): void {
    for (const key of Object.keys(this) as (keyof DirectionStats)[]) {
      if (typeof this[key] === 'number') (this as unknown as Record<string, number>)[key] = 0;
    }
    this.rqByCode.clear();
    this.rqLabelled.clear();
    this.mtlsFailuresByReason.clear();
    this.standard.clear();
    this.rqDurationMs.counts.fill(0);
    this.rqDurationMs.sum = 0;
    this.rqDurationMs.count = 0;
  }

  /** Adds another direction's counters (a worker's, from its snapshot) to these. */
  add(other: DirectionStats): void {
    for (const key of Object.keys(other) as (keyof DirectionStats)[]) {
      const value = other[key];
      if (typeof value === 'number') (this as unknown as Record<string, number>)[key] = (this[key] as number) + value;
    }
    for (const [code, n] of other.rqByCode) this.rqByCode.set(code, (this.rqByCode.get(code) ?? 0) + n);
    for (const [key, n] of other.rqLabelled) this.rqLabelled.set(key, (this.rqLabelled.get(key) ?? 0) + n);
    for (const [reason, n] of other.mtlsFailuresByReason) this.mtlsFailuresByReason.set(reason, (this.mtlsFailuresByReason.get(reason) ?? 0) + n);
    this.rqDurationMs.add(other.rqDurationMs);
    this.standard.add(other.standard);
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

  /**
   * Makes these stats the sum of `parts` (every worker's; copies cloned across threads keep the
   * data of these shapes). The object stays the same, so whoever holds it reads the new sum.
   */
  assignSum(parts: readonly ProxyStats[]): void {
    for (const d of DIRECTIONS) this.of(d).clear();
    this.loopsRefused = 0;
    this.uncaughtErrors = 0;
    for (const p of parts) {
      this.outbound.add(p.outbound);
      this.inbound.add(p.inbound);
      this.loopsRefused += p.loopsRefused;
      this.uncaughtErrors += p.uncaughtErrors;
    }
  }
}
