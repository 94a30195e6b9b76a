import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuthorizationCondition, AuthorizationOperation, AuthorizationSource } from '../../../src/config/resources/types.js';
import { evaluate, selectCustom, type AuthzRequest } from '../../../src/security/authz/evaluate.js';
import { authzRequest, policy, when } from './factories.js';

/** Whether one ALLOW rule with this source/operation/condition matches the request. */
function allowedBy(rule: { from?: AuthorizationSource; to?: AuthorizationOperation; when?: AuthorizationCondition[] }, req: Partial<AuthzRequest>): boolean {
  const p = policy('default/p', 'ALLOW', [{ from: rule.from ? [rule.from] : [], to: rule.to ? [rule.to] : [], when: rule.when ?? [] }]);
  return evaluate([p], authzRequest(req)).allowed;
}

const JWT = { principal: 'https://issuer.example/alice', claims: { iss: 'https://issuer.example', sub: 'alice', groups: ['dev', 'ops'], name: { given: 'Ann' } } };

describe('source fields', () => {
  const cases: { name: string; from: AuthorizationSource; req: Partial<AuthzRequest>; want: boolean }[] = [
    { name: 'requestPrincipals exact', from: { requestPrincipals: ['https://issuer.example/alice'] }, req: JWT, want: true },
    { name: 'requestPrincipals other', from: { requestPrincipals: ['https://issuer.example/bob'] }, req: JWT, want: false },
    { name: 'requestPrincipals prefix', from: { requestPrincipals: ['https://issuer.example/*'] }, req: JWT, want: true },
    { name: 'requestPrincipals suffix', from: { requestPrincipals: ['*/alice'] }, req: JWT, want: true },
    { name: 'requestPrincipals *, with a token', from: { requestPrincipals: ['*'] }, req: JWT, want: true },
    { name: 'requestPrincipals *, anonymous', from: { requestPrincipals: ['*'] }, req: {}, want: false },
    { name: 'requestPrincipals, anonymous', from: { requestPrincipals: ['https://issuer.example/alice'] }, req: {}, want: false },
    { name: 'notRequestPrincipals *, anonymous', from: { notRequestPrincipals: ['*'] }, req: {}, want: true },
    { name: 'notRequestPrincipals *, with a token', from: { notRequestPrincipals: ['*'] }, req: JWT, want: false },
    { name: 'notRequestPrincipals other', from: { notRequestPrincipals: ['https://issuer.example/bob'] }, req: JWT, want: true },
    { name: 'principals, no mTLS identity', from: { principals: ['*'] }, req: {}, want: false },
    { name: 'principals exact', from: { principals: ['cluster.local/ns/default/sa/web'] }, req: { sourcePrincipal: 'cluster.local/ns/default/sa/web' }, want: true },
    { name: 'notPrincipals, no mTLS identity', from: { notPrincipals: ['cluster.local/ns/default/sa/web'] }, req: {}, want: true },
    { name: 'notPrincipals matching', from: { notPrincipals: ['cluster.local/*'] }, req: { sourcePrincipal: 'cluster.local/ns/default/sa/web' }, want: false },
    { name: 'namespaces, absent', from: { namespaces: ['default'] }, req: {}, want: false },
    { name: 'namespaces exact', from: { namespaces: ['default'] }, req: { sourceNamespace: 'default' }, want: true },
    { name: 'notNamespaces, absent', from: { notNamespaces: ['default'] }, req: {}, want: true },
    { name: 'notNamespaces matching', from: { notNamespaces: ['default'] }, req: { sourceNamespace: 'default' }, want: false },
    { name: 'ipBlocks v4 CIDR', from: { ipBlocks: ['10.0.0.0/8'] }, req: { sourceIp: '10.1.2.3' }, want: true },
    { name: 'ipBlocks v4 outside', from: { ipBlocks: ['10.0.0.0/8'] }, req: { sourceIp: '192.168.0.1' }, want: false },
    { name: 'ipBlocks single address', from: { ipBlocks: ['192.168.0.1'] }, req: { sourceIp: '192.168.0.1' }, want: true },
    { name: 'ipBlocks v4-mapped peer', from: { ipBlocks: ['10.0.0.0/8'] }, req: { sourceIp: '::ffff:10.0.0.7' }, want: true },
    { name: 'ipBlocks v6 CIDR', from: { ipBlocks: ['2001:db8::/32'] }, req: { sourceIp: '2001:db8::5' }, want: true },
    { name: 'ipBlocks v6 outside', from: { ipBlocks: ['2001:db8::/32'] }, req: { sourceIp: 'fd00::5' }, want: false },
    { name: 'ipBlocks, no address', from: { ipBlocks: ['0.0.0.0/0'] }, req: {}, want: false },
    { name: 'notIpBlocks inside', from: { notIpBlocks: ['10.0.0.0/8'] }, req: { sourceIp: '10.1.2.3' }, want: false },
    { name: 'notIpBlocks outside', from: { notIpBlocks: ['10.0.0.0/8'] }, req: { sourceIp: '172.16.0.1' }, want: true },
    { name: 'remoteIpBlocks', from: { remoteIpBlocks: ['203.0.113.0/24'] }, req: { sourceIp: '10.0.0.1', remoteIp: '203.0.113.9' }, want: true },
    { name: 'remoteIpBlocks is not the peer', from: { remoteIpBlocks: ['10.0.0.0/8'] }, req: { sourceIp: '10.0.0.1', remoteIp: '203.0.113.9' }, want: false },
    { name: 'remoteIpBlocks falls back to the peer', from: { remoteIpBlocks: ['10.0.0.0/8'] }, req: { sourceIp: '10.0.0.1' }, want: true },
    { name: 'notRemoteIpBlocks', from: { notRemoteIpBlocks: ['203.0.113.0/24'] }, req: { remoteIp: '203.0.113.9' }, want: false },
    { name: 'every field must hold', from: { requestPrincipals: ['*'], ipBlocks: ['10.0.0.0/8'] }, req: { ...JWT, sourceIp: '11.0.0.1' }, want: false },
    { name: 'an empty list is no constraint', from: { requestPrincipals: [] }, req: {}, want: true },
  ];
  for (const c of cases) it(`${c.name}: ${c.want ? 'matches' : 'does not match'}`, () => assert.equal(allowedBy({ from: c.from }, c.req), c.want));
});

