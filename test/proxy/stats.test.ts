import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FLAG } from '../../src/log/access-record.js';
import { ProxyStats, requestKey, requestLabels } from '../../src/proxy/stats.js';

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

describe('DirectionStats.recordResponse and the labelled keys', () => {
  it('keeps a plain request (no peer, no gRPC, no flag) out of rqLabelled, as before', () => {
    const s = new ProxyStats();
    s.outbound.recordResponse(200, 1);
    s.outbound.recordResponse(200, 1, undefined, undefined, 0);
    assert.deepEqual([...s.outbound.rqByCode], [[200, 2]]);
    assert.equal(s.outbound.rqLabelled.size, 0);
  });

  it('labels a request with flags by Envoy\'s short names, in Envoy\'s order', () => {
    const s = new ProxyStats();
    s.outbound.recordResponse(503, 1, undefined, undefined, FLAG.URX | FLAG.UF);
    s.outbound.recordResponse(503, 1, undefined, undefined, FLAG.UF | FLAG.URX);
    assert.deepEqual([...s.outbound.rqLabelled], [['503 http - UF,URX -', 2]]);
    assert.deepEqual(requestLabels('503 http - UF,URX -'), { code: 503, protocol: 'http', grpcStatus: '', flags: 'UF,URX', peer: undefined });
  });

  const keys: [string, Parameters<typeof requestKey>, ReturnType<typeof requestLabels>][] = [
    ['plain with a peer', [200, undefined, 'cluster.local/ns/a/sa/b', 0], { code: 200, protocol: 'http', grpcStatus: '', flags: '-', peer: 'cluster.local/ns/a/sa/b' }],
    ['gRPC without a status', [200, null, undefined, 0], { code: 200, protocol: 'grpc', grpcStatus: '', flags: '-', peer: undefined }],
    ['gRPC, flags and peer', [503, 14, 'p', FLAG.UO], { code: 503, protocol: 'grpc', grpcStatus: '14', flags: 'UO', peer: 'p' }],
    ['a grpc-status beyond the cached range', [200, 1000, undefined, 0], { code: 200, protocol: 'grpc', grpcStatus: '1000', flags: '-', peer: undefined }],
    ['a peer with a space', [200, undefined, 'a b', FLAG.DC], { code: 200, protocol: 'http', grpcStatus: '', flags: 'DC', peer: 'a b' }],
  ];
  for (const [name, args, labels] of keys) {
    it(`requestKey / requestLabels round trip: ${name}`, () => {
      const key = requestKey(...args);
      assert.equal(requestKey(...args), key, 'the same key again (cached)');
      assert.deepEqual(requestLabels(key), labels);
    });
  }

  it('sums the flags\' keys across workers', () => {
    const a = new ProxyStats();
    a.outbound.recordResponse(503, 1, undefined, undefined, FLAG.UH);
    const b = new ProxyStats();
    b.outbound.recordResponse(503, 1, undefined, undefined, FLAG.UH);
    const total = new ProxyStats();
    total.assignSum([a, cloned(b)]);
    assert.deepEqual([...total.outbound.rqLabelled], [['503 http - UH -', 2]]);
  });
});
