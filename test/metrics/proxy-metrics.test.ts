import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Registry, register as globalRegistry } from 'prom-client';
import { DecisionLog } from '../../src/gateway/decisions.js';
import { DECISION_METRIC_NAME, PROXY_METRIC_NAMES, registerDecisionMetrics, registerProxyMetrics } from '../../src/metrics/proxy-metrics.js';
import { ProxyStats } from '../../src/proxy/stats.js';
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
    const pairs: [string, string, string][] = [
      ['mesh_http_protocol_errors_total', '1', '0'],
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
    assert.match(await registry.metrics(), /^mesh_tcp_passthrough_connections_total\{direction="outbound"\} 0$/m);
    stats.outbound.tcpCxTotal = 42;
    stats.outbound.rqActive = 3;
    const text = await registry.metrics();
    assert.match(text, /^mesh_tcp_passthrough_connections_total\{direction="outbound"\} 42$/m);
    assert.match(text, /^mesh_requests_active\{direction="outbound"\} 3$/m);
  });

  it('never touches the global registry', async () => {
    const before = await globalRegistry.metrics();
    await scrape(filledStats());
    assert.equal(await globalRegistry.metrics(), before);
    assert.doesNotMatch(before, /mesh_/);
  });

  it('documents every series in docs/METRICS.md', () => {
    const doc = readFileSync(join(repoRoot, 'docs', 'METRICS.md'), 'utf8');
    for (const name of Object.values(PROXY_METRIC_NAMES)) assert.match(doc, new RegExp(`^\\| \`${name}\` \\|`, 'm'), name);
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
