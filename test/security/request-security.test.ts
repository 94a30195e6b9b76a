// RequestSecurity: the JWT, then policy judging the request as the backend will get it; requests
// built as the fast path builds them (raw header lines, node:http's `headers` object from them).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { AuthorizationPolicy } from '../../src/config/resources/types.js';
import { DecisionLog } from '../../src/gateway/decisions.js';
import { headersObject } from '../../src/proxy/http1/headers.js';
import { JwtAuthenticator } from '../../src/security/jwt/authenticator.js';
import { quotedString, RequestSecurity, type RequestContext, type SecurityOutcome } from '../../src/security/request-security.js';
import { policy, when } from './authz/factories.js';
import { readExtAuthzProviders } from '../../src/config/ext-authz-providers.js';
import { Authorizers } from '../../src/security/ext-authz/authorizers.js';
import type { CheckAnswer, CheckInput } from '../../src/security/ext-authz/check.js';
import { jwksOf, makeKey, rule, sign, type SigningKey } from './jwt/support.js';

const ISS = 'https://issuer.example';
const PORT = 8080;

/** A request as the proxy hands it to a decider: `raw` is name, value, name, value... */
function request(raw: string[], url = '/'): IncomingMessage {
  return { method: 'GET', url, rawHeaders: raw, headers: headersObject(raw), socket: {} } as unknown as IncomingMessage;
}

