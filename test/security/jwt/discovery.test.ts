// RequestAuthentication without jwksUri or jwks: the keys are found by OpenID discovery under the
// issuer (`<issuer>/.well-known/openid-configuration`, then its `jwks_uri`), with a key set fetch's
// rules: real HTTP and HTTPS servers on loopback, the authenticator as the proxies use it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { JwtAuthenticator } from '../../../src/security/jwt/authenticator.js';
import type { FetchOutcome } from '../../../src/security/jwt/authenticator.js';
import type { AuthnResult } from '../../../src/security/jwt/result.js';
import { Clock, JwksServer, jwksOf, logSink, makeKey, rule, sign, type SigningKey } from './support.js';

describe('OpenID discovery of an issuer\'s keys', () => {
  const clock = new Clock();
  const servers: JwksServer[] = [];
  const opened: JwtAuthenticator[] = [];
  let good: SigningKey;
  let other: SigningKey;

  before(async () => {
    good = await makeKey('RS256', 'good');
    other = await makeKey('ES256', 'other');
  });
  after(async () => {
    for (const a of opened) a.close();
    for (const s of servers) await s.stop();
  });

  const server = async (tls: boolean, body: string): Promise<JwksServer> => {
    const s = await new JwksServer(tls).start();
    s.body = body;
    servers.push(s);
    return s;
  };
  const authenticator = (o: { follow?: boolean } = {}) => {
    const sink = logSink();
    const fetches: FetchOutcome[] = [];
    const a = new JwtAuthenticator({
      refreshIntervalMs: 20 * 60_000, insecureSkipVerify: true, followSameSchemeRedirects: o.follow ?? false, now: clock.now,
      log: sink.log, onFetch: (f) => fetches.push(f),
    });
    opened.push(a);
    return { a, sink, fetches };
  };
  const outcome = (r: AuthnResult): string => (r.outcome === 'invalid' ? `invalid ${r.reason}` : r.outcome);
  const check = async (a: JwtAuthenticator, iss: string, key: SigningKey): Promise<string> =>
    outcome(await a.authenticate({ headers: { authorization: `Bearer ${await sign(key, { iss, sub: 'x', exp: clock.seconds + 3600 })}` }, url: '/' }));

  for (const tls of [false, true]) {
    it(`${tls ? 'https' : 'http'}: the discovery document's jwks_uri gives the keys; a token of another key is refused`, async () => {
      const idp = await server(tls, jwksOf(good));
      const { a } = authenticator();
      a.setRules([rule({ issuer: idp.issuer })]);
      assert.equal(await check(a, idp.issuer, good), 'valid');
      assert.match(await check(a, idp.issuer, other), /^invalid/);
      // /config_dump names the key set the discovery found.
      assert.equal(a.keyStatus()[0]?.jwksUri, idp.url);
      assert.equal(idp.requests, 2, 'the discovery document, then the key set');
    });
  }

  it('a jwks_uri on another host of the same scheme is discovery, not a redirect: followed', async () => {
    const keys = await server(false, jwksOf(good));
    const idp = await server(false, '{"keys":[]}');
    idp.openid = { issuer: idp.issuer, jwks_uri: keys.url };
    const { a } = authenticator();
    a.setRules([rule({ issuer: idp.issuer })]);
    assert.equal(await check(a, idp.issuer, good), 'valid');
    assert.equal(keys.requests, 1);
  });

  for (const [from, to] of [[true, false], [false, true]] as const) {
    it(`a discovery document over ${from ? 'https' : 'http'} naming a jwks_uri over ${to ? 'https' : 'http'}: refused, as a redirect that changes the scheme`, async () => {
      const keys = await server(to, jwksOf(good));
      const idp = await server(from, '{"keys":[]}');
      idp.openid = { issuer: idp.issuer, jwks_uri: keys.url };
      const { a, sink, fetches } = authenticator({ follow: true });
      a.setRules([rule({ issuer: idp.issuer })]);
      assert.equal(await check(a, idp.issuer, good), 'invalid no_keys');
      assert.equal(keys.requests, 0, 'the key set is not even asked for');
      assert.deepEqual(fetches.map((f) => f.ok), [true], 'the discovery document alone was fetched');
      assert.match(sink.lines.join('\n'), /names jwks_uri .* on another scheme .*not followed: it changes the scheme; tokens of this issuer are refused/);
      assert.match(a.keyStatus()[0]?.lastError ?? '', /changes the scheme/);
    });
  }

  it('a redirected discovery document is refused (keys kept from before), and followed with the opt-in when the scheme stays', async () => {
    const idp = await server(false, jwksOf(good));
    const elsewhere = await server(false, jwksOf(other));
    const { a, sink } = authenticator();
    a.setRules([rule({ issuer: idp.issuer })]);
    assert.equal(await check(a, idp.issuer, good), 'valid');
    idp.redirect = { status: 302, location: `${elsewhere.issuer}/.well-known/openid-configuration` };
    clock.advance(1000);
    try {
      assert.match(await check(a, idp.issuer, other), /^invalid unknown_kid/, 'a token of the key the redirect would bring');
      assert.equal(await check(a, idp.issuer, good), 'valid', 'the keys fetched before stay');
      assert.match(sink.lines.join('\n'), /redirected \(HTTP 302\) to .*redirects are not followed/);
      const opt = authenticator({ follow: true });
      opt.a.setRules([rule({ issuer: idp.issuer })]);
      assert.equal(await check(opt.a, idp.issuer, other), 'valid', 'same scheme, opted in: the redirect is followed');
    } finally {
      idp.redirect = undefined;
    }
  });

  it('a discovery server that does not answer fails after the rule\'s timeout; tokens are refused until keys come', async () => {
    const idp = await server(false, jwksOf(good));
    idp.hang = true;
    const { a, sink } = authenticator();
    a.setRules([rule({ issuer: idp.issuer, timeoutMs: 200 })]);
    const started = Date.now();
    assert.equal(await check(a, idp.issuer, good), 'invalid no_keys');
    assert.ok(Date.now() - started < 3000);
    assert.match(sink.lines.join('\n'), /no answer within 200 ms/);
  });
});
