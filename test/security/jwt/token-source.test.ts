import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  cookies, cookieWithout, DEFAULT_HEADER, DEFAULT_PARAM, findTokens, planLocations, queryParams, urlWithoutParam, type RequestHeaders,
} from '../../../src/security/jwt/token-source.js';
import { rule } from './support.js';

describe('planLocations', () => {
  it('gives a rule without locations Authorization: Bearer and access_token', () => {
    assert.deepEqual(planLocations([rule({ issuer: 'a' })]).locations, [
      { location: DEFAULT_HEADER, rules: [0], prefixPattern: /Bearer /gi },
      { location: DEFAULT_PARAM, rules: [0] },
    ]);
  });

  it('lists each location once, in rule order, with the rules that read it', () => {
    const plan = planLocations([
      rule({ issuer: 'a', fromHeaders: [{ name: 'X-Token', prefix: '' }], fromCookies: ['c'] }),
      rule({ issuer: 'b' }),
      rule({ issuer: 'c', fromHeaders: [{ name: 'x-token', prefix: '' }], fromParams: ['access_token', 't'] }),
    ]);
    assert.deepEqual(plan.locations.map((p) => [p.location.kind, 'name' in p.location ? p.location.name : '', p.rules]), [
      ['header', 'x-token', [0, 2]],
      ['cookie', 'c', [0]],
      ['header', 'authorization', [1]],
      ['param', 'access_token', [1, 2]],
      ['param', 't', [2]],
    ]);
    assert.equal(plan.hasParams, true);
    assert.equal(plan.hasCookies, true);
  });

  it('keeps one header with two prefixes apart', () => {
    const plan = planLocations([
      rule({ issuer: 'a', fromHeaders: [{ name: 'authorization', prefix: 'Bearer ' }] }),
      rule({ issuer: 'b', fromHeaders: [{ name: 'authorization', prefix: 'Token ' }] }),
    ]);
    assert.equal(plan.locations.length, 2);
  });
});

