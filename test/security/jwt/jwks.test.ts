// RemoteKeys against a real JWKS server on 127.0.0.1; the fetch schedule as a pure function;
// redirects (followed by none by default, as Envoy) against real http and https servers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { lookupVariable } from '../../../src/config/env/registry.js';
import { JwtAuthenticator, type AuthnResult, type FetchOutcome } from '../../../src/security/jwt/authenticator.js';
import { discoveryUrl, InlineKeys, MAX_REDIRECTS, nextFetchDelayMs, nodeFetchText, redirectTarget, RemoteKeys, type RemoteKeysOptions } from '../../../src/security/jwt/jwks.js';
import { Clock, JwksServer, jwksOf, logSink, makeKey, rule, sign, type SigningKey } from './support.js';

describe('RemoteKeys', () => {
  let server: JwksServer;
  let k1: SigningKey;
  let k2: SigningKey;
  const opened: RemoteKeys[] = [];
  const clock = new Clock();

  function remote(over: Partial<RemoteKeysOptions> = {}, url = server.url): RemoteKeys {
    const r = new RemoteKeys(url, {
      refreshIntervalMs: 60_000, fetchTimeoutMs: 2000, minRefetchIntervalMs: 1000,
      fetchText: nodeFetchText({ insecureSkipVerify: false }), now: clock.now, log: () => undefined, ...over,
    });
    opened.push(r);
    return r;
  }

  before(async () => {
    server = await new JwksServer().start();
    k1 = await makeKey('RS256', 'k1');
    k2 = await makeKey('ES256', 'k2');
    server.body = jwksOf(k1);
  });

  after(async () => {
    for (const r of opened) r.close();
    await server.stop();
  });

  it('coalesces concurrent refetches and refuses another within the interval', async () => {
    const r = remote();
    const before = server.requests;
    const a = r.refetch();
    const b = r.refetch();
    assert.ok(a !== undefined);
    assert.equal(a, b, 'joined');
    await a;
    assert.equal(server.requests, before + 1);
    assert.equal(r.refetch(), undefined, 'rate-limited');
    clock.advance(1000);
    await r.refetch();
    assert.equal(server.requests, before + 2);
    assert.deepEqual(r.current?.keys.map((k) => k.kid), ['k1']);
  });

  it('keeps the same key set object when the document did not change', async () => {
    const r = remote();
    await r.refetch();
    const first = r.current;
    clock.advance(1000);
    await r.refetch();
    assert.equal(r.current, first);
    server.body = jwksOf(k1, k2);
    clock.advance(1000);
    await r.refetch();
    assert.notEqual(r.current, first);
    assert.deepEqual(r.current?.keys.map((k) => k.kid), ['k1', 'k2']);
    server.body = jwksOf(k1);
  });

  it('refreshes in the background every refresh interval', { timeout: 10_000 }, async () => {
    const sink = logSink();
    const r = remote({ refreshIntervalMs: 20, log: sink.log });
    r.start();
    const before = server.requests;
    server.body = jwksOf(k2);
    try {
      // Waits for the event, not for a time: the timer fetches again and again.
      while (r.current?.hasKid('k2') !== true || server.requests < before + 3) await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      server.body = jwksOf(k1);
      r.close();
    }
    assert.ok(sink.lines.some((l) => /^info: JWKS .* fetched, 1 key/.test(l)), sink.lines.join('\n'));
  });

  it('reports its state for /config_dump', async () => {
    const r = remote();
    await r.refetch();
    const s = r.status();
    assert.equal(s.jwksUri, server.url);
    assert.equal(s.keys, 1);
    assert.equal(s.lastFetch, new Date(clock.ms).toISOString());
    assert.equal(s.lastError, undefined);
  });

  it('stops fetching once closed', async () => {
    const r = remote();
    r.close();
    assert.equal(r.refetch(), undefined);
  });
});

