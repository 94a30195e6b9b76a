// Redirects to another scheme or port (Envoy's redirect action as Istio configures it) and regex
// rewrites of the path (Envoy's regex_rewrite), through the gateway's table as a request meets them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HttpRedirect, HttpRoute } from '../../src/config/resources/types.js';
import { compileGlobal, groupCount, translateSubstitution } from '../../src/config/resources/string-match.js';
import { route } from '../../src/routing/gateway-route.js';
import { buildRouteTable } from '../../src/routing/gateway-table.js';
import type { RouteRequest } from '../../src/routing/request.js';
import { dest, gateway, request, rule, server, virtualService } from './factories.js';

const GW = 'mesh-system/ingress';

function decideWith(r: Omit<Partial<HttpRoute>, 'match'>, req: Partial<RouteRequest>) {
  const table = buildRouteTable([gateway(GW, [server(req.port ?? 80, ['*'])])], [virtualService('default/v', ['*'], [GW], [rule(r)])]);
  return route(table, request(req));
}

function location(redirect: Omit<HttpRedirect, 'redirectCode'>, req: Partial<RouteRequest>): string | undefined {
  const d = decideWith({ route: [], redirect: { redirectCode: 301, ...redirect } }, req);
  return d.kind === 'redirect' ? d.location : undefined;
}

describe('redirect scheme, port, derivePort', () => {
  const cases: { name: string; redirect: Omit<HttpRedirect, 'redirectCode'>; req: Partial<RouteRequest>; want: string }[] = [
    { name: 'scheme only: the Host as received', redirect: { scheme: 'https' }, req: { host: 'a.com', path: '/p?q=1' }, want: 'https://a.com/p?q=1' },
    { name: 'scheme change drops the old scheme\'s default port', redirect: { scheme: 'https' }, req: { host: 'a.com:80', path: '/' }, want: 'https://a.com/' },
    { name: 'scheme change keeps another port', redirect: { scheme: 'https' }, req: { host: 'a.com:8080', path: '/' }, want: 'https://a.com:8080/' },
    { name: 'port replaces the Host\'s', redirect: { port: 8443 }, req: { host: 'a.com:8080', path: '/x' }, want: 'http://a.com:8443/x' },
    { name: 'port 80 with http: no port written', redirect: { port: 80 }, req: { host: 'a.com:8080', path: '/' }, want: 'http://a.com/' },
    { name: 'https and 443: no port written', redirect: { scheme: 'https', port: 443 }, req: { host: 'a.com', path: '/' }, want: 'https://a.com/' },
    { name: 'https and 80: written', redirect: { scheme: 'https', port: 80 }, req: { host: 'a.com', path: '/' }, want: 'https://a.com:80/' },
    { name: 'FROM_REQUEST_PORT: the listener\'s port', redirect: { derivePort: 'FROM_REQUEST_PORT', uri: '/new' }, req: { host: 'a.com', port: 8080, path: '/old?x' }, want: 'http://a.com:8080/new?x' },
    { name: 'FROM_REQUEST_PORT on 80: none', redirect: { derivePort: 'FROM_REQUEST_PORT' }, req: { host: 'a.com:80', port: 80, path: '/' }, want: 'http://a.com/' },
    { name: 'FROM_PROTOCOL_DEFAULT: the port dropped', redirect: { scheme: 'https', derivePort: 'FROM_PROTOCOL_DEFAULT' }, req: { host: 'a.com:8080', path: '/' }, want: 'https://a.com/' },
    { name: 'authority and port', redirect: { authority: 'b.com:9', port: 9443 }, req: { host: 'a.com', path: '/' }, want: 'http://b.com:9443/' },
    { name: 'an IPv6 Host', redirect: { port: 8443 }, req: { host: '[::1]:8080', path: '/' }, want: 'http://[::1]:8443/' },
  ];
  for (const c of cases) it(c.name, () => assert.equal(location(c.redirect, c.req), c.want));
});

describe('rewrite.uriRegexRewrite', () => {
  const rewrite = (match: string, substitution: string, path: string): string | undefined => {
    const regex = compileGlobal(match);
    const d = decideWith({ route: [dest('b', 80)], rewrite: { uriRegex: { match, regex, substitution: translateSubstitution(substitution, groupCount(regex)) } } }, { path });
    return d.kind === 'route' ? d.rewrite?.path : undefined;
  };
  it('replaces every match in the path, groups as \\1, the query kept as it was', () => {
    assert.equal(rewrite('^/service/([^/]+)(/.*)$', '\\2/instance/\\1', '/service/foo/v1/api?x=/service/'), '/v1/api/instance/foo?x=/service/');
    assert.equal(rewrite('one', 'two', '/xxx/one/yyy/one/zzz'), '/xxx/two/yyy/two/zzz', 'Envoy\'s example: every occurrence');
    assert.equal(rewrite('(?i)/API/', '/', '/api/v1'), '/v1');
    assert.equal(rewrite('/a', '$\\0', '/a'), '$/a', 'a dollar is literal, \\0 the whole match');
  });
  it('refuses what RE2 refuses, or what JavaScript would read with another meaning', () => {
    assert.throws(() => translateSubstitution('\\3', 2), /\\3 names a group the regex does not have \(it has 2\)/);
    assert.throws(() => translateSubstitution('\\n', 0), /is not a substitution escape/);
    assert.throws(() => compileGlobal('\\Qa.b\\E'), /quoted literals/);
    assert.throws(() => compileGlobal('\\pL'), /needs braces/);
    assert.throws(() => compileGlobal('(?=a)'), /lookaround/);
    assert.equal(groupCount(compileGlobal('(a)(?:b)(?P<c>d)')), 2);
  });
});
