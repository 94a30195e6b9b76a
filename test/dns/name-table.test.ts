// The name table: which names are answered locally, with what, and which are left to upstream.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ServiceEntry } from '../../src/config/resources/types.js';
import { alternateNames, NameTable, parseProxyDomain, type LocalAnswer } from '../../src/dns/name-table.js';
import { QTYPE } from '../../src/dns/wire.js';

function se(hosts: string[], addresses: string[]): ServiceEntry {
  return {
    meta: { kind: 'ServiceEntry', apiVersion: 'networking.mesh.io/v1', name: 'x', namespace: 'ns1', origin: { file: 'f.yaml', index: 0 } },
    hosts, addresses, ports: [], endpoints: [], subjectAltNames: [],
  };
}

const SEARCH = ['ns1.svc.cluster.local', 'svc.cluster.local', 'cluster.local'];
const table = NameTable.build([
  se(['reviews.ns1.svc.cluster.local'], ['10.0.0.1', '2001:db8::1']),
  se(['ratings.ns2.svc.cluster.local'], ['10.0.0.2']),
  se(['api.example.com', 'API2.Example.com.'], ['192.0.2.10']),
  se(['api.example.com'], ['192.0.2.11', '192.0.2.10']),
  se(['*.wild.example.com'], ['192.0.2.20']),
  se(['*.deep.wild.example.com'], ['192.0.2.21']),
  se(['noaddr.example.com'], []),
  se(['cidr.example.com'], ['10.9.0.0/16']),
  se(['other.ns1.svc.other.domain'], ['10.0.0.3']),
  se(['*', '192.0.2.99'], ['10.0.0.4']),
], { domain: 'ns1.svc.cluster.local', searchDomains: SEARCH });

const A = (...a: string[]) => a.map((address) => ({ type: 'A' as const, address }));
const AAAA = (...a: string[]) => a.map((address) => ({ type: 'AAAA' as const, address }));

describe('name table lookups', () => {
  const cases: { name: string; q: string; type?: number; want: LocalAnswer | undefined }[] = [
    { name: 'FQDN, A', q: 'reviews.ns1.svc.cluster.local', want: { rcode: 'NOERROR', records: A('10.0.0.1') } },
    { name: 'FQDN, AAAA', q: 'reviews.ns1.svc.cluster.local', type: QTYPE.AAAA, want: { rcode: 'NOERROR', records: AAAA('2001:db8::1') } },
    { name: 'FQDN, ANY: both families', q: 'reviews.ns1.svc.cluster.local', type: QTYPE.ANY, want: { rcode: 'NOERROR', records: [...A('10.0.0.1'), ...AAAA('2001:db8::1')] } },
    { name: 'short name, same namespace', q: 'reviews', want: { rcode: 'NOERROR', records: A('10.0.0.1') } },
    { name: 'name.ns', q: 'reviews.ns1', want: { rcode: 'NOERROR', records: A('10.0.0.1') } },
    { name: 'name.ns.svc', q: 'reviews.ns1.svc', want: { rcode: 'NOERROR', records: A('10.0.0.1') } },
    { name: 'other namespace: name.ns', q: 'ratings.ns2', want: { rcode: 'NOERROR', records: A('10.0.0.2') } },
    { name: 'other namespace: no bare short name', q: 'ratings', want: undefined },
    { name: 'other cluster domain: FQDN only', q: 'other.ns1.svc.other.domain', want: { rcode: 'NOERROR', records: A('10.0.0.3') } },
    { name: 'other cluster domain: no short name', q: 'other.ns1', want: undefined },
    { name: 'hosts of several entries merge, duplicates once', q: 'api.example.com', want: { rcode: 'NOERROR', records: A('192.0.2.10', '192.0.2.11') } },
    { name: 'host written upper-case with a trailing dot', q: 'api2.example.com', want: { rcode: 'NOERROR', records: A('192.0.2.10') } },
    { name: 'known name, type it has none of: NOERROR, empty', q: 'api.example.com', type: QTYPE.AAAA, want: { rcode: 'NOERROR', records: [] } },
    { name: 'known name, MX: NOERROR, empty', q: 'api.example.com', type: 15, want: { rcode: 'NOERROR', records: [] } },
    { name: 'wildcard', q: 'a.wild.example.com', want: { rcode: 'NOERROR', records: A('192.0.2.20') } },
    { name: 'most specific wildcard', q: 'a.deep.wild.example.com', want: { rcode: 'NOERROR', records: A('192.0.2.21') } },
    { name: 'the wildcard\'s own suffix is not covered', q: 'wild.example.com', want: undefined },
    { name: 'first search domain: CNAME to the name', q: 'api.example.com.ns1.svc.cluster.local', want: { rcode: 'NOERROR', cname: 'api.example.com', records: A('192.0.2.10', '192.0.2.11') } },
    { name: 'first search domain, CNAME asked', q: 'api.example.com.ns1.svc.cluster.local', type: QTYPE.CNAME, want: { rcode: 'NOERROR', cname: 'api.example.com', records: [] } },
    { name: 'first search domain after a wildcard name', q: 'x.wild.example.com.ns1.svc.cluster.local', want: { rcode: 'NOERROR', cname: 'x.wild.example.com', records: A('192.0.2.20') } },
    { name: 'later search domain: NXDOMAIN', q: 'api.example.com.svc.cluster.local', want: { rcode: 'NXDOMAIN', records: [] } },
    { name: 'last search domain: NXDOMAIN', q: 'api.example.com.cluster.local', want: { rcode: 'NXDOMAIN', records: [] } },
    { name: 'later search domain after a single-label name: forwarded', q: 'reviews.cluster.local', want: undefined },
    { name: 'name.ns + a later search domain is the FQDN itself', q: 'reviews.ns1.svc.cluster.local', want: { rcode: 'NOERROR', records: A('10.0.0.1') } },
    { name: 'unknown name: forwarded', q: 'unknown.example.org', want: undefined },
    { name: 'unknown name under the proxy domain: forwarded (a Service the table does not hold)', q: 'details.ns1.svc.cluster.local', want: undefined },
    { name: 'sub-name of a host: forwarded', q: 'x.api.example.com', want: undefined },
    { name: 'a host without addresses is not in the table', q: 'noaddr.example.com', want: undefined },
    { name: 'a CIDR is not an address to answer with', q: 'cidr.example.com', want: undefined },
    { name: 'host `*` is ignored', q: 'anything', want: undefined },
    { name: 'an IP host is ignored', q: '192.0.2.99', want: undefined },
    { name: 'the root', q: '', want: undefined },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(table.lookup(c.q, c.type ?? QTYPE.A), c.want);
    });
  }

  it('an empty table answers nothing', () => {
    assert.equal(NameTable.empty().lookup('reviews', QTYPE.A), undefined);
    assert.equal(NameTable.build([], { domain: 'ns1.svc.cluster.local', searchDomains: SEARCH }).size, 0);
  });

  it('lists its names', () => {
    assert.ok(table.names().includes('reviews'));
    assert.ok(table.names().includes('*.wild.example.com'));
  });
});

