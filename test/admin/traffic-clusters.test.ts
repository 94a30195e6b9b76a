// The admin API with traffic clusters in force, through adminRouter (no socket): `/clusters` in
// Envoy's text (golden) and JSON, the passthrough clusters and the traffic ones in one output;
// `/stats` with the `cluster.<name>.*` series beside today's, filter / usedonly / json / prometheus.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { adminRouter, type AdminHooks } from '../../src/admin/server.js';
import { registerClusterMetrics } from '../../src/metrics/cluster-metrics.js';
import { registerProxyMetrics } from '../../src/metrics/proxy-metrics.js';
import { ProxyStats } from '../../src/proxy/stats.js';
import { assertGolden } from '../helpers/golden.js';
import { HTTPBIN, REVIEWS_V1, trafficClusters } from '../helpers/traffic-clusters.js';

function hooks(): AdminHooks {
  const stats = new ProxyStats();
  stats.outbound.upstreamCxTotal = 4;
  stats.outbound.upstreamCxActive = 1;
  stats.outbound.rqTotal = 2;
  const runtimes = trafficClusters();
  const statuses = () => runtimes.map((c) => c.status());
  const proxyRegistry = new Registry();
  registerProxyMetrics(proxyRegistry, stats);
  registerClusterMetrics(proxyRegistry, statuses);
  return {
    stats, proxyRegistry,
    state: () => 'LIVE',
    serverInfo: () => ({}),
    configDump: () => ({}),
    listeners: () => [{ name: 'virtualOutbound', address: '0.0.0.0', port: 15001 }],
    clusters: () => [
      { name: 'PassthroughCluster', address: 'original destination', port: 0, cxActive: 1, cxTotal: 4, rqTotal: 2, connectFail: 0 },
      { name: 'InboundPassthroughCluster', address: '127.0.0.6', port: 0, cxActive: 0, cxTotal: 0, rqTotal: 0, connectFail: 0 },
    ],
    trafficClusters: statuses,
    drainListeners: () => undefined,
    setHealthcheckFailed: () => undefined,
    quit: () => undefined,
    decisions: () => [],
    extraStats: () => [],
  };
}

async function get(path: string): Promise<string> {
  const reply = await adminRouter(hooks())('GET', path);
  assert.equal(reply.status, 200, reply.body);
  return reply.body;
}

describe('admin /clusters with traffic clusters', () => {
  it('prints the passthrough clusters, then every traffic cluster in Envoy\'s text (golden)', async () => {
    const text = await get('/clusters');
    assertGolden('admin/testdata/clusters-traffic.golden', text);
    const lines = text.split('\n');
    for (const expected of [
      'PassthroughCluster::original destination:0::cx_total::4',
      `${REVIEWS_V1}::observability_name::${REVIEWS_V1}`,
      `${REVIEWS_V1}::default_priority::max_connections::3`,
      `${REVIEWS_V1}::default_priority::max_pending_requests::4294967295`,
      `${REVIEWS_V1}::high_priority::max_connections::1024`,
      `${REVIEWS_V1}::high_priority::max_retries::3`,
      `${REVIEWS_V1}::10.0.0.1:80::rq_active::0`,
      `${REVIEWS_V1}::10.0.0.1:80::rq_error::2`,
      `${REVIEWS_V1}::10.0.0.1:80::health_flags::/failed_outlier_check`,
      `${REVIEWS_V1}::10.0.0.1:80::region::us-east1`,
      `${REVIEWS_V1}::10.0.0.1:80::zone::us-east1-b`,
      `${REVIEWS_V1}::10.0.0.2:80::cx_active::1`,
      `${REVIEWS_V1}::10.0.0.2:80::rq_success::3`,
      `${REVIEWS_V1}::10.0.0.2:80::rq_total::3`,
      `${REVIEWS_V1}::10.0.0.2:80::health_flags::healthy`,
      `${REVIEWS_V1}::10.0.0.2:80::weight::2`,
      `${HTTPBIN}::93.184.216.34:80::rq_error::0`,
    ]) assert.ok(lines.includes(expected), `missing "${expected}"`);
    assert.ok(lines.indexOf('InboundPassthroughCluster::observability_name::InboundPassthroughCluster') < lines.indexOf(`${REVIEWS_V1}::observability_name::${REVIEWS_V1}`));
  });

  it('?format=json: one cluster_statuses list, passthrough then traffic, Envoy\'s protobuf JSON', async () => {
    const json = JSON.parse(await get('/clusters?format=json')) as {
      cluster_statuses: { name: string; host_statuses: { address: { socket_address: { address: string } }; health_status: Record<string, unknown>; weight: number; locality?: Record<string, string> }[] }[];
    };
    assert.deepEqual(json.cluster_statuses.map((c) => c.name), ['PassthroughCluster', 'InboundPassthroughCluster', REVIEWS_V1, HTTPBIN]);
    const reviews = json.cluster_statuses[2]!;
    assert.deepEqual(reviews.host_statuses.map((h) => [h.address.socket_address.address, h.health_status, h.weight, h.locality]), [
      ['10.0.0.1', { failed_outlier_check: true, eds_health_status: 'HEALTHY' }, 1, { region: 'us-east1', zone: 'us-east1-b' }],
      ['10.0.0.2', { eds_health_status: 'HEALTHY' }, 2, { region: 'us-east1', zone: 'us-east1-c' }],
    ]);
  });
});