describe('operation fields', () => {
  const cases: { name: string; to: AuthorizationOperation; req: Partial<AuthzRequest>; want: boolean }[] = [
    { name: 'methods exact', to: { methods: ['GET', 'HEAD'] }, req: { method: 'HEAD' }, want: true },
    { name: 'methods are case-sensitive', to: { methods: ['GET'] }, req: { method: 'get' }, want: false },
    { name: 'notMethods', to: { notMethods: ['DELETE'] }, req: { method: 'DELETE' }, want: false },
    { name: 'notMethods other', to: { notMethods: ['DELETE'] }, req: { method: 'GET' }, want: true },
    { name: 'paths exact', to: { paths: ['/headers'] }, req: { path: '/headers' }, want: true },
    { name: 'paths: a query is stripped', to: { paths: ['/headers'] }, req: { path: '/headers?x=1' }, want: true },
    { name: 'paths exact, longer path', to: { paths: ['/headers'] }, req: { path: '/headers/x' }, want: false },
    { name: 'paths prefix', to: { paths: ['/api/*'] }, req: { path: '/api/v1/users' }, want: true },
    { name: 'paths suffix', to: { paths: ['*.css'] }, req: { path: '/static/site.css' }, want: true },
    { name: 'notPaths', to: { notPaths: ['/admin*'] }, req: { path: '/admin/x' }, want: false },
    { name: 'notPaths other', to: { notPaths: ['/admin*'] }, req: { path: '/public' }, want: true },
    { name: 'hosts exact', to: { hosts: ['example.com'] }, req: { host: 'example.com' }, want: true },
    { name: 'hosts case-insensitive', to: { hosts: ['EXAMPLE.com'] }, req: { host: 'example.com' }, want: true },
    { name: 'hosts suffix', to: { hosts: ['*.example.com'] }, req: { host: 'api.example.com' }, want: true },
    { name: 'hosts other', to: { hosts: ['other.com'] }, req: { host: 'example.com' }, want: false },
    { name: 'hosts with the destination port', to: { hosts: ['example.com:8080'] }, req: { host: 'example.com', port: 8080 }, want: true },
    { name: 'hosts with the Host header port', to: { hosts: ['example.com:443'] }, req: { host: 'example.com', port: 8443, headers: { host: 'example.com:443' } }, want: true },
    { name: 'hosts with another port', to: { hosts: ['example.com:9090'] }, req: { host: 'example.com', port: 8080 }, want: false },
    { name: 'notHosts', to: { notHosts: ['example.com'] }, req: { host: 'example.com' }, want: false },
    { name: 'notHosts other', to: { notHosts: ['other.com'] }, req: { host: 'example.com' }, want: true },
    { name: 'ports', to: { ports: ['8080'] }, req: { port: 8080 }, want: true },
    { name: 'ports other', to: { ports: ['80'] }, req: { port: 8080 }, want: false },
    { name: 'notPorts', to: { notPorts: ['8080'] }, req: { port: 8080 }, want: false },
    { name: 'notPorts other', to: { notPorts: ['80'] }, req: { port: 8080 }, want: true },
    { name: 'every field must hold', to: { methods: ['GET'], paths: ['/a'] }, req: { method: 'GET', path: '/b' }, want: false },
  ];
  for (const c of cases) it(`${c.name}: ${c.want ? 'matches' : 'does not match'}`, () => assert.equal(allowedBy({ to: c.to }, c.req), c.want));
});

