import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HttpRoute, VirtualService } from '../../src/config/resources/types.js';
import { buildMeshRouteTable, type MeshPortRoutes, type MeshRouteTable } from '../../src/routing/mesh-table.js';
import { hostNames } from '../../src/traffic/service-index.js';
import { dest, prefix, rule, virtualService } from './factories.js';

const REVIEWS = 'reviews.default.svc.cluster.local';
const RATINGS = 'ratings.default.svc.cluster.local';

/** A mesh VirtualService (meshVirtualServices' output shape). */
const meshVs = (id: string, hosts: string[], http: HttpRoute[]): VirtualService => virtualService(id, hosts, ['mesh'], http);

/** host name → `vs@domain` of the virtual host it finds (the name as looked up). */
function lookups(routes: MeshPortRoutes, names: string[]): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const n of names) {
    const vh = routes.domains.lookup(n);
    out[n] = vh && `${vh.virtualService}@${vh.domain}`;
  }
  return out;
}

/** `port: vs@domain ...` for every port table. */
function layout(t: MeshRouteTable): Record<string, string[]> {
  const out: Record<string, string[]> = { other: t.otherPorts.virtualHosts.map((v) => `${v.virtualService}@${v.domain}`) };
  for (const [port, r] of t.ports) out[port] = r.virtualHosts.map((v) => `${v.virtualService}@${v.domain}`);
  return out;
}

describe('mesh table: names of a virtual host', () => {
  const inDefault = (h: string): readonly string[] => hostNames(h, 'default', 'cluster.local');
  const cases: { name: string; hostNames?: (h: string) => readonly string[]; found: Record<string, string | undefined> }[] = [
    {
      name: 'without hostNames: the host as given only',
      found: { [REVIEWS]: `default/reviews@${REVIEWS}`, reviews: undefined, 'reviews.default': undefined },
    },
    {
      name: 'with the service index names (client in the same namespace): the short forms too',
      hostNames: inDefault,
      found: {
        [REVIEWS]: `default/reviews@${REVIEWS}`, reviews: `default/reviews@${REVIEWS}`, 'reviews.default': `default/reviews@${REVIEWS}`,
        'reviews.default.svc': `default/reviews@${REVIEWS}`, 'reviews.other': undefined, 'reviews.default.svc.cluster': undefined,
      },
    },
    {
      name: 'from another namespace: no bare short name',
      hostNames: (h) => hostNames(h, 'other', 'cluster.local'),
      found: { reviews: undefined, 'reviews.default': `default/reviews@${REVIEWS}` },
    },
    {
      name: 'addresses the caller lists (IPv6 in brackets, as hostWithoutPort leaves them)',
      hostNames: (h) => (h === REVIEWS ? [h, '10.0.0.5', '[fd00::5]'] : [h]),
      found: { '10.0.0.5': `default/reviews@${REVIEWS}`, '[fd00::5]': `default/reviews@${REVIEWS}`, '10.0.0.6': undefined },
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = buildMeshRouteTable([meshVs('default/reviews', [REVIEWS], [rule()])], c.hostNames ? { hostNames: c.hostNames } : {});
      assert.deepEqual(lookups(t.otherPorts, Object.keys(c.found)), c.found);
    });
  }

  it('a host some VirtualService names beats another one\'s short form, whatever the order', () => {
    const t = buildMeshRouteTable(
      [meshVs('default/reviews', [REVIEWS], [rule()]), meshVs('default/literal', ['reviews.default'], [rule()])],
      { hostNames: inDefault },
    );
    assert.deepEqual(lookups(t.otherPorts, ['reviews.default', 'reviews']), {
      'reviews.default': 'default/literal@reviews.default', reviews: `default/reviews@${REVIEWS}`,
    });
    assert.deepEqual(t.warnings, []);
  });
});

