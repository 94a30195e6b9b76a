import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { KeySet } from '../../../src/security/jwt/key-set.js';
import { makeKey, type SigningKey } from './support.js';

describe('KeySet.parse', () => {
  let rsa: SigningKey;
  before(async () => {
    rsa = await makeKey('RS256', 'r');
  });

  const refused: [string, string, RegExp][] = [
    ['not JSON', '<html>', /not JSON/],
    ['no keys array', '{"key":[]}', /"keys" array/],
    ['empty', '{"keys":[]}', /empty/],
    ['only unusable keys', '{"keys":[{"kty":"RSA","kid":"a"},{"kty":"XYZ"},{"kty":"oct","k":"AA","use":"enc"}]}',
      /key 0 \(kid "a"\): RSA key without "n"; key 1: kty "XYZ" is not one of RSA, EC, OKP, oct; key 2: use "enc"/],
  ];
  for (const [name, text, message] of refused) {
    it(`refuses: ${name}`, () => {
      const r = KeySet.parse(text);
      assert.equal(r.ok, false);
      if (!r.ok) assert.match(r.message, message);
    });
  }

  it('keeps usable keys, names the others, and keeps only public members', () => {
    const r = KeySet.parse(JSON.stringify({ keys: [{ ...rsa.jwk, d: 'secret' }, { kty: 'EC', crv: 'P-256' }] }));
    assert.ok(r.ok);
    assert.equal(r.set.keys.length, 1);
    assert.deepEqual(Object.keys(r.set.keys[0]!.jwk).sort(), ['e', 'kty', 'n']);
    assert.match(r.skipped[0]!, /key 1: EC key without "x"/);
    assert.ok(r.set.hasKid('r'));
    assert.ok(!r.set.hasKid('other'));
  });
});

describe('KeySet.select', () => {
  const set = (() => {
    const r = KeySet.parse(JSON.stringify({
      keys: [
        { kty: 'RSA', kid: 'r1', n: 'AQAB', e: 'AQAB', alg: 'RS256' },
        { kty: 'RSA', kid: 'r2', n: 'AQAB', e: 'AQAB' },
        { kty: 'EC', kid: 'e1', crv: 'P-256', x: 'AA', y: 'AA' },
        { kty: 'EC', crv: 'P-384', x: 'AA', y: 'AA' },
      ],
    }));
    assert.ok(r.ok);
    return r.set;
  })();
  const kids = (alg: string, kid?: string): (string | undefined)[] | string => {
    const s = set.select(alg, kid);
    return s.ok ? s.keys.map((k) => k.kid) : s.reason;
  };

  const cases: [string, string, string | undefined, (string | undefined)[] | string][] = [
    ['kid and alg match', 'RS256', 'r1', ['r1']],
    ['a key without alg allows any RSA algorithm', 'PS256', 'r2', ['r2']],
    ['a key with alg allows only that one', 'RS384', 'r1', 'unsupported_alg'],
    ['no kid: every fitting key', 'RS256', undefined, ['r1', 'r2']],
    ['curve must fit', 'ES256', undefined, ['e1']],
    ['a key without kid is a candidate for any kid', 'ES384', 'zz', [undefined]],
    ['wrong family for the kid', 'ES256', 'r1', 'unsupported_alg'],
    ['no key fits', 'EdDSA', undefined, 'unsupported_alg'],
  ];
  for (const [name, alg, kid, want] of cases) {
    it(name, () => assert.deepEqual(kids(alg, kid), want));
  }

  it('reports an unknown kid when no key could match it', () => {
    const only = KeySet.parse('{"keys":[{"kty":"RSA","kid":"a","n":"AQAB","e":"AQAB"}]}');
    assert.ok(only.ok);
    const s = only.set.select('RS256', 'b');
    assert.ok(!s.ok);
    assert.equal(s.reason, 'unknown_kid');
    assert.match(s.message, /no key with kid "b" in the key set \(kids: a\)/);
  });
});