describe('when conditions', () => {
  const cases: { name: string; when: AuthorizationCondition; req: Partial<AuthzRequest>; want: boolean }[] = [
    { name: 'claim', when: when('request.auth.claims[sub]', ['alice']), req: JWT, want: true },
    { name: 'nested claim', when: when('request.auth.claims[name][given]', ['Ann']), req: JWT, want: true },
    { name: 'nested claim, other value', when: when('request.auth.claims[name][given]', ['Bob']), req: JWT, want: false },
    { name: 'list claim contains a value', when: when('request.auth.claims[groups]', ['admin', 'ops']), req: JWT, want: true },
    { name: 'list claim, prefix value', when: when('request.auth.claims[groups]', ['op*']), req: JWT, want: true },
    { name: 'list claim without the value', when: when('request.auth.claims[groups]', ['admin']), req: JWT, want: false },
    { name: 'claim notValues, an element matches', when: when('request.auth.claims[groups]', undefined, ['dev']), req: JWT, want: false },
    { name: 'claim notValues, none matches', when: when('request.auth.claims[groups]', undefined, ['banned']), req: JWT, want: true },
    { name: 'claim values, no JWT', when: when('request.auth.claims[groups]', ['dev']), req: {}, want: false },
    { name: 'claim notValues, no JWT', when: when('request.auth.claims[groups]', undefined, ['dev']), req: {}, want: true },
    { name: 'claim values, claim absent', when: when('request.auth.claims[tier]', ['gold']), req: JWT, want: false },
    { name: 'values and notValues both hold', when: when('request.auth.claims[groups]', ['dev'], ['banned']), req: JWT, want: true },
    { name: 'values hold, notValues fail', when: when('request.auth.claims[groups]', ['dev'], ['ops']), req: JWT, want: false },
    { name: 'header', when: when('request.headers[X-Tenant]', ['acme']), req: { headers: { 'x-tenant': 'acme' } }, want: true },
    { name: 'header missing', when: when('request.headers[x-tenant]', ['acme']), req: {}, want: false },
    { name: 'header missing, notValues', when: when('request.headers[x-tenant]', undefined, ['acme']), req: {}, want: true },
    { name: 'request.auth.principal', when: when('request.auth.principal', ['https://issuer.example/*']), req: JWT, want: true },
    { name: 'request.auth.audiences', when: when('request.auth.audiences', ['api']), req: { ...JWT, audiences: ['web', 'api'] }, want: true },
    { name: 'request.auth.audiences, none', when: when('request.auth.audiences', ['api']), req: JWT, want: false },
    { name: 'request.auth.presenter', when: when('request.auth.presenter', ['cli']), req: { presenter: 'cli' }, want: true },
    { name: 'source.ip', when: when('source.ip', ['10.0.0.0/8']), req: { sourceIp: '10.2.3.4' }, want: true },
    { name: 'source.ip notValues', when: when('source.ip', undefined, ['10.0.0.0/8']), req: { sourceIp: '10.2.3.4' }, want: false },
    { name: 'source.ip missing, notValues', when: when('source.ip', undefined, ['10.0.0.0/8']), req: {}, want: true },
    { name: 'remote.ip v6', when: when('remote.ip', ['2001:db8::/64']), req: { remoteIp: '2001:db8:0:1::1' }, want: false },
    { name: 'remote.ip v6 inside', when: when('remote.ip', ['2001:db8::/48']), req: { remoteIp: '2001:db8::1' }, want: true },
    { name: 'destination.ip', when: when('destination.ip', ['10.0.0.5']), req: { destinationIp: '10.0.0.5' }, want: true },
    { name: 'destination.port', when: when('destination.port', ['8080']), req: { port: 8080 }, want: true },
    { name: 'destination.port other', when: when('destination.port', ['80']), req: { port: 8080 }, want: false },
    { name: 'source.namespace missing', when: when('source.namespace', ['default']), req: {}, want: false },
    { name: 'source.principal', when: when('source.principal', ['*']), req: { sourcePrincipal: 'cluster.local/ns/a/sa/b' }, want: true },
    { name: 'connection.sni', when: when('connection.sni', ['*.example.com']), req: { sni: 'api.example.com' }, want: true },
    { name: 'unknown key fails closed in ALLOW', when: when('request.unknown', ['x']), req: {}, want: false },
  ];
  for (const c of cases) it(`${c.name}: ${c.want ? 'holds' : 'does not hold'}`, () => assert.equal(allowedBy({ when: [c.when] }, c.req), c.want));

  it('an unknown key fails closed in DENY (holds)', () => {
    const d = evaluate([policy('ns/deny', 'DENY', [{ when: [when('request.unknown', ['x'])] }])], authzRequest());
    assert.equal(d.allowed, false);
  });

  it('every condition must hold', () => {
    const conds = [when('request.auth.claims[sub]', ['alice']), when('request.headers[x-a]', ['1'])];
    assert.equal(allowedBy({ when: conds }, { ...JWT, headers: { 'x-a': '1' } }), true);
    assert.equal(allowedBy({ when: conds }, { ...JWT, headers: { 'x-a': '2' } }), false);
  });
});

