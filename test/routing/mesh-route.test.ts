import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HttpMatchRequest, HttpRoute, VirtualService } from '../../src/config/resources/types.js';
import { NO_ROUTE_REPLY, routeName } from '../../src/routing/decision.js';
import { pickDestination } from '../../src/routing/destination.js';
import { NO_VIRTUAL_SERVICE, routeMesh, type MeshRouteDecision } from '../../src/routing/mesh-route.js';
import { buildMeshRouteTable } from '../../src/routing/mesh-table.js';
import type { MeshRouteRequest } from '../../src/routing/request.js';
import { hostNames } from '../../src/traffic/service-index.js';
import { claim, dest, exact, header, meshRequest, prefix, present, regex, rule, virtualService } from './factories.js';

const REVIEWS = 'reviews.default.svc.cluster.local';

const meshVs = (id: string, hosts: string[], http: HttpRoute[]): VirtualService => virtualService(id, hosts, ['mesh'], http);

/** `vs#rule` for a matched rule, else the decision's kind. */
function kind(d: MeshRouteDecision): string {
  return d.kind === 'route' || d.kind === 'direct' || d.kind === 'redirect' ? `${d.virtualService}#${d.ruleIndex}` : d.kind;
}

describe('routeMesh: virtual host by Host (Envoy\'s domain order)', () => {
  const table = buildMeshRouteTable([
    meshVs('default/exact', ['a.example.com'], [rule()]),
    meshVs('default/wild', ['*.example.com'], [rule()]),
    meshVs('default/deeper', ['*.b.example.com'], [rule()]),
    meshVs('default/broad', ['*.com'], [rule()]),
    meshVs('default/reviews', [REVIEWS], [rule()]),
  ], { hostNames: (h) => hostNames(h, 'default', 'cluster.local') });
  const cases: [host: string, want: string][] = [
    ['a.example.com', 'default/exact#0'],
    ['A.Example.COM:9080', 'default/exact#0'], // case folded, the port ignored (Istio: ignore_port_in_host_matching)
    ['a.example.com:1234', 'default/exact#0'], // even a port other than the connection's
    ['x.example.com', 'default/wild#0'],
    ['b.example.com', 'default/wild#0'], // `*.b.example.com` needs a label before the suffix
    ['x.b.example.com', 'default/deeper#0'], // the longest suffix wins
    ['example.com', 'default/broad#0'],
    ['reviews', 'default/reviews#0'], // a short form (hostNames)
    ['reviews:9080', 'default/reviews#0'],
    ['reviews.default.svc', 'default/reviews#0'],
    ['ratings', 'no-virtual-service'],
    ['example.org', 'no-virtual-service'],
    ['a.example.com.', 'no-virtual-service'], // a trailing dot is not stripped (Envoy's default)
    ['', 'no-virtual-service'], // no Host at all (HTTP/1.0)
  ];
  for (const [host, want] of cases) {
    it(`${host || '(empty)'} → ${want}`, () => assert.equal(kind(routeMesh(table, meshRequest({ host }))), want));
  }
});