describe('RequestSecurity', () => {
  let key: SigningKey;
  let intruder: SigningKey;
  const opened: JwtAuthenticator[] = [];

  before(async () => {
    key = await makeKey('RS256', 'k1');
    intruder = await makeKey('RS256', 'k1');
  });
  after(() => {
    for (const a of opened) a.close();
  });

  function security(policies: AuthorizationPolicy[] = [], withRules = true): { sec: RequestSecurity; decisions: DecisionLog } {
    const authenticator = new JwtAuthenticator({ refreshIntervalMs: 60_000, insecureSkipVerify: false });
    opened.push(authenticator);
    const decisions = new DecisionLog();
    const sec = new RequestSecurity(authenticator, decisions);
    sec.configure(withRules ? [rule({
      issuer: ISS, jwks: jwksOf(key),
      outputClaimToHeaders: [{ header: 'x-jwt-sub', claim: ['sub'] }, { header: 'x-jwt-role', claim: ['role'] }],
    })] : [], policies);
    return { sec, decisions };
  }

  const token = (sub: string, claims: Record<string, unknown> = {}, by: SigningKey = key): Promise<string> =>
    sign(by, { iss: ISS, sub, exp: Math.floor(Date.now() / 1000) + 3600, ...claims });

  async function check(sec: RequestSecurity, decisions: DecisionLog, req: IncomingMessage): Promise<SecurityOutcome> {
    return await sec.check(req, { port: PORT, sourceIp: '10.0.0.1' }, decisions.begin(req, 'test'));
  }

  const requireSub = policy('ns/require-sub', 'ALLOW', [{ when: [when('request.headers[x-jwt-sub]', ['*'])] }]);
  const denyAdmin = policy('ns/deny-admin', 'DENY', [{ when: [when('request.headers[x-jwt-role]', ['admin'])] }]);
  const denyRoleAdmin = policy('ns/deny-x-role', 'DENY', [{ when: [when('request.headers[x-role]', ['admin'])] }]);

  describe('the interplay of tokens, forged headers and policy', () => {
    const cases: {
      name: string; policies?: AuthorizationPolicy[]; raw: () => Promise<string[]>;
      status?: 401 | 403; principal?: string; removes?: string[]; sets?: [string, string][];
    }[] = [
      {
        name: 'a valid token in one Authorization line and a forged one in another: 401',
        raw: async () => ['Authorization', `Bearer ${await token('alice')}`, 'Authorization', `Bearer ${await token('mallory', {}, intruder)}`],
        status: 401,
      },
      {
        name: 'a forged token after Basic in the line: 401',
        raw: async () => ['Authorization', `Basic Zm9v, Bearer ${await token('mallory', {}, intruder)}`],
        status: 401,
      },
      {
        name: 'valid tokens only: the first one\'s principal, every token removed',
        raw: async () => ['authorization', `Bearer ${await token('alice')}`, 'authorization', `Bearer ${await token('bob')}`],
        principal: `${ISS}/alice`, removes: ['authorization', 'x-jwt-role'], sets: [['x-jwt-sub', 'alice']],
      },
      {
        name: 'no token and a forged x-jwt-sub: removed, and policy does not see it',
        policies: [requireSub], raw: async () => ['X-Jwt-Sub', 'admin', 'x-jwt-role', 'admin'],
        status: 403, removes: ['x-jwt-sub', 'x-jwt-role'],
      },
      {
        name: 'a valid token: policy sees the claim header the filter writes',
        policies: [requireSub], raw: async () => ['authorization', `Bearer ${await token('alice')}`],
        principal: `${ISS}/alice`, removes: ['authorization', 'x-jwt-role'], sets: [['x-jwt-sub', 'alice']],
      },
      {
        name: 'DENY on a header a claim writes sees the written value, not the client\'s',
        policies: [denyAdmin], raw: async () => ['authorization', `Bearer ${await token('alice', { role: 'admin' })}`, 'x-jwt-role', 'user'],
        status: 403,
      },
      {
        name: 'a client claiming admin in a claim header is not believed',
        policies: [denyAdmin], raw: async () => ['authorization', `Bearer ${await token('alice', { role: 'user' })}`, 'x-jwt-role', 'admin'],
        principal: `${ISS}/alice`, sets: [['x-jwt-sub', 'alice'], ['x-jwt-role', 'user']],
      },
      {
        name: 'a header condition reads a second line node:http would keep from it',
        policies: [denyRoleAdmin], raw: async () => ['x-role', 'user', 'X-Role', 'admin'],
        status: 403,
      },
    ];
    for (const c of cases) {
      it(c.name, async () => {
        const { sec, decisions } = security(c.policies);
        const req = request(await c.raw());
        const outcome = await check(sec, decisions, req);
        assert.equal(outcome.reply?.status, c.status, JSON.stringify(outcome.reply));
        if (c.principal !== undefined) assert.equal(outcome.authn.outcome === 'valid' && outcome.authn.principal, c.principal);
        if (c.removes !== undefined) assert.deepEqual(outcome.edits.removeHeaders, c.removes);
        if (c.sets !== undefined) assert.deepEqual(outcome.edits.setHeaders, c.sets);
        // The outcome's edits are what upstreamEdits gives for the same request.
        assert.deepEqual(outcome.edits, sec.upstreamEdits(outcome.authn, req.url!, req.headers));
      });
    }
  });

  it('upstreamEdits drops a client\'s claim headers whatever the JWT outcome (review finding 2)', () => {
    const { sec } = security();
    for (const authn of [{ outcome: 'absent' } as const, { outcome: 'invalid', reason: 'malformed', message: 'x', location: { kind: 'param', name: 'access_token' } } as const]) {
      assert.deepEqual(sec.upstreamEdits(authn, '/'), { setHeaders: [], removeHeaders: ['x-jwt-sub', 'x-jwt-role'] }, authn.outcome);
    }
    assert.deepEqual(security([], false).sec.upstreamEdits({ outcome: 'absent' }, '/'), { setHeaders: [], removeHeaders: [] }, 'no rules: no edits');
  });

  it('answers without a promise once the token is cached', async () => {
    const { sec, decisions } = security([requireSub]);
    const req = request(['authorization', `Bearer ${await token('carol')}`]);
    assert.ok(sec.check(req, { port: PORT }, decisions.begin(req, 'test')) instanceof Promise, 'a signature to check');
    await check(sec, decisions, req);
    const again = sec.check(req, { port: PORT }, decisions.begin(req, 'test'));
    assert.ok(!(again instanceof Promise));
    assert.equal(again.reply, undefined);
  });

  describe('the 401 realm (review finding 6)', () => {
    const cases: [host: string, header: string][] = [
      ['example.com:8080', 'Bearer realm="example.com:8080", error="invalid_token"'],
      ['evil", error="x', 'Bearer realm="evil\\", error=\\"x", error="invalid_token"'],
      ['a\\b', 'Bearer realm="a\\\\b", error="invalid_token"'],
      ['a\x01b\x7fc\tdé€', 'Bearer realm="abc\tdé", error="invalid_token"'],
    ];
    for (const [host, header] of cases) {
      it(`Host ${JSON.stringify(host)}`, async () => {
        const { sec, decisions } = security();
        const outcome = await check(sec, decisions, request(['host', host, 'authorization', 'Bearer not-a-jwt']));
        assert.equal(outcome.reply?.headers?.['www-authenticate'], header);
      });
    }
    it('quotedString escapes backslash and double quote', () => assert.equal(quotedString('a"b\\c'), '"a\\"b\\\\c"'));
  });

  describe('the connection as policy sees it: connection.sni and destination.ip', () => {
    const denySni = policy('edge/deny-sni', 'DENY', [{ when: [when('connection.sni', ['admin.example.com'])] }]);
    const denyDst = policy('edge/deny-dst', 'DENY', [{ when: [when('destination.ip', ['10.9.9.9'])] }]);
    it('a request: the context\'s SNI and destination address reach the policy', async () => {
      const { sec, decisions } = security([denySni, denyDst], false);
      const req = request(['Host', 'shop.example.com']);
      const judge = async (ctx: Partial<RequestContext>): Promise<number | undefined> =>
        (await sec.check(req, { port: PORT, sourceIp: '10.0.0.1', ...ctx }, decisions.begin(req, 'test'))).reply?.status;
      assert.equal(await judge({ sni: 'admin.example.com' }), 403);
      assert.equal(await judge({ sni: 'shop.example.com' }), undefined);
      assert.equal(await judge({}), undefined, 'no SNI: a values condition does not match');
      assert.equal(await judge({ destinationIp: '10.9.9.9' }), 403);
      assert.equal(await judge({ destinationIp: '10.9.9.8' }), undefined);
    });
    it('readsSni: only when a policy in force names connection.sni (TLS carried as bytes waits for its ClientHello then)', () => {
      assert.equal(security([denySni], false).sec.readsSni, true);
      assert.equal(security([denyDst], false).sec.readsSni, false);
      assert.equal(security([policy('edge/audit', 'AUDIT', [{ when: [when('connection.sni', ['a.example'])] }])], false).sec.readsSni, false, 'AUDIT is left out');
    });
    it('a connection: the same', () => {
      const { sec } = security([denySni, denyDst], false);
      assert.equal(sec.checkConnection({ port: PORT, sni: 'admin.example.com' }).allowed, false);
      assert.equal(sec.checkConnection({ port: PORT, sni: 'shop.example.com' }).allowed, true);
      assert.equal(sec.checkConnection({ port: PORT, destinationIp: '10.9.9.9' }).allowed, false);
      assert.equal(sec.checkConnection({ port: PORT }).allowed, true);
    });
  });

  it('AUDIT policies are left out (no effect here): with only those, nothing is checked', () => {
    const audit = policy('ns/audit', 'AUDIT', [{}]);
    const { sec } = security([audit], false);
    assert.deepEqual([sec.idle, sec.hasPolicies], [true, false]);
    const { sec: both } = security([audit, policy('ns/deny-all', 'DENY', [{}])], false);
    assert.deepEqual([both.idle, both.hasPolicies], [false, true]);
    assert.match(both.checkConnection({ port: PORT }).reason, /denied by DENY policy ns\/deny-all/);
  });

  describe('checkConnection (review finding 5)', () => {
    const requireJwt = policy('mesh-system/require-jwt', 'DENY', [{ from: [{ notRequestPrincipals: ['*'] }] }]);
    const onlyPort = policy('ns/db', 'ALLOW', [{ to: [{ ports: ['5432'] }], from: [{ ipBlocks: ['10.0.0.0/8'] }] }]);
    const cases: { name: string; policies: AuthorizationPolicy[]; rules?: boolean; port?: number; hasPolicies: boolean; allowed: boolean }[] = [
      { name: 'RequestAuthentication alone never blocks a connection', policies: [], hasPolicies: false, allowed: true },
      { name: 'no policy, no rule', policies: [], rules: false, hasPolicies: false, allowed: true },
      { name: 'a DENY of HTTP fields alone denies every connection', policies: [requireJwt], hasPolicies: true, allowed: false },
      { name: 'an ALLOW on port and address', policies: [onlyPort], port: 5432, hasPolicies: true, allowed: true },
      { name: 'an ALLOW on port and address, another port', policies: [onlyPort], port: 6379, hasPolicies: true, allowed: false },
    ];
    for (const c of cases) {
      it(c.name, () => {
        const { sec, decisions } = security(c.policies, c.rules ?? true);
        assert.equal(sec.hasPolicies, c.hasPolicies);
        const d = sec.checkConnection({ port: c.port ?? 5432, sourceIp: '10.1.1.1', destinationIp: '10.0.0.9' });
        assert.equal(d.allowed, c.allowed, d.reason);
        assert.ok(d.reason.length > 0);
        // Pure: the connection may still turn out HTTP; the data plane counts it once it is carried or refused.
        assert.deepEqual([...(decisions.counts.get('authz') ?? new Map())], []);
      });
    }
  });

  describe('CUSTOM: the external authorizer first, then DENY and ALLOW on the request it edited', () => {
    const { providers } = readExtAuthzProviders([{ name: 'authz', envoyExtAuthzGrpc: { service: 'a', port: 1 } }]);
    const custom = (name: string, provider: string, rules: Parameters<typeof policy>[2]): AuthorizationPolicy => ({ ...policy(`ns/${name}`, 'CUSTOM', rules), provider });
    const checkAdmin = custom('ext', 'authz', [{ to: [{ paths: ['/admin*'] }] }]);

    function withAuthorizer(policies: AuthorizationPolicy[], answer: (input: CheckInput) => CheckAnswer): { sec: RequestSecurity; decisions: DecisionLog; asked: CheckInput[]; warnings: string[] } {
      const asked: CheckInput[] = [];
      const authenticator = new JwtAuthenticator({ refreshIntervalMs: 60_000, insecureSkipVerify: false });
      opened.push(authenticator);
      const decisions = new DecisionLog();
      const sec = new RequestSecurity(authenticator, decisions, new Authorizers(providers, () => ({
        check: (input) => { asked.push(input); return Promise.resolve(answer(input)); }, close: () => {},
      })), () => 'spiffe://cluster.local/ns/shop/sa/web');
      const warnings = sec.configure([rule({ issuer: ISS, jwks: jwksOf(key), outputClaimToHeaders: [{ header: 'x-jwt-sub', claim: ['sub'] }] })], policies);
      return { sec, decisions, asked, warnings };
    }
    const allowAs = (user: string): CheckAnswer => ({ kind: 'allow', upstream: [{ name: 'x-user', value: user, action: 'set' }, { name: 'x-jwt-sub', value: 'forged', action: 'set' }], remove: [], downstream: [['x-note', 'n']] });
    const withSocket = (raw: string[], url: string): IncomingMessage => {
      const req = request(raw, url) as unknown as { socket: unknown; httpVersion: string };
      req.socket = { once: () => {}, removeListener: () => {}, remotePort: 4000 };
      req.httpVersion = '1.1';
      return req as unknown as IncomingMessage;
    };

    it('a request no CUSTOM rule selects is not sent (and the check is synchronous)', () => {
      const { sec, decisions, asked, warnings } = withAuthorizer([checkAdmin], () => allowAs('x'));
      assert.deepEqual(warnings, [], 'its rules need HTTP: no connection is selected, nothing to say');
      const req = withSocket(['Host', 'a'], '/public');
      const outcome = sec.check(req, { port: PORT, sourceIp: '10.0.0.1' }, decisions.begin(req, 'test'));
      assert.equal(outcome instanceof Promise, false);
      assert.equal(asked.length, 0);
    });

    it('allowed: the authorizer\'s headers join the request (never the JWT filter\'s), DENY sees them, the client gets its lines', async () => {
      const denyBob = policy('ns/deny-bob', 'DENY', [{ when: [when('request.headers[x-user]', ['bob'])] }]);
      const sub = await token('carol');
      const alice = withAuthorizer([checkAdmin, denyBob], () => allowAs('alice'));
      const req = withSocket(['Host', 'shop', 'Authorization', `Bearer ${sub}`, 'X-Custom', 'c'], '/admin/1?x=y');
      const ok = await check(alice.sec, alice.decisions, req);
      assert.equal(ok.reply, undefined);
      assert.deepEqual(ok.edits.setHeaders.filter(([n]) => n === 'x-user' || n === 'x-jwt-sub'), [['x-jwt-sub', 'carol'], ['x-user', 'alice']]);
      assert.deepEqual(ok.edits.responseHeaders, [['x-note', 'n']]);
      // The authorizer was told the request as the JWT filter left it: the token gone, the claim header written.
      const input = alice.asked[0]!;
      assert.deepEqual([input.path, input.host, input.headers.get('authorization'), input.headers.get('x-jwt-sub'), input.headers.get('x-custom')],
        ['/admin/1?x=y', 'shop', undefined, ['carol'], ['c']]);
      assert.deepEqual([input.source, input.destination], [{ address: '10.0.0.1', port: 4000 }, { address: '', port: PORT }]);
      // Over mesh mTLS both ends have their identity.
      const mtls = withSocket(['Host', 'shop'], '/admin');
      await alice.sec.check(mtls, { port: PORT, sourceIp: '10.0.0.1', sourcePrincipal: 'cluster.local/ns/a/sa/b' }, alice.decisions.begin(mtls, 'test'));
      assert.deepEqual([alice.asked[1]!.source.principal, alice.asked[1]!.destination.principal],
        ['spiffe://cluster.local/ns/a/sa/b', 'spiffe://cluster.local/ns/shop/sa/web']);
      const bob = withAuthorizer([checkAdmin, denyBob], () => allowAs('bob'));
      const denied = await check(bob.sec, bob.decisions, withSocket(['Host', 'shop'], '/admin'));
      assert.equal(denied.reply?.status, 403);
      assert.match(denied.authz?.reason ?? '', /denied by DENY policy ns\/deny-bob/);
    });

    it('refused: the authorizer\'s reply, flag UAEX, before any DENY or ALLOW is evaluated', async () => {
      const { sec, decisions } = withAuthorizer([checkAdmin, policy('ns/allow-all', 'ALLOW', [{}])],
        () => ({ kind: 'deny', status: 401, body: 'who are you', headers: [['www-authenticate', 'Basic']] }));
      const req = withSocket(['Host', 'shop'], '/admin');
      const draft = decisions.begin(req, 'test');
      const o = await sec.check(req, { port: PORT }, draft);
      assert.deepEqual(o.reply, { kind: 'reply', status: 401, body: 'who are you', headers: { 'www-authenticate': 'Basic' }, flag: 'UAEX', details: 'ext_authz_denied' });
      assert.match(draft.authz, /^denied by CUSTOM policy ns\/ext \(provider authz\): denied by the authorizer with 401/);
      assert.deepEqual([...(decisions.counts.get('ext_authz') ?? new Map())], [['denied', 1]]);
    });

    it('a provider the mesh config lacks, or two providers on one workload: the selected requests are denied, and said', async () => {
      for (const policies of [[custom('ext', 'missing', [{}])], [checkAdmin, custom('other', 'second', [{ to: [{ paths: ['/x'] }] }])]]) {
        const { sec, decisions, asked, warnings } = withAuthorizer(policies, () => allowAs('alice'));
        assert.match(warnings.join('\n'), /spec\.provider\.name: .*(is not an envoyExtAuthzHttp or envoyExtAuthzGrpc provider|one provider per workload)/);
        const o = await check(sec, decisions, withSocket(['Host', 'shop'], policies.length === 1 ? '/' : '/x'));
        assert.equal(o.reply?.status, 403);
        assert.match(o.authz?.reason ?? '', /denied by CUSTOM policy/);
        assert.equal(asked.length, 0);
      }
    });

    it('connections not carried as HTTP that a CUSTOM rule selects are denied (no authorizer asked); the rest pass', () => {
      const { sec, warnings } = withAuthorizer([custom('ext', 'authz', [{ to: [{ ports: ['5432'] }] }])], () => allowAs('x'));
      assert.match(warnings[0] ?? '', /a connection not carried as HTTP that its rules select is denied/);
      assert.equal(sec.hasPolicies, true);
      assert.equal(sec.checkConnection({ port: 5432 }).allowed, false);
      assert.equal(sec.checkConnection({ port: 6379 }).allowed, true);
    });
  });
});

