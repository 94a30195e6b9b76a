// The traffic clusters' Prometheus series: names (Envoy's stat under `mesh_cluster_`, Prometheus'
// suffix rules), one series per cluster in force read at scrape time, label values escaped, valid
// text (our validator, and promtool's linter when it is installed).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { CLUSTER_LABEL, clusterMetricName, registerClusterMetrics } from '../../src/metrics/cluster-metrics.js';
import { PROXY_METRIC_NAMES } from '../../src/metrics/proxy-metrics.js';
import { CLUSTER_STATS, type ClusterStatus } from '../../src/traffic/cluster-status.js';
import { repoRoot } from '../helpers/repo.js';
import { HTTPBIN, REVIEWS_V1, trafficClusters } from '../helpers/traffic-clusters.js';
import { assertValidPrometheusText } from './prom-text-validator.js';

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;

function scrapeOf(clusters: () => readonly ClusterStatus[]): Registry {
  const registry = new Registry();
  registerClusterMetrics(registry, clusters);
  return registry;
}

describe('cluster metric names', () => {
  const cases: [string, 'counter' | 'gauge', string][] = [
    ['upstream_rq_retry', 'counter', 'mesh_cluster_upstream_rq_retry_total'],
    ['upstream_rq_total', 'counter', 'mesh_cluster_upstream_rq_total'],
    ['upstream_cx_overflow', 'counter', 'mesh_cluster_upstream_cx_overflow_total'],
    ['outlier_detection.ejections_enforced_total', 'counter', 'mesh_cluster_outlier_detection_ejections_enforced_total'],
    ['outlier_detection.ejections_active', 'gauge', 'mesh_cluster_outlier_detection_ejections_active'],
    ['membership_total', 'gauge', 'mesh_cluster_membership_size'],
    ['circuit_breakers.default.rq_pending_open', 'gauge', 'mesh_cluster_circuit_breakers_default_rq_pending_open'],
  ];
  for (const [stat, type, name] of cases) {
    it(`${stat} (${type}) → ${name}`, () => assert.equal(clusterMetricName(stat, type), name));
  }

  it('are valid, distinct, suffixed as Prometheus wants, and clash with no proxy series', () => {
    const names = CLUSTER_STATS.map((s) => clusterMetricName(s.stat, s.type));
    assert.equal(new Set(names).size, names.length);
    for (const [i, name] of names.entries()) {
      assert.match(name, /^mesh_cluster_[a-z0-9_]+$/);
      assert.equal(name.endsWith('_total'), CLUSTER_STATS[i]!.type === 'counter', name);
    }
    const proxy = new Set<string>(Object.values(PROXY_METRIC_NAMES));
    assert.deepEqual(names.filter((n) => proxy.has(n)), []);
  });

  it('are documented in docs/METRICS.md', () => {
    const doc = readFileSync(join(repoRoot, 'docs', 'METRICS.md'), 'utf8');
    // Every stat, by its Envoy name, in the table of the traffic cluster series.
    const table = doc.slice(doc.indexOf('## Traffic cluster series'), doc.indexOf('## Agent series'));
    for (const { stat } of CLUSTER_STATS) assert.ok(table.includes(`\`${stat}\``), stat);
  });
});

describe('cluster metrics', () => {
  it('have one series per cluster, labelled cluster_name, with the numbers of /stats', async () => {
    const runtimes = trafficClusters();
    const text = await scrapeOf(() => runtimes.map((c) => c.status())).metrics();
    const samples = assertValidPrometheusText(text);
    const value = (name: string, cluster: string): number | undefined =>
      samples.find((s) => s.name === name && s.labels[CLUSTER_LABEL] === cluster)?.value;
    assert.equal(value('mesh_cluster_upstream_rq_retry_total', REVIEWS_V1), 1);
    assert.equal(value('mesh_cluster_upstream_rq_5xx_total', REVIEWS_V1), 1);
    assert.equal(value('mesh_cluster_outlier_detection_ejections_active', REVIEWS_V1), 1);
    assert.equal(value('mesh_cluster_membership_size', REVIEWS_V1), 2);
    assert.equal(value('mesh_cluster_membership_healthy', REVIEWS_V1), 1);
    assert.equal(value('mesh_cluster_upstream_cx_active', REVIEWS_V1), 1);
    assert.equal(value('mesh_cluster_upstream_rq_4xx_total', HTTPBIN), 1);
    assert.match(text, /^# TYPE mesh_cluster_upstream_rq_retry_total counter$/m);
    assert.match(text, /^# TYPE mesh_cluster_upstream_cx_active gauge$/m);
    assert.equal(samples.length, CLUSTER_STATS.length * 2);
  });

  it('follow the clusters in force: a removed cluster\'s series go', async () => {
    const runtimes = trafficClusters();
    let inForce = runtimes;
    const registry = scrapeOf(() => inForce.map((c) => c.status()));
    assert.match(await registry.metrics(), new RegExp(`cluster_name="${HTTPBIN.replace(/\|/g, '\\|')}"`));
    inForce = runtimes.slice(0, 1);
    const text = await registry.metrics();
    assert.doesNotMatch(text, /httpbin/);
    assert.equal(assertValidPrometheusText(text).length, CLUSTER_STATS.length);
  });

  it('read the clusters once per scrape, at scrape time', async () => {
    let reads = 0;
    const runtimes = trafficClusters();
    const registry = scrapeOf(() => {
      reads++;
      return runtimes.map((c) => c.status());
    });
    assert.equal(reads, 0);
    await registry.metrics();
    assert.equal(reads, 1);
    await registry.metrics();
    assert.equal(reads, 2);
  });

  it('escape label values', async () => {
    const [reviews] = trafficClusters();
    const odd = 'outbound|80||we"ird\\x\ny';
    const text = await scrapeOf(() => [{ ...reviews!.status(), name: odd }]).metrics();
    assert.match(text, /cluster_name="outbound\|80\|\|we\\"ird\\\\x\\ny"/);
    assert.ok(assertValidPrometheusText(text).every((s) => s.labels[CLUSTER_LABEL] === odd));
  });

  it('print families without series when no cluster is in force (still valid text)', async () => {
    const text = await scrapeOf(() => []).metrics();
    assert.deepEqual(assertValidPrometheusText(text), []);
  });

  it('pass promtool check metrics', { skip: promtool ? false : 'promtool not installed (Debian: apt-get install prometheus)' }, async () => {
    const runtimes = trafficClusters();
    const text = await scrapeOf(() => runtimes.map((c) => c.status())).metrics();
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no lint problem');
  });
});
