import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { VirtualService } from '../../src/config/resources/types.js';
import { buildRouteTable, type RouteTable } from '../../src/routing/gateway-table.js';
import { gateway, prefix, rule, server, virtualService } from './factories.js';

/** domain → VirtualServices serving it on `port`. */
function domains(table: RouteTable, port = 80): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const vh of table.ports.get(port)?.virtualHosts ?? []) out[vh.domain] = [...vh.virtualServices];
  return out;
}

describe('gateway binding', () => {
  const gw = gateway('mesh-system/ingress', [server(80, ['*'])]);
  const cases: { name: string; vs: VirtualService; bound: boolean }[] = [
    { name: 'ns/name', vs: virtualService('default/a', ['*'], ['mesh-system/ingress'], [rule()]), bound: true },
    { name: 'bare name in the same namespace', vs: virtualService('mesh-system/a', ['*'], ['ingress'], [rule()]), bound: true },
    { name: 'bare name resolved in the VirtualService namespace (another one)', vs: virtualService('default/a', ['*'], ['ingress'], [rule()]), bound: false },
    { name: 'wrong namespace', vs: virtualService('default/a', ['*'], ['default/ingress'], [rule()]), bound: false },
    { name: 'mesh only (sidecars)', vs: virtualService('default/a', ['*'], ['mesh'], [rule()]), bound: false },
    { name: 'mesh and the gateway', vs: virtualService('default/a', ['*'], ['mesh', 'mesh-system/ingress'], [rule()]), bound: true },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.bound ? 'bound' : 'not bound'}`, () => {
      const t = buildRouteTable([gw], [c.vs]);
      assert.deepEqual(domains(t), c.bound ? { '*': [`${c.vs.meta.namespace}/${c.vs.meta.name}`] } : {});
    });
  }
});

describe('server hosts', () => {
  it('intersects VirtualService hosts with the server hosts', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/gw', [server(80, ['foo.com', '*.bar.com'])])],
      [
        virtualService('default/all', ['*'], ['mesh-system/gw'], [rule()]),
        virtualService('default/one', ['a.bar.com'], ['mesh-system/gw'], [rule()]),
        virtualService('default/other', ['baz.com'], ['mesh-system/gw'], [rule()]),
      ],
    );
    assert.deepEqual(domains(t), { 'foo.com': ['default/all'], '*.bar.com': ['default/all'], 'a.bar.com': ['default/one'] });
  });

  it('honours the namespace of a server host', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/gw', [server(80, ['team-a/a.com', '*/b.com'])])],
      [
        virtualService('team-a/x', ['a.com', 'b.com'], ['mesh-system/gw'], [rule()]),
        virtualService('team-b/y', ['a.com', 'b.com'], ['mesh-system/gw'], [rule()]),
      ],
    );
    assert.deepEqual(domains(t), { 'a.com': ['team-a/x'], 'b.com': ['team-a/x', 'team-b/y'] });
  });
});

describe('ports and servers', () => {
  it('keeps the first protocol of a port and warns about a conflicting server', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/a', [server(80, ['*'])]), gateway('mesh-system/b', [server(80, ['*'], { protocol: 'TCP' })])],
      [],
    );
    assert.equal(t.ports.get(80)?.protocol, 'HTTP');
    assert.equal(t.ports.get(80)?.servers.length, 1);
    assert.equal(t.warnings.length, 1);
    assert.match(t.warnings[0]!, /port 80: gateway mesh-system\/b server 0 declares TCP, but mesh-system\/a declared HTTP first/);
  });

  it('lets HTTP flavours share a port', () => {
    const t = buildRouteTable([gateway('mesh-system/a', [server(80, ['a.com']), server(80, ['b.com'], { protocol: 'HTTP2' })])], []);
    assert.equal(t.ports.get(80)?.servers.length, 2);
    assert.deepEqual(t.warnings, []);
  });

  it('lists servers per port with their own virtual hosts', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/gw', [server(80, ['a.com']), server(443, ['b.com'], { protocol: 'HTTPS', tls: { credentialName: 'c' } })])],
      [virtualService('default/v', ['*'], ['mesh-system/gw'], [rule()])],
    );
    assert.deepEqual([...t.ports.keys()], [80, 443]);
    const s443 = t.ports.get(443)!.servers[0]!;
    assert.equal(s443.gateway, 'mesh-system/gw');
    assert.equal(s443.index, 1);
    assert.equal(s443.tls?.mode, 'SIMPLE');
    assert.deepEqual(s443.virtualHosts.map((v) => v.domain), ['b.com']);
  });

  it('gives TCP and TLS passthrough servers no virtual hosts', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/gw', [server(9000, ['*'], { protocol: 'TCP' }), server(443, ['*'], { protocol: 'HTTPS', tls: { mode: 'PASSTHROUGH' } })])],
      [virtualService('default/v', ['*'], ['mesh-system/gw'], [rule()])],
    );
    assert.deepEqual(domains(t, 9000), {});
    assert.deepEqual(domains(t, 443), {});
  });
});

describe('rules per gateway and port', () => {
  it('concatenates the rules of VirtualServices on one host in input order', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/gw', [server(80, ['*'])])],
      [
        virtualService('default/first', ['foo.com'], ['mesh-system/gw'], [rule({ match: [{ uri: prefix('/a') }] }), rule({ match: [{ uri: prefix('/b') }] })]),
        virtualService('default/second', ['foo.com'], ['mesh-system/gw'], [rule()]),
      ],
    );
    const vh = t.ports.get(80)!.virtualHosts[0]!;
    assert.deepEqual(vh.rules.map((r) => `${r.virtualService}#${r.ruleIndex}`), ['default/first#0', 'default/first#1', 'default/second#0']);
  });

  it('drops match entries meant for other gateways or ports, and rules left with none', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/gw', [server(80, ['*'])])],
      [virtualService('default/v', ['*'], ['mesh-system/gw', 'mesh-system/other'], [
        rule({ match: [{ gateways: ['mesh-system/other'] }] }),
        rule({ match: [{ gateways: ['mesh-system/other'] }, { port: 80, uri: prefix('/x') }, { port: 8080 }] }),
        rule({ match: [{ gateways: ['gw'] }] }), // bare: in the VirtualService's namespace (default), not ours
        rule(),
      ])],
    );
    const rules = t.ports.get(80)!.virtualHosts[0]!.rules;
    assert.deepEqual(rules.map((r) => [r.ruleIndex, r.matches?.map((m) => m.index)]), [[1, [1]], [3, undefined]]);
  });

  it('adds a VirtualService once when two servers on the port bring it in', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/a', [server(80, ['*'])]), gateway('mesh-system/b', [server(80, ['*'])])],
      [virtualService('default/v', ['*'], ['mesh-system/a', 'mesh-system/b'], [rule()])],
    );
    const port = t.ports.get(80)!;
    assert.equal(port.virtualHosts[0]!.rules.length, 1);
    assert.equal(port.virtualHosts[0]!.rules[0]!.gateway, 'mesh-system/a');
    assert.equal(port.servers[1]!.virtualHosts[0]!.rules[0]!.gateway, 'mesh-system/b');
  });
});
