import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  cookies, cookieWithout, DEFAULT_HEADER, DEFAULT_PARAM, findToken, planLocations, queryParams, urlWithoutParam, type RequestHeaders,
} from '../../../src/security/jwt/token-source.js';
import { rule } from './support.js';

describe('planLocations', () => {
  it('gives a rule without locations Authorization: Bearer and access_token', () => {
    assert.deepEqual(planLocations([rule({ issuer: 'a' })]).locations, [
      { location: DEFAULT_HEADER, rules: [0] },
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

describe('findToken', () => {
  const defaults = planLocations([rule({ issuer: 'a' })]);
  const custom = planLocations([rule({ issuer: 'a', fromHeaders: [{ name: 'x-jwt', prefix: 'JWT ' }], fromParams: ['tok'], fromCookies: ['sess'] })]);
  const cases: { name: string; plan: typeof defaults; headers?: RequestHeaders; url?: string; token?: string; kind?: string }[] = [
    { name: 'Bearer', plan: defaults, headers: { authorization: 'Bearer abc' }, token: 'abc', kind: 'header' },
    { name: 'bearer, extra spaces', plan: defaults, headers: { authorization: 'bearer   abc ' }, token: 'abc', kind: 'header' },
    { name: 'BEARER', plan: defaults, headers: { authorization: 'BEARER abc' }, token: 'abc', kind: 'header' },
    { name: 'Basic is no token', plan: defaults, headers: { authorization: 'Basic abc' } },
    { name: 'Bearer without a token', plan: defaults, headers: { authorization: 'Bearer' } },
    { name: 'access_token', plan: defaults, url: '/p?x=1&access_token=a.b.c', token: 'a.b.c', kind: 'param' },
    { name: 'access_token percent-encoded', plan: defaults, url: '/p?access_token=a%2Eb.c', token: 'a.b.c', kind: 'param' },
    { name: 'the header before the parameter', plan: defaults, headers: { authorization: 'Bearer h' }, url: '/?access_token=p', token: 'h', kind: 'header' },
    { name: 'empty access_token', plan: defaults, url: '/?access_token=' },
    { name: 'other parameter', plan: defaults, url: '/?token=x' },
    { name: 'a header list', plan: defaults, headers: { authorization: ['Basic x', 'Bearer y'] }, token: 'y', kind: 'header' },
    { name: 'custom header with prefix', plan: custom, headers: { 'x-jwt': 'JWT t1' }, token: 't1', kind: 'header' },
    { name: 'custom prefix is case-sensitive', plan: custom, headers: { 'x-jwt': 'jwt t1' } },
    { name: 'custom param', plan: custom, url: '/?tok=t2', token: 't2', kind: 'param' },
    { name: 'custom cookie', plan: custom, headers: { cookie: 'a=1; sess="t3"' }, token: 't3', kind: 'cookie' },
    { name: 'defaults not read when locations are listed', plan: custom, headers: { authorization: 'Bearer x' }, url: '/?access_token=y' },
    { name: 'bad percent-encoding is ignored', plan: custom, url: '/?tok=%zz' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const found = findToken(c.plan, c.headers ?? {}, c.url ?? '/');
      assert.equal(found?.token, c.token);
      assert.equal(found?.at.location.kind, c.kind);
    });
  }
});

describe('query and cookie helpers', () => {
  it('parses the first value of each parameter and cookie', () => {
    assert.deepEqual([...queryParams('/p?a=1&a=2&b&c=x+y#frag')], [['a', '1'], ['b', ''], ['c', 'x y']]);
    assert.deepEqual([...queryParams('/p')], []);
    assert.deepEqual([...cookies(['a=1; b=2', 'a=3'])], [['a', '1'], ['b', '2']]);
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

  it('cookieWithout drops one cookie, and the header when nothing is left', () => {
    assert.equal(cookieWithout('a=1; sess=t; b=2', 'sess'), 'a=1; b=2');
    assert.equal(cookieWithout('sess=t', 'sess'), undefined);
    assert.equal(cookieWithout(undefined, 'sess'), undefined);
  });
});