describe('key set helpers', () => {
  it('backs off after failures: 1 s doubling to 60 s, never beyond the refresh interval', () => {
    const interval = 20 * 60_000;
    assert.deepEqual([0, 1, 2, 3, 6, 7, 8, 100].map((f) => nextFetchDelayMs(f, interval)), [interval, 1000, 2000, 4000, 32_000, 60_000, 60_000, 60_000]);
    assert.equal(nextFetchDelayMs(5, 3000), 3000);
    assert.equal(nextFetchDelayMs(0, 0), 1);
    assert.equal(nextFetchDelayMs(0, 1e12), 2 ** 31 - 1);
  });

  it('finds the OpenID discovery document of an issuer URL', () => {
    assert.equal(discoveryUrl('https://accounts.example.com/'), 'https://accounts.example.com/.well-known/openid-configuration');
    assert.equal(discoveryUrl('https://example.com/realms/x'), 'https://example.com/realms/x/.well-known/openid-configuration');
    assert.equal(discoveryUrl('testing@secure.istio.io'), undefined);
  });

  it('follows a redirect only when allowed, keeping the scheme, a few hops at most', () => {
    const from = new URL('https://keys.example/jwks');
    const follow = { followSameSchemeRedirects: true };
    assert.equal(redirectTarget(from, 302, '/v2/jwks', 0, follow).href, 'https://keys.example/v2/jwks');
    assert.equal(redirectTarget(from, 308, 'https://cdn.example/jwks', MAX_REDIRECTS - 1, follow).href, 'https://cdn.example/jwks');
    const refusals: [string, string, number, boolean, RegExp][] = [
      ['off', 'https://keys.example/v2', 0, false, /^Error: https:\/\/keys\.example\/jwks redirected \(HTTP 302\) to https:\/\/keys\.example\/v2; redirects are not followed \(MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS is off\)$/],
      ['to http', 'http://keys.example/jwks', 0, true, /to http:\/\/keys\.example\/jwks; not followed: it changes the scheme$/],
      ['to another scheme', 'file:///etc/jwks', 0, true, /it changes the scheme/],
      ['too many', '/jwks', MAX_REDIRECTS, true, new RegExp(`more than ${MAX_REDIRECTS} redirects`)],
      ['not a URL (quoted, never raw in a log)', 'http://[::1\n', 0, true, /to "http:\/\/\[::1\\n"; not followed: not a URL$/],
    ];
    for (const [name, location, hops, allowed, error] of refusals) {
      assert.throws(() => redirectTarget(from, 302, location, hops, { followSameSchemeRedirects: allowed }), error, name);
    }
    assert.match(lookupVariable('MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS')!.description, new RegExp(`up to ${MAX_REDIRECTS} redirects`));
  });

  it('parses an inline jwks once and never refetches it', () => {
    const bad = new InlineKeys('{}');
    assert.equal(bad.current, undefined);
    assert.match(bad.whyNoKeys(), /inline jwks is not usable: not a JSON Web Key Set/);
    assert.equal(bad.refetch(), undefined);
  });
});

