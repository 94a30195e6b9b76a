import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { editedHeader, headerCandidates, type HeaderValue } from '../../../src/security/authz/header-values.js';

describe('headerCandidates', () => {
  const cases: [name: string, value: HeaderValue, want: string[] | undefined][] = [
    ['absent', undefined, undefined],
    ['no line', [], undefined],
    ['one value', 'admin', ['admin']],
    ['an empty value', '', ['']],
    ['a list in one line: the whole value, then each element', 'user, admin', ['user, admin', 'user', 'admin']],
    ['elements trimmed, empty ones left out', ' a ,, b,', [' a ,, b,', 'a', 'b']],
    ['one line as a list', ['user'], ['user']],
    ['lines: each, joined, then their elements', ['user', 'admin'], ['user', 'admin', 'user, admin']],
    ['lines holding lists', ['a, b', 'c'], ['a, b', 'c', 'a, b, c', 'a', 'b']],
    ['repeats once', ['x', 'x'], ['x', 'x, x']],
  ];
  for (const [name, value, want] of cases) it(name, () => assert.deepEqual(headerCandidates(value), want));

  it('gives one header the same candidates as lines and as node:http\'s joined string', () => {
    assert.deepEqual(new Set(headerCandidates(['user', 'admin'])), new Set(headerCandidates('user, admin')));
  });
});

describe('editedHeader', () => {
  const headers = { 'x-a': 'client', 'x-b': ['1', '2'] };
  const edits = { remove: ['x-b', 'x-c'], set: [['X-A', 'proxy'], ['x-c', 'one'], ['x-c', 'two']] as [string, string][] };
  const cases: [name: string, header: string, want: HeaderValue][] = [
    ['set wins over the client\'s value (any case in the edit)', 'x-a', 'proxy'],
    ['removed', 'x-b', undefined],
    ['set wins over removed; every set line', 'x-c', ['one', 'two']],
    ['untouched', 'x-d', undefined],
  ];
  for (const [name, header, want] of cases) it(name, () => assert.deepEqual(editedHeader(headers, edits, header), want));
  it('without edits: the request\'s own', () => assert.deepEqual(editedHeader(headers, undefined, 'x-b'), ['1', '2']));
});
