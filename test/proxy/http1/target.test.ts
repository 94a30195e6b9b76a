import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTarget, validAuthority } from '../../../src/proxy/http1/target.js';

describe('parseTarget', () => {
  const good: [string, string, ReturnType<typeof parseTarget>][] = [
    ['GET', '/a?b#c', { form: 'origin', path: '/a', query: '?b' }],
    ['GET', '/a#c?d', { form: 'origin', path: '/a', query: '' }],
    ['GET', 'http://g/admin/x', { form: 'absolute', path: '/admin/x', query: '', authority: 'g' }],
    ['GET', 'HtTp://g:80?x=1', { form: 'absolute', path: '/', query: '?x=1', authority: 'g:80' }],
    ['GET', 'https://[::1]:8443/p#f', { form: 'absolute', path: '/p', query: '', authority: '[::1]:8443' }],
    ['OPTIONS', '*', { form: 'asterisk', path: '*', query: '' }],
    ['CONNECT', 'example.com:443', { form: 'authority', path: '', query: '', authority: 'example.com:443' }],
    ['CONNECT', '[2001:db8::1]:443', { form: 'authority', path: '', query: '', authority: '[2001:db8::1]:443' }],
  ];
  for (const [method, target, want] of good) it(`${method} ${target}`, () => assert.deepEqual(parseTarget(method, target), want));

  const bad: [string, string][] = [
    ['GET', 'admin'], ['GET', '*'], ['GET', 'ftp://g/'], ['GET', 'http://'], ['GET', 'http://u:p@g/'],
    ['GET', 'http://g h/'], ['GET', 'http://:80/'], ['CONNECT', '/a'], ['CONNECT', 'g'], ['CONNECT', 'g:'], ['CONNECT', ':443'],
  ];
  for (const [method, target] of bad) it(`refuses ${method} ${target}`, () => assert.equal(typeof parseTarget(method, target), 'string'));
});

it('validAuthority', () => {
  for (const a of ['a', 'a.b', 'a:1', '[::1]', '[::1]:80', '', 'xn--b.c', 'a%41']) assert.equal(validAuthority(a), true, a);
  for (const a of ['a b', 'a/b', 'a@b', 'a?b', 'a#b', '"a"', 'a\\b', '[::1', 'a:b', 'a\tb']) assert.equal(validAuthority(a), false, a);
});
