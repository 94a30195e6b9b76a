// The proxy's Prometheus series (15090 `/stats/prometheus`, and the proxy part of 15020). The data
// plane only bumps plain numbers in ProxyStats; these collectors read them at scrape time, so the
// hot path never calls prom-client and `/stats` (admin) and Prometheus can never disagree.
// Names follow Istio's standard metrics with `istio_` → `mesh_`; `direction` (outbound|inbound)
// plays the part of Istio's `reporter` (docs/METRICS.md lists every series and its source).
import { Counter, Gauge, Histogram, type MetricType, type Registry } from './prom.js';
import type { DecisionLog } from '../gateway/decisions.js';
import { DIRECTIONS, DURATION_BUCKETS_MS, MTLS_FAILURE_REASONS, requestLabels, type Direction, type DirectionStats, type ProxyStats } from '../proxy/stats.js';

/** Every series this module registers, by name: one home for the names (docs and tests use it). */
export const PROXY_METRIC_NAMES = {
  requests: 'mesh_requests_total',
  requestsActive: 'mesh_requests_active',
  requestDuration: 'mesh_request_duration_milliseconds',
  requestBytes: 'mesh_request_bytes_total',
  responseBytes: 'mesh_response_bytes_total',
  httpProtocolErrors: 'mesh_http_protocol_errors_total',
  httpHeadTimeouts: 'mesh_http_request_header_timeouts_total',
  httpTunnels: 'mesh_http_upgrades_total',
  tcpDenied: 'mesh_tcp_connections_denied_total',
  tcpOpened: 'mesh_tcp_connections_opened_total',
  tcpClosed: 'mesh_tcp_connections_closed_total',
  tcpReceivedBytes: 'mesh_tcp_received_bytes_total',
  tcpSentBytes: 'mesh_tcp_sent_bytes_total',
  tcpPassthrough: 'mesh_tcp_passthrough_connections_total',
  downstreamActive: 'mesh_downstream_connections_active',
  downstreamOverflow: 'mesh_downstream_connections_overflow_total',
  tlsHandshakes: 'mesh_tls_handshakes_total',
  tlsErrors: 'mesh_tls_connection_errors_total',
  tlsHandshakeTimeouts: 'mesh_tls_handshake_timeouts_total',
  tlsRenegotiations: 'mesh_tls_renegotiations_refused_total',
  tlsNoServerMatch: 'mesh_tls_no_server_match_total',
  mtlsHandshakes: 'mesh_mtls_handshakes_total',
  mtlsHandshakeFailures: 'mesh_mtls_handshake_failures_total',
  mtlsPlaintextRefused: 'mesh_mtls_plaintext_refused_total',
  mtlsNoIdentity: 'mesh_mtls_no_identity_total',
  upstreamTotal: 'mesh_upstream_connections_total',
  upstreamActive: 'mesh_upstream_connections_active',
  upstreamConnectFailures: 'mesh_upstream_connect_failures_total',
  upstreamConnectTimeouts: 'mesh_upstream_connect_timeouts_total',
  upstreamRequestErrors: 'mesh_upstream_request_errors_total',
  loopsRefused: 'mesh_loop_connections_refused_total',
  connectionTerminations: 'proxy_connection_terminations',
} as const;

/** Registered beside the proxy's series by registerDecisionMetrics. */
export const DECISION_METRIC_NAME = 'mesh_request_decisions_total';

type PerDirection = (d: DirectionStats) => number;

/** A counter per direction whose value is read from the stats at scrape time. */
function directionCounter(registry: Registry, stats: ProxyStats, name: string, help: string, read: PerDirection): void {
  new Counter({
    name, help, labelNames: ['direction'], registers: [registry],
    collect() {
      this.reset();
      for (const direction of DIRECTIONS) this.inc({ direction }, read(stats.of(direction)));
    },
  });
}

function directionGauge(registry: Registry, stats: ProxyStats, name: string, help: string, read: PerDirection): void {
  new Gauge({
    name, help, labelNames: ['direction'], registers: [registry],
    collect() {
      for (const direction of DIRECTIONS) this.set({ direction }, read(stats.of(direction)));
    },
  });
}

/** Sample of a histogram as prom-client's text formatter takes it. */
interface HistogramSample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/**
 * The cumulative Prometheus samples (`_bucket` per bound and `+Inf`, `_sum`, `_count`) of one
 * direction's request-duration histogram, whose counts in ProxyStats are per bucket.
 */
export function durationSamples(name: string, direction: Direction, d: DirectionStats): HistogramSample[] {
  const h = d.rqDurationMs;
  const samples: HistogramSample[] = [];
  let cumulative = 0;
  h.bounds.forEach((bound, i) => {
    cumulative += h.counts[i]!;
    samples.push({ metricName: `${name}_bucket`, labels: { direction, le: bound }, value: cumulative });
  });
  samples.push({ metricName: `${name}_bucket`, labels: { direction, le: '+Inf' }, value: h.count });
  samples.push({ metricName: `${name}_sum`, labels: { direction }, value: h.sum });
  samples.push({ metricName: `${name}_count`, labels: { direction }, value: h.count });
  return samples;
}