describe('connection.sni and destination.ip: the TLS server name and the address the client connected to', () => {
  const denySni = policy('edge/deny-sni', 'DENY', [{ when: [when('connection.sni', ['admin.example.com', '*.internal'])] }]);
  const denyNotSni = policy('edge/deny-not-sni', 'DENY', [{ when: [when('connection.sni', undefined, ['shop.example.com'])] }]);
  const allowSni = policy('edge/allow-sni', 'ALLOW', [{ when: [when('connection.sni', ['shop.example.com'])] }]);
  const denyDst = policy('edge/deny-dst', 'DENY', [{ when: [when('destination.ip', ['10.0.0.0/24'])] }]);
  const denyNotDst = policy('edge/deny-not-dst', 'DENY', [{ when: [when('destination.ip', undefined, ['10.0.0.5'])] }]);
  const cases: { name: string; policies: ReturnType<typeof policy>[]; req: Partial<AuthzRequest>; allowed: boolean }[] = [
    { name: 'DENY values: that SNI', policies: [denySni], req: { sni: 'admin.example.com' }, allowed: false },
    { name: 'DENY values: a suffix pattern', policies: [denySni], req: { sni: 'db.internal' }, allowed: false },
    { name: 'DENY values: the SNI in another case (DNS names have none)', policies: [denySni], req: { sni: 'ADMIN.Example.COM' }, allowed: false },
    { name: 'DENY values: a value in another case', policies: [policy('edge/d', 'DENY', [{ when: [when('connection.sni', ['Admin.Example.com'])] }])], req: { sni: 'admin.example.com' }, allowed: false },
    { name: 'DENY values: another SNI', policies: [denySni], req: { sni: 'shop.example.com' }, allowed: true },
    { name: 'DENY values: no SNI (plaintext) does not match', policies: [denySni], req: {}, allowed: true },
    { name: 'DENY values: the Host does not stand in for the SNI', policies: [denySni], req: { host: 'admin.example.com', sni: 'shop.example.com' }, allowed: true },
    { name: 'DENY notValues: another SNI', policies: [denyNotSni], req: { sni: 'admin.example.com' }, allowed: false },
    { name: 'DENY notValues: that SNI', policies: [denyNotSni], req: { sni: 'shop.example.com' }, allowed: true },
    { name: 'DENY notValues: no SNI holds (Istio: an absent attribute is none of the values)', policies: [denyNotSni], req: {}, allowed: false },
    { name: 'ALLOW values: that SNI', policies: [allowSni], req: { sni: 'shop.example.com' }, allowed: true },
    { name: 'ALLOW values: no SNI', policies: [allowSni], req: {}, allowed: false },
    { name: 'ALLOW *: any SNI present', policies: [policy('edge/a', 'ALLOW', [{ when: [when('connection.sni', ['*'])] }])], req: { sni: 'x.example' }, allowed: true },
    { name: 'ALLOW *: no SNI', policies: [policy('edge/a', 'ALLOW', [{ when: [when('connection.sni', ['*'])] }])], req: {}, allowed: false },
    { name: 'DENY destination.ip: inside the block', policies: [denyDst], req: { destinationIp: '10.0.0.7' }, allowed: false },
    { name: 'DENY destination.ip: an IPv4-mapped address (a dual-stack socket)', policies: [denyDst], req: { destinationIp: '::ffff:10.0.0.7' }, allowed: false },
    { name: 'DENY destination.ip: outside', policies: [denyDst], req: { destinationIp: '10.0.1.7' }, allowed: true },
    { name: 'DENY destination.ip: unknown does not match', policies: [denyDst], req: {}, allowed: true },
    { name: 'DENY destination.ip notValues: another address', policies: [denyNotDst], req: { destinationIp: '10.0.0.6' }, allowed: false },
    { name: 'DENY destination.ip notValues: that address', policies: [denyNotDst], req: { destinationIp: '10.0.0.5' }, allowed: true },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.allowed ? 'allowed' : 'denied'}`, () => {
      const d = evaluate(c.policies, authzRequest(c.req));
      assert.equal(d.allowed, c.allowed, d.reason);
    });
  }
});

describe('header conditions read every value of the header (review finding 4)', () => {
  const denyAdmin = policy('default/deny-admin', 'DENY', [{ when: [when('request.headers[x-role]', ['admin'])] }]);
  const denyNotUser = policy('default/deny-not-user', 'DENY', [{ when: [when('request.headers[x-role]', undefined, ['user'])] }]);
  const allowUser = policy('default/allow-user', 'ALLOW', [{ when: [when('request.headers[x-role]', ['user'])] }]);
  const denyEvilHost = policy('default/deny-host', 'DENY', [{ to: [{ hosts: ['evil.example'] }] }]);
  const cases: { name: string; policies: ReturnType<typeof policy>[]; headers: AuthzRequest['headers']; allowed: boolean }[] = [
    { name: 'DENY values: one value', policies: [denyAdmin], headers: { 'x-role': 'admin' }, allowed: false },
    { name: 'DENY values: another value', policies: [denyAdmin], headers: { 'x-role': 'user' }, allowed: true },
    { name: 'DENY values: a second line', policies: [denyAdmin], headers: { 'x-role': ['user', 'admin'] }, allowed: false },
    { name: 'DENY values: lines joined by node:http', policies: [denyAdmin], headers: { 'x-role': 'user, admin' }, allowed: false },
    { name: 'DENY values: a list without spaces', policies: [denyAdmin], headers: { 'x-role': 'user,admin' }, allowed: false },
    { name: 'DENY values: the whole value still matches', policies: [policy('default/d', 'DENY', [{ when: [when('request.headers[x-role]', ['user, admin'])] }])], headers: { 'x-role': 'user, admin' }, allowed: false },
    { name: 'DENY values: a prefix pattern on an element', policies: [policy('default/d', 'DENY', [{ when: [when('request.headers[x-role]', ['adm*'])] }])], headers: { 'x-role': ['user', 'admin'] }, allowed: false },
    { name: 'DENY notValues: every value matches', policies: [denyNotUser], headers: { 'x-role': 'user' }, allowed: true },
    { name: 'DENY notValues: absent', policies: [denyNotUser], headers: {}, allowed: false },
    { name: 'ALLOW values: an element matches', policies: [allowUser], headers: { 'x-role': 'guest, user' }, allowed: true },
    { name: 'ALLOW values: none matches', policies: [allowUser], headers: { 'x-role': ['guest', 'admin'] }, allowed: false },
    { name: 'header names compare in any case', policies: [policy('default/d', 'DENY', [{ when: [{ key: 'request.headers[X-Role]', values: ['admin'] }] }])], headers: { 'x-role': 'admin' }, allowed: false },
    { name: 'hosts: a second Host line', policies: [denyEvilHost], headers: { host: ['example.com', 'evil.example'] }, allowed: false },
    { name: 'hosts: a Host list with a port', policies: [denyEvilHost], headers: { host: 'example.com, evil.example:8080' }, allowed: false },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.allowed ? 'allowed' : 'denied'}`, () => assert.equal(evaluate(c.policies, authzRequest({ headers: c.headers })).allowed, c.allowed));
  }
});