// A key set server that redirects elsewhere must not hand over the keys of that other place: a token
// signed with the foreign key would pass. Each case: the keys fetched (good), then the origin
// redirects to a server of the `to` scheme holding another key set (foreign), then a foreign token
// makes the authenticator refetch.
describe('key set fetches and redirects', () => {
  type Scheme = 'http' | 'https';
  interface Case {
    readonly name: string;
    readonly from: Scheme;
    /** Where the origin redirects: the foreign server of that scheme, or itself (a loop). */
    readonly to: Scheme | 'loop';
    readonly status: number;
    readonly follow: boolean;
    /** Refused: the log line's reason; undefined when the redirect is followed. */
    readonly refused?: RegExp;
    /** The injected `fetch` instead of node:http/https. */
    readonly fetch?: typeof fetch;
  }
  const notFollowed = /redirects are not followed \(MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS is off\)/;
  const otherScheme = /not followed: it changes the scheme/;
  const base: Case[] = [
    ...[301, 302, 307, 308].flatMap((status) => (['http', 'https'] as const).map((scheme): Case => (
      { name: `${scheme} ${status} to another ${scheme} server`, from: scheme, to: scheme, status, follow: false, refused: notFollowed }))),
    { name: 'https 302 to http', from: 'https', to: 'http', status: 302, follow: false, refused: notFollowed },
    { name: 'opt-in: http 302 to http is followed', from: 'http', to: 'http', status: 302, follow: true },
    { name: 'opt-in: https 307 to https is followed', from: 'https', to: 'https', status: 307, follow: true },
    { name: 'opt-in: https 301 to http', from: 'https', to: 'http', status: 301, follow: true, refused: otherScheme },
    { name: 'opt-in: http 308 to https', from: 'http', to: 'https', status: 308, follow: true, refused: otherScheme },
    { name: 'opt-in: a redirect loop', from: 'http', to: 'loop', status: 302, follow: true, refused: new RegExp(`more than ${MAX_REDIRECTS} redirects`) },
  ];
  // The same over an injected fetch (plain http: global fetch refuses the self-signed certificate).
  const viaFetch = base.filter((c) => c.from === 'http').map((c): Case => ({ ...c, name: `injected fetch, ${c.name}`, fetch: globalThis.fetch }));
  // A fetch that follows redirects whatever it is asked: its answer came from somewhere unknown.
  const following: typeof fetch = (url, init) => globalThis.fetch(url, { ...init, redirect: 'follow' });
  const cases: Case[] = [...base, ...viaFetch,
    { name: 'a fetch that follows redirects itself', from: 'http', to: 'http', status: 302, follow: true, refused: /by a fetch that follows redirects itself; not accepted/, fetch: following }];

  const ISS = 'https://issuer.example';
  const clock = new Clock();
  const origin = {} as Record<Scheme, JwksServer>;
  const foreign = {} as Record<Scheme, JwksServer>;
  let good: SigningKey;
  let stranger: SigningKey;
  const opened: JwtAuthenticator[] = [];

  before(async () => {
    good = await makeKey('RS256', 'good');
    stranger = await makeKey('ES256', 'foreign');
    for (const scheme of ['http', 'https'] as const) {
      origin[scheme] = await new JwksServer(scheme === 'https').start();
      origin[scheme].body = jwksOf(good);
      foreign[scheme] = await new JwksServer(scheme === 'https').start();
      foreign[scheme].body = jwksOf(stranger);
    }
  });

  after(async () => {
    for (const a of opened) a.close();
    for (const s of [...Object.values(origin), ...Object.values(foreign)]) await s.stop();
  });

  const outcome = (r: AuthnResult): string => (r.outcome === 'invalid' ? `invalid ${r.reason}: ${r.message}` : r.outcome);

  for (const c of cases) {
    it(`${c.name}${c.refused ? ': refused, the keys fetched before stay' : ''}`, async () => {
      const from = origin[c.from];
      const target = c.to === 'loop' ? from : foreign[c.to];
      const sink = logSink();
      const fetches: FetchOutcome[] = [];
      const a = new JwtAuthenticator({
        refreshIntervalMs: 20 * 60_000, insecureSkipVerify: true, followSameSchemeRedirects: c.follow, now: clock.now,
        log: sink.log, onFetch: (f) => fetches.push(f), ...(c.fetch ? { fetch: c.fetch } : {}),
      });
      opened.push(a);
      a.setRules([rule({ issuer: ISS, jwksUri: from.url })]);
      const check = async (key: SigningKey): Promise<string> =>
        outcome(await a.authenticate({ headers: { authorization: `Bearer ${await sign(key, { iss: ISS, sub: 'x', exp: clock.seconds + 3600 })}` }, url: '/' }));
      assert.equal(await check(good), 'valid', 'the first fetch, not redirected');
      const foreignBefore = target.requests;
      from.redirect = { status: c.status, location: target.url };
      clock.advance(1000);
      try {
        const result = await check(stranger);
        if (c.refused === undefined) {
          assert.equal(result, 'valid', 'the opt-in follows a same-scheme redirect');
          assert.equal(target.requests, foreignBefore + 1);
          assert.deepEqual(fetches.map((f) => f.ok), [true, true]);
          return;
        }
        assert.match(result, /^invalid unknown_kid/, 'a token of the foreign key');
        assert.equal(await check(good), 'valid', 'the keys fetched before');
        if (c.to !== 'loop' && c.fetch === undefined) assert.equal(target.requests, foreignBefore, 'the other server is not even asked');
        assert.deepEqual(fetches.map((f) => f.ok), [true, false], 'counted as a failed fetch');
        const line = sink.lines.find((l) => l.includes('redirected')) ?? '';
        assert.ok(line?.startsWith(`warn: JWKS fetch from ${from.url} failed: `), sink.lines.join('\n'));
        assert.ok(c.fetch === following || line.includes(`redirected (HTTP ${c.status}) to ${target.url}`), line);
        assert.match(line, c.refused);
        assert.match(line, /keeping the 1 key\(s\) fetched before$/);
        assert.match(a.keyStatus()[0]?.lastError ?? '', c.refused);
      } finally {
        from.redirect = undefined;
      }
    });
  }

  it('OpenID discovery: a redirected discovery document is refused too', async () => {
    const sink = logSink();
    const from = origin.http;
    const discovery = `${from.url.replace(/\/jwks$/, '')}/.well-known/openid-configuration`;
    from.redirect = { status: 302, location: `${foreign.http.url.replace(/\/jwks$/, '')}/.well-known/openid-configuration` };
    const r = new RemoteKeys(discovery, {
      refreshIntervalMs: 60_000, fetchTimeoutMs: 2000, minRefetchIntervalMs: 1000,
      fetchText: nodeFetchText({ insecureSkipVerify: false }), now: clock.now, log: sink.log,
    }, true);
    try {
      await r.refetch();
    } finally {
      r.close();
      from.redirect = undefined;
    }
    assert.equal(r.current, undefined);
    assert.match(sink.lines.join('\n'), new RegExp(`^error: JWKS fetch from ${discovery.replace(/[.]/g, '\\.')} failed: .* redirected \\(HTTP 302\\) to .*redirects are not followed`));
  });
});