/** prom-client types the kind as an enum its JavaScript does not export; the value is the string. */
const HISTOGRAM = 'histogram' as unknown as MetricType;

/**
 * prom-client's Histogram only learns through observe(); this one reports the data plane's
 * fixed-bucket counts as they are at scrape time (the registry calls getForPromString for text).
 */
class StatsDurationHistogram extends Histogram<'direction'> {
  private static readonly help =
    'Duration of HTTP requests through the proxy, from the first byte of the request to the end of the response, in milliseconds.';

  constructor(registry: Registry, private readonly stats: ProxyStats) {
    super({
      name: PROXY_METRIC_NAMES.requestDuration,
      help: StatsDurationHistogram.help,
      labelNames: ['direction'],
      buckets: [...DURATION_BUCKETS_MS],
      registers: [registry],
    });
  }

  getForPromString(): ReturnType<Histogram<'direction'>['get']> {
    const name = PROXY_METRIC_NAMES.requestDuration;
    const values = DIRECTIONS.flatMap((direction) => durationSamples(name, direction, this.stats.of(direction)));
    return Promise.resolve({
      name, help: StatsDurationHistogram.help, type: HISTOGRAM, aggregator: 'sum', collect: () => undefined,
      // `le` is a label prom-client's histograms carry; the type does not name it.
      values: values as Awaited<ReturnType<Histogram<'direction'>['get']>>['values'],
    });
  }

  override get(): ReturnType<Histogram<'direction'>['get']> {
    return this.getForPromString();
  }
}

/**
 * Registers the proxy's collectors on `registry` (never the global one). Nothing is counted here:
 * every value is read from `stats` when the registry is scraped.
 */