describe('routeMesh: match entries (the gateway\'s matcher)', () => {
  /** The decision with one VirtualService whose only rule has the match list `entries`. */
  function decideWith(entries: Partial<HttpMatchRequest>[], req: Partial<MeshRouteRequest>): MeshRouteDecision {
    return routeMesh(buildMeshRouteTable([meshVs('default/reviews', [REVIEWS], [rule({ match: entries })])]), meshRequest(req));
  }
  const cases: { name: string; m: Partial<HttpMatchRequest>[]; req: Partial<MeshRouteRequest>; want: boolean | 'no-virtual-service' }[] = [
    { name: 'uri prefix', m: [{ uri: prefix('/api') }], req: { path: '/api/x?y=1' }, want: true },
    { name: 'uri exact ignores the query', m: [{ uri: exact('/a') }], req: { path: '/a?x' }, want: true },
    { name: 'uri exact, other path', m: [{ uri: exact('/a') }], req: { path: '/b' }, want: false },
    { name: 'uri regex, full match', m: [{ uri: regex('/v[0-9]+') }], req: { path: '/v1/x' }, want: false },
    { name: 'ignoreUriCase', m: [{ uri: prefix('/API'), ignoreUriCase: true }], req: { path: '/api/x' }, want: true },
    { name: 'scheme', m: [{ scheme: exact('http') }], req: {}, want: true },
    { name: 'method', m: [{ method: exact('POST') }], req: { method: 'GET' }, want: false },
    { name: 'authority, lower-cased and without port', m: [{ authority: exact(REVIEWS) }], req: { host: 'Reviews.default.svc.cluster.local:9080' }, want: true },
    { name: 'header', m: [{ headers: [header('end-user', exact('jason'))] }], req: { headers: { 'end-user': 'jason' } }, want: true },
    { name: 'header missing', m: [{ headers: [header('end-user', present)] }], req: {}, want: false },
    { name: 'withoutHeaders, header absent', m: [{ withoutHeaders: [header('x-canary', present)] }], req: {}, want: true },
    { name: 'withoutHeaders, header present', m: [{ withoutHeaders: [header('x-canary', present)] }], req: { headers: { 'x-canary': '' } }, want: false },
    { name: 'withoutHeaders, other value', m: [{ withoutHeaders: [header('x-v', exact('1'))] }], req: { headers: { 'x-v': '2' } }, want: true },
    { name: 'queryParams exact', m: [{ queryParams: [{ name: 'v', match: exact('2') }] }], req: { path: '/p?a=1&v=2' }, want: true },
    { name: 'queryParams decoded', m: [{ queryParams: [{ name: 'q', match: exact('a b') }] }], req: { path: '/p?q=a%20b' }, want: true },
    { name: 'queryParams missing', m: [{ queryParams: [{ name: 'v', match: present }] }], req: { path: '/p' }, want: false },
    { name: 'queryParams, first occurrence', m: [{ queryParams: [{ name: 'v', match: exact('1') }] }], req: { path: '/p?v=2&v=1' }, want: false },
    { name: 'port of the connection', m: [{ port: 9080 }], req: { port: 9080 }, want: true },
    // Its only rule is for 9080: on 9090 the VirtualService has no rule, and the host keeps its default route.
    { name: 'port of another connection', m: [{ port: 9080 }], req: { port: 9090 }, want: 'no-virtual-service' },
    { name: 'a claim never matches on a sidecar', m: [{ headers: [claim('@request.auth.claims.sub', present)] }], req: {}, want: false },
    // AND inside an entry, OR between entries.
    { name: 'AND: every field holds', m: [{ uri: prefix('/a'), method: exact('GET'), headers: [header('x', exact('1'))] }], req: { path: '/a', headers: { x: '1' } }, want: true },
    { name: 'AND: one field fails', m: [{ uri: prefix('/a'), method: exact('GET'), headers: [header('x', exact('1'))] }], req: { path: '/a', headers: { x: '2' } }, want: false },
    { name: 'OR: the second entry holds', m: [{ uri: prefix('/a') }, { headers: [header('x', exact('1'))] }], req: { path: '/b', headers: { x: '1' } }, want: true },
    { name: 'OR: no entry holds', m: [{ uri: prefix('/a') }, { headers: [header('x', exact('1'))] }], req: { path: '/b' }, want: false },
  ];
  for (const c of cases) {
    const want = c.want === true ? 'route' : c.want === false ? 'no-route' : c.want;
    it(`${c.name}: ${want}`, () => {
      const d = decideWith(c.m, c.req);
      assert.equal(d.kind, want, d.reason);
    });
  }
});

describe('routeMesh: rules in order, first match wins', () => {
  const table = buildMeshRouteTable([meshVs('default/reviews', [REVIEWS], [
    rule({ name: 'jason', match: [{ headers: [header('end-user', exact('jason'))], name: 'user' }], route: [dest(REVIEWS, 9080)] }),
    rule({ match: [{ uri: prefix('/v2') }, { uri: prefix('/beta'), name: 'beta' }], route: [dest(REVIEWS, 9080)] }),
    rule({ match: [{ port: 9090 }], route: [dest(REVIEWS, 9090)] }),
    rule({ match: [{ uri: prefix('/') }], route: [dest(REVIEWS, 9080)] }),
    rule({ route: [dest('never')] }),
  ])]);
  const cases: { name: string; req: Partial<MeshRouteRequest>; want: string; matchIndex?: number; routeName?: string }[] = [
    { name: 'the first rule that matches, though later ones match too', req: { path: '/v2/x', headers: { 'end-user': 'jason' } }, want: 'default/reviews#0', matchIndex: 0, routeName: 'jason.user' },
    { name: 'the second entry of a rule', req: { path: '/beta/x' }, want: 'default/reviews#1', matchIndex: 1, routeName: 'beta' },
    { name: 'a rule for the connection\'s port', req: { port: 9090, path: '/x' }, want: 'default/reviews#2', matchIndex: 0 },
    { name: 'the same request on another port', req: { port: 9080, path: '/x' }, want: 'default/reviews#3', matchIndex: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = routeMesh(table, meshRequest(c.req));
      assert.equal(kind(d), c.want);
      assert.ok(d.kind === 'route');
      assert.equal(d.matchIndex, c.matchIndex);
      assert.equal(routeName(d.ruleName, d.matchName), c.routeName);
      assert.equal(d.gateway, 'mesh');
    });
  }
});

