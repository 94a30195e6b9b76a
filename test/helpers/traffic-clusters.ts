// Traffic clusters in a known state, for the surfaces that show them (admin /clusters, /stats,
// /config_dump, the Prometheus series): real ClusterRuntimes on a private store with a fake clock,
// driven through the engine's API — traffic, an ejection, a retry, connections.
import assert from 'node:assert/strict';
import { ClusterRuntime, isPickFailure, type Endpoint } from '../../src/traffic/cluster.js';
import { OUTCOME, parseRetryOn } from '../../src/traffic/retry.js';
import { privateTrafficStore } from '../../src/traffic/shared-state.js';
import { DEFAULT_RETRY } from '../../src/traffic/spec.js';
import { clusterSpec, endpoint, FakeClock, outlierSpec, seeded } from '../traffic/support.js';

export const REVIEWS_V1 = 'outbound|80|v1|reviews.default.svc.cluster.local';
export const HTTPBIN = 'outbound|80||httpbin.org';

/**
 * Two clusters: `reviews` v1 (outlier detection after 2 consecutive 5xx, max 3 connections, two
 * endpoints with localities, 10.0.0.1 ejected, 10.0.0.2 with 3 successes and a connection open, one
 * retry decided), and `httpbin.org` (defaults, one 404 answered). Their runtimes stay open.
 */
export function trafficClusters(): ClusterRuntime[] {
  const store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 8 });
  const reviews = new ClusterRuntime({
    spec: {
      ...clusterSpec({
        name: REVIEWS_V1,
        policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 2, maxEjectionPercent: 50 }), rule: 'DestinationRule default/reviews' },
        pool: { tcp: { maxConnections: 3 } },
      }),
      subset: 'v1', subsetLabels: { version: 'v1' },
    },
    endpoints: [
      endpoint('10.0.0.1', { locality: 'us-east1/us-east1-b', labels: { version: 'v1' } }),
      endpoint('10.0.0.2', { weight: 2, locality: 'us-east1/us-east1-c', labels: { version: 'v1' } }),
    ],
    store, clock: new FakeClock(), random: seeded(7),
  });
  const start = (ep: Endpoint): Endpoint => {
    const r = reviews.startAttempt(ep);
    assert.ok(!isPickFailure(r));
    return r;
  };
  const [a, b] = reviews.endpoints as [Endpoint, Endpoint];
  reviews.attemptEnded(start(a), { kind: 'response', status: 503 });
  reviews.attemptEnded(start(a), OUTCOME.reset); // the second consecutive 5xx: ejected
  for (let k = 0; k < 3; k++) reviews.attemptEnded(start(b), { kind: 'response', status: 200 });
  assert.ok(reviews.tryAcquireConnection(b));
  reviews.decideRetry({ ...DEFAULT_RETRY, ...parseRetryOn('5xx')! }, { kind: 'response', status: 500 }, 0, { bodyReplayable: true });
  const httpbin = new ClusterRuntime({
    spec: { ...clusterSpec({ name: HTTPBIN }), host: 'httpbin.org', service: 'httpbin.org:80', origin: 'ServiceEntry default/httpbin' },
    endpoints: [endpoint('93.184.216.34')], store, clock: new FakeClock(), random: seeded(7),
  });
  const p = httpbin.pick();
  assert.ok(!isPickFailure(p));
  httpbin.attemptEnded(p, { kind: 'response', status: 404 });
  return [reviews, httpbin];
}
