// Istio's "Authorization on TCP": an ALLOW rule that needs an HTTP-only field matches no connection;
// a DENY rule's HTTP-only fields are ignored, so it matches more connections. AUDIT is not evaluated.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuthorizationRule } from '../../../src/config/resources/types.js';
import { evaluateConnection, type AuthzConnection } from '../../../src/security/authz/evaluate.js';
import { policy, when } from './factories.js';

const CONN: AuthzConnection = { port: 9000, sourceIp: '10.1.2.3', destinationIp: '10.0.0.5' };

describe('evaluateConnection', () => {
  type Rule = Partial<AuthorizationRule>;
  /** Whether one rule of `action` matches CONN (tweaked by `conn`). */
  const cases: { name: string; rule: Rule; conn?: Partial<AuthzConnection>; allow: boolean; deny: boolean }[] = [
    // HTTP-only fields: an ALLOW rule needing one never matches; a DENY rule ignores them.
    { name: 'requestPrincipals', rule: { from: [{ requestPrincipals: ['*'] }] }, allow: false, deny: true },
    { name: 'notRequestPrincipals (the usual "require a JWT" DENY)', rule: { from: [{ notRequestPrincipals: ['*'] }] }, allow: false, deny: true },
    { name: 'methods', rule: { to: [{ methods: ['GET'] }] }, allow: false, deny: true },
    { name: 'notMethods', rule: { to: [{ notMethods: ['GET'] }] }, allow: false, deny: true },
    { name: 'paths', rule: { to: [{ paths: ['/admin*'] }] }, allow: false, deny: true },
    { name: 'notPaths', rule: { to: [{ notPaths: ['/public'] }] }, allow: false, deny: true },
    { name: 'hosts', rule: { to: [{ hosts: ['example.com'] }] }, allow: false, deny: true },
    { name: 'notHosts', rule: { to: [{ notHosts: ['example.com'] }] }, allow: false, deny: true },
    { name: 'request.headers', rule: { when: [when('request.headers[x-a]', ['1'])] }, allow: false, deny: true },
    { name: 'request.auth.claims', rule: { when: [when('request.auth.claims[groups]', ['dev'])] }, allow: false, deny: true },
    { name: 'request.auth.principal', rule: { when: [when('request.auth.principal', ['*'])] }, allow: false, deny: true },
    { name: 'request.auth.audiences', rule: { when: [when('request.auth.audiences', ['api'])] }, allow: false, deny: true },
    { name: 'request.auth.presenter', rule: { when: [when('request.auth.presenter', undefined, ['x'])] }, allow: false, deny: true },
    { name: 'an HTTP field in one of several sources', rule: { from: [{ ipBlocks: ['10.0.0.0/8'] }, { requestPrincipals: ['*'] }] }, allow: false, deny: true },
    // A DENY rule keeps its TCP fields: the HTTP ones are dropped, not the rule.
    { name: 'paths and a port that matches', rule: { to: [{ paths: ['/x'], ports: ['9000'] }] }, allow: false, deny: true },
    { name: 'paths and another port', rule: { to: [{ paths: ['/x'], ports: ['80'] }] }, allow: false, deny: false },
    { name: 'requestPrincipals and an ipBlock that does not match', rule: { from: [{ requestPrincipals: ['*'], ipBlocks: ['192.168.0.0/16'] }] }, allow: false, deny: false },
    // TCP fields work as for requests.
    { name: 'ports', rule: { to: [{ ports: ['9000'] }] }, allow: true, deny: true },
    { name: 'ports, other', rule: { to: [{ ports: ['80'] }] }, allow: false, deny: false },
    { name: 'notPorts', rule: { to: [{ notPorts: ['9000'] }] }, allow: false, deny: false },
    { name: 'ipBlocks', rule: { from: [{ ipBlocks: ['10.0.0.0/8'] }] }, allow: true, deny: true },
    { name: 'notIpBlocks', rule: { from: [{ notIpBlocks: ['10.0.0.0/8'] }] }, allow: false, deny: false },
    { name: 'remoteIpBlocks: the peer address', rule: { from: [{ remoteIpBlocks: ['10.1.0.0/16'] }] }, allow: true, deny: true },
    { name: 'principals, no identity', rule: { from: [{ principals: ['*'] }] }, allow: false, deny: false },
    { name: 'principals', rule: { from: [{ principals: ['cluster.local/ns/a/sa/b'] }] }, conn: { sourcePrincipal: 'cluster.local/ns/a/sa/b' }, allow: true, deny: true },
    { name: 'namespaces', rule: { from: [{ namespaces: ['a'] }] }, conn: { sourceNamespace: 'a' }, allow: true, deny: true },
    { name: 'notNamespaces, none', rule: { from: [{ notNamespaces: ['a'] }] }, allow: true, deny: true },
    { name: 'source.ip', rule: { when: [when('source.ip', ['10.1.2.0/24'])] }, allow: true, deny: true },
    { name: 'remote.ip', rule: { when: [when('remote.ip', undefined, ['10.1.2.3'])] }, allow: false, deny: false },
    { name: 'destination.ip', rule: { when: [when('destination.ip', ['10.0.0.5'])] }, allow: true, deny: true },
    { name: 'destination.port', rule: { when: [when('destination.port', ['9000'])] }, allow: true, deny: true },
    { name: 'source.principal', rule: { when: [when('source.principal', ['*'])] }, allow: false, deny: false },
    { name: 'source.namespace', rule: { when: [when('source.namespace', ['a'])] }, conn: { sourceNamespace: 'a' }, allow: true, deny: true },
    { name: 'connection.sni', rule: { when: [when('connection.sni', ['*.example.com'])] }, conn: { sni: 'db.example.com' }, allow: true, deny: true },
    { name: 'connection.sni, another', rule: { when: [when('connection.sni', ['*.example.com'])] }, conn: { sni: 'db.example.org' }, allow: false, deny: false },
    { name: 'connection.sni, none (plaintext)', rule: { when: [when('connection.sni', ['*.example.com'])] }, allow: false, deny: false },
    { name: 'connection.sni notValues, none (plaintext)', rule: { when: [when('connection.sni', undefined, ['db.example.com'])] }, allow: true, deny: true },
    { name: 'destination.ip, another', rule: { when: [when('destination.ip', ['10.0.0.6'])] }, allow: false, deny: false },
    { name: 'an unknown key fails closed (holds in DENY only, as for requests)', rule: { when: [when('connection.unknown', ['x'])] }, allow: false, deny: true },
    { name: 'rules: [{}]', rule: {}, allow: true, deny: true },
  ];
  for (const c of cases) {
    it(`${c.name}: ALLOW ${c.allow ? 'matches' : 'does not match'}, DENY ${c.deny ? 'matches' : 'does not match'}`, () => {
      const conn = { ...CONN, ...c.conn };
      assert.equal(evaluateConnection([policy('ns/allow', 'ALLOW', [c.rule])], conn).allowed, c.allow, 'ALLOW');
      assert.equal(evaluateConnection([policy('ns/deny', 'DENY', [c.rule])], conn).allowed, !c.deny, 'DENY');
      assert.deepEqual(evaluateConnection([policy('ns/audit', 'AUDIT', [c.rule])], conn), { allowed: true, reason: 'no DENY policy matched and no ALLOW policy applies' }, 'AUDIT');
    });
  }

  it('keeps the order: DENY, then ALLOW (none applies: allowed; else one must match)', () => {
    const httpAllow = policy('ns/http-allow', 'ALLOW', [{ to: [{ paths: ['/'] }] }]);
    const portAllow = policy('ns/port-allow', 'ALLOW', [{ to: [{ ports: ['9000'] }] }]);
    const portDeny = policy('ns/port-deny', 'DENY', [{ to: [{ ports: ['9000'] }] }]);
    assert.deepEqual(evaluateConnection([], CONN), { allowed: true, reason: 'no policies' });
    assert.equal(evaluateConnection([httpAllow], CONN).reason, 'no ALLOW policy matched (1 apply)');
    assert.equal(evaluateConnection([httpAllow, portAllow], CONN).reason, 'allowed by ALLOW policy ns/port-allow');
    assert.equal(evaluateConnection([portAllow, portDeny], CONN).reason, 'denied by DENY policy ns/port-deny rule 0');
    assert.equal(evaluateConnection([policy('ns/d', 'DENY', [{ to: [{ ports: ['80'] }] }])], CONN).reason, 'no DENY policy matched and no ALLOW policy applies');
    // No authorizer is asked for a connection: what a CUSTOM rule selects is denied (a rule needing HTTP selects none).
    const custom = evaluateConnection([policy('ns/ext', 'CUSTOM', [{}])], CONN);
    assert.equal(custom.allowed, false);
    assert.match(custom.reason, /CUSTOM policy ns\/ext rule 0: external authorization of connections not carried as HTTP/);
    assert.equal(evaluateConnection([policy('ns/ext', 'CUSTOM', [{ to: [{ paths: ['/'] }] }])], CONN).allowed, true);
  });
});
