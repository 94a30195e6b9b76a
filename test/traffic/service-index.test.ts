import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildClusters } from '../../src/traffic/clusters.js';
import { canonicalIp, hostNames, hostPart, ServiceIndex } from '../../src/traffic/service-index.js';
import { parseIp } from '../../src/security/authz/cidr.js';
import { se, SHOP, snapshotOf } from './resources.js';

const index = ServiceIndex.build(buildClusters(snapshotOf(
  se('reviews', '{hosts: [reviews.shop.svc.cluster.local], addresses: [10.0.0.10, "fd00::10"], ports: [{number: 9080, name: http, protocol: HTTP}], resolution: STATIC, endpoints: [{address: 10.1.0.1}]}'),
  se('ratings', '{hosts: [ratings.other.svc.cluster.local], addresses: [10.0.0.20], ports: [{number: 9080, name: http, protocol: HTTP}], resolution: STATIC, endpoints: [{address: 10.1.0.2}]}'),
  se('db', '{hosts: [db.example.com], addresses: [10.20.0.0/16, 10.20.30.0/24, "2001:db8::/32"], ports: [{number: 5432, name: pg, protocol: TCP}]}'),
  se('narrow', '{hosts: [narrow.example.com], addresses: [10.20.30.40], ports: [{number: 5432, name: pg, protocol: TCP}]}'),
  se('wild', '{hosts: ["*.example.org", "*.api.example.org"], ports: [{number: 443, name: tls, protocol: TLS}, {number: 80, name: http, protocol: HTTP}]}'),
), { workload: SHOP }), { namespace: 'shop' });

const host = (authority: string, port: number): string => index.byHost(authority, port)?.host ?? '-';
const dest = (address: string, port: number): string => index.byDestination(address, port)?.host ?? '-';

