import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HttpMatchRequest } from '../../src/config/resources/types.js';
import type { RouteRequest } from '../../src/routing/request.js';
import { route, type RouteDecision } from '../../src/routing/gateway-route.js';
import { buildRouteTable } from '../../src/routing/gateway-table.js';
import { claim, dest, exact, gateway, header, prefix, present, regex, request, rule, server, virtualService } from './factories.js';

const GW = 'mesh-system/ingress';
const ingress = gateway(GW, [server(80, ['*'])]);

/** The decision for `req` with one VirtualService whose only rule has the match entry `m`. */
function decideWith(m: Partial<HttpMatchRequest>, req: Partial<RouteRequest>): RouteDecision {
  const table = buildRouteTable([ingress], [virtualService('default/v', ['*'], [GW], [rule({ match: [m] })])]);
  return route(table, request(req));
}

function kind(d: RouteDecision): string {
  return d.kind === 'route' ? `${d.virtualService}#${d.ruleIndex}` : d.kind;
}

describe('virtual host selection', () => {
  const table = buildRouteTable(
    [gateway(GW, [server(80, ['*']), server(8080, ['only.com'])])],
    [
      virtualService('default/exact', ['a.foo.com'], [GW], [rule()]),
      virtualService('default/wild', ['*.foo.com'], [GW], [rule()]),
      virtualService('default/deeper', ['*.b.foo.com'], [GW], [rule()]),
      virtualService('default/any', ['*'], [GW], [rule()]),
    ],
  );
  const cases: [host: string, port: number, want: string][] = [
    ['a.foo.com', 80, 'default/exact#0'],
    ['A.Foo.COM:80', 80, 'default/exact#0'],
    ['x.foo.com', 80, 'default/wild#0'],
    ['x.b.foo.com', 80, 'default/deeper#0'],
    ['foo.com', 80, 'default/any#0'],
    ['', 80, 'default/any#0'],
    ['only.com:8080', 8080, 'default/any#0'], // the `*` VirtualService narrowed to the server host
    ['other.com', 8080, 'no-host'],
    ['a.foo.com', 9999, 'no-host'],
  ];
  for (const [host, port, want] of cases) {
    it(`${host || '(empty)'} on ${port} → ${want}`, () => assert.equal(kind(route(table, request({ host, port }))), want));
  }

  it('picks among servers on one port by host', () => {
    const t = buildRouteTable(
      [gateway('mesh-system/a', [server(80, ['a.com'])]), gateway('mesh-system/b', [server(80, ['b.com'])])],
      [virtualService('default/va', ['*'], ['mesh-system/a'], [rule()]), virtualService('default/vb', ['*'], ['mesh-system/b'], [rule()])],
    );
    const a = route(t, request({ host: 'a.com' }));
    const b = route(t, request({ host: 'b.com' }));
    assert.equal(a.kind === 'route' && `${a.gateway} ${a.virtualService}`, 'mesh-system/a default/va');
    assert.equal(b.kind === 'route' && `${b.gateway} ${b.virtualService}`, 'mesh-system/b default/vb');
  });
});

