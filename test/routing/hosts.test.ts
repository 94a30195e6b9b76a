import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DomainIndex, hostMatches, hostWithoutPort, intersectHosts } from '../../src/routing/hosts.js';

describe('hostMatches', () => {
  const cases: [pattern: string, host: string, want: boolean][] = [
    ['*', 'anything.example', true],
    ['*', '', true],
    ['foo.com', 'foo.com', true],
    ['foo.com', 'a.foo.com', false],
    ['*.foo.com', 'a.foo.com', true],
    ['*.foo.com', 'a.b.foo.com', true],
    ['*.foo.com', 'foo.com', false],
    ['*.foo.com', 'afoo.com', false],
    ['*.foo.com', '.foo.com', false],
  ];
  for (const [pattern, host, want] of cases) {
    it(`${pattern} ${want ? 'covers' : 'does not cover'} ${JSON.stringify(host)}`, () => assert.equal(hostMatches(pattern, host), want));
  }
});

describe('intersectHosts (server host × VirtualService host)', () => {
  const cases: [a: string, b: string, want: string | undefined][] = [
    ['foo.com', '*', 'foo.com'],
    ['*', 'foo.com', 'foo.com'],
    ['*', '*', '*'],
    ['*.foo.com', 'a.foo.com', 'a.foo.com'],
    ['a.foo.com', '*.foo.com', 'a.foo.com'],
    ['*.foo.com', '*.bar.foo.com', '*.bar.foo.com'],
    ['*.foo.com', '*.foo.com', '*.foo.com'],
    ['*.foo.com', 'foo.com', undefined],
    ['*.foo.com', '*.bar.com', undefined],
    ['a.com', 'b.com', undefined],
    ['*', '*.foo.com', '*.foo.com'],
  ];
  for (const [a, b, want] of cases) {
    it(`${a} ∩ ${b} = ${want ?? 'nothing'}`, () => assert.equal(intersectHosts(a, b), want));
  }
});

describe('hostWithoutPort', () => {
  const cases: [string, string][] = [
    ['Example.COM:8080', 'example.com'],
    ['example.com', 'example.com'],
    ['example.com:', 'example.com'],
    ['[::1]:8080', '[::1]'],
    ['[::1]', '[::1]'],
    ['::1', '::1'],
    ['10.0.0.1:80', '10.0.0.1'],
    ['', ''],
  ];
  for (const [input, want] of cases) it(`${JSON.stringify(input)} → ${JSON.stringify(want)}`, () => assert.equal(hostWithoutPort(input), want));
});

describe('DomainIndex lookup order', () => {
  const index = new DomainIndex<string>();
  for (const d of ['*', '*.foo.com', '*.b.foo.com', 'a.b.foo.com', 'foo.com']) index.ensure(d, () => d);
  const cases: [host: string, want: string][] = [
    ['a.b.foo.com', 'a.b.foo.com'], // exact beats every wildcard
    ['x.b.foo.com', '*.b.foo.com'], // the longest wildcard suffix
    ['x.y.b.foo.com', '*.b.foo.com'],
    ['x.foo.com', '*.foo.com'],
    ['foo.com', 'foo.com'],
    ['bar.com', '*'],
  ];
  for (const [host, want] of cases) it(`${host} → ${want}`, () => assert.equal(index.lookup(host), want));

  it('finds nothing without a catch-all', () => {
    const only = new DomainIndex<string>();
    only.ensure('*.foo.com', () => 'w');
    assert.equal(only.lookup('foo.com'), undefined);
    assert.equal(only.lookup('a.foo.com'), 'w');
  });

  it('keeps the first value for a domain', () => {
    const i = new DomainIndex<string>();
    assert.equal(i.ensure('a.com', () => 'first'), 'first');
    assert.equal(i.ensure('a.com', () => 'second'), 'first');
  });
});