describe('admin /stats with traffic clusters', () => {
  it('adds each cluster\'s series under Envoy\'s names beside today\'s, all sorted', async () => {
    const text = await get('/stats');
    const lines = text.trimEnd().split('\n').filter((l) => !l.includes('downstream_rq_time'));
    assert.deepEqual(lines, [...lines].sort());
    for (const expected of [
      'cluster.outbound.upstream_cx_total: 4',
      `cluster.${REVIEWS_V1}.upstream_rq_retry: 1`,
      `cluster.${REVIEWS_V1}.upstream_rq_total: 5`,
      `cluster.${REVIEWS_V1}.upstream_rq_5xx: 1`,
      `cluster.${REVIEWS_V1}.upstream_rq_2xx: 3`,
      `cluster.${REVIEWS_V1}.upstream_rq_timeout: 0`,
      `cluster.${REVIEWS_V1}.upstream_rq_pending_overflow: 0`,
      `cluster.${REVIEWS_V1}.upstream_cx_overflow: 0`,
      `cluster.${REVIEWS_V1}.upstream_rq_retry_overflow: 0`,
      `cluster.${REVIEWS_V1}.upstream_cx_active: 1`,
      `cluster.${REVIEWS_V1}.upstream_rq_active: 0`,
      `cluster.${REVIEWS_V1}.outlier_detection.ejections_active: 1`,
      `cluster.${REVIEWS_V1}.outlier_detection.ejections_enforced_total: 1`,
      `cluster.${REVIEWS_V1}.membership_healthy: 1`,
      `cluster.${REVIEWS_V1}.membership_total: 2`,
      `cluster.${REVIEWS_V1}.circuit_breakers.default.remaining_cx: 2`,
      `cluster.${HTTPBIN}.upstream_rq_4xx: 1`,
    ]) assert.ok(lines.includes(expected), `missing "${expected}" in\n${text}`);
  });

  it('filter= and usedonly apply to them as to the others', async () => {
    // Sorted by name as Envoy prints them (`|` sorts after letters: `v1|reviews` before `|httpbin`).
    assert.equal(await get('/stats?filter=ejections_active'),
      `cluster.${REVIEWS_V1}.outlier_detection.ejections_active: 1\ncluster.${HTTPBIN}.outlier_detection.ejections_active: 0\n`);
    assert.equal(await get('/stats?filter=ejections_active&usedonly'), `cluster.${REVIEWS_V1}.outlier_detection.ejections_active: 1\n`);
    const used = await get(`/stats?usedonly&filter=${encodeURIComponent('^cluster\\.outbound\\|80\\|\\|httpbin')}`);
    assert.doesNotMatch(used, /: 0$/m);
    assert.match(used, /^cluster\.outbound\|80\|\|httpbin\.org\.upstream_rq_4xx: 1$/m);
  });

  it('?format=json lists them as {name, value}', async () => {
    const json = JSON.parse(await get('/stats?format=json&filter=upstream_rq_retry$')) as { stats: { name: string; value: number }[] };
    assert.deepEqual(json.stats, [
      { name: `cluster.${REVIEWS_V1}.upstream_rq_retry`, value: 1 },
      { name: 'cluster.outbound|80||httpbin.org.upstream_rq_retry', value: 0 },
    ]);
  });

  it('?format=prometheus has them as mesh_cluster_<stat>{cluster_name}, filtered the same way', async () => {
    const text = await get('/stats?format=prometheus&filter=mesh_cluster_upstream_rq_retry_total');
    assert.deepEqual(text.split('\n').filter((l) => l !== '' && !l.startsWith('#')), [
      `mesh_cluster_upstream_rq_retry_total{cluster_name="${REVIEWS_V1}"} 1`,
      `mesh_cluster_upstream_rq_retry_total{cluster_name="${HTTPBIN}"} 0`,
    ]);
    // usedonly in Prometheus form keeps a family with a non-zero series (whole), as for the other families.
    const used = await get('/stats?format=prometheus&usedonly&filter=^mesh_cluster_(outlier_detection_ejections_active|upstream_rq_timeout_total)$');
    assert.deepEqual(used.split('\n').filter((l) => l !== '' && !l.startsWith('#')), [
      `mesh_cluster_outlier_detection_ejections_active{cluster_name="${REVIEWS_V1}"} 1`,
      `mesh_cluster_outlier_detection_ejections_active{cluster_name="${HTTPBIN}"} 0`,
    ]);
  });
});
