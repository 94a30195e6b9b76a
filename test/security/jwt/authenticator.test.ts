// JwtAuthenticator against a real JWKS server on 127.0.0.1, with keys and tokens made by jose.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { JwtRule } from '../../../src/config/resources/types.js';
import { claimValues } from '../../../src/security/claims.js';
import { JwtAuthenticator, type AuthnResult, type JwtAuthenticatorOptions } from '../../../src/security/jwt/authenticator.js';
import { b64, Clock, deadUrl, JwksServer, jwksOf, logSink, makeKey, rule, sign, type SigningKey } from './support.js';

const ISS = 'https://issuer.example';
const OTHER_ISS = 'https://other.example';

type Headers = Record<string, string | string[] | undefined>;

function bearer(token: string): Headers {
  return { authorization: `Bearer ${token}` };
}

function expectValid(r: AuthnResult): Extract<AuthnResult, { outcome: 'valid' }> {
  assert.equal(r.outcome, 'valid', r.outcome === 'invalid' ? `${r.reason}: ${r.message}` : r.outcome);
  return r as Extract<AuthnResult, { outcome: 'valid' }>;
}

function expectInvalid(r: AuthnResult, reason: string): Extract<AuthnResult, { outcome: 'invalid' }> {
  assert.equal(r.outcome, 'invalid');
  const inv = r as Extract<AuthnResult, { outcome: 'invalid' }>;
  assert.equal(inv.reason, reason, inv.message);
  assert.ok(inv.message.length > 0);
  return inv;
}

