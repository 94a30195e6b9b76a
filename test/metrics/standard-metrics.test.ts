// Istio's standard metrics as a scrape prints them: names under each prefix, every label valued as
// Istio values it on both reporters, histograms with Istio's buckets, a peer's exchanged metadata.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { FLAG } from '../../src/log/access-record.js';
import { ownMetadata, UNKNOWN_WORKLOAD, metadataOfHeader } from '../../src/metrics/peer-metadata.js';
import { registerProxyMetrics } from '../../src/metrics/proxy-metrics.js';
import { hostOfCluster, PASSTHROUGH_SERVICE, serviceOfHost, type LocalFacts } from '../../src/metrics/standard-labels.js';
import { standardMetricNames, type MetricsPrefix } from '../../src/metrics/standard-metrics.js';
import { packRequest } from '../../src/proxy/standard-series.js';
import { ProxyStats } from '../../src/proxy/stats.js';
import { assertValidPrometheusText } from './prom-text-validator.js';
import { spawnSync } from 'node:child_process';

const env = (pod: string, ns: string) => ({
  POD_NAME: pod, POD_NAMESPACE: ns, CLUSTER_ID: 'Kubernetes', MESH_META_CLUSTER_ID: '', MESH_META_WORKLOAD_NAME: '', SERVICE_ACCOUNT: '', INSTANCE_IP: '',
});
const SLEEP = ownMetadata(env('sleep-7f9c8d6b5c-abcde', 'default'), { app: 'sleep', version: 'v1' });
const HTTPBIN = ownMetadata(env('httpbin-6d7f8c9b4d-fghij', 'default'), { app: 'httpbin', version: 'v2' });
const CLUSTER = 'outbound|8080||httpbin.default.svc.cluster.local';

/** The facts of the sleep pod (the client). */
function facts(own = SLEEP): LocalFacts {
  return {
    own: own.metadata, ownPrincipal: 'spiffe://cluster.local/ns/default/sa/sleep',
    inboundService: serviceOfHost('sleep.default.svc.cluster.local', 'default'),
    serviceOf: (c) => { const h = hostOfCluster(c); return h === undefined ? PASSTHROUGH_SERVICE : serviceOfHost(h, 'default'); },
    peerOf: (k) => (k === '' ? UNKNOWN_WORKLOAD : metadataOfHeader(k) ?? UNKNOWN_WORKLOAD),
  };
}

async function scrape(stats: ProxyStats, prefix: MetricsPrefix = 'mesh'): Promise<string> {
  const registry = new Registry();
  registerProxyMetrics(registry, stats, { prefix, facts: () => facts() });
  return registry.metrics();
}

/** The labels of the sample lines of `name` (exact family name, not its _bucket etc.). */
function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const body = line.slice(name.length + 1, line.lastIndexOf('}'));
    const labels: Record<string, string> = {};
    for (const m of body.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
    out.push({ labels, value: Number(line.slice(line.lastIndexOf(' ') + 1)) });
  }
  return out;
}