describe('alternate names and the proxy domain', () => {
  const cases: { host: string; domain: string; want: string[] }[] = [
    { host: 'r.ns1.svc.cluster.local', domain: 'ns1.svc.cluster.local', want: ['r.ns1.svc.cluster.local', 'r.ns1.svc', 'r.ns1', 'r'] },
    { host: 'r.ns2.svc.cluster.local', domain: 'ns1.svc.cluster.local', want: ['r.ns2.svc.cluster.local', 'r.ns2.svc', 'r.ns2'] },
    { host: 'r.ns2.svc.corp.local', domain: 'ns1.svc.corp.local', want: ['r.ns2.svc.corp.local', 'r.ns2.svc', 'r.ns2'] },
    { host: 'a.r.ns1.svc.cluster.local', domain: 'ns1.svc.cluster.local', want: ['a.r.ns1.svc.cluster.local'] },
    { host: 'r.ns1.svc.cluster.local', domain: '.svc.cluster.local', want: ['r.ns1.svc.cluster.local'] },
    { host: 'r.ns1.svc.cluster.local', domain: 'example.com', want: ['r.ns1.svc.cluster.local'] },
    { host: 'api.example.com', domain: 'ns1.svc.cluster.local', want: ['api.example.com'] },
  ];
  for (const c of cases) {
    it(`${c.host} with --domain ${c.domain || '(empty)'}`, () => assert.deepEqual(alternateNames(c.host, c.domain), c.want));
  }

  it('parses the proxy domain', () => {
    assert.deepEqual(parseProxyDomain('ns1.svc.cluster.local'), { namespace: 'ns1', clusterDomain: 'cluster.local' });
    assert.deepEqual(parseProxyDomain('NS1.svc.Cluster.Local.'), { namespace: 'ns1', clusterDomain: 'cluster.local' });
    assert.equal(parseProxyDomain('.svc.cluster.local'), undefined);
    assert.equal(parseProxyDomain('ns1.svc'), undefined);
  });
});
