// The sidecar's tcp and tls routes: which routes a service port takes, which one a connection gets
// (most specific destination subnet, then the server name), and the weighted choice per connection.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Workload } from '../../src/config/resources/types.js';
import { parseIp } from '../../src/security/authz/cidr.js';
import { buildClusters, type ServiceSpec } from '../../src/traffic/clusters.js';
import { buildL4RouteTable, pickL4Destination, selectAddresslessTlsRoute, selectTcpRoute, selectTlsRoute, type L4RouteTable, type ServiceL4Routes } from '../../src/traffic/l4-routes.js';
import { dr, se, snapshotOf, vs, SHOP } from './resources.js';

const ENTRIES = [
  se('db', '{hosts: [db.example.com], addresses: [10.9.0.1], ports: [{number: 5432, name: pg, protocol: TCP}, {number: 80, name: web, protocol: HTTP}], resolution: STATIC, endpoints: [{address: 10.1.0.1, labels: {v: a}}, {address: 10.1.0.2, labels: {v: b}}]}'),
  se('tls', '{hosts: [api.example.com], addresses: [10.9.0.2], ports: [{number: 443, name: tls, protocol: TLS}, {number: 9000, name: any}], resolution: STATIC, endpoints: [{address: 10.2.0.1, labels: {v: a}}, {address: 10.2.0.2, labels: {v: b}}]}'),
  dr('db', '{host: db.example.com, subsets: [{name: a, labels: {v: a}}, {name: b, labels: {v: b}}]}'),
  dr('tls', '{host: api.example.com, subsets: [{name: a, labels: {v: a}}, {name: b, labels: {v: b}}]}'),
];

function table(vsDocs: string[], workload: Workload = SHOP): { t: L4RouteTable | undefined; of: (host: string, port: number) => ServiceL4Routes | undefined } {
  const snapshot = snapshotOf(...ENTRIES, ...vsDocs);
  const set = buildClusters(snapshot, { workload });
  const t = buildL4RouteTable(snapshot.virtualServices, set, { workload });
  const of = (host: string, port: number): ServiceL4Routes | undefined => {
    const s = set.services.find((x: ServiceSpec) => x.host === host && x.port.number === port);
    assert.ok(s, `${host}:${port}`);
    return t?.byService.get(s);
  };
  return { t, of };
}

const ip = (a: string): Uint8Array => parseIp(a)!;
const tcpOf = (r: ServiceL4Routes | undefined): Extract<ServiceL4Routes, { kind: 'tcp' }> => {
  assert.equal(r?.kind, 'tcp');
  return r as Extract<ServiceL4Routes, { kind: 'tcp' }>;
};
const tlsOf = (r: ServiceL4Routes | undefined): Extract<ServiceL4Routes, { kind: 'tls' }> => {
  assert.equal(r?.kind, 'tls');
  return r as Extract<ServiceL4Routes, { kind: 'tls' }>;
};
const clusterOf = (target: ReturnType<typeof pickL4Destination>): string => (target?.kind === 'cluster' ? target.cluster.name : `NC ${target?.name ?? '-'}`);

it('no VirtualService with tcp or tls routes: no table (the data path checks one flag)', () => {
  assert.equal(table([vs('web', '{hosts: [db.example.com], http: [{route: [{destination: {host: db.example.com}}]}]}')]).t, undefined);
});

it('tcp: the most specific destination subnet, then the first catch-all, else the service\'s own cluster', () => {
  const { of } = table([vs('db', `{hosts: [db.example.com], tcp: [
    {match: [{destinationSubnets: [10.0.0.0/8]}], route: [{destination: {host: db.example.com, subset: a}}]},
    {match: [{destinationSubnets: [10.9.0.0/16]}], route: [{destination: {host: db.example.com, subset: b}}]},
    {match: [{port: 5432}], route: [{destination: {host: db.example.com}}]},
    {route: [{destination: {host: db.example.com, subset: b}}]}]}`)]);
  const r = tcpOf(of('db.example.com', 5432));
  assert.equal(selectTcpRoute(r, ip('10.9.0.1'))?.name, 'shop/db tcp[1]', 'the /16 beats the /8, though listed later');
  assert.equal(selectTcpRoute(r, ip('10.1.2.3'))?.name, 'shop/db tcp[0]');
  assert.equal(selectTcpRoute(r, ip('192.0.2.1'))?.name, 'shop/db tcp[2]', 'the first route without subnets catches the rest; tcp[3] is never reached');
  assert.equal(clusterOf(pickL4Destination(selectTcpRoute(r, ip('10.9.0.1'))!, Math.random)), 'outbound|5432|b|db.example.com');
  assert.equal(clusterOf(pickL4Destination(selectTcpRoute(r, ip('192.0.2.1'))!, Math.random)), 'outbound|5432||db.example.com');
  // Only subnet routes: a destination none holds keeps the service's own cluster.
  const only = tcpOf(table([vs('db', '{hosts: [db.example.com], tcp: [{match: [{destinationSubnets: [10.0.0.0/8]}], route: [{destination: {host: db.example.com, subset: a}}]}]}')]).of('db.example.com', 5432));
  assert.equal(selectTcpRoute(only, ip('192.0.2.1')), undefined);
});

