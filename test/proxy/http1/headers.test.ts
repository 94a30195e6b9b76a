import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { headersObject, invalidEdit, isHopByHop, validHeaderValue, wireText } from '../../../src/proxy/http1/headers.js';

describe('isHopByHop', () => {
  const cases: [string, boolean][] = [
    ['Connection', true], ['keep-alive', true], ['Proxy-Connection', true], ['TE', true], ['Trailer', true],
    ['Transfer-Encoding', true], ['UPGRADE', true], ['Host', false], ['Content-Length', false], ['te-x', false],
    ['Connectionx', false], ['x-upgrade', false], ['', false],
  ];
  for (const [name, want] of cases) it(`${JSON.stringify(name)} → ${want}`, () => assert.equal(isHopByHop(name), want));
});

describe('headersObject', () => {
  it('lower-case names; every repeated line joined, none dropped (a policy sees what the app may read)', () => {
    assert.deepEqual({ ...headersObject(['Host', 'a', 'X-Role', 'user', 'x-role', 'admin', 'Authorization', 'A', 'authorization', 'B', 'Cookie', 'a=1', 'cookie', 'b=2']) }, {
      host: 'a', 'x-role': 'user, admin', authorization: 'A, B', cookie: 'a=1; b=2',
    });
    assert.deepEqual({ ...headersObject(['Set-Cookie', 's1', 'set-cookie', 's2']) }, { 'set-cookie': ['s1', 's2'] });
    assert.deepEqual({ ...headersObject([]) }, {});
    const odd = headersObject(['__proto__', 'x', 'constructor', 'y']);
    assert.equal(Object.getOwnPropertyDescriptor(odd, '__proto__')?.value, 'x', 'a header like any other, not the prototype');
    assert.equal(odd['constructor'], 'y');
  });
});

describe('invalidEdit, validHeaderValue, wireText', () => {
  const cases: [string, Parameters<typeof invalidEdit>[0], string | undefined][] = [
    ['no edits', {}, undefined],
    ['a good path and headers', { path: '/a?b=c', setHeaders: [['x-a', 'v é Ω']] }, undefined],
    ['a path with a space', { path: '/a b' }, 'path "/a b"'],
    ['a path not in origin-form', { path: 'http://x/' }, 'path "http://x/"'],
    ['an empty path', { path: '' }, 'path ""'],
    ['a header name that is not a token', { setHeaders: [['x a', 'v']] }, 'header name "x a"'],
    ['a value with CR LF', { setHeaders: [['x-a', 'v\r\nx-b: y']] }, 'value of header x-a'],
    ['a value with NUL', { setHeaders: [['x-a', 'v\u0000']] }, 'value of header x-a'],
  ];
  for (const [name, edits, want] of cases) it(name, () => assert.equal(invalidEdit(edits), want));
  it('validHeaderValue refuses control characters, takes text', () => {
    assert.equal(validHeaderValue('ok\tvalue José Ωmega'), true);
    assert.equal(validHeaderValue('no\nnewline'), false);
  });
  it('wireText: UTF-8 bytes as a latin1 string, ASCII as it is', () => {
    assert.equal(wireText('plain'), 'plain');
    assert.deepEqual(Buffer.from(wireText('José Ωmega'), 'latin1'), Buffer.from('José Ωmega', 'utf8'));
  });
});
