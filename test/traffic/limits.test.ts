import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClusterLimits, connectionExhausted, limitValues, retryBudgetLimit } from '../../src/traffic/limits.js';
import { createTrafficMemory, privateTrafficStore, TrafficStore } from '../../src/traffic/shared-state.js';
import { ISTIO_POOL } from './support.js';

function limits(max: Partial<ReturnType<typeof limitValues>>, shared = false): ClusterLimits {
  const store = shared
    ? new TrafficStore({ memory: createTrafficMemory({ workers: 1, endpointSlots: 8, clusterSlots: 8 }), worker: 0 })
    : privateTrafficStore({ endpointSlots: 8, clusterSlots: 8 });
  const slot = store.attachCluster('c');
  return new ClusterLimits(slot, { ...limitValues(ISTIO_POOL), ...max });
}

describe('ClusterLimits', () => {
  const kinds = [
    ['connections', 'maxConnections', 'tryAcquireConnection', 'releaseConnection', 'upstream_cx_overflow'],
    ['pending requests', 'maxPendingRequests', 'tryAcquirePending', 'releasePending', 'upstream_rq_pending_overflow'],
    ['requests', 'maxRequests', 'tryAcquireRequest', 'releaseRequest', 'upstream_rq_pending_overflow'],
    ['retries', 'maxRetries', 'tryAcquireRetry', 'releaseRetry', 'upstream_rq_retry_overflow'],
  ] as const;
  for (const [name, max, acquire, release, overflow] of kinds) {
    it(`${name}: up to ${max}, then refused and counted as ${overflow}; a release admits one more`, () => {
      const l = limits({ [max]: 2 });
      assert.deepEqual([l[acquire](), l[acquire](), l[acquire]()], [true, true, false]);
      assert.equal(l.slot.total(overflow), 1);
      l[release]();
      assert.equal(l[acquire](), true);
      assert.equal(l[acquire](), false);
      assert.equal(l.slot.total(overflow), 2);
    });
  }

  it('a retry budget replaces maxRetries: max(minRetryConcurrency, percent of the requests in flight and pending), truncated', () => {
    assert.deepEqual([0, 10, 14, 15, 100, 1000].map((n) => retryBudgetLimit({ percent: 20, minRetryConcurrency: 3 }, n)), [3, 3, 3, 3, 20, 200]);
    assert.equal(retryBudgetLimit({ percent: 25, minRetryConcurrency: 0 }, 7), 1);
    const l = limits({ maxRetries: 1000, retryBudget: { percent: 50, minRetryConcurrency: 1 } });
    for (let i = 0; i < 6; i++) assert.equal(l.tryAcquireRequest(), true);
    for (let i = 0; i < 2; i++) assert.equal(l.tryAcquirePending(), true);
    // 8 requests in flight or pending: 4 retries at once, the fifth refused and counted.
    assert.deepEqual([1, 2, 3, 4, 5].map(() => l.tryAcquireRetry()), [true, true, true, true, false]);
    assert.equal(l.slot.total('upstream_rq_retry_overflow'), 1);
    assert.equal(l.retryLimit(), 4);
    for (let i = 0; i < 6; i++) l.releaseRequest();
    // 2 left: the floor of 1 and 50 % of 2 give 1, and 4 are in flight already.
    assert.equal(l.tryAcquireRetry(), false);
    assert.equal(l.slot.total('upstream_rq_retry_overflow'), 2);
  });

  it('counts every pending request taken (upstream_rq_pending_total)', () => {
    const l = limits({});
    l.tryAcquirePending();
    l.tryAcquirePending();
    assert.equal(l.slot.total('upstream_rq_pending_total'), 2);
    assert.equal(l.active('pending'), 2);
  });

  it('takes Istio\'s defaults as unlimited (2^32 - 1)', () => {
    const l = limits({});
    for (let k = 0; k < 10_000; k++) assert.equal(l.tryAcquireConnection(), true);
    assert.equal(l.max.maxConnections, 4294967295);
  });

  for (const shared of [false, true]) {
    it(`wakes a request waiting for a connection when one is released in the same thread, or times out (${shared ? 'shared' : 'private'} memory)`, async () => {
      const l = limits({ maxConnections: 1 }, shared);
      assert.equal(l.tryAcquireConnection(), true);
      const waiting = l.waitForConnection(5000);
      assert.equal(l.connectionWaiters(), 1);
      l.releaseConnection();
      assert.equal(await waiting, true);
      assert.equal(l.tryAcquireConnection(), true);
      assert.equal(await l.waitForConnection(20), false);
      assert.equal(l.connectionWaiters(), 0);
    });
  }
});

describe('connectionExhausted', () => {
  const cases: [served: number, max: number, expected: boolean][] = [[0, 0, false], [1_000_000, 0, false], [0, 1, false], [1, 1, true], [99, 100, false], [100, 100, true]];
  for (const [served, max, expected] of cases) {
    it(`${served} served, maxRequestsPerConnection ${max} → ${expected}`, () => assert.equal(connectionExhausted(served, max), expected));
  }
});