describe('headerEdits: headers as the backend gets them (review finding 3)', () => {
  const denyAdmin = policy('default/deny-admin', 'DENY', [{ when: [when('request.headers[x-jwt-role]', ['admin'])] }]);
  const requireSub = policy('default/require-sub', 'ALLOW', [{ when: [when('request.headers[x-jwt-sub]', ['*'])] }]);
  const cases: { name: string; policies: ReturnType<typeof policy>[]; req: Partial<AuthzRequest>; allowed: boolean }[] = [
    { name: 'a header an edit sets: the set value', policies: [denyAdmin], req: { headerEdits: { remove: [], set: [['x-jwt-role', 'admin']] } }, allowed: false },
    { name: "the set value replaces the client's", policies: [denyAdmin], req: { headers: { 'x-jwt-role': 'admin' }, headerEdits: { remove: [], set: [['x-jwt-role', 'user']] } }, allowed: true },
    { name: 'a removed header is absent', policies: [requireSub], req: { headers: { 'x-jwt-sub': 'forged' }, headerEdits: { remove: ['x-jwt-sub'], set: [] } }, allowed: false },
    { name: "without edits: the client's header", policies: [requireSub], req: { headers: { 'x-jwt-sub': 'forged' } }, allowed: true },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.allowed ? 'allowed' : 'denied'}`, () => assert.equal(evaluate(c.policies, authzRequest(c.req)).allowed, c.allowed));
  }
});

describe('policy order and outcome', () => {
  const requireJwt = policy('mesh-system/require-jwt', 'DENY', [{ from: [{ notRequestPrincipals: ['*'] }] }]);
  const onlyDev = policy('default/only-dev', 'ALLOW', [{ when: [when('request.auth.claims[groups]', ['dev'])] }]);
  const headersOnly = policy('default/headers', 'ALLOW', [{ to: [{ paths: ['/headers'] }] }]);
  const cases: { name: string; policies: ReturnType<typeof policy>[]; req: Partial<AuthzRequest>; allowed: boolean; reason: string }[] = [
    { name: 'no policies', policies: [], req: {}, allowed: true, reason: 'no policies' },
    // SPEC 7: no JWT and a policy denying requests without one → 403.
    { name: 'DENY without a request principal, anonymous', policies: [requireJwt], req: {}, allowed: false, reason: 'denied by DENY policy mesh-system/require-jwt rule 0' },
    { name: 'DENY without a request principal, with a token', policies: [requireJwt], req: JWT, allowed: true, reason: 'no DENY policy matched and no ALLOW policy applies' },
    { name: 'DENY wins over a matching ALLOW', policies: [headersOnly, requireJwt], req: { path: '/headers' }, allowed: false, reason: 'denied by DENY policy mesh-system/require-jwt rule 0' },
    { name: 'ALLOW matching', policies: [requireJwt, onlyDev], req: JWT, allowed: true, reason: 'allowed by ALLOW policy default/only-dev' },
    { name: 'the second ALLOW matching', policies: [headersOnly, onlyDev], req: JWT, allowed: true, reason: 'allowed by ALLOW policy default/only-dev' },
    { name: 'no ALLOW matching', policies: [headersOnly, onlyDev], req: { path: '/ip' }, allowed: false, reason: 'no ALLOW policy matched (2 apply)' },
    { name: 'ALLOW with no rules denies everything', policies: [policy('default/nothing', 'ALLOW', [])], req: JWT, allowed: false, reason: 'no ALLOW policy matched (1 apply)' },
    { name: 'ALLOW with rules: [{}] allows everything', policies: [policy('default/all', 'ALLOW', [{}])], req: {}, allowed: true, reason: 'allowed by ALLOW policy default/all' },
    { name: 'DENY with no rules never matches', policies: [policy('default/none', 'DENY', [])], req: {}, allowed: true, reason: 'no DENY policy matched and no ALLOW policy applies' },
    { name: 'DENY with rules: [{}] denies everything', policies: [policy('default/all', 'DENY', [{}])], req: JWT, allowed: false, reason: 'denied by DENY policy default/all rule 0' },
    { name: 'the matching DENY rule is named', policies: [policy('default/d', 'DENY', [{ to: [{ paths: ['/a'] }] }, { to: [{ paths: ['/b'] }] }])], req: { path: '/b' }, allowed: false, reason: 'denied by DENY policy default/d rule 1' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = evaluate(c.policies, authzRequest(c.req));
      assert.equal(d.allowed, c.allowed);
      assert.equal(d.reason, c.reason);
    });
  }

  it('names the deciding policy, action and rule', () => {
    const d = evaluate([requireJwt], authzRequest());
    assert.deepEqual(d, { allowed: false, reason: 'denied by DENY policy mesh-system/require-jwt rule 0', policy: 'mesh-system/require-jwt', action: 'DENY', ruleIndex: 0 });
  });

  it('ANDs from, to and when, and ORs the entries of each', () => {
    const p = policy('default/p', 'ALLOW', [{
      from: [{ requestPrincipals: ['*/bob'] }, { requestPrincipals: ['*/alice'] }],
      to: [{ methods: ['POST'] }, { paths: ['/headers'] }],
      when: [when('request.auth.claims[groups]', ['ops'])],
    }]);
    assert.equal(evaluate([p], authzRequest({ ...JWT, path: '/headers' })).allowed, true);
    assert.equal(evaluate([p], authzRequest({ ...JWT, path: '/other' })).allowed, false);
    assert.equal(evaluate([p], authzRequest({ path: '/headers' })).allowed, false);
  });

  it('AUDIT is not evaluated (no audit provider here): it never changes the outcome, and leaves no trace in it', () => {
    const audit = policy('default/audit', 'AUDIT', [{}]);
    assert.deepEqual(evaluate([audit], authzRequest()), { allowed: true, reason: 'no DENY policy matched and no ALLOW policy applies' });
    const nothing = policy('default/nothing', 'ALLOW', []);
    assert.deepEqual(evaluate([audit, nothing], authzRequest()), evaluate([nothing], authzRequest()));
    // A rule whose condition would throw if read: an AUDIT policy is never looked into.
    const trap = policy('default/trap', 'AUDIT', [{ when: [{ key: 'request.auth.claims[x]', get claimPath(): string[] { throw new Error('evaluated'); } }] }]);
    assert.equal(evaluate([trap], authzRequest()).allowed, true);
  });

  it('a CUSTOM policy left to evaluate (its authorizer cannot be asked) denies what it selects, before DENY and ALLOW', () => {
    const custom = { ...policy('default/ext', 'CUSTOM', [{ to: [{ paths: ['/admin*'] }] }]), provider: 'gone' };
    const allowAll = policy('default/all', 'ALLOW', [{}]);
    const d = evaluate([allowAll, custom], authzRequest({ path: '/admin/x' }));
    assert.equal(d.allowed, false);
    assert.equal(d.action, 'CUSTOM');
    assert.match(d.reason, /denied by CUSTOM policy default\/ext rule 0: its provider "gone" cannot be used/);
    assert.equal(evaluate([allowAll, custom], authzRequest({ path: '/public' })).reason, 'allowed by ALLOW policy default/all');
  });

  it('selectCustom finds the first CUSTOM policy whose rules select the request', () => {
    const a = { ...policy('default/a', 'CUSTOM', [{ to: [{ methods: ['POST'] }] }]), provider: 'p' };
    const b = { ...policy('default/b', 'CUSTOM', [{ to: [{ paths: ['/x'] }] }, { to: [{ paths: ['/admin*'] }] }]), provider: 'p' };
    assert.equal(selectCustom([a, b], authzRequest({ path: '/public' })), undefined);
    const hit = selectCustom([policy('default/deny', 'DENY', [{}]), a, b], authzRequest({ path: '/admin/1' }));
    assert.deepEqual([hit?.policy.meta.name, hit?.rule], ['b', 1]);
    assert.equal(selectCustom([a, b], authzRequest({ method: 'POST', path: '/admin/1' }))?.policy.meta.name, 'a');
  });
});

describe('serviceAccounts and pseudo-header conditions', () => {
  it('serviceAccounts match the peer principal\'s namespace and account exactly, any trust domain', () => {
    const cases: { name: string; from: AuthorizationSource; principal?: string; want: boolean }[] = [
      { name: 'same account', from: { serviceAccounts: ['shop/web'] }, principal: 'cluster.local/ns/shop/sa/web', want: true },
      { name: 'another trust domain', from: { serviceAccounts: ['shop/web'] }, principal: 'example.org/ns/shop/sa/web', want: true },
      { name: 'another account', from: { serviceAccounts: ['shop/web'] }, principal: 'cluster.local/ns/shop/sa/web2', want: false },
      { name: 'another namespace', from: { serviceAccounts: ['shop/web'] }, principal: 'cluster.local/ns/shop2/sa/web', want: false },
      { name: 'no peer identity', from: { serviceAccounts: ['shop/web'] }, want: false },
      { name: 'a principal of another shape', from: { serviceAccounts: ['shop/web'] }, principal: 'cluster.local/x/ns/shop/sa/web', want: false },
      { name: 'not: the account', from: { notServiceAccounts: ['shop/web'] }, principal: 'cluster.local/ns/shop/sa/web', want: false },
      { name: 'not: another', from: { notServiceAccounts: ['shop/web'] }, principal: 'cluster.local/ns/shop/sa/db', want: true },
      { name: 'not: no peer identity', from: { notServiceAccounts: ['shop/web'] }, want: true },
    ];
    for (const c of cases) {
      assert.equal(allowedBy({ from: c.from }, c.principal !== undefined ? { sourcePrincipal: c.principal } : {}), c.want, c.name);
    }
  });

  it('request.headers[:authority|:method|:path] read the request\'s authority, method and whole target', () => {
    assert.equal(allowedBy({ when: [{ key: 'request.headers[:authority]', header: ':authority', values: ['a.example:8080'] }] }, { headers: { host: 'a.example:8080' } }), true);
    assert.equal(allowedBy({ when: [{ key: 'request.headers[:authority]', header: ':authority', values: ['b.example'] }] }, { headers: { host: 'a.example' } }), false);
    assert.equal(allowedBy({ when: [{ key: 'request.headers[:method]', header: ':method', values: ['POST'] }] }, { method: 'POST' }), true);
    assert.equal(allowedBy({ when: [{ key: 'request.headers[:path]', header: ':path', values: ['/a?x=1'] }] }, { path: '/a?x=1' }), true);
    assert.equal(allowedBy({ when: [{ key: 'request.headers[:path]', header: ':path', values: ['/a?x=1'] }] }, { path: '/a' }), false);
    // The operation still reads the path without its query.
    assert.equal(allowedBy({ to: { paths: ['/a'] } }, { path: '/a?x=1' }), true);
  });
});

describe('trustDomains and notTrustDomains', () => {
  it('match the peer principal\'s trust domain, `*` standing for any run of its characters', () => {
    const p = 'cluster.local/ns/shop/sa/web';
    const cases: { name: string; from: AuthorizationSource; principal?: string; want: boolean }[] = [
      { name: 'exact', from: { trustDomains: ['cluster.local'] }, principal: p, want: true },
      { name: 'another', from: { trustDomains: ['example.org'] }, principal: p, want: false },
      { name: 'a wildcard inside', from: { trustDomains: ['cluster.*'] }, principal: p, want: true },
      { name: 'a wildcard never reaches past the trust domain', from: { trustDomains: ['cluster.local/ns*'] }, principal: p, want: false },
      { name: 'middle star', from: { trustDomains: ['c*r.l*l'] }, principal: p, want: true },
      { name: 'no peer identity', from: { trustDomains: ['*'] }, want: false },
      { name: 'not: the domain', from: { notTrustDomains: ['cluster.local'] }, principal: p, want: false },
      { name: 'not: no peer identity', from: { notTrustDomains: ['cluster.local'] }, want: true },
    ];
    for (const c of cases) assert.equal(allowedBy({ from: c.from }, c.principal !== undefined ? { sourcePrincipal: c.principal } : {}), c.want, c.name);
  });
});
