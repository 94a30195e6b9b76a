// The proxy's Prometheus series (15090 `/stats/prometheus`, and the proxy part of 15020). The data
// plane only bumps plain numbers in ProxyStats; these collectors read them at scrape time, so the
// hot path never calls prom-client and `/stats` (admin) and Prometheus can never disagree.
// Istio's ten standard metrics are registered by standard-metrics.ts (labelled as Istio labels them,
// `reporter` source|destination); the proxy's own series here keep `direction` (outbound|inbound).
// docs/METRICS.md lists every series and its source.
import { Counter, Gauge, type Registry } from './prom.js';
import type { DecisionLog } from '../gateway/decisions.js';
import { DIRECTIONS, MTLS_FAILURE_REASONS, type DirectionStats, type ProxyStats } from '../proxy/stats.js';
import { UNKNOWN_WORKLOAD } from './peer-metadata.js';
import { hostOfCluster, PASSTHROUGH_SERVICE, serviceOfHost, UNKNOWN_SERVICE, type LocalFacts } from './standard-labels.js';
import { registerStandardMetrics, standardMetricNames, type MetricsPrefix } from './standard-metrics.js';

export { standardMetricNames };

/** Every series of the proxy's own this module registers, by name: one home for the names (docs and tests use it). */
export const PROXY_METRIC_NAMES = {
  requestsActive: 'mesh_requests_active',
  httpProtocolErrors: 'mesh_http_protocol_errors_total',
  httpHeadTimeouts: 'mesh_http_request_header_timeouts_total',
  httpTunnels: 'mesh_http_upgrades_total',
  tcpDenied: 'mesh_tcp_connections_denied_total',
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

/** Istio's standard metrics: their prefix (MESH_METRICS_PREFIX) and what the scrape knows of this pod. */
export interface StandardMetricsOptions {
  readonly prefix?: MetricsPrefix | undefined;
  readonly facts?: (() => LocalFacts) | undefined;
}

/** A pod that knows nothing of itself: every workload label `unknown`. */
const UNKNOWN_FACTS: LocalFacts = {
  own: UNKNOWN_WORKLOAD, ownPrincipal: undefined, inboundService: UNKNOWN_SERVICE,
  serviceOf: (cluster) => {
    const host = hostOfCluster(cluster);
    return host === undefined ? PASSTHROUGH_SERVICE : serviceOfHost(host, UNKNOWN_WORKLOAD.namespace);
  },
  peerOf: () => UNKNOWN_WORKLOAD,
};
const unknownFacts = (): LocalFacts => UNKNOWN_FACTS;

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

/**
 * Registers the proxy's collectors on `registry` (never the global one). Nothing is counted here:
 * every value is read from `stats` when the registry is scraped.
 */
export function registerProxyMetrics(registry: Registry, stats: ProxyStats, standard: StandardMetricsOptions = {}): void {
  const n = PROXY_METRIC_NAMES;
  registerStandardMetrics(registry, stats, standard.prefix ?? 'mesh', standard.facts ?? unknownFacts);
  directionGauge(registry, stats, n.requestsActive, 'HTTP requests in progress.', (d) => d.rqActive);
  directionCounter(registry, stats, n.httpProtocolErrors, 'Malformed HTTP requests, answered 400 (414, 431, 501, 505 for their cases).', (d) => d.rqProtocolErrors);
  directionCounter(registry, stats, n.httpHeadTimeouts, 'HTTP request heads not complete within the header time-out (408).', (d) => d.rqHeadTimeouts);
  directionCounter(registry, stats, n.httpTunnels, 'HTTP requests whose protocol switch the upstream confirmed (101 to an Upgrade, 2xx to CONNECT).', (d) => d.rqTunnels);

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
