import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseQuery, RequestView } from '../../src/routing/request.js';
import { request } from './factories.js';

describe('parseQuery', () => {
  const cases: [query: string, want: Record<string, string>][] = [
    ['', {}],
    ['?', {}],
    ['?a=1&b=2', { a: '1', b: '2' }],
    ['?a=1&a=2', { a: '1' }],
    ['?flag&x=', { flag: '', x: '' }],
    ['?q=a%20b&n%61me=v', { q: 'a b', name: 'v' }],
    ['?q=a+b', { q: 'a+b' }],
    ['?bad=%zz', { bad: '%zz' }],
    ['?a=1=2', { a: '1=2' }],
  ];
  for (const [q, want] of cases) it(`${JSON.stringify(q)}`, () => assert.deepEqual(Object.fromEntries(parseQuery(q)), want));
});

describe('RequestView', () => {
  it('splits path and query and folds the host', () => {
    const v = new RequestView(request({ host: 'Foo.COM:8443', path: '/A/b?x=1' }));
    assert.equal(v.host, 'foo.com');
    assert.equal(v.path, '/A/b');
    assert.equal(v.query, '?x=1');
    assert.equal(v.lowerPath, '/a/b');
    assert.equal(v.queryParam('x'), '1');
  });

  it('joins repeated headers with "," and answers pseudo-headers', () => {
    const v = new RequestView(request({ method: 'PUT', path: '/p?q', headers: { 'x-a': ['1', '2'], 'x-b': 'v' } }));
    assert.equal(v.header('x-a'), '1,2');
    assert.equal(v.header('x-b'), 'v');
    assert.equal(v.header('x-c'), undefined);
    assert.equal(v.header(':method'), 'PUT');
    assert.equal(v.header(':path'), '/p?q');
    assert.equal(v.header(':authority'), 'example.com');
  });
});
