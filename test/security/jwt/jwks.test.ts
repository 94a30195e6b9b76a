// RemoteKeys against a real JWKS server on 127.0.0.1; the fetch schedule as a pure function.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { discoveryUrl, InlineKeys, nextFetchDelayMs, nodeFetchText, RemoteKeys, type RemoteKeysOptions } from '../../../src/security/jwt/jwks.js';
import { Clock, JwksServer, jwksOf, logSink, makeKey, type SigningKey } from './support.js';

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

  it('parses an inline jwks once and never refetches it', () => {
    const bad = new InlineKeys('{}');
    assert.equal(bad.current, undefined);
    assert.match(bad.whyNoKeys(), /inline jwks is not usable: not a JSON Web Key Set/);
    assert.equal(bad.refetch(), undefined);
  });
});