describe('JwtAuthenticator', () => {
  let rsa: SigningKey;
  let ec: SigningKey;
  let server: JwksServer;
  const clock = new Clock();
  const opened: JwtAuthenticator[] = [];

  function authenticator(rules: readonly JwtRule[], over: Partial<JwtAuthenticatorOptions> = {}): JwtAuthenticator {
    const a = new JwtAuthenticator({ refreshIntervalMs: 20 * 60_000, insecureSkipVerify: false, now: clock.now, ...over });
    a.setRules(rules);
    opened.push(a);
    return a;
  }

  async function check(a: JwtAuthenticator, headers: Headers, url = '/'): Promise<AuthnResult> {
    return await a.authenticate({ headers, url });
  }

  /** A token of ISS valid for an hour, signed with `key`. */
  function token(key: SigningKey, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): Promise<string> {
    return sign(key, { iss: ISS, sub: 'alice', exp: clock.seconds + 3600, ...claims }, header);
  }

  before(async () => {
    rsa = await makeKey('RS256', 'rsa-1');
    ec = await makeKey('ES256', 'ec-1');
    server = await new JwksServer().start();
    server.body = jwksOf(rsa, ec);
  });

  after(async () => {
    for (const a of opened) a.close();
    await server.stop();
  });

  it('verifies RS256 and ES256 tokens and exposes nested, dotted, string and list claims', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
    const claims = {
      aud: ['web', 'api'], azp: 'frontend',
      groups: ['dev', 'ops'], name: { givenName: 'Alice', family: { name: 'Liddell' } },
      'example.com/role': 'admin', admin: true, level: 3,
    };
    for (const key of [rsa, ec]) {
      const v = expectValid(await check(a, bearer(await token(key, claims))));
      assert.equal(v.issuer, ISS);
      assert.equal(v.subject, 'alice');
      assert.equal(v.principal, `${ISS}/alice`);
      assert.deepEqual(v.audiences, ['web', 'api']);
      assert.equal(v.presenter, 'frontend');
      assert.deepEqual(v.location, { kind: 'header', name: 'authorization', prefix: 'Bearer ', ignoreCase: true });
      assert.deepEqual(claimValues(v.claims, ['groups']), ['dev', 'ops']);
      assert.deepEqual(claimValues(v.claims, ['name', 'givenName']), ['Alice']);
      assert.deepEqual(claimValues(v.claims, ['name', 'family', 'name']), ['Liddell']);
      assert.deepEqual(claimValues(v.claims, ['example.com/role']), ['admin']);
      assert.deepEqual(claimValues(v.claims, ['admin']), ['true']);
      assert.ok(Object.isFrozen(v.claims.name), 'claims are shared between requests: frozen');
    }
  });

  it('answers absent without a token, for Basic credentials and for an empty Bearer', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
    for (const headers of [{}, { authorization: 'Basic dXNlcjpwYXNz' }, { authorization: 'Bearer ' }, { authorization: 'Bearertoken' }]) {
      assert.deepEqual(a.authenticate({ headers, url: '/x?y=1' }), { outcome: 'absent' }, JSON.stringify(headers));
    }
    assert.deepEqual(authenticator([]).authenticate({ headers: bearer('x.y.z'), url: '/' }), { outcome: 'absent' }, 'no rules: no authentication');
  });

  it('takes the Bearer scheme in any case', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
    expectValid(await check(a, { authorization: `bEaReR ${await token(rsa)}` }));
  });

  it('refuses tokens that are not verifiable, with the reason', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url, audiences: ['api'] })]);
    const now = clock.seconds;
    const intruder = await makeKey('RS256', 'rsa-1');
    const good = await token(rsa, { aud: 'api' });
    const [h, p] = good.split('.');
    const cases: [string, string, string][] = [
      ['expired a second ago', await token(rsa, { aud: 'api', exp: now - 1 }), 'expired'],
      ['expiring this second', await token(rsa, { aud: 'api', exp: now }), 'expired'],
      ['nbf in the future', await token(rsa, { aud: 'api', nbf: now + 60 }), 'not_yet_valid'],
      ['another issuer', await sign(rsa, { iss: OTHER_ISS, aud: 'api', exp: now + 60 }), 'unknown_issuer'],
      ['no issuer', await sign(rsa, { aud: 'api', exp: now + 60 }), 'unknown_issuer'],
      ['audience not accepted', await token(rsa, { aud: ['web', 'mobile'] }), 'bad_audience'],
      ['no audience', await token(rsa), 'bad_audience'],
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${p}.`, 'unsupported_alg'],
      ['alg HS256 against an RSA key', `${b64({ alg: 'HS256', kid: 'rsa-1' })}.${p}.${b64('sig')}`, 'unsupported_alg'],
      ['signed by another key with the same kid', await sign(intruder, { iss: ISS, aud: 'api', exp: now + 60 }), 'bad_signature'],
      ['payload changed after signing', `${h}.${b64({ iss: ISS, aud: 'api', sub: 'mallory', exp: now + 60 })}.${good.split('.')[2]}`, 'bad_signature'],
      ['empty signature', `${h}.${p}.`, 'bad_signature'],
      ['two parts', `${h}.${p}`, 'malformed'],
      ['four parts', `${good}.x`, 'malformed'],
      ['not base64url', `${h}.${p}!.sig`, 'malformed'],
      ['header not JSON', `${b64('{nope')}.${p}.sig`, 'malformed'],
      ['payload a JSON array', `${h}.${b64([1, 2])}.sig`, 'malformed'],
      ['exp not a number', await token(rsa, { aud: 'api', exp: 'tomorrow' }), 'malformed'],
    ];
    for (const [name, t, reason] of cases) {
      const r = expectInvalid(await check(a, bearer(t)), reason);
      assert.equal(r.location.kind, 'header', name);
    }
    expectValid(await check(a, bearer(good)));
  });

  it('refuses a token of a configured issuer found where that issuer\'s rule does not look', async () => {
    const a = authenticator([
      rule({ issuer: ISS, jwksUri: server.url, fromHeaders: [{ name: 'x-jwt', prefix: '' }] }),
      rule({ issuer: OTHER_ISS, jwksUri: server.url }),
    ]);
    const r = expectInvalid(await check(a, bearer(await token(rsa))), 'unknown_issuer');
    assert.match(r.message, /not accepted in header authorization/);
    expectValid(await check(a, { 'x-jwt': await token(rsa) }));
  });

  it('answers synchronously for refusals that need no key', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
    const r = a.authenticate({ headers: bearer(await token(rsa, { exp: clock.seconds - 10 })), url: '/' });
    assert.ok(!(r instanceof Promise));
    expectInvalid(r, 'expired');
    expectInvalid(a.authenticate({ headers: bearer('garbage'), url: '/' }) as AuthnResult, 'malformed');
  });

  it('reads a custom header with its prefix, and only the listed locations', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url, fromHeaders: [{ name: 'X-Jwt-Assertion', prefix: 'Token ' }] })]);
    const t = await token(rsa);
    const v = expectValid(await check(a, { 'x-jwt-assertion': `Token ${t}` }));
    assert.deepEqual(v.location, { kind: 'header', name: 'x-jwt-assertion', prefix: 'Token ', ignoreCase: false });
    assert.equal((await check(a, { 'x-jwt-assertion': t })).outcome, 'absent', 'value without the prefix: no token');
    assert.equal((await check(a, bearer(t))).outcome, 'absent', 'Authorization is not read when locations are listed');
    assert.equal((await check(a, {}, `/?access_token=${t}`)).outcome, 'absent');
  });

  it('reads the access_token query parameter by default, and a listed cookie', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
    const t = await token(rsa);
    const v = expectValid(await check(a, {}, `/path?a=1&access_token=${t}&b=2`));
    assert.deepEqual(v.location, { kind: 'param', name: 'access_token' });
    assert.deepEqual(a.upstreamEdits(v, { url: `/path?a=1&access_token=${t}&b=2` }), { removeHeaders: [], setHeaders: [], url: '/path?a=1&b=2' });

    const c = authenticator([rule({ issuer: ISS, jwksUri: server.url, fromCookies: ['session'] })]);
    const headers = { cookie: `theme=dark; session=${t}` };
    const vc = expectValid(await check(c, headers));
    assert.deepEqual(c.upstreamEdits(vc, { url: '/', headers }), { removeHeaders: [], setHeaders: [['cookie', 'theme=dark']], url: '/' });
  });

  it('takes the first token in rule order when several locations carry one', async () => {
    const a = authenticator([
      rule({ issuer: OTHER_ISS, jwksUri: server.url, fromHeaders: [{ name: 'x-other', prefix: '' }] }),
      rule({ issuer: ISS, jwksUri: server.url }),
    ]);
    const r = expectInvalid(await check(a, { 'x-other': 'not-a-jwt', ...bearer(await token(rsa)) }), 'malformed');
    assert.deepEqual(r.location, { kind: 'header', name: 'x-other', prefix: '', ignoreCase: false });
  });

  it('verifies tokens of several rules (several RequestAuthentications), and tries rules of one issuer in turn', async () => {
    const a = authenticator([
      rule({ issuer: ISS, jwksUri: server.url, audiences: ['one'] }),
      rule({ issuer: OTHER_ISS, jwksUri: server.url }),
      rule({ issuer: ISS, jwks: jwksOf(rsa), audiences: ['two'] }),
    ]);
    const v = expectValid(await check(a, bearer(await token(rsa, { aud: 'two' }))));
    assert.deepEqual(v.rule.audiences, ['two']);
    expectValid(await check(a, bearer(await sign(ec, { iss: OTHER_ISS, exp: clock.seconds + 60 }))));
    expectInvalid(await check(a, bearer(await token(rsa, { aud: 'three' }))), 'bad_audience');
  });

  it('removes the token upstream unless forwardOriginalToken, and writes payload and claim headers', async () => {
    const rules = (forward: boolean): JwtRule[] => [rule({
      issuer: ISS, jwksUri: server.url, forwardOriginalToken: forward, outputPayloadToHeader: 'X-Jwt-Payload',
      outputClaimToHeaders: [
        { header: 'x-given', claim: ['name', 'givenName'] },
        { header: 'x-groups', claim: ['groups'] },
        { header: 'x-missing', claim: ['nothing'] },
        { header: 'x-evil', claim: ['evil'] },
      ],
    })];
    const payload = { iss: ISS, sub: 'alice', exp: clock.seconds + 3600, name: { givenName: 'Alice' }, groups: ['dev', 'ops'], evil: 'a\r\nx-injected: 1' };
    const t = await sign(rsa, payload);
    const dropped = authenticator(rules(false));
    const v = expectValid(await check(dropped, bearer(t)));
    const edits = dropped.upstreamEdits(v, { url: '/' });
    assert.deepEqual(edits.removeHeaders, ['authorization', 'x-missing', 'x-evil']);
    assert.deepEqual(edits.setHeaders.map(([n]) => n), ['x-jwt-payload', 'x-given', 'x-groups']);
    const [, encoded] = edits.setHeaders[0]!;
    assert.match(encoded, /^[A-Za-z0-9_-]+$/, 'base64url without padding');
    assert.deepEqual(JSON.parse(Buffer.from(encoded, 'base64url').toString()), payload);
    assert.deepEqual(edits.setHeaders.slice(1), [['x-given', 'Alice'], ['x-groups', '["dev","ops"]']]);

    const kept = authenticator(rules(true));
    const edits2 = kept.upstreamEdits(expectValid(await check(kept, bearer(t))), { url: '/' });
    assert.ok(!edits2.removeHeaders.includes('authorization'));
    // Without a valid token, a client's copy of the headers the rule writes is not forwarded.
    assert.deepEqual(kept.upstreamEdits({ outcome: 'absent' }, { url: '/a?b' }),
      { removeHeaders: ['x-jwt-payload', 'x-given', 'x-groups', 'x-missing', 'x-evil'], setHeaders: [], url: '/a?b' });
  });

  describe('every token the request carries must verify (review finding 1)', () => {
    let intruder: SigningKey;
    before(async () => {
      intruder = await makeKey('RS256', 'rsa-1');
    });
    let n = 0;
    /** A fresh token of ISS signed by another key with the JWKS key's kid: bad_signature. */
    const forged = (): Promise<string> => sign(intruder, { iss: ISS, sub: 'mallory', exp: clock.seconds + 3600, n: n++ });

    const cases: { name: string; headers: (good: string, bad: string, other: string) => Headers; url?: (good: string, bad: string) => string; want: 'first' | 'forged' | 'malformed' }[] = [
      { name: 'a forged token in a second Authorization line', headers: (g, b) => ({ authorization: [`Bearer ${g}`, `Bearer ${b}`] }), want: 'forged' },
      { name: 'a forged token in the first line', headers: (g, b) => ({ authorization: [`Bearer ${b}`, `Bearer ${g}`] }), want: 'forged' },
      { name: 'a forged token after Basic in the same line', headers: (_g, b) => ({ authorization: `Basic Zm9v, Bearer ${b}` }), want: 'forged' },
      { name: 'lines joined by node:http, the second forged', headers: (g, b) => ({ authorization: `Bearer ${g}, Bearer ${b}` }), want: 'forged' },
      { name: 'a valid header and a forged access_token', headers: (g) => bearer(g), url: (_g, b) => `/?access_token=${b}`, want: 'forged' },
      { name: 'a forged access_token repeated after a valid one', headers: () => ({}), url: (g, b) => `/?access_token=${g}&access_token=${b}`, want: 'forged' },
      { name: 'two valid tokens: the first one', headers: (g, _b, o) => ({ authorization: [`Bearer ${g}`, `Bearer ${o}`] }), want: 'first' },
      { name: 'one valid token in two lines', headers: (g) => ({ authorization: [`Bearer ${g}`, `Bearer ${g}`] }), want: 'first' },
      { name: 'a valid token followed by junk: 401 (Envoy would cut the junk off)', headers: (g) => ({ authorization: `Bearer ${g};junk` }), want: 'malformed' },
    ];
    for (const c of cases) {
      it(`${c.name}: ${c.want === 'first' ? 'the first token\'s principal' : `401 (${c.want})`}`, async () => {
        const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
        const good = await token(rsa);
        const other = await token(ec, { sub: 'bob' });
        const r = await a.authenticate({ headers: c.headers(good, await forged(), other), url: c.url?.(good, await forged()) ?? '/' });
        if (c.want === 'first') assert.equal(expectValid(r).principal, `${ISS}/alice`);
        else expectInvalid(r, c.want === 'forged' ? 'bad_signature' : 'malformed');
      });
    }

    it('answers synchronously when every token is cached, and verifies a cached token again at no other location', async () => {
      const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
      const t1 = await token(rsa, { n: 1 });
      const t2 = await token(ec, { n: 2 });
      const headers = { authorization: [`Bearer ${t1}`, `Bearer ${t2}`] };
      expectValid(await a.authenticate({ headers, url: `/?access_token=${t1}` }));
      const verifications = a.stats().signatureVerifications;
      assert.equal(verifications, 3, 't1 in the header, t2, t1 in the parameter');
      const again = a.authenticate({ headers, url: `/?access_token=${t1}` });
      assert.ok(!(again instanceof Promise), 'all cached: synchronous');
      assert.equal(expectValid(again).token, t1);
      assert.equal(a.stats().signatureVerifications, verifications, 'one token in two locations is cached at both');
    });

    it('stops at the first invalid token: forged tokens after it cost no signature check', async () => {
      const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
      const lines = await Promise.all(Array.from({ length: 5 }, async () => `Bearer ${await forged()}`));
      expectInvalid(await a.authenticate({ headers: { authorization: lines }, url: '/' }), 'bad_signature');
      assert.equal(a.stats().signatureVerifications, 1);
      const expired = await token(rsa, { exp: clock.seconds - 1 });
      const sync = a.authenticate({ headers: { authorization: [`Bearer ${expired}`, ...lines] }, url: '/' });
      assert.ok(!(sync instanceof Promise), 'refused by the cheap checks first: synchronous');
      expectInvalid(sync, 'expired');
    });

    it('removes every location that carried a token unless the rule forwards it', async () => {
      const rules = (forward: boolean): JwtRule[] => [rule({
        issuer: ISS, jwksUri: server.url, forwardOriginalToken: forward,
        fromHeaders: [{ name: 'Authorization', prefix: 'Bearer ' }, { name: 'x-token', prefix: '' }], fromParams: ['access_token', 't'], fromCookies: ['session', 'sid'],
      })];
      const t = await token(rsa);
      const headers = { authorization: `Bearer ${t}`, 'x-token': t, cookie: [`theme=dark; session=${t}`, `sid=${t}; session=${t}`] };
      const url = `/p?access_token=${t}&a=1&t=${t}&access_token=${t}`;
      const dropped = authenticator(rules(false));
      const v = expectValid(await dropped.authenticate({ headers, url }));
      assert.deepEqual(dropped.upstreamEdits(v, { url, headers }), {
        removeHeaders: ['authorization', 'x-token'], setHeaders: [['cookie', 'theme=dark']], url: '/p?a=1',
      });
      // Without the headers, a cookie that carried a token cannot be edited: the whole header goes.
      assert.deepEqual(dropped.upstreamEdits(v, { url: '/' }).removeHeaders, ['authorization', 'x-token', 'cookie']);
      const kept = authenticator(rules(true));
      const vk = expectValid(await kept.authenticate({ headers, url }));
      assert.deepEqual(kept.upstreamEdits(vk, { url, headers }), { removeHeaders: [], setHeaders: [], url });
    });
  });

  it('writes a claim outside Latin-1 as the JS string, and refuses control characters (review finding 7)', async () => {
    const claims = { name: 'José Ωmega 😀', lf: 'a\nb', nul: 'a\0b', cr: 'a\rb', bell: 'a\x07b', tab: 'a\tb', list: ['Ω', 'x\ny'] };
    const a = authenticator([rule({
      issuer: ISS, jwksUri: server.url,
      outputClaimToHeaders: Object.keys(claims).map((k) => ({ header: `x-${k}`, claim: [k] })),
    })]);
    const v = expectValid(await check(a, bearer(await token(rsa, claims))));
    const { setHeaders, removeHeaders } = a.upstreamEdits(v, { url: '/' });
    assert.deepEqual(setHeaders, [['x-name', 'José Ωmega 😀'], ['x-tab', 'a\tb'], ['x-list', '["Ω","x\\ny"]']]);
    assert.deepEqual(removeHeaders, ['authorization', 'x-lf', 'x-nul', 'x-cr', 'x-bell']);
  });

  it('caches a verified token: the next request is answered synchronously, without verifying again, until exp', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
    const t = await token(rsa, { exp: clock.seconds + 120 });
    const first = a.authenticate({ headers: bearer(t), url: '/' });
    assert.ok(first instanceof Promise, 'the first sight of a token verifies its signature');
    expectValid(await first);
    const verifications = a.stats().signatureVerifications;
    assert.equal(verifications, 1);
    const second = a.authenticate({ headers: bearer(t), url: '/' });
    assert.ok(!(second instanceof Promise), 'cached: synchronous');
    assert.equal(second, await first, 'the same result object');
    assert.equal(a.stats().signatureVerifications, verifications);
    assert.equal(a.stats().cacheHits, 1);

    clock.advance(121_000);
    try {
      const late = a.authenticate({ headers: bearer(t), url: '/' });
      assert.ok(!(late instanceof Promise));
      expectInvalid(late, 'expired');
      assert.equal(a.stats().cacheSize, 0, 'the expired entry is dropped');
    } finally {
      clock.advance(-121_000);
    }
  });

  it('verifies a new token once for concurrent requests, and forgets verified tokens when the rules change', async () => {
    const a = authenticator([rule({ issuer: ISS, jwksUri: server.url })]);
    const t = await token(ec);
    const all = await Promise.all(Array.from({ length: 5 }, () => a.authenticate({ headers: bearer(t), url: '/' })));
    all.forEach((r) => expectValid(r));
    assert.equal(a.stats().signatureVerifications, 1);
    a.setRules([rule({ issuer: ISS, jwksUri: server.url })]);
    const again = a.authenticate({ headers: bearer(t), url: '/' });
    assert.ok(again instanceof Promise, 'cache cleared by setRules');
    expectValid(await again);
  });

  it('fetches a rotated key set when a token names an unknown kid, once per interval on a flood', async () => {
    const rotating = await new JwksServer().start();
    try {
      const k1 = await makeKey('RS256', 'k1');
      const k2 = await makeKey('ES256', 'k2');
      rotating.body = jwksOf(k1);
      const a = authenticator([rule({ issuer: ISS, jwksUri: rotating.url })], { minRefetchIntervalMs: 1000 });
      expectValid(await check(a, bearer(await token(k1))));
      assert.equal(rotating.requests, 1);

      rotating.body = jwksOf(k2);
      clock.advance(1500);
      const v = expectValid(await check(a, bearer(await token(k2))));
      assert.equal(v.issuer, ISS);
      assert.equal(rotating.requests, 2, 'one refetch');

      // Made-up kids: refetched at most once per interval, concurrent ones joined.
      clock.advance(1500);
      const flood = await Promise.all(Array.from({ length: 20 }, async (_, i) => check(a, bearer(await token(k2, {}, { kid: `nope-${i}` })))));
      flood.forEach((r) => expectInvalid(r, 'unknown_kid'));
      assert.equal(rotating.requests, 3);
      expectInvalid(await check(a, bearer(await token(k2, {}, { kid: 'nope-again' }))), 'unknown_kid');
      assert.equal(rotating.requests, 3, 'no refetch within the interval');
      expectInvalid(await check(a, bearer(await token(k1))), 'unknown_kid');
    } finally {
      await rotating.stop();
    }
  });

  it('keeps verifying with cached keys when the JWKS server goes down', async () => {
    const flaky = await new JwksServer().start();
    flaky.body = jwksOf(rsa);
    const sink = logSink();
    const a = authenticator([rule({ issuer: ISS, jwksUri: flaky.url })], { log: sink.log });
    expectValid(await check(a, bearer(await token(rsa, { n: 1 }))));
    await flaky.stop();
    clock.advance(1500);
    // An unknown kid forces a fetch, which fails: the old keys stay.
    expectInvalid(await check(a, bearer(await token(rsa, {}, { kid: 'gone' }))), 'unknown_kid');
    expectValid(await check(a, bearer(await token(rsa, { n: 2 }))));
    const [status] = a.keyStatus();
    assert.equal(status!.jwksUri, flaky.url);
    assert.equal(status!.keys, 1);
    assert.ok(status!.lastFetch !== undefined);
    assert.match(status!.lastError ?? '', /ECONNREFUSED/);
    assert.equal(sink.lines.filter((l) => l.includes('failed')).length, 1, sink.lines.join('\n'));
    assert.match(sink.lines.find((l) => l.includes('failed'))!, /^warn: .*keeping the 1 key/);
  });

  it('keeps the old keys when the server answers an error or a document that is not a key set', async () => {
    const bad = await new JwksServer().start();
    try {
      bad.body = jwksOf(rsa);
      const a = authenticator([rule({ issuer: ISS, jwksUri: bad.url })]);
      expectValid(await check(a, bearer(await token(rsa, { n: 1 }))));
      for (const [status, body] of [[200, '<html>'], [200, '{"keys":[{"kty":"RSA"}]}'], [500, 'oops']] as const) {
        bad.status = status;
        bad.body = body;
        clock.advance(1500);
        expectInvalid(await check(a, bearer(await token(rsa, {}, { kid: 'new' }))), 'unknown_kid');
        expectValid(await check(a, bearer(await token(rsa, { n: status, body }))));
      }
      assert.match(a.keyStatus()[0]!.lastError ?? '', /HTTP 500/);
    } finally {
      await bad.stop();
    }
  });

  it('refuses tokens with no_keys while the JWKS server has been down since the start, and recovers', async () => {
    const url = await deadUrl();
    const sink = logSink();
    const a = authenticator([rule({ issuer: ISS, jwksUri: url })], { log: sink.log });
    const t = await token(rsa);
    const r = expectInvalid(await check(a, bearer(t)), 'no_keys');
    assert.match(r.message, /has not been fetched: .*ECONNREFUSED/);
    expectInvalid(await check(a, bearer(t)), 'no_keys');
    assert.equal(a.keyStatus()[0]!.keys, 0);
    assert.match(sink.lines[0] ?? '', /^error: JWKS fetch from .* failed/);

    // The server comes up on that port: the next request after the interval fetches the keys.
    const late = await new JwksServer().start(Number(new URL(url).port));
    try {
      late.body = jwksOf(rsa);
      clock.advance(1500);
      expectValid(await check(a, bearer(t)));
    } finally {
      await late.stop();
    }
  });

  it('reports no_keys for an inline jwks that does not parse and for a jwksUri that is not a URL', async () => {
    const sink = logSink();
    const a = authenticator([
      rule({ issuer: ISS, jwks: '{"keys": "nope"}' }),
      rule({ issuer: OTHER_ISS, jwksUri: 'file:///etc/passwd' }),
    ], { log: sink.log });
    expectInvalid(await check(a, bearer(await token(rsa))), 'no_keys');
    const r = expectInvalid(await check(a, bearer(await sign(rsa, { iss: OTHER_ISS }))), 'no_keys');
    assert.match(r.message, /not an http\(s\) URL/);
    assert.equal(sink.lines.length, 2);
    assert.deepEqual(a.keyStatus(), []);
  });

  it('finds keys by OpenID discovery when a rule has neither jwksUri nor jwks', async () => {
    const oidc = await new JwksServer().start();
    try {
      oidc.body = jwksOf(ec);
      const issuer = oidc.url.replace(/\/jwks$/, '');
      const a = authenticator([rule({ issuer })]);
      expectValid(await check(a, bearer(await sign(ec, { iss: issuer, sub: 's' }))));
      assert.equal(a.keyStatus()[0]!.jwksUri, oidc.url);
    } finally {
      await oidc.stop();
    }
  });

  it('fetches over an injected fetch when given one', async () => {
    let calls = 0;
    const fakeFetch: typeof fetch = async (input) => {
      calls += 1;
      assert.equal(String(input), 'https://keys.example/jwks');
      return new Response(jwksOf(rsa), { status: 200 });
    };
    const a = authenticator([rule({ issuer: ISS, jwksUri: 'https://keys.example/jwks' })], { fetch: fakeFetch });
    expectValid(await check(a, bearer(await token(rsa))));
    assert.equal(calls, 1);
  });

  it('gives up a fetch after fetchTimeoutMs', async () => {
    const slow = await new JwksServer().start();
    try {
      slow.hang = true;
      const a = authenticator([rule({ issuer: ISS, jwksUri: slow.url })], { fetchTimeoutMs: 200 });
      const r = expectInvalid(await check(a, bearer(await token(rsa))), 'no_keys');
      assert.match(r.message, /no answer within 200 ms/);
    } finally {
      await slow.stop();
    }
  });

  it('gives up a fetch after the rule\'s timeout (Istio\'s jwtRules[].timeout), the longest when rules share a key set', async () => {
    const slow = await new JwksServer().start();
    try {
      slow.hang = true;
      const started = Date.now();
      const a = authenticator([rule({ issuer: ISS, jwksUri: slow.url, timeoutMs: 150 })]);
      const r = expectInvalid(await check(a, bearer(await token(rsa))), 'no_keys');
      assert.match(r.message, /no answer within 150 ms/);
      assert.ok(Date.now() - started < 4000, 'not the 5 s default');
      // Two rules naming one key set: fetched once, with the longer time-out.
      const b = authenticator([rule({ issuer: ISS, jwksUri: slow.url, timeoutMs: 100 }), rule({ issuer: OTHER_ISS, jwksUri: slow.url, timeoutMs: 300 })]);
      const both = expectInvalid(await check(b, bearer(await token(rsa))), 'no_keys');
      assert.match(both.message, /no answer within 300 ms/);
      // A reload with another time-out: the next fetch takes it.
      b.setRules([rule({ issuer: ISS, jwksUri: slow.url, timeoutMs: 200 })]);
      clock.advance(2000);
      const again = expectInvalid(await check(b, bearer(await token(rsa))), 'no_keys');
      assert.match(again.message, /no answer within 200 ms/);
    } finally {
      await slow.stop();
    }
  });

  it('shares a key set between reloads and stops fetching one no rule names', async () => {
    const shared = await new JwksServer().start();
    try {
      shared.body = jwksOf(rsa);
      const a = authenticator([rule({ issuer: ISS, jwksUri: shared.url })]);
      expectValid(await check(a, bearer(await token(rsa))));
      a.setRules([rule({ issuer: ISS, jwksUri: shared.url, audiences: [] }), rule({ issuer: OTHER_ISS, jwksUri: shared.url })]);
      expectValid(await check(a, bearer(await token(rsa, { n: 'reloaded' }))));
      assert.equal(shared.requests, 1, 'not fetched again on reload');
      a.setRules([]);
      assert.deepEqual(a.keyStatus(), []);
    } finally {
      await shared.stop();
    }
  });
});

describe('JwtAuthenticator over HTTPS (self-signed certificate)', () => {
  let server: JwksServer;
  let key: SigningKey;
  const opened: JwtAuthenticator[] = [];

  before(async () => {
    key = await makeKey('RS256', 'tls');
    server = await new JwksServer(true).start();
    server.body = jwksOf(key);
  });

  after(async () => {
    for (const a of opened) a.close();
    await server.stop();
  });

  for (const insecureSkipVerify of [true, false]) {
    it(`insecureSkipVerify ${insecureSkipVerify}: ${insecureSkipVerify ? 'fetches the keys' : 'refuses the certificate'}`, async () => {
      const a = new JwtAuthenticator({ refreshIntervalMs: 60_000, insecureSkipVerify });
      opened.push(a);
      a.setRules([rule({ issuer: ISS, jwksUri: server.url })]);
      const r = await a.authenticate({ headers: bearer(await sign(key, { iss: ISS, sub: 'x' })), url: '/' });
      if (insecureSkipVerify) expectValid(r);
      else assert.match(expectInvalid(r, 'no_keys').message, /self-signed certificate/);
    });
  }
});
