import assert from 'node:assert/strict';
import { it } from 'node:test';
import { connectionNames, expandShortName, hostMatchRank, normalizeHost, serviceNamespaceOf } from '../../../src/security/mtls/host-names.js';

it('normalizes names as a Host header or a DNS answer writes them', () => {
  const cases: [string, string][] = [['A.Example.COM.', 'a.example.com'], ['api.example.com:8443', 'api.example.com'], ['[fd00::1]', 'fd00::1'], ['fd00::1', 'fd00::1'], [' x ', 'x']];
  for (const [raw, want] of cases) assert.equal(normalizeHost(raw), want, raw);
});

it('expands Kubernetes short forms from a namespace, and nothing else', () => {
  const cases: [string, string][] = [
    ['reviews', 'reviews.shop.svc.cluster.local'], ['reviews.prod', 'reviews.prod.svc.cluster.local'], ['reviews.prod.svc', 'reviews.prod.svc.cluster.local'],
    ['reviews.prod.svc.cluster.local', 'reviews.prod.svc.cluster.local'], ['api.example.com', 'api.example.com'], ['10.0.0.1', '10.0.0.1'], ['*.local', '*.local'],
  ];
  for (const [name, want] of cases) assert.equal(expandShortName(name, 'shop', 'cluster.local'), want, name);
  assert.deepEqual(connectionNames(['reviews', 'example.com', 'REVIEWS'], 'shop', 'cluster.local'),
    ['reviews.shop.svc.cluster.local', 'reviews', 'example.com', 'example.com.svc.cluster.local']);
  assert.equal(serviceNamespaceOf('reviews.prod.svc.cluster.local', 'cluster.local'), 'prod');
  assert.equal(serviceNamespaceOf('a.b.prod.svc.cluster.local', 'cluster.local'), undefined);
});

it('ranks host matches: exact, then the longer wildcard; * never matches an address', () => {
  const cases: [string, string, boolean][] = [
    ['a.example.com', 'a.example.com', true], ['*.example.com', 'a.example.com', true], ['*.example.com', 'a.b.example.com', true],
    ['*.example.com', 'example.com', false], ['*', 'anything.local', true], ['*', '10.0.0.1', false], ['*.local', 'a.example.com', false],
  ];
  for (const [pattern, name, match] of cases) assert.equal(hostMatchRank(pattern, name) !== undefined, match, `${pattern} ~ ${name}`);
  assert.ok(hostMatchRank('a.example.com', 'a.example.com')! > hostMatchRank('*.example.com', 'a.example.com')!);
  assert.ok(hostMatchRank('*.a.example.com', 'x.a.example.com')! > hostMatchRank('*.example.com', 'x.a.example.com')!);
  assert.ok(hostMatchRank('*.example.com', 'a.example.com')! > hostMatchRank('*', 'a.example.com')!);
});