describe('a TLS connection is routed by the hosts of the server its SNI chose', () => {
  const tls = { mode: 'SIMPLE' as const, credentialName: 'c' };
  const table = buildRouteTable(
    [gateway(GW, [server(443, ['a.example.com'], { protocol: 'HTTPS', tls }), server(443, ['*.example.com'], { protocol: 'HTTPS', tls }), server(80, ['a.example.com', 'b.example.com'])])],
    [virtualService('default/a', ['a.example.com'], [GW], [rule()]), virtualService('default/b', ['b.example.com'], [GW], [rule()])],
  );
  const cases: [host: string, port: number, server: string | undefined, want: string][] = [
    ['a.example.com', 443, `${GW}#0`, 'default/a#0'],
    ['b.example.com', 443, `${GW}#0`, 'no-host'], // SNI a.example.com, Host b.example.com: not a's to route
    ['b.example.com', 443, `${GW}#1`, 'default/b#0'],
    ['a.example.com', 443, `${GW}#1`, 'default/a#0'], // *.example.com covers a.example.com too
    ['a.example.com', 443, `${GW}#7`, 'no-host'], // a server no longer there
    ['b.example.com', 80, undefined, 'default/b#0'], // plain HTTP: every server of the port
  ];
  for (const [host, port, srv, want] of cases) {
    it(`${host} on ${port} via ${srv ?? 'plain HTTP'} → ${want}`, () => assert.equal(kind(route(table, request({ host, port, ...(srv ? { server: srv } : {}) }))), want));
  }

  it('says which server refused the host', () => {
    assert.match(route(table, request({ host: 'b.example.com', port: 443, server: `${GW}#0` })).reason, /on port 443 server mesh-system\/ingress#0 \(the one the client's SNI chose\)/);
  });
});

describe('match fields', () => {
  const cases: { name: string; m: Partial<HttpMatchRequest>; req: Partial<RouteRequest>; want: boolean }[] = [
    { name: 'empty entry matches', m: {}, req: {}, want: true },
    // uri
    { name: 'uri exact', m: { uri: exact('/a') }, req: { path: '/a' }, want: true },
    { name: 'uri exact, longer path', m: { uri: exact('/a') }, req: { path: '/a/b' }, want: false },
    { name: 'uri exact ignores the query', m: { uri: exact('/a') }, req: { path: '/a?x=1' }, want: true },
    { name: 'uri prefix', m: { uri: prefix('/headers') }, req: { path: '/headers/x' }, want: true },
    { name: 'uri prefix is case-sensitive', m: { uri: prefix('/headers') }, req: { path: '/Headers' }, want: false },
    { name: 'uri prefix with ignoreUriCase', m: { uri: prefix('/Headers'), ignoreUriCase: true }, req: { path: '/hEADERS/x' }, want: true },
    { name: 'uri exact with ignoreUriCase', m: { uri: exact('/Foo'), ignoreUriCase: true }, req: { path: '/fOO?Q=1' }, want: true },
    { name: 'uri prefix does not see the query', m: { uri: prefix('/a?x') }, req: { path: '/a?x=1' }, want: false },
    { name: 'uri regex (full match)', m: { uri: regex('/v[0-9]+/.*') }, req: { path: '/v12/x?y=1' }, want: true },
    { name: 'uri regex must match the whole path', m: { uri: regex('/v[0-9]+') }, req: { path: '/v1/x' }, want: false },
    { name: 'ignoreUriCase leaves regexes alone', m: { uri: regex('/abc'), ignoreUriCase: true }, req: { path: '/ABC' }, want: false },
    // method, authority, scheme
    { name: 'method', m: { method: exact('GET') }, req: { method: 'GET' }, want: true },
    { name: 'method differs', m: { method: exact('GET') }, req: { method: 'POST' }, want: false },
    { name: 'authority without port, any case', m: { authority: exact('foo.com') }, req: { host: 'FOO.com:8080' }, want: true },
    { name: 'authority prefix', m: { authority: prefix('api.') }, req: { host: 'web.foo.com' }, want: false },
    { name: 'scheme', m: { scheme: exact('https') }, req: { scheme: 'https' }, want: true },
    { name: 'scheme differs', m: { scheme: exact('https') }, req: { scheme: 'http' }, want: false },
    // headers
    { name: 'header exact', m: { headers: [header('x-v', exact('1'))] }, req: { headers: { 'x-v': '1' } }, want: true },
    { name: 'header exact, other value', m: { headers: [header('x-v', exact('1'))] }, req: { headers: { 'x-v': '2' } }, want: false },
    { name: 'header missing', m: { headers: [header('x-v', exact('1'))] }, req: {}, want: false },
    { name: 'header missing never matches a regex', m: { headers: [header('x-v', regex('.*'))] }, req: {}, want: false },
    { name: 'header prefix', m: { headers: [header('user-agent', prefix('curl/'))] }, req: { headers: { 'user-agent': 'curl/8.0' } }, want: true },
    { name: 'header regex', m: { headers: [header('x-v', regex('v[12]'))] }, req: { headers: { 'x-v': 'v2' } }, want: true },
    { name: 'header present', m: { headers: [header('x-v', present)] }, req: { headers: { 'x-v': '' } }, want: true },
    { name: 'header present, missing', m: { headers: [header('x-v', present)] }, req: { headers: { 'x-w': '1' } }, want: false },
    { name: 'several values joined with ","', m: { headers: [header('x-v', exact('a,b'))] }, req: { headers: { 'x-v': ['a', 'b'] } }, want: true },
    { name: 'all headers must match', m: { headers: [header('a', exact('1')), header('b', exact('2'))] }, req: { headers: { a: '1', b: '3' } }, want: false },
    // claims
    { name: 'claim, dotted nested path', m: { headers: [claim('@request.auth.claims.name.givenName', exact('Ann'))] }, req: { claims: { name: { givenName: 'Ann' } } }, want: true },
    { name: 'claim, bracket nested path', m: { headers: [claim('@request.auth.claims[name][givenName]', exact('Ann'))] }, req: { claims: { name: { givenName: 'Ann' } } }, want: true },
    { name: 'claim name containing a dot', m: { headers: [claim('@request.auth.claims[example.com/role]', exact('admin'))] }, req: { claims: { 'example.com/role': 'admin' } }, want: true },
    { name: 'list claim contains the value', m: { headers: [claim('@request.auth.claims.groups', exact('group1'))] }, req: { claims: { groups: ['group0', 'group1'] } }, want: true },
    { name: 'list claim without the value', m: { headers: [claim('@request.auth.claims.groups', exact('group1'))] }, req: { claims: { groups: ['group2'] } }, want: false },
    { name: 'claim absent from the token', m: { headers: [claim('@request.auth.claims.groups', exact('group1'))] }, req: { claims: { sub: 'x' } }, want: false },
    { name: 'no valid JWT', m: { headers: [claim('@request.auth.claims.groups', exact('group1'))] }, req: { claims: undefined }, want: false },
    { name: 'no valid JWT, present matcher', m: { headers: [claim('@request.auth.claims.sub', present)] }, req: { claims: undefined }, want: false },
    { name: 'claim present', m: { headers: [claim('@request.auth.claims.sub', present)] }, req: { claims: { sub: 'x' } }, want: true },
    { name: 'a claim is not a header', m: { headers: [claim('@request.auth.claims.sub', exact('x'))] }, req: { headers: { '@request.auth.claims.sub': 'x' } }, want: false },
    // withoutHeaders
    { name: 'withoutHeaders, header absent', m: { withoutHeaders: [header('x-v', exact('1'))] }, req: {}, want: true },
    { name: 'withoutHeaders, header matching', m: { withoutHeaders: [header('x-v', exact('1'))] }, req: { headers: { 'x-v': '1' } }, want: false },
    { name: 'withoutHeaders, header not matching', m: { withoutHeaders: [header('x-v', exact('1'))] }, req: { headers: { 'x-v': '2' } }, want: true },
    { name: 'withoutHeaders present, header there', m: { withoutHeaders: [header('x-v', present)] }, req: { headers: { 'x-v': '2' } }, want: false },
    { name: 'withoutHeaders claim, no JWT', m: { withoutHeaders: [claim('@request.auth.claims.groups', exact('banned'))] }, req: {}, want: true },
    { name: 'withoutHeaders claim, matching', m: { withoutHeaders: [claim('@request.auth.claims.groups', exact('banned'))] }, req: { claims: { groups: ['banned'] } }, want: false },
    // queryParams
    { name: 'query exact', m: { queryParams: [{ name: 'v', match: exact('1') }] }, req: { path: '/p?a=0&v=1' }, want: true },
    { name: 'query exact, other value', m: { queryParams: [{ name: 'v', match: exact('1') }] }, req: { path: '/p?v=2' }, want: false },
    { name: 'query missing', m: { queryParams: [{ name: 'v', match: exact('1') }] }, req: { path: '/p' }, want: false },
    { name: 'query decoded', m: { queryParams: [{ name: 'q', match: exact('a b/c') }] }, req: { path: '/p?q=a%20b%2Fc' }, want: true },
    { name: 'query prefix', m: { queryParams: [{ name: 'q', match: prefix('ab') }] }, req: { path: '/p?q=abc' }, want: true },
    { name: 'query regex', m: { queryParams: [{ name: 'q', match: regex('[0-9]+') }] }, req: { path: '/p?q=123' }, want: true },
    { name: 'query first occurrence', m: { queryParams: [{ name: 'q', match: exact('1') }] }, req: { path: '/p?q=1&q=2' }, want: true },
    // port, gateways
    { name: 'port of the listener', m: { port: 80 }, req: { port: 80 }, want: true },
    { name: 'another port', m: { port: 8080 }, req: { port: 80 }, want: false },
    { name: 'entry for this gateway', m: { gateways: [GW] }, req: {}, want: true },
    { name: 'entry for another gateway', m: { gateways: ['mesh-system/other'] }, req: {}, want: false },
    // everything ANDed
    {
      name: 'all fields hold',
      m: { uri: prefix('/api'), method: exact('POST'), headers: [header('x-v', exact('1'))], queryParams: [{ name: 'a', match: exact('b') }] },
      req: { path: '/api/x?a=b', method: 'POST', headers: { 'x-v': '1' } },
      want: true,
    },
    {
      name: 'one field fails',
      m: { uri: prefix('/api'), method: exact('POST'), headers: [header('x-v', exact('1'))] },
      req: { path: '/api/x', method: 'GET', headers: { 'x-v': '1' } },
      want: false,
    },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.want ? 'matches' : 'does not match'}`, () => {
      const d = decideWith(c.m, c.req);
      assert.equal(d.kind, c.want ? 'route' : 'no-route', d.reason);
    });
  }
});

describe('rule order', () => {
  it('ORs the entries of a match list and reports which one matched', () => {
    const table = buildRouteTable([ingress], [virtualService('default/v', ['*'], [GW], [
      rule({ name: 'r', match: [{ uri: prefix('/a') }, { uri: prefix('/b'), name: 'bee' }] }),
    ])]);
    const d = route(table, request({ path: '/b/1' }));
    assert.equal(d.kind, 'route');
    assert.equal(d.kind === 'route' && d.matchIndex, 1);
    assert.equal(d.kind === 'route' && d.matchName, 'bee');
    assert.equal(d.kind === 'route' && d.ruleName, 'r');
    assert.equal(d.reason, 'vs default/v rule 0 "r" (match 1)');
  });

  it('takes the first matching rule, across two VirtualServices on one host', () => {
    const table = buildRouteTable([ingress], [
      virtualService('default/first', ['foo.com'], [GW], [rule({ match: [{ uri: prefix('/a') }], route: [dest('one', 1)] })]),
      virtualService('default/second', ['foo.com'], [GW], [rule({ route: [dest('two', 2)] }), rule({ match: [{ uri: prefix('/a') }], route: [dest('three', 3)] })]),
    ]);
    const cases: [path: string, want: string][] = [['/a/x', 'default/first#0'], ['/b', 'default/second#0']];
    for (const [path, want] of cases) assert.equal(kind(route(table, request({ host: 'foo.com', path }))), want);
  });

  it('says which VirtualServices were tried when nothing matched', () => {
    const table = buildRouteTable([ingress], [
      virtualService('default/a', ['foo.com'], [GW], [rule({ match: [{ uri: prefix('/a') }] })]),
      virtualService('default/b', ['foo.com'], [GW], [rule({ match: [{ uri: prefix('/b') }] })]),
    ]);
    const d = route(table, request({ host: 'foo.com', path: '/c' }));
    assert.deepEqual(d, { kind: 'no-route', virtualServices: ['default/a', 'default/b'], reason: 'no route: no rule of default/a, default/b matched' });
  });

  it('explains a missing virtual host', () => {
    const table = buildRouteTable([gateway(GW, [server(80, ['foo.com'])])], []);
    assert.deepEqual(route(table, request({ host: 'bar.com' })), { kind: 'no-host', reason: 'no route: no virtual host for "bar.com" on port 80' });
    assert.equal(route(table, request({ port: 81 })).kind, 'no-host');
  });
});

describe('actions', () => {
  function only(r: ReturnType<typeof rule>, req: Partial<RouteRequest>): RouteDecision {
    return route(buildRouteTable([ingress], [virtualService('default/v', ['*'], [GW], [r])]), request(req));
  }

  it('routes with the rule destinations, headers and timeout', () => {
    const d = only(rule({ route: [dest('a', 1, 80), dest('b', 2, 20)], requestHeaders: { set: { x: '1' }, add: {}, remove: [] }, timeoutMs: 1500 }), {});
    assert.equal(d.kind, 'route');
    if (d.kind !== 'route') return;
    assert.deepEqual(d.destinations.map((x) => x.host), ['a', 'b']);
    assert.deepEqual(d.requestHeaders?.set, { x: '1' });
    assert.equal(d.timeoutMs, 1500);
    assert.equal(d.gateway, GW);
    assert.equal(d.rewrite, undefined);
    assert.equal(d.reason, 'vs default/v rule 0');
  });

  it('hands out one frozen decision per rule entry, and builds rewrites per request', () => {
    const table = buildRouteTable([ingress], [virtualService('default/v', ['*'], [GW], [
      rule({ match: [{ uri: prefix('/a') }] }),
      rule({ match: [{ uri: prefix('/b') }], rewrite: { uri: '/c' } }),
    ])]);
    const first = route(table, request({ path: '/a/1' }));
    assert.equal(route(table, request({ path: '/a/2' })), first);
    assert.ok(Object.isFrozen(first));
    const r1 = route(table, request({ path: '/b/1' }));
    const r2 = route(table, request({ path: '/b/2' }));
    assert.deepEqual([r1.kind === 'route' && r1.rewrite?.path, r2.kind === 'route' && r2.rewrite?.path], ['/c/1', '/c/2']);
    const none = route(table, request({ path: '/z' }));
    assert.equal(route(table, request({ path: '/y' })), none);
  });

  const rewrites: { name: string; m?: Partial<HttpMatchRequest>; uri?: string; authority?: string; path: string; want: { path?: string; authority?: string } }[] = [
    { name: 'prefix match: the prefix is replaced', m: { uri: prefix('/api/') }, uri: '/v2/', path: '/api/users?id=1', want: { path: '/v2/users?id=1' } },
    { name: 'prefix match, case folded', m: { uri: prefix('/API'), ignoreUriCase: true }, uri: '/x', path: '/api/u', want: { path: '/x/u' } },
    { name: 'exact match: the whole path', m: { uri: exact('/old') }, uri: '/new', path: '/old?q', want: { path: '/new?q' } },
    { name: 'regex match: the whole path', m: { uri: regex('/o.*') }, uri: '/new', path: '/old/x', want: { path: '/new' } },
    { name: 'no uri match: the whole path', uri: '/new', path: '/any/thing', want: { path: '/new' } },
    { name: 'authority', authority: 'internal.svc', path: '/p', want: { authority: 'internal.svc' } },
  ];
  for (const c of rewrites) {
    it(`rewrite: ${c.name}`, () => {
      const r = rule({ ...(c.m ? { match: [c.m] } : {}), rewrite: { ...(c.uri ? { uri: c.uri } : {}), ...(c.authority ? { authority: c.authority } : {}) } });
      const d = only(r, { path: c.path });
      assert.equal(d.kind, 'route');
      assert.deepEqual(d.kind === 'route' && d.rewrite, c.want);
    });
  }

  it('redirects, keeping the query unless the new path has one', () => {
    const keep = only(rule({ redirect: { uri: '/new', redirectCode: 302 } }), { host: 'foo.com:8080', path: '/old?a=1' });
    assert.deepEqual(keep.kind === 'redirect' && [keep.status, keep.location], [302, 'http://foo.com:8080/new?a=1']);
    const own = only(rule({ redirect: { uri: '/new?b=2', authority: 'bar.com', redirectCode: 301 } }), { path: '/old?a=1', scheme: 'https' });
    assert.deepEqual(own.kind === 'redirect' && [own.status, own.location], [301, 'https://bar.com/new?b=2']);
  });

  it('answers directly', () => {
    const d = only(rule({ directResponse: { status: 418, body: 'teapot' } }), {});
    assert.deepEqual(d.kind === 'direct' && [d.status, d.body, d.reason], [418, 'teapot', 'vs default/v rule 0: direct response']);
  });

  it('redirects plain HTTP to https for a server with httpsRedirect', () => {
    const t = buildRouteTable([gateway(GW, [server(80, ['*'], { tls: { httpsRedirect: true } })])], [virtualService('default/v', ['*'], [GW], [rule()])]);
    const d = route(t, request({ host: 'Foo.com:80', path: '/x?y=1' }));
    assert.deepEqual(d.kind === 'redirect' && [d.status, d.location], [301, 'https://foo.com/x?y=1']);
  });
});

// SPEC 7: a rule requiring claim `groups` equal to `group1` on prefix `/headers`.
describe('spec 7 routing outcomes', () => {
  const table = buildRouteTable([ingress], [virtualService('default/httpbin', ['*'], [GW], [
    rule({
      match: [{ uri: prefix('/headers'), headers: [claim('@request.auth.claims.groups', exact('group1'))] }],
      route: [dest('httpbin.default.svc.cluster.local', 8000)],
    }),
  ])]);
  const cases: { name: string; claims: unknown; want: string }[] = [
    { name: 'no JWT: no route (404)', claims: undefined, want: 'no-route' },
    { name: 'groups contains group1: routed (200)', claims: { iss: 'testing@secure.istio.io', sub: 's', groups: ['group1', 'group2'], scope: ['scope1'] }, want: 'default/httpbin#0' },
    { name: 'groups without group1: no route (404)', claims: { iss: 'testing@secure.istio.io', sub: 's', groups: ['group2'] }, want: 'no-route' },
    { name: 'no groups claim at all: no route (404)', claims: { iss: 'testing@secure.istio.io', sub: 's' }, want: 'no-route' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = route(table, request({ path: '/headers', headers: { authorization: 'Bearer x' }, claims: c.claims }));
      assert.equal(kind(d), c.want, d.reason);
    });
  }
});
