import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Registry, register as globalRegistry } from 'prom-client';
import { DecisionLog } from '../../src/gateway/decisions.js';
import { DECISION_METRIC_NAME, PROXY_METRIC_NAMES, durationSamples, registerDecisionMetrics, registerProxyMetrics } from '../../src/metrics/proxy-metrics.js';
import { FLAG } from '../../src/log/access-record.js';
import { DURATION_BUCKETS_MS, ProxyStats } from '../../src/proxy/stats.js';
import { repoRoot } from '../helpers/repo.js';
import { assertValidPrometheusText } from './prom-text-validator.js';

/** A ProxyStats filled by hand, as the data plane would have after some traffic. */
function filledStats(): ProxyStats {
  const stats = new ProxyStats();
  const out = stats.outbound;
  out.cxTotal = 10; out.cxActive = 3; out.cxErrors = 2; out.rxBytes = 1000; out.txBytes = 5000; out.tcpCxTotal = 4;
  out.rqTotal = 7; out.rqActive = 1; out.rqProtocolErrors = 1; out.rqBodyBytes = 300; out.rsBodyBytes = 4000;
  out.upstreamCxTotal = 6; out.upstreamCxActive = 2; out.upstreamCxConnectFail = 1; out.upstreamCxConnectTimeout = 1; out.upstreamRqErrors = 1;
  out.recordResponse(200, 0.4);
  out.recordResponse(200, 3);
  out.recordResponse(200, 3);
  out.recordResponse(404, 20);
  out.recordResponse(503, 5_000_000); // beyond the last bucket
  const inb = stats.inbound;
  inb.cxTotal = 2; inb.cxActive = 0; inb.cxErrors = 1; inb.rxBytes = 10; inb.txBytes = 20;
  inb.rqTotal = 1; inb.recordResponse(201, 1);
  stats.loopsRefused = 5;
  return stats;
}

async function scrape(stats: ProxyStats): Promise<string> {
  const registry = new Registry();
  registerProxyMetrics(registry, stats);
  return registry.metrics();
}

/** The HELP, TYPE and sample lines of one family. */
function block(text: string, name: string): string[] {
  const lines = text.split('\n');
  const start = lines.indexOf(lines.find((l) => l.startsWith(`# HELP ${name} `)) ?? '');
  assert.ok(start >= 0, `no family ${name}`);
  const end = lines.findIndex((l, i) => i > start + 1 && !l.startsWith(name));
  return lines.slice(start, end === -1 ? undefined : end).map((l) => (l.startsWith('# HELP') ? l.split(' ').slice(0, 3).join(' ') : l));
}

