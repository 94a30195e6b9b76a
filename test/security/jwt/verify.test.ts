import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkAudience, checkTime, decodeToken, isDecoded, type DecodedToken } from '../../../src/security/jwt/verify.js';
import { b64 } from './support.js';

const HEADER = b64({ alg: 'RS256', kid: 'k' });

function decoded(payload: Record<string, unknown>): DecodedToken {
  const d = decodeToken(`${HEADER}.${b64(payload)}.c2ln`);
  assert.ok(isDecoded(d), JSON.stringify(d));
  return d;
}

describe('decodeToken', () => {
  it('reads the header and the registered claims', () => {
    const d = decoded({ iss: 'i', sub: 's', aud: 'a', azp: 'p', exp: 20, nbf: 10, x: { y: 1 } });
    assert.equal(d.alg, 'RS256');
    assert.equal(d.kid, 'k');
    assert.deepEqual(d.audiences, ['a']);
    assert.deepEqual([d.iss, d.sub, d.azp, d.exp, d.nbf], ['i', 's', 'p', 20, 10]);
    assert.deepEqual(d.payload.x, { y: 1 });
    assert.deepEqual(decoded({ aud: ['a', 'b'] }).audiences, ['a', 'b']);
    assert.deepEqual(decoded({}).audiences, []);
  });

  const refused: [string, string, string, RegExp][] = [
    ['empty', '', 'malformed', /three dot-separated parts/],
    ['one part', 'abc', 'malformed', /three/],
    ['four parts', 'a.b.c.d', 'malformed', /three/],
    ['empty header', `.${b64({})}.s`, 'malformed', /empty/],
    ['padding', `${HEADER}=.${b64({})}.s`, 'malformed', /base64url/],
    ['header not JSON', `${b64('nope')}.${b64({})}.s`, 'malformed', /header is not base64url-encoded JSON/],
    ['header a string', `${b64('"x"')}.${b64({})}.s`, 'malformed', /header is not a JSON object/],
    ['no alg', `${b64({ typ: 'JWT' })}.${b64({})}.s`, 'malformed', /no "alg"/],
    ['alg none', `${b64({ alg: 'none' })}.${b64({})}.`, 'unsupported_alg', /"none"/],
    ['alg NONE', `${b64({ alg: 'NONE' })}.${b64({})}.`, 'unsupported_alg', /"none"/],
    ['alg unknown', `${b64({ alg: 'XS256' })}.${b64({})}.s`, 'unsupported_alg', /"XS256" is not supported \(accepted: RS256/],
    ['kid a number', `${b64({ alg: 'RS256', kid: 1 })}.${b64({})}.s`, 'malformed', /kid/],
    ['payload null', `${HEADER}.${b64('null')}.s`, 'malformed', /payload is not a JSON object/],
    ['iss a number', `${HEADER}.${b64({ iss: 1 })}.s`, 'malformed', /"iss" is not a string/],
    ['exp a string', `${HEADER}.${b64({ exp: '1' })}.s`, 'malformed', /"exp" is not a number/],
    ['aud a list of numbers', `${HEADER}.${b64({ aud: [1] })}.s`, 'malformed', /"aud"/],
  ];
  for (const [name, token, reason, message] of refused) {
    it(`refuses: ${name}`, () => {
      const d = decodeToken(token);
      assert.ok(!isDecoded(d));
      assert.equal(d.reason, reason);
      assert.match(d.message, message);
    });
  }

  it('does not mistake a payload for a failure', () => {
    assert.ok(isDecoded(decodeToken(`${HEADER}.${b64({ reason: 'x', message: 'y' })}.s`)));
  });
});

describe('checkTime (no clock skew)', () => {
  const cases: [string, Record<string, unknown>, number, string | undefined][] = [
    ['no exp, no nbf', {}, 5000, undefined],
    ['before exp', { exp: 100 }, 99_999, undefined],
    ['at exp', { exp: 100 }, 100_000, 'expired'],
    ['a second after exp', { exp: 100 }, 101_000, 'expired'],
    ['at nbf', { nbf: 100 }, 100_000, undefined],
    ['a millisecond before nbf', { nbf: 100 }, 99_999, 'not_yet_valid'],
  ];
  for (const [name, payload, now, want] of cases) {
    it(name, () => assert.equal(checkTime(decoded(payload), now)?.reason, want));
  }
  it('names the time in the message', () => {
    assert.match(checkTime(decoded({ exp: 1_700_000_000 }), 1_800_000_000_000)!.message, /expired at 2023-11-14T22:13:20.000Z/);
  });
});

describe('checkAudience', () => {
  const cases: [string, unknown, string[], boolean][] = [
    ['no audiences required', undefined, [], true],
    ['string aud accepted', 'a', ['a', 'b'], true],
    ['list aud with one accepted', ['x', 'b'], ['a', 'b'], true],
    ['aud not accepted', ['x'], ['a'], false],
    ['no aud', undefined, ['a'], false],
  ];
  for (const [name, aud, accepted, ok] of cases) {
    it(name, () => {
      const f = checkAudience(decoded(aud === undefined ? {} : { aud }), accepted);
      assert.equal(f === undefined, ok);
      if (f) assert.equal(f.reason, 'bad_audience');
    });
  }
});
