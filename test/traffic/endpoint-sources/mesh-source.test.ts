// The source the sidecar runs with: each service served by the source its resolution calls for,
// one notification per configuration change, and a service that changes resolution moving across.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { buildClusters } from '../../../src/traffic/clusters.js';
import { MeshEndpointSource } from '../../../src/traffic/endpoint-sources/mesh-source.js';
import { nodeDnsResolve } from '../../../src/traffic/endpoint-sources/node-dns-resolver.js';
import type { EndpointSpec } from '../../../src/traffic/spec.js';
import { answerTo, fakeUpstream, parse, type FakeUpstream } from '../../dns/dns-test-kit.js';
import { se, SHOP, snapshotOf, we } from '../resources.js';

const brief = (es: readonly EndpointSpec[]): string[] => es.map((e) => `${e.address}:${e.port}`);
const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('MeshEndpointSource', () => {
  const entries = (staticResolution = 'STATIC'): string[] => [
    se('static', `{hosts: [s.example.com], addresses: [10.0.0.1], ports: [{number: 80, name: http, protocol: HTTP}], resolution: ${staticResolution}${staticResolution === 'STATIC' ? ', endpoints: [{address: 10.1.0.1}]' : ''}}`),
    se('selected', '{hosts: [w.example.com], addresses: [10.0.0.2], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC, workloadSelector: {labels: {app: w}}}'),
    se('dns', '{hosts: [d.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}'),
    se('passthrough', '{hosts: [p.example.com], addresses: [10.0.0.4], ports: [{number: 80, name: http, protocol: HTTP}]}'),
    we('vm', '{address: 10.2.0.1, labels: {app: w}}'),
  ];
  it('sends each service to its source; resolution NONE has no endpoints', async () => {
    const source = new MeshEndpointSource({ dns: { resolve: async () => [{ address: '192.0.2.7', ttl: 30 }] } });
    after(() => source.close());
    const told: string[][] = [];
    source.onChange((k) => told.push([...k].sort()));
    const snap = snapshotOf(...entries());
    source.update(buildClusters(snap, { workload: SHOP }).services, snap.workloadEntries);
    assert.deepEqual(told, [['d.example.com:443', 's.example.com:80', 'w.example.com:80']], 'one notification for the whole change');
    await settle();
    assert.deepEqual(told.at(-1), ['d.example.com:443'], 'then the DNS answer');
    assert.deepEqual(brief(source.endpointsOf('s.example.com:80')), ['10.1.0.1:80']);
    assert.deepEqual(brief(source.endpointsOf('w.example.com:80')), ['10.2.0.1:80']);
    assert.deepEqual(brief(source.endpointsOf('d.example.com:443')), ['192.0.2.7:443']);
    assert.deepEqual(source.endpointsOf('p.example.com:80'), []);
  });
  it('a service whose resolution changes moves to its new source, and listeners read the new endpoints', async () => {
    const source = new MeshEndpointSource({ dns: { resolve: async (name) => [{ address: name === 's.example.com' ? '192.0.2.9' : '192.0.2.7', ttl: 30 }] } });
    after(() => source.close());
    const reads: string[][] = [];
    source.onChange((keys) => { if (keys.includes('s.example.com:80')) reads.push(brief(source.endpointsOf('s.example.com:80'))); });
    const a = snapshotOf(...entries());
    source.update(buildClusters(a, { workload: SHOP }).services, a.workloadEntries);
    const b = snapshotOf(...entries('DNS'));
    source.update(buildClusters(b, { workload: SHOP }).services, b.workloadEntries);
    await settle();
    assert.deepEqual(reads, [['10.1.0.1:80'], [], ['192.0.2.9:80']]);
  });
});

describe('nodeDnsResolve (a real name server on port 0)', () => {
  let upstream: FakeUpstream | undefined;
  after(async () => upstream?.close());
  it('returns addresses with their TTL; "no such name" is an empty answer; SERVFAIL a failure', async () => {
    upstream = await fakeUpstream((q) => {
      const name = parse(q).questions[0]!.name;
      if (name === 'api.example.com') return answerTo(q, { addresses: ['192.0.2.10', '192.0.2.11'], ttl: 42 });
      if (name === 'gone.example.com') return answerTo(q, { rcode: 3 });
      return answerTo(q, { rcode: 2 });
    });
    const resolve = nodeDnsResolve({ servers: [`127.0.0.1:${upstream.port}`], timeoutMs: 500 });
    assert.deepEqual(await resolve('api.example.com'), [{ address: '192.0.2.10', ttl: 42 }, { address: '192.0.2.11', ttl: 42 }]);
    assert.deepEqual(await resolve('gone.example.com'), []);
    await assert.rejects(resolve('broken.example.com'), /SERVFAIL|ESERVFAIL/);
  });
});