it('tcp: matches are judged for this workload and port at build time (sourceLabels, sourceNamespace, port, gateways)', () => {
  const spec = `{hosts: [db.example.com], gateways: [mesh], tcp: [
    {match: [{sourceLabels: {app: other}}], route: [{destination: {host: db.example.com, subset: a}}]},
    {match: [{sourceNamespace: elsewhere}], route: [{destination: {host: db.example.com, subset: a}}]},
    {match: [{port: 1234}], route: [{destination: {host: db.example.com, subset: a}}]},
    {match: [{sourceLabels: {app: client}, sourceNamespace: shop, port: 5432, gateways: [mesh]}], route: [{destination: {host: db.example.com, subset: b}}]}]}`;
  assert.equal(selectTcpRoute(tcpOf(table([vs('db', spec)]).of('db.example.com', 5432)), ip('10.9.0.1'))?.name, 'shop/db tcp[3]');
  // Another workload: only the labels route holds.
  const other = table([vs('db', spec)], { namespace: 'shop', labels: { app: 'other' } });
  assert.equal(selectTcpRoute(tcpOf(other.of('db.example.com', 5432)), ip('10.9.0.1'))?.name, 'shop/db tcp[0]');
});

it('tcp routes take no HTTP port, tls routes only TLS / HTTPS ports; a VirtualService whose host has no such port is warned about', () => {
  const { t, of } = table([
    vs('db', '{hosts: [db.example.com], tcp: [{route: [{destination: {host: db.example.com, subset: a}}]}]}'),
    vs('api', '{hosts: [api.example.com], tcp: [{route: [{destination: {host: api.example.com, subset: a}}]}]}'),
    vs('dbtls', '{hosts: [db.example.com], tls: [{match: [{sniHosts: [db.example.com]}], route: [{destination: {host: db.example.com}}]}]}'),
  ]);
  assert.equal(of('db.example.com', 80), undefined, 'HTTP port: its connections are HTTP (or pass through)');
  assert.equal(of('api.example.com', 443), undefined, 'a tcp route on a TLS port: Istio builds no chain for it');
  assert.equal(selectTcpRoute(tcpOf(of('api.example.com', 9000)), ip('10.9.0.2'))?.name, 'shop/api tcp[0]', 'a port of unset protocol carried as TCP takes it');
  assert.deepEqual(t?.warnings, [
    'VirtualService shop/dbtls spec.tls has no effect: no port of db.example.com takes tls routes (as in Istio, tls routes apply to ports declared TLS or HTTPS, tcp routes to the other ports carried as TCP: TCP, MONGO, MYSQL, REDIS, or unset)',
  ]);
});