describe('findTokens', () => {
  const defaults = planLocations([rule({ issuer: 'a' })]);
  const custom = planLocations([rule({ issuer: 'a', fromHeaders: [{ name: 'x-jwt', prefix: 'JWT ' }], fromParams: ['tok'], fromCookies: ['sess'] })]);
  const bare = planLocations([rule({ issuer: 'a', fromHeaders: [{ name: 'x-jwt', prefix: '' }] })]);
  const letters = planLocations([rule({ issuer: 'a', fromHeaders: [{ name: 'x-jwt', prefix: 'a' }] })]);
  /** `tokens`: `kind:token` in the order found; none: the request carries no token. */
  const cases: { name: string; plan: typeof defaults; headers?: RequestHeaders; url?: string; tokens?: string[] }[] = [
    { name: 'Bearer', plan: defaults, headers: { authorization: 'Bearer abc' }, tokens: ['header:abc'] },
    { name: 'bearer, extra spaces', plan: defaults, headers: { authorization: 'bearer   abc ' }, tokens: ['header:abc'] },
    { name: 'BEARER', plan: defaults, headers: { authorization: 'BEARER abc' }, tokens: ['header:abc'] },
    { name: 'Basic is no token', plan: defaults, headers: { authorization: 'Basic abc' } },
    { name: 'Bearer without a token', plan: defaults, headers: { authorization: 'Bearer' } },
    { name: 'Bearer and a space only', plan: defaults, headers: { authorization: 'Bearer ' } },
    { name: 'access_token', plan: defaults, url: '/p?x=1&access_token=a.b.c', tokens: ['param:a.b.c'] },
    { name: 'access_token percent-encoded', plan: defaults, url: '/p?access_token=a%2Eb.c', tokens: ['param:a.b.c'] },
    { name: 'the header before the parameter, both found', plan: defaults, headers: { authorization: 'Bearer h' }, url: '/?access_token=p', tokens: ['header:h', 'param:p'] },
    { name: 'empty access_token', plan: defaults, url: '/?access_token=' },
    { name: 'other parameter', plan: defaults, url: '/?token=x' },
    // Review finding 1: a token after another scheme, or in a second line, is a token too.
    { name: 'a header list: every line', plan: defaults, headers: { authorization: ['Bearer x', 'Bearer y'] }, tokens: ['header:x', 'header:y'] },
    { name: 'a header list: a Bearer line after a Basic one', plan: defaults, headers: { authorization: ['Basic x', 'Bearer y'] }, tokens: ['header:y'] },
    { name: 'Bearer after Basic in one line', plan: defaults, headers: { authorization: 'Basic Zm9v, Bearer forged' }, tokens: ['header:forged'] },
    { name: 'two lines joined by node:http', plan: defaults, headers: { authorization: 'Bearer x, bearer y' }, tokens: ['header:x', 'header:y'] },
    { name: 'a token ends at a comma or blank', plan: defaults, headers: { authorization: 'Bearer a.b-c_d\tx, y z' }, tokens: ['header:a.b-c_d'] },
    { name: 'other characters stay in the token (it fails as malformed)', plan: defaults, headers: { authorization: 'Bearer a.b.c;junk' }, tokens: ['header:a.b.c;junk'] },
    { name: 'one token twice: once', plan: defaults, headers: { authorization: ['Bearer x', 'Bearer x'] }, tokens: ['header:x'] },
    { name: 'repeated access_token: every value', plan: defaults, url: '/?access_token=p&x=1&access_token=q&access_token=p', tokens: ['param:p', 'param:q'] },
    { name: 'custom header with prefix', plan: custom, headers: { 'x-jwt': 'JWT t1' }, tokens: ['header:t1'] },
    { name: 'custom prefix is case-sensitive', plan: custom, headers: { 'x-jwt': 'jwt t1' } },
    { name: 'custom prefix anywhere in the value', plan: custom, headers: { 'x-jwt': 'Other o, JWT t1' }, tokens: ['header:t1'] },
    { name: 'custom param', plan: custom, url: '/?tok=t2', tokens: ['param:t2'] },
    { name: 'custom cookie', plan: custom, headers: { cookie: 'a=1; sess="t3"' }, tokens: ['cookie:t3'] },
    { name: 'repeated cookie: every value, every line', plan: custom, headers: { cookie: ['sess=t3; a=1; sess=t4', 'sess=t5'] }, tokens: ['cookie:t3', 'cookie:t4', 'cookie:t5'] },
    { name: 'every location in plan order', plan: custom, headers: { cookie: 'sess=c', 'x-jwt': 'JWT h' }, url: '/?tok=p', tokens: ['header:h', 'param:p', 'cookie:c'] },
    { name: 'defaults not read when locations are listed', plan: custom, headers: { authorization: 'Bearer x' }, url: '/?access_token=y' },
    { name: 'bad percent-encoding is ignored', plan: custom, url: '/?tok=%zz' },
    { name: 'no prefix: the value', plan: bare, headers: { 'x-jwt': ' a.b.c ' }, tokens: ['header:a.b.c'] },
    { name: 'no prefix: each element of a joined list', plan: bare, headers: { 'x-jwt': 'a.b.c, d.e.f' }, tokens: ['header:a.b.c', 'header:d.e.f'] },
    { name: 'no prefix: each line', plan: bare, headers: { 'x-jwt': ['a.b.c', 'd.e.f'] }, tokens: ['header:a.b.c', 'header:d.e.f'] },
    { name: 'a prefix of JWT characters is not looked for inside a token', plan: letters, headers: { 'x-jwt': 'a xyz.abc.bca' }, tokens: ['header:xyz.abc.bca'] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const found = findTokens(c.plan, c.headers ?? {}, c.url ?? '/');
      assert.deepEqual(found.map((f) => `${f.at.location.kind}:${f.token}`), c.tokens ?? []);
    });
  }
});

describe('query and cookie helpers', () => {
  it('parses every value of each parameter and cookie', () => {
    assert.deepEqual([...queryParams('/p?a=1&a=2&b&c=x+y#frag')], [['a', ['1', '2']], ['b', ['']], ['c', ['x y']]]);
    assert.deepEqual([...queryParams('/p')], []);
    assert.deepEqual([...cookies(['a=1; b=2', 'a=3'])], [['a', ['1', '3']], ['b', ['2']]]);
  });

  const urls: [string, string, string][] = [
    ['/p?access_token=t', 'access_token', '/p'],
    ['/p?a=1&access_token=t&b=%20', 'access_token', '/p?a=1&b=%20'],
    ['/p?access_token=t&access_token=u&z', 'access_token', '/p?z'],
    ['/p?access%5Ftoken=t#f', 'access_token', '/p#f'],
    ['/p', 'access_token', '/p'],
    ['/p?other=1', 'access_token', '/p?other=1'],
  ];
  for (const [url, name, want] of urls) {
    it(`urlWithoutParam(${url})`, () => assert.equal(urlWithoutParam(url, name), want));
  }

  it('cookieWithout drops every cookie of a name, and the header when nothing is left', () => {
    assert.equal(cookieWithout('a=1; sess=t; b=2', 'sess'), 'a=1; b=2');
    assert.equal(cookieWithout(['sess=t; a=1', 'sess=u'], 'sess'), 'a=1');
    assert.equal(cookieWithout('sess=t', 'sess'), undefined);
    assert.equal(cookieWithout(undefined, 'sess'), undefined);
  });
});