describe('ServiceIndex', () => {
  it('by original destination: exact addresses, then the longest CIDR block, on a port of the service', () => {
    const cases: [string, number, string][] = [
      ['10.0.0.10', 9080, 'reviews.shop.svc.cluster.local'],
      ['::ffff:10.0.0.10', 9080, 'reviews.shop.svc.cluster.local'],
      ['fd00::10', 9080, 'reviews.shop.svc.cluster.local'],
      ['fd00:0:0::0010', 9080, 'reviews.shop.svc.cluster.local'],
      ['10.0.0.10', 80, '-'],
      ['10.20.1.1', 5432, 'db.example.com'],
      ['10.20.30.41', 5432, 'db.example.com'],
      ['10.20.30.40', 5432, 'narrow.example.com'],
      ['10.21.0.1', 5432, '-'],
      ['2001:db8:ffff::1', 5432, 'db.example.com'],
      ['2001:db9::1', 5432, '-'],
      ['not-an-address', 5432, '-'],
    ];
    for (const [a, p, want] of cases) assert.equal(dest(a, p), want, `${a}:${p}`);
  });

  it('by Host: exact names, short Kubernetes forms from the client\'s namespace, addresses, the most specific wildcard', () => {
    const cases: [string, number, string][] = [
      ['reviews.shop.svc.cluster.local', 9080, 'reviews.shop.svc.cluster.local'],
      ['Reviews.Shop.svc.cluster.local.', 9080, 'reviews.shop.svc.cluster.local'],
      ['reviews.shop.svc.cluster.local:9080', 9080, 'reviews.shop.svc.cluster.local'],
      ['reviews.shop.svc.cluster.local:80', 9080, '-'],
      ['reviews.shop.svc.cluster.local', 80, '-'],
      ['reviews', 9080, 'reviews.shop.svc.cluster.local'],
      ['reviews.shop', 9080, 'reviews.shop.svc.cluster.local'],
      ['reviews.shop.svc', 9080, 'reviews.shop.svc.cluster.local'],
      ['ratings', 9080, '-'],
      ['ratings.other', 9080, 'ratings.other.svc.cluster.local'],
      ['10.0.0.10:9080', 9080, 'reviews.shop.svc.cluster.local'],
      ['[fd00::10]:9080', 9080, 'reviews.shop.svc.cluster.local'],
      ['a.example.org', 443, '*.example.org'],
      ['v1.api.example.org', 80, '*.api.example.org'],
      ['api.example.org', 80, '*.example.org'],
      ['example.org', 80, '-'],
      ['a.example.org', 8443, '-'],
      ['', 80, '-'],
      ['[broken', 80, '-'],
    ];
    for (const [a, p, want] of cases) assert.equal(host(a, p), want, `${a} on ${p}`);
  });

  it('an HTTP request: its Host first, else its original destination', () => {
    assert.equal(index.forRequest('reviews', '10.9.9.9', 9080)?.host, 'reviews.shop.svc.cluster.local');
    assert.equal(index.forRequest('unknown.example.com', '10.0.0.10', 9080)?.host, 'reviews.shop.svc.cluster.local');
    assert.equal(index.forRequest(undefined, '10.20.30.40', 5432)?.host, 'narrow.example.com');
    assert.equal(index.forRequest('unknown.example.com', '10.9.9.9', 9080), undefined, 'the original destination, as today');
  });

  it('an HTTP request: the kept last answer never answers another question (each part changed, then back)', () => {
    const asked: [string | undefined, string, number, string][] = [
      ['reviews', '10.9.9.9', 9080, 'reviews.shop.svc.cluster.local'],
      ['reviews', '10.9.9.9', 9080, 'reviews.shop.svc.cluster.local'],
      ['reviews', '10.9.9.9', 80, '-'],
      ['unknown.example.com', '10.9.9.9', 9080, '-'],
      ['unknown.example.com', '10.0.0.10', 9080, 'reviews.shop.svc.cluster.local'],
      ['unknown.example.com', '10.9.9.9', 9080, '-'],
      [undefined, '10.20.30.40', 5432, 'narrow.example.com'],
      ['', '10.20.30.40', 5432, 'narrow.example.com'],
      [undefined, '10.99.99.99', 5432, '-'],
      ['reviews', '10.9.9.9', 9080, 'reviews.shop.svc.cluster.local'],
    ];
    for (const [a, address, port, want] of asked) {
      assert.equal(index.forRequest(a, address, port)?.host ?? '-', want, `${a} to ${address}:${port}`);
    }
  });

  it('a connection\'s protocol, from its destination\'s ServiceEntry port: TCP family, HTTP family, or sniffed', () => {
    const idx = ServiceIndex.build(buildClusters(snapshotOf(
      se('mixed', `{hosts: [mixed.example.com], addresses: [10.0.0.1, "fd00::1", 10.30.0.0/16], resolution: STATIC, endpoints: [{address: 10.9.0.1}], ports: [
        {number: 3306, name: db, protocol: MYSQL}, {number: 443, name: tls, protocol: tls}, {number: 8443, name: https, protocol: HTTPS},
        {number: 6379, name: redis, protocol: REDIS}, {number: 27017, name: mongo, protocol: MONGO}, {number: 9000, name: tcp, protocol: TCP},
        {number: 80, name: http, protocol: HTTP}, {number: 81, name: h2, protocol: HTTP2}, {number: 7070, name: grpc, protocol: GRPC},
        {number: 7071, name: grpc-web, protocol: GRPC-WEB}, {number: 3128, name: proxy, protocol: HTTP_PROXY},
        {number: 8080, name: unset}, {number: 53, name: dns, protocol: UDP}]}`),
      // A narrower block that leaves the protocol unset wins for its addresses.
      se('narrow', '{hosts: [narrow.example.com], addresses: [10.30.1.0/24], ports: [{number: 9000, name: tcp}]}'),
    ), { workload: SHOP }), { namespace: 'shop' });
    const cases: [string, number, string | undefined][] = [
      ['10.0.0.1', 3306, 'tcp'], ['10.0.0.1', 443, 'tcp'], ['10.0.0.1', 8443, 'tcp'], ['10.0.0.1', 6379, 'tcp'], ['10.0.0.1', 27017, 'tcp'],
      ['10.0.0.1', 9000, 'tcp'], ['::ffff:10.0.0.1', 9000, 'tcp'], ['fd00:0::1', 9000, 'tcp'], ['10.30.7.7', 9000, 'tcp'],
      ['10.0.0.1', 80, 'http'], ['10.0.0.1', 81, 'http'], ['10.0.0.1', 7070, 'http'], ['10.0.0.1', 7071, 'http'], ['10.0.0.1', 3128, 'http'],
      ['10.0.0.1', 8080, undefined], // unset: sniffed
      ['10.0.0.1', 53, undefined], // UDP: not proxied, the connection is no service's
      ['10.30.1.5', 9000, undefined], // the narrower block's unset port
      ['10.0.0.2', 9000, undefined], // not an address of the entry
      ['10.9.0.1', 9000, undefined], // an endpoint of a service that has addresses: only its addresses count
      ['10.0.0.1', 1234, undefined], ['not-an-address', 9000, undefined],
    ];
    for (const [a, p, want] of cases) assert.equal(idx.protocolAt(a, p), want, `${a}:${p}`);
    assert.equal(idx.byDestination('10.0.0.1', 53), undefined, 'a UDP port is routed nowhere');
    assert.equal(idx.byHost('mixed.example.com', 53), undefined);
  });

  it('several services at one address: any unset protocol makes it sniffed, else TCP wins over HTTP (Istio\'s listeners)', () => {
    const at = (...ports: string[]): string | undefined => ServiceIndex.build(buildClusters(snapshotOf(
      ...ports.map((p, i) => se(`s${i}`, `{hosts: [s${i}.example.com], addresses: [10.0.0.1], ports: [{number: 5000, name: p${p === '' ? '' : `, protocol: ${p}`}}]}`)),
    ), { workload: SHOP }), { namespace: 'shop' }).protocolAt('10.0.0.1', 5000);
    assert.equal(at('TCP', 'TLS'), 'tcp');
    assert.equal(at('HTTP', 'GRPC'), 'http');
    assert.equal(at('HTTP', 'TCP'), 'tcp');
    assert.equal(at('TCP', ''), undefined);
    assert.equal(at('', 'HTTP'), undefined);
  });

  it('a service without addresses: its declared protocol applies to connections made to its endpoints, on its port', () => {
    const set = buildClusters(snapshotOf(
      se('db', '{hosts: [db.example.com], resolution: DNS, ports: [{number: 5432, name: pg, protocol: TCP}]}'),
      se('web', '{hosts: [web.example.com], resolution: STATIC, endpoints: [{address: "fd00::7"}], ports: [{number: 80, name: http, protocol: HTTP}]}'),
      se('plain', '{hosts: [plain.example.com], resolution: STATIC, endpoints: [{address: 10.8.0.1}], ports: [{number: 5432, name: pg}]}'),
    ), { workload: SHOP });
    const endpoints: Record<string, string[]> = {
      'db.example.com': ['203.0.113.5', '203.0.113.6'], 'web.example.com': ['fd00:0:0::7'], 'plain.example.com': ['10.8.0.1'],
    };
    const asked: string[] = [];
    const idx = ServiceIndex.build(set, {
      namespace: 'shop',
      endpointsOf: (s) => {
        asked.push(`${s.host}:${s.port.number}`);
        return endpoints[s.host]?.map((address) => ({ address }));
      },
    });
    assert.equal(idx.protocolAt('203.0.113.6', 5432), 'tcp', 'a resolved address of the TCP service');
    assert.equal(idx.protocolAt('::ffff:203.0.113.5', 5432), 'tcp');
    assert.equal(idx.protocolAt('fd00::7', 80), 'http', 'IPv6 endpoints compared in their canonical form');
    assert.equal(idx.protocolAt('203.0.113.5', 80), undefined, 'another port of the address');
    assert.equal(idx.protocolAt('10.8.0.1', 5432), undefined, 'an endpoint of a service of unset protocol: sniffed');
    assert.equal(idx.protocolAt('198.51.100.1', 5432), undefined, 'an address no endpoint has');
    asked.length = 0;
    assert.equal(idx.protocolAt('203.0.113.5', 8080), undefined);
    assert.deepEqual(asked, [], 'a port nothing declares is looked up no further');
    // Without endpointsOf, only addresses count.
    assert.equal(ServiceIndex.build(set, { namespace: 'shop' }).protocolAt('203.0.113.6', 5432), undefined);
  });

  it('helpers: host parts, short names, canonical addresses', () => {
    assert.deepEqual([hostPart('A.com:80', 80), hostPart('a.com:81', 80), hostPart('[::1]', 80), hostPart('[::1]:80', 80), hostPart('::1', 80)],
      ['a.com', undefined, '::1', '::1', '::1']);
    assert.deepEqual(hostNames('r.shop.svc.cluster.local', 'shop', 'cluster.local'), ['r.shop.svc.cluster.local', 'r.shop.svc', 'r.shop', 'r']);
    assert.deepEqual(hostNames('r.other.svc.cluster.local', 'shop', 'cluster.local'), ['r.other.svc.cluster.local', 'r.other.svc', 'r.other']);
    assert.deepEqual(hostNames('api.example.com', 'shop', 'cluster.local'), ['api.example.com']);
    assert.deepEqual(['::1', '2001:db8:0:0:1:0:0:1', '10.0.0.1', '::ffff:10.0.0.1', 'fe80::'].map((a) => canonicalIp(parseIp(a)!)),
      ['::1', '2001:db8::1:0:0:1', '10.0.0.1', '10.0.0.1', 'fe80::']);
  });
});