export function registerProxyMetrics(registry: Registry, stats: ProxyStats): void {
  const n = PROXY_METRIC_NAMES;
  new Counter({
    name: n.requests,
    help: 'HTTP requests completed by the proxy, by direction, response status code, and Istio\'s labels: request_protocol '
      + '(http, grpc), grpc_response_status (a gRPC call\'s grpc-status), response_flags (Envoy\'s short flags: UH, UF, UO, URX, '
      + 'NR, UT, UC, UR, LR, DC...; - for none), whether the client came over mutual TLS and as whom '
      + '(connection_security_policy mutual_tls/none inbound, unknown outbound; source_principal).',
    labelNames: ['direction', 'response_code', 'request_protocol', 'grpc_response_status', 'response_flags', 'connection_security_policy', 'source_principal'],
    registers: [registry],
    collect() {
      this.reset();
      for (const direction of DIRECTIONS) {
        const d = stats.of(direction);
        const plain = new Map(d.rqByCode);
        const policy = direction === 'inbound' ? 'none' : 'unknown';
        for (const [key, count] of d.rqLabelled) {
          const l = requestLabels(key);
          plain.set(l.code, (plain.get(l.code) ?? 0) - count);
          this.inc({
            direction, response_code: String(l.code), request_protocol: l.protocol, grpc_response_status: l.grpcStatus, response_flags: l.flags,
            connection_security_policy: l.peer === undefined ? policy : 'mutual_tls', source_principal: l.peer ?? 'unknown',
          }, count);
        }
        for (const [code, count] of [...plain].sort(([a], [b]) => a - b)) {
          if (count > 0) {
            this.inc({
              direction, response_code: String(code), request_protocol: 'http', grpc_response_status: '', response_flags: '-',
              connection_security_policy: policy, source_principal: 'unknown',
            }, count);
          }
        }
      }
    },
  });
  directionGauge(registry, stats, n.requestsActive, 'HTTP requests in progress.', (d) => d.rqActive);
  new StatsDurationHistogram(registry, stats);
  directionCounter(registry, stats, n.requestBytes, 'HTTP request body bytes received from clients.', (d) => d.rqBodyBytes);
  directionCounter(registry, stats, n.responseBytes, 'HTTP response body bytes sent back to clients.', (d) => d.rsBodyBytes);
  directionCounter(registry, stats, n.httpProtocolErrors, 'Malformed HTTP requests, answered 400 (414, 431, 501, 505 for their cases).', (d) => d.rqProtocolErrors);
  directionCounter(registry, stats, n.httpHeadTimeouts, 'HTTP request heads not complete within the header time-out (408).', (d) => d.rqHeadTimeouts);
  directionCounter(registry, stats, n.httpTunnels, 'HTTP requests whose protocol switch the upstream confirmed (101 to an Upgrade, 2xx to CONNECT).', (d) => d.rqTunnels);

  directionCounter(registry, stats, n.tcpOpened, 'Downstream TCP connections accepted (HTTP and passthrough).', (d) => d.cxTotal);
  directionCounter(registry, stats, n.tcpClosed, 'Downstream TCP connections closed (HTTP and passthrough).', (d) => d.cxTotal - d.cxActive);
  directionCounter(registry, stats, n.tcpReceivedBytes, 'Bytes read from downstream connections.', (d) => d.rxBytes);
  directionCounter(registry, stats, n.tcpSentBytes, 'Bytes written to downstream connections.', (d) => d.txBytes);
  directionCounter(registry, stats, n.tcpPassthrough, 'Downstream connections carried as raw TCP (not HTTP/1.x).', (d) => d.tcpCxTotal);
  directionCounter(registry, stats, n.tcpDenied, 'Downstream connections not HTTP/1.x that authorization policy refused (closed before a byte went on).', (d) => d.tcpCxDenied);
  directionGauge(registry, stats, n.downstreamActive, 'Downstream connections open now.', (d) => d.cxActive);
  directionCounter(registry, stats, n.downstreamOverflow,
    'Downstream connections refused at accept: the process held MESH_MAX_DOWNSTREAM_CONNECTIONS already.', (d) => d.cxOverflow);

  directionCounter(registry, stats, n.tlsHandshakes, 'TLS handshakes completed (gateway HTTPS ports).', (d) => d.tlsHandshakes);
  directionCounter(registry, stats, n.tlsErrors,
    'TLS connections closed for a TLS reason: failed handshake, not a ClientHello, handshake time-out, renegotiation attempt.', (d) => d.tlsErrors);
  directionCounter(registry, stats, n.tlsHandshakeTimeouts, 'TLS handshakes not complete within MESH_TLS_HANDSHAKE_TIMEOUT.', (d) => d.tlsHandshakeTimeouts);
  directionCounter(registry, stats, n.tlsRenegotiations, 'TLS connections closed because the client tried to renegotiate.', (d) => d.tlsRenegotiations);
  directionCounter(registry, stats, n.tlsNoServerMatch, 'TLS connections refused: their server name (or its absence) matched no server of the port.', (d) => d.tlsNoServerMatch);

  directionCounter(registry, stats, n.mtlsHandshakes, 'Mutual TLS handshakes between sidecars completed (inbound: terminated here; outbound: originated).', (d) => d.mtlsHandshakes);
  new Counter({
    name: n.mtlsHandshakeFailures,
    help: 'Mutual TLS handshakes that failed, by reason: peer_certificate (chain, dates, SPIFFE id, trust domain, none), handshake (a TLS error), timeout.',
    labelNames: ['direction', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const direction of DIRECTIONS) {
        for (const reason of MTLS_FAILURE_REASONS) this.inc({ direction, reason }, stats.of(direction).mtlsFailuresByReason.get(reason) ?? 0);
      }
    },
  });
  directionCounter(registry, stats, n.mtlsPlaintextRefused, 'Inbound connections reset because PeerAuthentication is STRICT and they were not mutual TLS.', (d) => d.mtlsPlaintextRefused);
  directionCounter(registry, stats, n.mtlsNoIdentity, 'Connections that needed mutual TLS while no workload certificate was held.', (d) => d.mtlsNoIdentity);

  directionCounter(registry, stats, n.upstreamTotal, 'Connections opened to upstreams (original destinations).', (d) => d.upstreamCxTotal);
  directionGauge(registry, stats, n.upstreamActive, 'Upstream connections open now.', (d) => d.upstreamCxActive);
  directionCounter(registry, stats, n.upstreamConnectFailures, 'Upstream connection attempts that failed.', (d) => d.upstreamCxConnectFail);
  directionCounter(registry, stats, n.upstreamConnectTimeouts, 'Upstream connection attempts that timed out.', (d) => d.upstreamCxConnectTimeout);
  directionCounter(registry, stats, n.upstreamRequestErrors,
    'Requests failed for an upstream reason (refused, reset, timeout), answered 503 or reset.', (d) => d.upstreamRqErrors);

  new Counter({
    name: n.loopsRefused,
    help: 'Connections refused because their original destination was one of the proxy\'s own ports.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.loopsRefused);
    },
  });
  new Counter({
    name: n.connectionTerminations,
    help: 'Total proxy connection errors: downstream connections, both directions, that ended in an error rather than a close.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.outbound.cxErrors + stats.inbound.cxErrors);
    },
  });
}

/** `mesh_request_decisions_total{stage, outcome}`: why requests got their answers (JWT, policy, route). */
export function registerDecisionMetrics(registry: Registry, decisions: DecisionLog): void {
  new Counter({
    name: DECISION_METRIC_NAME,
    help: 'Request decisions by stage (jwt: absent|valid|invalid; authz: allowed|denied; route: routed|no_route|direct_response|redirect).',
    labelNames: ['stage', 'outcome'], registers: [registry],
    collect() {
      this.reset();
      for (const [stage, byOutcome] of decisions.counts) for (const [outcome, n] of byOutcome) this.inc({ stage, outcome }, n);
    },
  });
}