describe('mesh table: several VirtualServices for one host (Istio: the oldest routes it, no merge)', () => {
  const cases: { name: string; vss: VirtualService[]; want: Record<string, string[]>; warnings: RegExp[] }[] = [
    {
      name: 'the first in file order routes the host, the later one is reported',
      vss: [meshVs('default/a', [REVIEWS], [rule()]), meshVs('team/b', [REVIEWS], [rule()])],
      want: { other: [`default/a@${REVIEWS}`] },
      warnings: [/^VirtualService team\/b: host reviews\.default\.svc\.cluster\.local is already routed by default\/a \(earlier in the files\); sidecars do not merge VirtualServices/],
    },
    {
      name: 'the later one keeps its other hosts',
      vss: [meshVs('default/a', [REVIEWS], [rule()]), meshVs('team/b', [REVIEWS, RATINGS], [rule()])],
      want: { other: [`default/a@${REVIEWS}`, `team/b@${RATINGS}`] },
      warnings: [/team\/b: host reviews/],
    },
    {
      name: 'the same host twice in one VirtualService is no conflict',
      vss: [meshVs('default/a', [REVIEWS, REVIEWS], [rule()])],
      want: { other: [`default/a@${REVIEWS}`] },
      warnings: [],
    },
    {
      name: 'a wildcard and an exact host are different domains (the exact one wins its name at lookup)',
      vss: [meshVs('default/wild', ['*.default.svc.cluster.local'], [rule()]), meshVs('default/a', [REVIEWS], [rule()])],
      want: { other: ['default/wild@*.default.svc.cluster.local', `default/a@${REVIEWS}`] },
      warnings: [],
    },
    {
      name: 'on a port where the first has no rule, the later one routes the host',
      vss: [
        meshVs('default/a', [REVIEWS], [rule({ match: [{ port: 9080 }] })]),
        meshVs('default/b', [REVIEWS], [rule()]),
      ],
      want: { other: [`default/b@${REVIEWS}`], 9080: [`default/a@${REVIEWS}`] },
      warnings: [/^VirtualService default\/b: host reviews\.default\.svc\.cluster\.local is already routed by default\/a on port 9080/],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = buildMeshRouteTable(c.vss);
      assert.deepEqual(layout(t), c.want);
      assert.equal(t.warnings.length, c.warnings.length, t.warnings.join('\n'));
      c.warnings.forEach((w, i) => assert.match(t.warnings[i]!, w));
    });
  }
});

describe('mesh table: destination ports', () => {
  it('gives every port a match entry names its own table, and the others one table', () => {
    const t = buildMeshRouteTable([
      meshVs('default/reviews', [REVIEWS], [
        rule({ match: [{ port: 9080, uri: prefix('/a') }], route: [dest('v1')] }),
        rule({ match: [{ port: 9090 }, { uri: prefix('/b') }], route: [dest('v2')] }),
        rule({ route: [dest('v3')] }),
      ]),
      meshVs('default/ratings', [RATINGS], [rule()]),
    ]);
    assert.deepEqual([...t.ports.keys()], [9080, 9090]);
    const rules = (r: MeshPortRoutes | undefined): string[] => r!.domains.lookup(REVIEWS)!.rules.map((x) => `${x.ruleIndex}:${x.matches?.map((m) => m.index).join(',') ?? '*'}`);
    assert.deepEqual(rules(t.ports.get(9080)), ['0:0', '1:1', '2:*']);
    assert.deepEqual(rules(t.ports.get(9090)), ['1:0,1', '2:*']);
    assert.deepEqual(rules(t.otherPorts), ['1:1', '2:*']);
  });

  it('shares the virtual hosts (and their decisions) of a VirtualService that names no port', () => {
    const t = buildMeshRouteTable([
      meshVs('default/reviews', [REVIEWS], [rule({ match: [{ port: 9080 }] }), rule()]),
      meshVs('default/ratings', [RATINGS], [rule()]),
    ]);
    const ratings = t.otherPorts.domains.lookup(RATINGS);
    assert.ok(ratings && Object.isFrozen(ratings) && Object.isFrozen(ratings.noRoute));
    assert.equal(t.ports.get(9080)!.domains.lookup(RATINGS), ratings);
    assert.notEqual(t.ports.get(9080)!.domains.lookup(REVIEWS), t.otherPorts.domains.lookup(REVIEWS));
  });

  it('leaves a host to its default route on a port where the VirtualService has no rule', () => {
    const t = buildMeshRouteTable([meshVs('default/reviews', [REVIEWS], [rule({ match: [{ port: 9080 }] })])]);
    assert.equal(t.otherPorts.domains.lookup(REVIEWS), undefined);
    assert.equal(t.ports.get(9080)!.domains.lookup(REVIEWS)?.virtualService, 'default/reviews');
  });
});

describe('mesh table: only what is bound to the mesh', () => {
  it('skips a VirtualService for gateways only, and entries bound to other gateways', () => {
    const t = buildMeshRouteTable([
      virtualService('default/gw', [RATINGS], ['mesh-system/ingress'], [rule()]),
      meshVs('default/reviews', [REVIEWS], [
        rule({ match: [{ gateways: ['mesh-system/ingress'] }] }),
        rule({ match: [{ gateways: ['mesh', 'mesh-system/ingress'], uri: prefix('/m') }] }),
      ]),
    ]);
    assert.deepEqual(layout(t), { other: [`default/reviews@${REVIEWS}`] });
    assert.deepEqual(t.otherPorts.domains.lookup(REVIEWS)!.rules.map((r) => r.ruleIndex), [1]);
  });
});
