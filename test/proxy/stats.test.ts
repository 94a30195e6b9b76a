import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProxyStats } from '../../src/proxy/stats.js';

/** What a worker's stats look like after crossing a thread (structured clone: data, no prototype). */
const cloned = (s: ProxyStats): ProxyStats => structuredClone(s);

describe('ProxyStats.assignSum', () => {
  it('sums the workers\' counters, codes and histograms into the same object, replacing what it held', () => {
    const a = new ProxyStats();
    a.outbound.cxTotal = 3;
    a.outbound.recordResponse(200, 2);
    a.loopsRefused = 1;
    const b = new ProxyStats();
    b.outbound.cxTotal = 4;
    b.outbound.recordResponse(200, 20);
    b.outbound.recordResponse(503, 2000);
    b.inbound.upstreamRqErrors = 2;
    const total = new ProxyStats();
    total.outbound.cxTotal = 99; // a previous sum
    total.outbound.recordResponse(404, 1);
    const before = total.outbound;
    total.assignSum([a, cloned(b)]);
    assert.equal(total.outbound, before, 'the same object, so holders see the new sum');
    assert.equal(total.outbound.cxTotal, 7);
    assert.deepEqual([...total.outbound.rqByCode].sort(), [[200, 2], [503, 1]]);
    assert.equal(total.outbound.rqDurationMs.count, 3);
    assert.equal(total.outbound.rqDurationMs.sum, 2022);
    assert.equal(total.outbound.rqDurationMs.counts.reduce((x, y) => x + y, 0), 3);
    assert.equal(total.inbound.upstreamRqErrors, 2);
    assert.equal(total.loopsRefused, 1);
  });
});
