// The gateway's tcp and tls routes as Istio builds its TCP and TLS PASSTHROUGH servers' chains:
// which VirtualServices (bound, hosts matching the server's, namespace-restricted server hosts),
// which matches (port and gateways only), the first tcp route, SNI chains with duplicates skipped,
// and the server name picking a chain (exact, longest suffix, `*`; none: no route).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { L4MatchAttributes, TcpRoute, TlsRoute, VirtualService } from '../../src/config/resources/types.js';
import { buildGatewayL4Table, serverKind, tlsRouteFor } from '../../src/routing/gateway-l4-table.js';
import { dest, gateway, meta, server } from './factories.js';

function l4vs(id: string, hosts: string[], gateways: string[], routes: { tcp?: TcpRoute[]; tls?: TlsRoute[] }): VirtualService {
  return { meta: meta('VirtualService', id), hosts, gateways, http: [], ...routes };
}
const tcp = (match: L4MatchAttributes[], host: string): TcpRoute => ({ match, route: [dest(host, 5432)] });
const tls = (sniHosts: string[], host: string, m: L4MatchAttributes = {}): TlsRoute => ({ match: [{ sniHosts, ...m }], route: [dest(host, 443)] });

const TCP = server(9000, ['*'], { protocol: 'TCP' });
const PASS = (hosts: string[], port = 8443): ReturnType<typeof server> => server(port, hosts, { protocol: 'TLS', tls: { mode: 'PASSTHROUGH' } });

describe('serverKind', () => {
  it('splits servers as Istio does: HTTP, HTTPS terminated, TCP (MONGO, MYSQL, REDIS), TLS / HTTPS PASSTHROUGH, the rest unserved', () => {
    assert.equal(serverKind(server(80, ['*'])), 'http');
    assert.equal(serverKind(server(443, ['*'], { protocol: 'HTTPS', tls: {} })), 'https');
    for (const p of ['TCP', 'MONGO', 'MYSQL', 'REDIS'] as const) assert.equal(serverKind(server(1, ['*'], { protocol: p })), 'tcp');
    assert.equal(serverKind(PASS(['*'])), 'tls-passthrough');
    assert.equal(serverKind(server(443, ['*'], { protocol: 'HTTPS', tls: { mode: 'PASSTHROUGH' } })), 'tls-passthrough');
    assert.equal(serverKind(server(443, ['*'], { protocol: 'TLS', tls: { mode: 'SIMPLE' } })), 'unserved');
    assert.equal(serverKind(server(443, ['*'], { protocol: 'HTTPS', tls: { mode: 'MUTUAL' } })), 'unserved');
  });
});

describe('buildGatewayL4Table: tcp', () => {
  it('the first route whose match holds, of the first VirtualService bound to the gateway with a host the server matches', () => {
    const t = buildGatewayL4Table([gateway('edge/gw', [TCP])], [
      l4vs('shop/unbound', ['db.example.com'], ['edge/other'], { tcp: [tcp([], 'a')] }),
      l4vs('shop/mesh', ['db.example.com'], ['mesh'], { tcp: [tcp([], 'b')] }),
      l4vs('shop/db', ['db.example.com'], ['edge/gw'], { tcp: [tcp([{ port: 9001 }], 'c'), tcp([{ port: 9000, gateways: ['edge/gw'] }], 'd'), tcp([], 'e')] }),
      l4vs('shop/later', ['db.example.com'], ['edge/gw'], { tcp: [tcp([], 'f')] }),
    ]);
    const r = t.ports.get(9000)?.tcp;
    assert.equal(r?.name, 'shop/db tcp[1]');
    assert.deepEqual(r?.destinations, [dest('d', 5432)]);
    assert.equal(r?.virtualService, 'shop/db');
    assert.deepEqual(t.warnings, []);
  });

  it('reads only port and gateways of a match (Istio\'s gateways): destinationSubnets, sourceLabels, sourceNamespace do not exclude it', () => {
    const t = buildGatewayL4Table([gateway('edge/gw', [TCP])], [
      l4vs('shop/db', ['*'], ['edge/gw'], { tcp: [tcp([{ destinationSubnets: ['192.0.2.1/32'], sourceLabels: { app: 'x' }, sourceNamespace: 'nowhere' }], 'a')] }),
    ]);
    assert.equal(t.ports.get(9000)?.tcp?.name, 'shop/db tcp[0]');
  });

  it('a match for another gateway or port does not hold; a route left with none is skipped; none at all: no route, a warning', () => {
    const t = buildGatewayL4Table([gateway('edge/gw', [TCP])], [
      l4vs('shop/db', ['*'], ['edge/gw', 'edge/gw2'], { tcp: [tcp([{ gateways: ['edge/gw2'] }, { port: 1 }], 'a')] }),
    ]);
    assert.equal(t.ports.get(9000)?.tcp, undefined);
    assert.match(t.warnings[0]!, /^gateway edge\/gw: server 0 on port 9000 \(TCP\): no tcp route .* closed \(NR\)$/);
  });

  it('a server host ns/host admits VirtualServices of ns only; hosts match when either pattern covers the other', () => {
    const gw = gateway('edge/gw', [server(9000, ['shop/*.example.com'], { protocol: 'TCP' })]);
    const other = l4vs('other/db', ['db.example.com'], ['edge/gw'], { tcp: [tcp([], 'a')] });
    const wide = l4vs('shop/db', ['*'], ['edge/gw'], { tcp: [tcp([], 'b')] });
    const elsewhere = l4vs('shop/x', ['db.example.org'], ['edge/gw'], { tcp: [tcp([], 'c')] });
    assert.equal(buildGatewayL4Table([gw], [other, elsewhere, wide]).ports.get(9000)?.tcp?.name, 'shop/db tcp[0]');
    assert.equal(buildGatewayL4Table([gw], [other, elsewhere]).ports.get(9000)?.tcp, undefined);
  });

  it('a bare gateway name is read in the VirtualService\'s namespace', () => {
    const t = buildGatewayL4Table([gateway('shop/gw', [TCP])], [l4vs('shop/db', ['*'], ['gw'], { tcp: [tcp([{ gateways: ['gw'] }], 'a')] })]);
    assert.equal(t.ports.get(9000)?.tcp?.name, 'shop/db tcp[0]');
  });
});