describe('routeMesh: no VirtualService vs no rule matched', () => {
  const table = buildMeshRouteTable([meshVs('default/reviews', [REVIEWS], [rule({ match: [{ uri: prefix('/api') }] })])]);

  it('a host no VirtualService routes: the default route (one shared answer)', () => {
    const d = routeMesh(table, meshRequest({ host: 'ratings:9080' }));
    assert.equal(d, NO_VIRTUAL_SERVICE);
    assert.equal(routeMesh(buildMeshRouteTable([]), meshRequest()), NO_VIRTUAL_SERVICE);
  });

  it('a routed host whose rules all miss: Envoy\'s 404 NR route_not_found, built once', () => {
    const d = routeMesh(table, meshRequest({ path: '/web' }));
    assert.deepEqual(d, { kind: 'no-route', virtualServices: ['default/reviews'], reason: 'no route: no rule of default/reviews matched' });
    assert.equal(routeMesh(table, meshRequest({ path: '/other' })), d);
    assert.deepEqual(NO_ROUTE_REPLY, { status: 404, flag: 'NR', details: 'route_not_found' });
  });
});

describe('routeMesh: decisions (the gateway\'s shape and builder)', () => {
  const retries = { attempts: 3, perTryTimeoutMs: 2000 };
  const table = buildMeshRouteTable([meshVs('default/reviews', [REVIEWS], [
    rule({
      name: 'canary', match: [{ uri: prefix('/split') }], route: [{ host: REVIEWS, subset: 'v1', weight: 90 }, { host: REVIEWS, subset: 'v2', weight: 10 }],
      requestHeaders: { set: { 'x-route': 'canary' }, add: {}, remove: ['x-debug'] }, timeoutMs: 1500, retries,
    }),
    rule({ match: [{ uri: prefix('/old') }], rewrite: { uri: '/new' }, route: [dest(REVIEWS, 9080)] }),
    rule({ match: [{ uri: prefix('/moved') }], redirect: { uri: '/here', redirectCode: 301 }, route: [] }),
    rule({ match: [{ uri: prefix('/down') }], directResponse: { status: 503, body: 'maintenance' }, route: [] }),
  ])]);

  it('routes with weighted destinations, header edits, timeout and retries, one frozen object for every request', () => {
    const d = routeMesh(table, meshRequest({ path: '/split/1' }));
    assert.ok(d.kind === 'route' && Object.isFrozen(d));
    assert.deepEqual(d.destinations.map((x) => `${x.subset}:${x.weight}`), ['v1:90', 'v2:10']);
    assert.deepEqual(d.requestHeaders, { set: { 'x-route': 'canary' }, add: {}, remove: ['x-debug'] });
    assert.equal(d.timeoutMs, 1500);
    assert.equal(d.retries, retries);
    assert.equal(d.reason, 'vs default/reviews rule 0 "canary" (match 0)');
    assert.equal(routeMesh(table, meshRequest({ path: '/split/2', headers: { a: 'b' } })), d);
  });

  it('leaves the weighted choice to every request (pickDestination), the port defaulted by the caller', () => {
    const d = routeMesh(table, meshRequest({ path: '/split' }));
    assert.ok(d.kind === 'route');
    const picks: [random: number, want: string][] = [[0, 'v1'], [0.8999, 'v1'], [0.9, 'v2'], [0.9999, 'v2']];
    for (const [r, want] of picks) assert.equal(pickDestination(d.destinations, () => r, 9080)?.destination.subset, want);
    assert.deepEqual(pickDestination(d.destinations, () => 0, 9080), { destination: d.destinations[0], host: REVIEWS, port: 9080, portDefaulted: true });
  });

  const perRequest: { name: string; req: Partial<MeshRouteRequest>; want: unknown }[] = [
    { name: 'rewrite (prefix replaced, query kept)', req: { path: '/old/a?x=1' }, want: { kind: 'route', rewrite: { path: '/new/a?x=1' } } },
    { name: 'redirect (Host as received, query kept)', req: { host: `${REVIEWS}:9080`, path: '/moved/x?y=2' }, want: { kind: 'redirect', status: 301, location: `http://${REVIEWS}:9080/here?y=2` } },
    { name: 'direct response', req: { path: '/down' }, want: { kind: 'direct', status: 503, body: 'maintenance' } },
  ];
  for (const c of perRequest) {
    it(c.name, () => {
      const d = routeMesh(table, meshRequest(c.req)) as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(c.want as Record<string, unknown>)) assert.deepEqual(d[k], v, k);
    });
  }

  it('builds a rewrite per request, and a direct response once', () => {
    const a = routeMesh(table, meshRequest({ path: '/old/a' }));
    const b = routeMesh(table, meshRequest({ path: '/old/b' }));
    assert.deepEqual([a.kind === 'route' && a.rewrite?.path, b.kind === 'route' && b.rewrite?.path], ['/new/a', '/new/b']);
    assert.equal(routeMesh(table, meshRequest({ path: '/down' })), routeMesh(table, meshRequest({ path: '/down/2' })));
  });
});