describe('proxy metrics', () => {
  it('prints the counters of each direction under the documented names', async () => {
    const text = await scrape(filledStats());
    assert.deepEqual(block(text, 'mesh_requests_total'), [
      '# HELP mesh_requests_total',
      '# TYPE mesh_requests_total counter',
      'mesh_requests_total{direction="outbound",response_code="200",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 3',
      'mesh_requests_total{direction="outbound",response_code="404",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 1',
      'mesh_requests_total{direction="outbound",response_code="503",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 1',
      'mesh_requests_total{direction="inbound",response_code="201",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="none",source_principal="unknown"} 1',
    ]);
    const pairs: [string, string, string][] = [
      ['mesh_request_bytes_total', '300', '0'],
      ['mesh_response_bytes_total', '4000', '0'],
      ['mesh_http_protocol_errors_total', '1', '0'],
      ['mesh_tcp_connections_opened_total', '10', '2'],
      ['mesh_tcp_connections_closed_total', '7', '2'],
      ['mesh_tcp_received_bytes_total', '1000', '10'],
      ['mesh_tcp_sent_bytes_total', '5000', '20'],
      ['mesh_tcp_passthrough_connections_total', '4', '0'],
      ['mesh_upstream_connections_total', '6', '0'],
      ['mesh_upstream_connect_failures_total', '1', '0'],
      ['mesh_upstream_connect_timeouts_total', '1', '0'],
      ['mesh_upstream_request_errors_total', '1', '0'],
    ];
    for (const [name, outbound, inbound] of pairs) {
      assert.deepEqual(block(text, name), [
        `# HELP ${name}`, `# TYPE ${name} counter`,
        `${name}{direction="outbound"} ${outbound}`, `${name}{direction="inbound"} ${inbound}`,
      ], name);
    }
    for (const [name, outbound, inbound] of [['mesh_downstream_connections_active', '3', '0'], ['mesh_upstream_connections_active', '2', '0'], ['mesh_requests_active', '1', '0']] as const) {
      assert.deepEqual(block(text, name), [
        `# HELP ${name}`, `# TYPE ${name} gauge`,
        `${name}{direction="outbound"} ${outbound}`, `${name}{direction="inbound"} ${inbound}`,
      ], name);
    }
    assert.deepEqual(block(text, 'proxy_connection_terminations'),
      ['# HELP proxy_connection_terminations', '# TYPE proxy_connection_terminations counter', 'proxy_connection_terminations 3']);
    assert.deepEqual(block(text, 'mesh_loop_connections_refused_total'),
      ['# HELP mesh_loop_connections_refused_total', '# TYPE mesh_loop_connections_refused_total counter', 'mesh_loop_connections_refused_total 5']);
  });

  it('prints the duration histogram cumulatively from the fixed buckets', async () => {
    const text = await scrape(filledStats());
    const lines = block(text, 'mesh_request_duration_milliseconds');
    assert.equal(lines[1], '# TYPE mesh_request_duration_milliseconds histogram');
    const outbound = lines.filter((l) => l.includes('direction="outbound"'));
    assert.deepEqual(outbound.slice(0, 5), [
      'mesh_request_duration_milliseconds_bucket{direction="outbound",le="0.5"} 1',
      'mesh_request_duration_milliseconds_bucket{direction="outbound",le="1"} 1',
      'mesh_request_duration_milliseconds_bucket{direction="outbound",le="5"} 3',
      'mesh_request_duration_milliseconds_bucket{direction="outbound",le="10"} 3',
      'mesh_request_duration_milliseconds_bucket{direction="outbound",le="25"} 4',
    ]);
    assert.deepEqual(outbound.slice(-4), [
      'mesh_request_duration_milliseconds_bucket{direction="outbound",le="3600000"} 4',
      'mesh_request_duration_milliseconds_bucket{direction="outbound",le="+Inf"} 5',
      'mesh_request_duration_milliseconds_sum{direction="outbound"} 5000026.4',
      'mesh_request_duration_milliseconds_count{direction="outbound"} 5',
    ]);
    assert.equal(outbound.length, DURATION_BUCKETS_MS.length + 3);
    assert.ok(lines.includes('mesh_request_duration_milliseconds_bucket{direction="inbound",le="1"} 1'));
    assert.ok(lines.includes('mesh_request_duration_milliseconds_count{direction="inbound"} 1'));
  });

  it('gives every series HELP and TYPE and produces valid Prometheus text', async () => {
    const text = await scrape(filledStats());
    assertValidPrometheusText(text);
    for (const name of Object.values(PROXY_METRIC_NAMES)) {
      assert.match(text, new RegExp(`^# HELP ${name} \\S`, 'm'), name);
      assert.match(text, new RegExp(`^# TYPE ${name} (counter|gauge|histogram)$`, 'm'), name);
    }
  });

  it('reads the stats at scrape time, not at registration', async () => {
    const stats = new ProxyStats();
    const registry = new Registry();
    registerProxyMetrics(registry, stats);
    assert.match(await registry.metrics(), /^mesh_tcp_connections_opened_total\{direction="outbound"\} 0$/m);
    stats.outbound.cxTotal = 42;
    stats.outbound.recordResponse(500, 2);
    const text = await registry.metrics();
    assert.match(text, /^mesh_tcp_connections_opened_total\{direction="outbound"\} 42$/m);
    assert.match(text, /^mesh_requests_total\{direction="outbound",response_code="500",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="unknown",source_principal="unknown"\} 1$/m);
    assert.match(text, /^mesh_request_duration_milliseconds_count\{direction="outbound"\} 1$/m);
  });

  it('labels requests that came over mutual TLS with the peer, Istio\'s way; the rest none (inbound) or unknown (outbound)', async () => {
    const stats = new ProxyStats();
    const registry = new Registry();
    registerProxyMetrics(registry, stats);
    stats.inbound.recordResponse(200, 1, 'cluster.local/ns/default/sa/sleep');
    stats.inbound.recordResponse(200, 1, 'cluster.local/ns/default/sa/sleep');
    stats.inbound.recordResponse(403, 1, 'cluster.local/ns/default/sa/other');
    stats.inbound.recordResponse(200, 1);
    const lines = (await registry.metrics()).split('\n').filter((l) => l.startsWith('mesh_requests_total{'));
    assert.deepEqual(lines.sort(), [
      'mesh_requests_total{direction="inbound",response_code="200",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="mutual_tls",source_principal="cluster.local/ns/default/sa/sleep"} 2',
      'mesh_requests_total{direction="inbound",response_code="200",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="none",source_principal="unknown"} 1',
      'mesh_requests_total{direction="inbound",response_code="403",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="mutual_tls",source_principal="cluster.local/ns/default/sa/other"} 1',
    ]);
  });

  it('labels gRPC calls request_protocol grpc with their grpc-status, plain HTTP/2 requests http', async () => {
    const stats = new ProxyStats();
    const registry = new Registry();
    registerProxyMetrics(registry, stats);
    stats.outbound.recordResponse(200, 1, undefined, 0);
    stats.outbound.recordResponse(200, 1, undefined, 7);
    stats.outbound.recordResponse(200, 1, undefined, 7);
    stats.outbound.recordResponse(200, 1, undefined, null);
    stats.outbound.recordResponse(200, 1);
    stats.inbound.recordResponse(200, 1, 'cluster.local/ns/default/sa/sleep', 14);
    const lines = (await registry.metrics()).split('\n').filter((l) => l.startsWith('mesh_requests_total{'));
    assert.deepEqual(lines.sort(), [
      'mesh_requests_total{direction="inbound",response_code="200",request_protocol="grpc",grpc_response_status="14",response_flags="-",connection_security_policy="mutual_tls",source_principal="cluster.local/ns/default/sa/sleep"} 1',
      'mesh_requests_total{direction="outbound",response_code="200",request_protocol="grpc",grpc_response_status="",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 1',
      'mesh_requests_total{direction="outbound",response_code="200",request_protocol="grpc",grpc_response_status="0",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 1',
      'mesh_requests_total{direction="outbound",response_code="200",request_protocol="grpc",grpc_response_status="7",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 2',
      'mesh_requests_total{direction="outbound",response_code="200",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 1',
    ]);
  });

  it('labels requests with Envoy\'s response flags (response_flags, - when none), beside the other labels', async () => {
    const stats = new ProxyStats();
    const registry = new Registry();
    registerProxyMetrics(registry, stats);
    stats.outbound.recordResponse(503, 1, undefined, undefined, FLAG.UH);
    stats.outbound.recordResponse(503, 1, undefined, undefined, FLAG.UH);
    stats.outbound.recordResponse(503, 1, undefined, undefined, FLAG.UF | FLAG.URX);
    stats.outbound.recordResponse(200, 1, undefined, 14, FLAG.URX);
    stats.outbound.recordResponse(200, 1);
    stats.inbound.recordResponse(403, 1, 'cluster.local/ns/default/sa/other', undefined, FLAG.RBAC);
    const lines = (await registry.metrics()).split('\n').filter((l) => l.startsWith('mesh_requests_total{'));
    assert.deepEqual(lines.sort(), [
      'mesh_requests_total{direction="inbound",response_code="403",request_protocol="http",grpc_response_status="",response_flags="RBAC",connection_security_policy="mutual_tls",source_principal="cluster.local/ns/default/sa/other"} 1',
      'mesh_requests_total{direction="outbound",response_code="200",request_protocol="grpc",grpc_response_status="14",response_flags="URX",connection_security_policy="unknown",source_principal="unknown"} 1',
      'mesh_requests_total{direction="outbound",response_code="200",request_protocol="http",grpc_response_status="",response_flags="-",connection_security_policy="unknown",source_principal="unknown"} 1',
      'mesh_requests_total{direction="outbound",response_code="503",request_protocol="http",grpc_response_status="",response_flags="UF,URX",connection_security_policy="unknown",source_principal="unknown"} 1',
      'mesh_requests_total{direction="outbound",response_code="503",request_protocol="http",grpc_response_status="",response_flags="UH",connection_security_policy="unknown",source_principal="unknown"} 2',
    ]);
  });

  it('never touches the global registry', async () => {
    const before = await globalRegistry.metrics();
    await scrape(filledStats());
    assert.equal(await globalRegistry.metrics(), before);
    assert.doesNotMatch(before, /mesh_/);
  });

  it('gives the same numbers through getMetricsAsJSON', async () => {
    const registry = new Registry();
    registerProxyMetrics(registry, filledStats());
    const json = await registry.getMetricsAsJSON();
    const histogram = json.find((m) => m.name === 'mesh_request_duration_milliseconds');
    assert.equal(histogram?.type, 'histogram');
    assert.ok(histogram?.values.some((v) => (v as { metricName?: string }).metricName === 'mesh_request_duration_milliseconds_count' && v.value === 5));
  });

  it('documents every series in docs/METRICS.md', () => {
    const doc = readFileSync(join(repoRoot, 'docs', 'METRICS.md'), 'utf8');
    for (const name of Object.values(PROXY_METRIC_NAMES)) assert.match(doc, new RegExp(`^\\| \`${name}\` \\|`, 'm'), name);
  });

  it('durationSamples is cumulative and ends with +Inf, _sum and _count', () => {
    const stats = new ProxyStats();
    stats.inbound.recordResponse(200, 7);
    const samples = durationSamples('h', 'inbound', stats.inbound);
    assert.deepEqual(samples.slice(2, 4).map((s) => [s.labels['le'], s.value]), [[5, 0], [10, 1]]);
    assert.deepEqual(samples.slice(-3).map((s) => [s.metricName, s.value]), [['h_bucket', 1], ['h_sum', 7], ['h_count', 1]]);
  });
});

describe('decision metrics', () => {
  it('counts request decisions by stage and outcome, read from the decision log at scrape time', async () => {
    const registry = new Registry();
    const decisions = new DecisionLog();
    registerDecisionMetrics(registry, decisions);
    decisions.count('jwt', 'invalid');
    decisions.count('route', 'routed');
    decisions.count('route', 'routed');
    const text = await registry.metrics();
    assert.match(text, /^# TYPE mesh_request_decisions_total counter$/m);
    assert.match(text, /^mesh_request_decisions_total\{stage="jwt",outcome="invalid"\} 1$/m);
    assert.match(text, /^mesh_request_decisions_total\{stage="route",outcome="routed"\} 2$/m);
    const doc = readFileSync(join(repoRoot, 'docs', 'METRICS.md'), 'utf8');
    assert.match(doc, new RegExp(`\`${DECISION_METRIC_NAME}\``));
  });
});