describe('Istio\'s standard metrics', () => {
  it('labels an outbound request over mutual TLS as Istio\'s source reporter does, with the peer\'s exchanged workload', async () => {
    const stats = new ProxyStats();
    stats.outbound.standard.recordHttp(CLUSTER, 'cluster.local/ns/default/sa/httpbin', HTTPBIN.header, packRequest(200, undefined, 0), 3, 10, 200, 0, 0);
    const text = await scrape(stats);
    assertValidPrometheusText(text);
    const [s] = samples(text, 'mesh_requests_total');
    assert.deepEqual(s, {
      value: 1,
      labels: {
        reporter: 'source', source_workload: 'sleep', source_canonical_service: 'sleep', source_canonical_revision: 'v1', source_workload_namespace: 'default',
        source_principal: 'spiffe://cluster.local/ns/default/sa/sleep', source_app: 'sleep', source_version: 'v1', source_cluster: 'Kubernetes',
        destination_workload: 'httpbin', destination_workload_namespace: 'default', destination_principal: 'spiffe://cluster.local/ns/default/sa/httpbin',
        destination_app: 'httpbin', destination_version: 'v2', destination_service: 'httpbin.default.svc.cluster.local',
        destination_canonical_service: 'httpbin', destination_canonical_revision: 'v2', destination_service_name: 'httpbin',
        destination_service_namespace: 'default', destination_cluster: 'Kubernetes', request_protocol: 'http', response_code: '200',
        grpc_response_status: '', response_flags: '-', connection_security_policy: 'unknown',
      },
    });
  });

  it('labels an inbound request as the destination reporter: the peer is the source, mutual_tls or none', async () => {
    const stats = new ProxyStats();
    stats.inbound.standard.recordHttp('', 'cluster.local/ns/default/sa/httpbin', HTTPBIN.header, packRequest(403, undefined, FLAG.RBAC), 1, 0, 19, 0, 0);
    stats.inbound.standard.recordHttp('', '', '', packRequest(200, undefined, 0), 1, 0, 19, 0, 0);
    const rows = samples(await scrape(stats), 'mesh_requests_total');
    const mtls = rows.find((r) => r.labels['connection_security_policy'] === 'mutual_tls')!;
    assert.equal(mtls.labels['reporter'], 'destination');
    assert.equal(mtls.labels['source_workload'], 'httpbin');
    assert.equal(mtls.labels['source_principal'], 'spiffe://cluster.local/ns/default/sa/httpbin');
    assert.equal(mtls.labels['destination_workload'], 'sleep');
    assert.equal(mtls.labels['destination_principal'], 'spiffe://cluster.local/ns/default/sa/sleep');
    assert.equal(mtls.labels['destination_service'], 'sleep.default.svc.cluster.local');
    assert.equal(mtls.labels['response_flags'], 'RBAC');
    const plain = rows.find((r) => r.labels['connection_security_policy'] === 'none')!;
    assert.equal(plain.labels['source_workload'], 'unknown');
    assert.equal(plain.labels['source_principal'], 'unknown');
    assert.equal(plain.labels['destination_principal'], 'unknown');
  });

  it('gives gRPC calls request_protocol grpc, their grpc-status and their message counts', async () => {
    const stats = new ProxyStats();
    stats.outbound.standard.recordHttp(CLUSTER, '', '', packRequest(200, 0, 0), 2, 12, 30, 3, 2);
    stats.outbound.standard.recordHttp(CLUSTER, '', '', packRequest(200, 14, FLAG.URX), 2, 12, 0, 1, 0);
    stats.outbound.standard.recordHttp('', '', '', packRequest(200, undefined, 0), 2, 12, 0, 0, 0);
    const text = await scrape(stats);
    const calls = samples(text, 'mesh_requests_total').filter((r) => r.labels['request_protocol'] === 'grpc');
    assert.deepEqual(calls.map((r) => [r.labels['grpc_response_status'], r.labels['response_flags']]).sort(), [['0', '-'], ['14', 'URX']]);
    assert.deepEqual(samples(text, 'mesh_request_messages_total').map((r) => r.value).sort(), [1, 3]);
    assert.deepEqual(samples(text, 'mesh_response_messages_total').map((r) => r.value).sort(), [0, 2]);
    const passthrough = samples(text, 'mesh_requests_total').find((r) => r.labels['request_protocol'] === 'http')!;
    assert.equal(passthrough.labels['destination_service_name'], 'PassthroughCluster');
    assert.equal(passthrough.labels['destination_service'], 'unknown');
  });

  it('prints the three histograms with Istio\'s buckets, cumulatively', async () => {
    const stats = new ProxyStats();
    stats.outbound.standard.recordHttp(CLUSTER, '', '', packRequest(200, undefined, 0), 7, 0, 1500, 0, 0);
    stats.outbound.standard.recordHttp(CLUSTER, '', '', packRequest(200, undefined, 0), 700, 5, 15, 0, 0);
    const text = await scrape(stats);
    assertValidPrometheusText(text);
    const le = (name: string): [string, number][] => samples(text, `${name}_bucket`).map((r) => [r.labels['le']!, r.value]);
    assert.deepEqual(le('mesh_request_duration_milliseconds').map(([l]) => l),
      ['0.5', '1', '5', '10', '25', '50', '100', '250', '500', '1000', '2500', '5000', '10000', '30000', '60000', '300000', '600000', '1800000', '3600000', '+Inf']);
    assert.deepEqual(le('mesh_request_duration_milliseconds').filter(([l]) => l === '5' || l === '10' || l === '1000'), [['5', 0], ['10', 1], ['1000', 2]]);
    assert.deepEqual(le('mesh_response_bytes'), [['1', 0], ['10', 0], ['100', 1], ['1000', 1], ['10000', 2], ['100000', 2], ['1000000', 2],
      ['10000000', 2], ['100000000', 2], ['1000000000', 2], ['+Inf', 2]]);
    assert.deepEqual(samples(text, 'mesh_request_bytes_sum').map((r) => r.value), [5]);
    assert.deepEqual(samples(text, 'mesh_request_duration_milliseconds_count').map((r) => r.value), [2]);
  });

  it('labels the four TCP metrics (request_protocol tcp), bytes and closes as connections end', async () => {
    const stats = new ProxyStats();
    const series = stats.inbound.standard.tcpSeries('', 'cluster.local/ns/default/sa/httpbin', '');
    series.opened += 2;
    series.closed += 1;
    series.receivedBytes += 100;
    series.sentBytes += 40;
    const text = await scrape(stats);
    for (const [name, value] of [['mesh_tcp_connections_opened_total', 2], ['mesh_tcp_connections_closed_total', 1], ['mesh_tcp_received_bytes_total', 100], ['mesh_tcp_sent_bytes_total', 40]] as const) {
      const [row] = samples(text, name);
      assert.equal(row?.value, value, name);
      assert.equal(row.labels['request_protocol'], 'tcp');
      assert.equal(row.labels['reporter'], 'destination');
      assert.equal(row.labels['connection_security_policy'], 'mutual_tls');
      assert.equal(row.labels['response_code'], undefined);
    }
  });

  it('exports the same series under istio_ with MESH_METRICS_PREFIX=istio, and none under mesh_', async () => {
    const stats = new ProxyStats();
    stats.outbound.standard.recordHttp(CLUSTER, '', '', packRequest(200, 0, 0), 2, 12, 30, 1, 1);
    stats.outbound.standard.tcpSeries(CLUSTER, '', '').opened++;
    const text = await scrape(stats, 'istio');
    for (const name of Object.values(standardMetricNames('istio'))) assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
    for (const name of Object.values(standardMetricNames('mesh'))) assert.doesNotMatch(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
    assert.equal(samples(text, 'istio_requests_total').length, 1);
  });
});

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;

describe('promtool check metrics', () => {
  it('finds nothing on our names but the two a spec fixes (README: known exceptions)', { skip: promtool ? false : 'promtool not installed (Debian: apt-get install prometheus)' }, async () => {
    for (const prefix of ['mesh', 'istio'] as const) {
      const stats = new ProxyStats();
      stats.outbound.standard.recordHttp(CLUSTER, 'cluster.local/ns/default/sa/httpbin', HTTPBIN.header, packRequest(200, 0, 0), 3, 1, 2, 1, 1);
      stats.inbound.standard.tcpSeries('', '', '').opened++;
      const r = spawnSync('promtool', ['check', 'metrics'], { input: await scrape(stats, prefix), encoding: 'utf8' });
      const problems = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l.trim() !== '').sort();
      assert.deepEqual(problems, [
        `${prefix}_request_duration_milliseconds use base unit "seconds" instead of "milliseconds"`,
        'proxy_connection_terminations counter metrics should have "_total" suffix',
      ]);
    }
  });
});

