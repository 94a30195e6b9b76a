import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hash53, hash64Hex } from '../../src/traffic/hash.js';
import { cookieToGenerate, hashKeyOf, requestHash, type HashRequestFacts } from '../../src/traffic/hash-key.js';
import type { HashKey } from '../../src/traffic/spec.js';

function facts(o: { headers?: Record<string, string>; cookies?: Record<string, string>; query?: Record<string, string>; sourceIp?: string } = {}): HashRequestFacts {
  return {
    header: (n) => o.headers?.[n],
    cookie: (n) => o.cookies?.[n],
    queryParameter: (n) => o.query?.[n],
    sourceIp: o.sourceIp,
    connection: '10.0.0.7:51000' + '10.0.0.2:80',
  };
}

describe('hashKeyOf', () => {
  const generated = hash64Hex('10.0.0.7:5100010.0.0.2:80');
  const cases: [name: string, key: HashKey, f: HashRequestFacts, expected: string | undefined][] = [
    ['header present', { kind: 'header', name: 'x-user' }, facts({ headers: { 'x-user': 'alice' } }), 'alice'],
    ['header absent', { kind: 'header', name: 'x-user' }, facts(), undefined],
    ['source ip', { kind: 'sourceIp' }, facts({ sourceIp: '10.1.2.3' }), '10.1.2.3'],
    ['query parameter', { kind: 'queryParameter', name: 'u' }, facts({ query: { u: 'bob' } }), 'bob'],
    ['query parameter absent', { kind: 'queryParameter', name: 'u' }, facts({ query: { v: 'bob' } }), undefined],
    ['cookie present', { kind: 'cookie', name: 'session', ttlMs: 60_000 }, facts({ cookies: { session: 's1' } }), 's1'],
    ['cookie absent, no ttl: no key', { kind: 'cookie', name: 'session' }, facts(), undefined],
    ['cookie absent, ttl: the value about to be generated', { kind: 'cookie', name: 'session', ttlMs: 60_000 }, facts(), generated],
    ['cookie absent, ttl 0 (session cookie): generated too', { kind: 'cookie', name: 'session', ttlMs: 0 }, facts(), generated],
  ];
  for (const [name, key, f, expected] of cases) {
    it(name, () => {
      assert.equal(hashKeyOf(key, f), expected);
      assert.equal(requestHash(key, f), expected === undefined ? undefined : hash53(expected));
    });
  }
});

describe('cookieToGenerate', () => {
  const value = hash64Hex('10.0.0.7:5100010.0.0.2:80');
  const cases: [name: string, key: HashKey, f: HashRequestFacts, header: string | undefined][] = [
    ['ttl and path', { kind: 'cookie', name: 'user', path: '/api', ttlMs: 3_600_500 }, facts(), `user="${value}"; Max-Age=3600; Path=/api; HttpOnly`],
    ['ttl, no path', { kind: 'cookie', name: 'user', ttlMs: 10_000 }, facts(), `user="${value}"; Max-Age=10; HttpOnly`],
    ['ttl 0: a session cookie, no Max-Age', { kind: 'cookie', name: 'user', ttlMs: 0 }, facts(), `user="${value}"; HttpOnly`],
    ['no ttl: never generated', { kind: 'cookie', name: 'user' }, facts(), undefined],
    ['cookie sent: not generated again', { kind: 'cookie', name: 'user', ttlMs: 10_000 }, facts({ cookies: { user: 'x' } }), undefined],
    ['not a cookie key', { kind: 'header', name: 'user' }, facts(), undefined],
  ];
  for (const [name, key, f, header] of cases) {
    it(name, () => {
      const c = cookieToGenerate(key, f);
      assert.equal(c?.header, header);
      if (c !== undefined) {
        assert.equal(c.value, value);
        // The client's next request carries the cookie: it hashes to what this one hashed to.
        assert.equal(requestHash(key, facts({ cookies: { user: c.value } })), requestHash(key, f));
      }
    });
  }

  it('gives every request of one connection the same cookie, another connection another', () => {
    const key: HashKey = { kind: 'cookie', name: 'user', ttlMs: 1000 };
    const other = { ...facts(), connection: '10.0.0.8:4000010.0.0.2:80' };
    assert.equal(cookieToGenerate(key, facts())?.value, cookieToGenerate(key, facts())?.value);
    assert.notEqual(cookieToGenerate(key, facts())?.value, cookieToGenerate(key, other)?.value);
  });
});