describe('buildGatewayL4Table: tls passthrough', () => {
  const vsA = l4vs('shop/a', ['*.example.com'], ['edge/gw'], {
    tls: [tls(['api.example.com'], 'api'), tls(['*.example.com'], 'wild'), tls(['api.example.com', 'x.example.com'], 'dup')],
  });
  const vsB = l4vs('shop/b', ['*'], ['edge/gw'], { tls: [tls(['*'], 'any'), tls(['other.example.org'], 'p9', { port: 9443 })] });

  it('one chain per holding match; a match naming a host already taken on the port is skipped whole, with a warning', () => {
    const t = buildGatewayL4Table([gateway('edge/gw', [PASS(['*'])])], [vsA, vsB]);
    const chains = t.ports.get(8443)!.tls;
    assert.deepEqual(chains.map((c) => [c.sniHosts.join(','), c.route.name, c.server]), [
      ['api.example.com', 'shop/a tls[0]', 'edge/gw#0'], ['*.example.com', 'shop/a tls[1]', 'edge/gw#0'], ['*', 'shop/b tls[0]', 'edge/gw#0'],
    ]);
    assert.equal(t.warnings.length, 1);
    assert.match(t.warnings[0]!, /VirtualService shop\/a spec\.tls\[2\]\.match\[0\] skipped: api\.example\.com already routed by shop\/a tls\[0\]/);
  });

  it('the server name picks: exact, then the longest *.suffix, then *, case-insensitively; no name: no route', () => {
    const port = buildGatewayL4Table([gateway('edge/gw', [PASS(['*'])])], [vsA, vsB]).ports.get(8443)!;
    assert.equal(tlsRouteFor(port, 'api.example.com')?.name, 'shop/a tls[0]');
    assert.equal(tlsRouteFor(port, 'API.Example.COM')?.name, 'shop/a tls[0]');
    assert.equal(tlsRouteFor(port, 'www.example.com')?.name, 'shop/a tls[1]');
    assert.equal(tlsRouteFor(port, 'example.com')?.name, 'shop/b tls[0]', '*.example.com does not cover example.com itself');
    assert.equal(tlsRouteFor(port, 'other.example.org')?.name, 'shop/b tls[0]', 'the 9443 match does not hold on 8443');
    assert.equal(tlsRouteFor(port, undefined), undefined);
  });

  it('without a * chain an unknown name has no route; the server\'s hosts choose the VirtualServices, not the names', () => {
    const port = buildGatewayL4Table([gateway('edge/gw', [PASS(['api.example.com'])])], [vsA, vsB]).ports.get(8443)!;
    // shop/a (*.example.com) matches the server host; shop/b (*) too: Istio compares hosts, and sniHosts decide per connection.
    assert.equal(tlsRouteFor(port, 'www.example.com')?.name, 'shop/a tls[1]');
    const narrow = buildGatewayL4Table([gateway('edge/gw', [PASS(['api.example.com'])])], [vsA]).ports.get(8443)!;
    assert.equal(tlsRouteFor(narrow, 'nothing.example.org'), undefined);
  });

  it('servers of one port share its chains; a TCP server\'s port has no tls chain and the reverse', () => {
    const t = buildGatewayL4Table([gateway('edge/gw', [PASS(['*']), PASS(['*'], 9443), TCP])], [vsB]);
    assert.deepEqual(t.ports.get(9443)!.tls.map((c) => c.route.name), ['shop/b tls[0]', 'shop/b tls[1]']);
    assert.equal(t.ports.get(9000)!.tls.length, 0);
    assert.equal(t.ports.get(8443)!.tcp, undefined);
  });
});
