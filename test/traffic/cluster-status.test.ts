import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClusterRuntime, isPickFailure, type Endpoint } from '../../src/traffic/cluster.js';
import {
  clusterStats, formatClustersJson, formatClustersText, formatClusterStatsText, hostPortOf, splitLocality, type ClusterStatus,
} from '../../src/traffic/cluster-status.js';
import { OUTCOME, parseRetryOn } from '../../src/traffic/retry.js';
import { DEFAULT_RETRY } from '../../src/traffic/spec.js';
import { privateTrafficStore } from '../../src/traffic/shared-state.js';
import { assertGolden } from '../helpers/golden.js';
import { clusterSpec, endpoint, FakeClock, outlierSpec, seeded } from './support.js';

/** Two clusters in a known state: traffic, an ejection, a connection, a retry. */
function statuses(): ClusterStatus[] {
  const store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 8 });
  const reviews = new ClusterRuntime({
    spec: clusterSpec({
      name: 'outbound|9080|v1|reviews.default.svc.cluster.local',
      policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 2, maxEjectionPercent: 50 }), loadBalancer: { kind: 'simple', simple: 'ROUND_ROBIN' } },
      pool: { tcp: { maxConnections: 100 }, http: { http1MaxPendingRequests: 10, maxRetries: 3 } },
    }),
    endpoints: [
      endpoint('10.0.0.1', { port: 9080, locality: 'us-east1/us-east1-b/rack1' }),
      endpoint('10.0.0.2', { port: 9080, weight: 3, locality: 'us-east1/us-east1-c' }),
      endpoint('fd00::3', { port: 9080 }),
    ],
    store, clock: new FakeClock(), random: seeded(5),
  });
  const start = (ep: Endpoint): Endpoint => {
    const r = reviews.startAttempt(ep);
    assert.ok(!isPickFailure(r));
    return r;
  };
  const [a, b, c] = reviews.endpoints as [Endpoint, Endpoint, Endpoint];
  reviews.attemptEnded(start(a), { kind: 'response', status: 503 });
  reviews.attemptEnded(start(a), OUTCOME.reset); // the second consecutive 5xx: ejected
  for (let k = 0; k < 3; k++) reviews.attemptEnded(start(b), { kind: 'response', status: 200 });
  reviews.attemptEnded(start(b), OUTCOME.perTryTimeout);
  start(c); // in flight
  reviews.tryAcquireConnection(b);
  reviews.tryAcquireConnection(c);
  reviews.attemptEnded(start(c), OUTCOME.connectFailure);
  reviews.decideRetry({ ...DEFAULT_RETRY, ...parseRetryOn('5xx')! }, { kind: 'response', status: 500 }, 0, { bodyReplayable: true });
  const plain = new ClusterRuntime({
    spec: clusterSpec({ name: 'outbound|80||httpbin.org' }), endpoints: [endpoint('93.184.216.34')], store, clock: new FakeClock(), random: seeded(5),
  });
  const p = plain.pick();
  assert.ok(!isPickFailure(p));
  plain.attemptEnded(p, { kind: 'response', status: 404 });
  return [reviews.status(), plain.status()];
}

describe('cluster status formatters', () => {
  it('prints /clusters as Envoy\'s text (golden)', () => {
    assertGolden('traffic/testdata/clusters.golden', formatClustersText(statuses()));
  });

  it('prints /clusters?format=json as Envoy\'s protobuf JSON (golden)', () => {
    const json = formatClustersJson(statuses());
    assertGolden('traffic/testdata/clusters-json.golden', json);
    const parsed = JSON.parse(json) as { cluster_statuses: { host_statuses: { health_status: Record<string, unknown>; stats: { name: string; value?: string }[] }[] }[] };
    const host = parsed.cluster_statuses[0]!.host_statuses[0]!;
    assert.deepEqual(host.health_status, { failed_outlier_check: true, eds_health_status: 'HEALTHY' });
    assert.equal(host.stats.find((s) => s.name === 'rq_error')?.value, '2');
    assert.equal(host.stats.find((s) => s.name === 'cx_total')?.value, undefined, 'a zero is left out, as protobuf JSON does');
  });

  it('gives /stats Envoy\'s names (golden), with the gauges derived from the live counts', () => {
    const [reviews] = statuses();
    assertGolden('traffic/testdata/cluster-stats.golden', formatClusterStatsText([reviews!]));
    const byName = new Map(clusterStats(reviews!).map((s) => [s.name.replace('cluster.outbound|9080|v1|reviews.default.svc.cluster.local.', ''), s]));
    assert.deepEqual(['outlier_detection.ejections_active', 'membership_healthy', 'membership_total', 'upstream_rq_active', 'upstream_cx_active',
      'circuit_breakers.default.remaining_cx', 'upstream_rq_retry'].map((n) => byName.get(n)?.value), [1, 2, 3, 1, 2, 98, 1]);
    assert.equal(byName.get('upstream_rq_retry')?.type, 'counter');
    assert.equal(byName.get('membership_total')?.type, 'gauge');
  });

  it('prints nothing for no cluster', () => {
    assert.equal(formatClustersText([]), '');
  });

  const localities: [string | undefined, string[]][] = [[undefined, ['', '', '']], ['r', ['r', '', '']], ['r/z', ['r', 'z', '']], ['r/z/s', ['r', 'z', 's']]];
  for (const [text, parts] of localities) {
    it(`splits the locality ${text ?? '(none)'}`, () => {
      const l = splitLocality(text);
      assert.deepEqual([l.region, l.zone, l.subZone], parts);
    });
  }

  it('writes an IPv6 endpoint in brackets', () => {
    assert.equal(hostPortOf('fd00::1', 80), '[fd00::1]:80');
    assert.equal(hostPortOf('10.0.0.1', 80), '10.0.0.1:80');
  });
});
