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