it('tls: the server name picks the route (exact before the longest wildcard), within the most specific destination subnet; nothing matching is no route', () => {
  const { of } = table([vs('api', `{hosts: ["*.example.com"], tls: [
    {match: [{sniHosts: ["*.example.com"]}], route: [{destination: {host: api.example.com, subset: a}}]},
    {match: [{sniHosts: [api.example.com]}, {sniHosts: ["*.v2.example.com"]}], route: [{destination: {host: api.example.com, subset: b}}]},
    {match: [{sniHosts: [api.example.com]}], route: [{destination: {host: api.example.com}}]},
    {match: [{sniHosts: [sub.example.com], destinationSubnets: [10.9.0.0/24]}], route: [{destination: {host: api.example.com}}]}]}`)]);
  const r = tlsOf(of('api.example.com', 443));
  const at = ip('10.9.0.2');
  assert.equal(selectTlsRoute(r, ip('192.0.2.1'), 'api.example.com')?.name, 'shop/api tls[1]', 'exact beats *.example.com; tls[2] repeats tls[1]\'s match: never reached');
  assert.equal(selectTlsRoute(r, ip('192.0.2.1'), 'API.Example.COM')?.name, 'shop/api tls[1]', 'server names compare case-insensitively');
  assert.equal(selectTlsRoute(r, ip('192.0.2.1'), 'x.v2.example.com')?.name, 'shop/api tls[1]', 'the longer wildcard');
  assert.equal(selectTlsRoute(r, ip('192.0.2.1'), 'other.example.com')?.name, 'shop/api tls[0]');
  assert.equal(selectTlsRoute(r, ip('192.0.2.1'), 'example.org'), undefined);
  assert.equal(selectTlsRoute(r, ip('192.0.2.1'), undefined), undefined, 'no SNI: no route');
  // Within 10.9.0.0/24 only the subnet's entry counts (Envoy does not fall back to the broader chains).
  assert.equal(selectTlsRoute(r, at, 'sub.example.com')?.name, 'shop/api tls[3]');
  assert.equal(selectTlsRoute(r, at, 'api.example.com'), undefined);
});

it('destinations: resolved with the table (a missing subset is NC, warned); the weighted choice is per connection', () => {
  const { t, of } = table([vs('db', '{hosts: [db.example.com], tcp: [{route: [{destination: {host: db.example.com, subset: a}, weight: 75}, {destination: {host: db.example.com, subset: zz}, weight: 25}]}]}')]);
  const route = selectTcpRoute(tcpOf(of('db.example.com', 5432)), ip('10.9.0.1'))!;
  assert.equal(clusterOf(pickL4Destination(route, () => 0.74)), 'outbound|5432|a|db.example.com');
  assert.equal(clusterOf(pickL4Destination(route, () => 0.75)), 'NC outbound|5432|zz|db.example.com');
  assert.match(t!.warnings[0]!, /^VirtualService shop\/db spec\.tcp\[0\]\.route\[1\] routes to outbound\|5432\|zz\|db\.example\.com, which no cluster serves/);
  // A seeded sequence: the choices follow the weights connection by connection.
  let seed = 7;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const counts = new Map<string, number>();
  for (let i = 0; i < 4000; i++) {
    const c = clusterOf(pickL4Destination(route, random));
    counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  // Binomial(4000, 0.75): sd ≈ 27; ±150 is 5.5 sd (false failure < 1e-7, and the seed is fixed anyway).
  assert.ok(Math.abs((counts.get('outbound|5432|a|db.example.com') ?? 0) - 3000) < 150, JSON.stringify([...counts]));
});

it('tls on entries without addresses: listed by port, the server name picks among them (a name none routes: undefined)', () => {
  const snapshot = snapshotOf(...ENTRIES,
    se('ext', '{hosts: [ext.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: STATIC, endpoints: [{address: 10.3.0.1}]}'),
    se('ext2', '{hosts: [two.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: STATIC, endpoints: [{address: 10.3.0.2}]}'),
    vs('ext', '{hosts: [ext.example.com], tls: [{match: [{sniHosts: [ext.example.com]}], route: [{destination: {host: ext.example.com}}]}]}'),
    vs('ext2', '{hosts: [two.example.com], tls: [{match: [{sniHosts: [two.example.com]}], route: [{destination: {host: two.example.com}}]}]}'),
    vs('api', '{hosts: [api.example.com], tls: [{match: [{sniHosts: [api.example.com]}], route: [{destination: {host: api.example.com}}]}]}'));
  const set = buildClusters(snapshot, { workload: SHOP });
  const t = buildL4RouteTable(snapshot.virtualServices, set, { workload: SHOP })!;
  assert.deepEqual(t.addressless.get(443)?.map((s) => s.host), ['ext.example.com', 'two.example.com'], 'api has addresses: not listed');
  assert.equal(selectAddresslessTlsRoute(t, 443, ip('10.3.0.1'), 'two.example.com')?.name, 'shop/ext2 tls[0]');
  assert.equal(selectAddresslessTlsRoute(t, 443, ip('10.3.0.1'), 'ext.example.com')?.name, 'shop/ext tls[0]');
  assert.equal(selectAddresslessTlsRoute(t, 443, ip('10.3.0.1'), 'api.example.com'), undefined);
  assert.equal(selectAddresslessTlsRoute(t, 8443, ip('10.3.0.1'), 'ext.example.com'), undefined);
});
