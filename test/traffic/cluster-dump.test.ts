import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clusterConfigDump } from '../../src/traffic/cluster-dump.js';
import { REVIEWS_V1, trafficClusters } from '../helpers/traffic-clusters.js';

describe('clusterConfigDump', () => {
  it('shows what the cluster is, its resolved policy, its rule and its endpoints with their health', () => {
    const [reviews] = trafficClusters();
    const dump = JSON.parse(JSON.stringify(clusterConfigDump(reviews!.spec, reviews!.endpoints.map((e) => e.spec), reviews!.status()))) as Record<string, unknown>;
    assert.deepEqual(
      { ...dump, policy: undefined, endpoints: undefined },
      {
        name: REVIEWS_V1, type: 'EDS', host: 'reviews.default.svc.cluster.local', port: 80, subset: 'v1', subset_labels: { version: 'v1' },
        service: 'ServiceEntry default/reviews', rule: 'DestinationRule default/reviews', policy: undefined, endpoints: undefined,
      },
    );
    const policy = dump['policy'] as Record<string, Record<string, unknown> | null>;
    assert.deepEqual(policy['loadBalancer'], { kind: 'simple', simple: 'LEAST_REQUEST' });
    assert.equal((policy['connectionPool']!['tcp'] as Record<string, number>)['maxConnections'], 3);
    assert.equal(policy['outlierDetection']!['consecutive5xxErrors'], 2);
    assert.equal(policy['tls'], null);
    assert.equal(policy['locality'], null, 'no locality balancing');
    assert.deepEqual(dump['endpoints'], [
      { address: '10.0.0.1', port: 80, labels: { version: 'v1' }, locality: 'us-east1/us-east1-b', weight: 1, priority: 0, origin: 'ServiceEntry default/test', health: 'FAILED_OUTLIER_CHECK' },
      { address: '10.0.0.2', port: 80, labels: { version: 'v1' }, locality: 'us-east1/us-east1-c', weight: 2, priority: 0, origin: 'ServiceEntry default/test', health: 'HEALTHY' },
    ]);
  });

  it('says ORIGINAL_DST and lists no endpoint for a passthrough cluster', () => {
    const [reviews] = trafficClusters();
    const spec = { ...reviews!.spec, discovery: 'ORIGINAL_DST' as const, subset: undefined, subsetLabels: undefined };
    const dump = clusterConfigDump(spec, [], { ...reviews!.status(), hosts: [] });
    assert.equal(dump['type'], 'ORIGINAL_DST');
    assert.equal(dump['subset'], null);
    assert.equal('subset_labels' in dump, false);
    assert.deepEqual(dump['endpoints'], []);
  });
});