describe('standard series bounds', () => {
  it('folds distinct principals past the bound into one unknown series (a burst of clients cannot grow the series without end)', async () => {
    const stats = new ProxyStats();
    for (let i = 0; i < 10_000; i++) stats.inbound.standard.recordHttp('', `cluster.local/ns/default/sa/c${i}`, '', packRequest(200, undefined, 0), 1, 0, 0, 0, 0);
    const rows = samples(await scrape(stats), 'mesh_requests_total');
    assert.equal(rows.length, 257);
    assert.equal(rows.reduce((n, r) => n + r.value, 0), 10_000);
    assert.equal(rows.filter((r) => r.labels['source_principal'] === 'unknown').length, 1);
  });

  it('sums the workers\' series (a structured clone of each, as they cross threads)', async () => {
    const a = new ProxyStats();
    const b = new ProxyStats();
    a.outbound.standard.recordHttp(CLUSTER, '', '', packRequest(200, undefined, 0), 2, 1, 1, 0, 0);
    b.outbound.standard.recordHttp(CLUSTER, '', '', packRequest(200, undefined, 0), 2, 1, 1, 0, 0);
    b.inbound.standard.tcpSeries('', '', '').opened = 3;
    const total = new ProxyStats();
    total.assignSum([structuredClone(a), structuredClone(b)]);
    const text = await scrape(total);
    assert.deepEqual(samples(text, 'mesh_requests_total').map((r) => r.value), [2]);
    assert.deepEqual(samples(text, 'mesh_request_duration_milliseconds_count').map((r) => r.value), [2]);
    assert.deepEqual(samples(text, 'mesh_tcp_connections_opened_total').map((r) => r.value), [3]);
  });
});

describe('MESH_METRICS_PREFIX', () => {
  it('takes mesh (default) or istio; another value is a problem naming the variable (the proxy refuses to start on one)', async () => {
    const { readEnvironment, describeProblem } = await import('../../src/config/env/registry.js');
    assert.equal(readEnvironment({}).values.MESH_METRICS_PREFIX, 'mesh');
    assert.equal(readEnvironment({ MESH_METRICS_PREFIX: 'istio' }).values.MESH_METRICS_PREFIX, 'istio');
    const env = readEnvironment({ MESH_METRICS_PREFIX: 'prometheus' });
    assert.equal(env.problems.length, 1);
    assert.match(describeProblem(env.problems[0]!), /MESH_METRICS_PREFIX.*prometheus.*mesh.*istio/);
  });
});
