import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_DESTINATION_PORT, pickDestination, rewritePath } from '../../src/routing/destination.js';
import { dest } from './factories.js';

describe('pickDestination', () => {
  const split = [dest('a', 1, 80), dest('zero', 2, 0), dest('b', 3, 20)];
  const cases: [random: number, want: string][] = [
    [0, 'a'],
    [0.5, 'a'],
    [0.7999, 'a'],
    [0.8, 'b'],
    [0.9999, 'b'],
  ];
  for (const [r, want] of cases) {
    it(`random ${r} → ${want}`, () => assert.equal(pickDestination(split, () => r)?.host, want));
  }

  it('never picks a 0-weight destination', () => {
    const hosts = new Set<string>();
    for (let i = 0; i < 100; i++) hosts.add(pickDestination(split, () => i / 100)!.host);
    assert.deepEqual([...hosts].sort(), ['a', 'b']);
  });

  it('uses the port of the destination, or 80 and says so', () => {
    assert.deepEqual(pickDestination([dest('a', 8080)]), { destination: dest('a', 8080), host: 'a', port: 8080, portDefaulted: false });
    assert.deepEqual(pickDestination([dest('a')]), { destination: dest('a'), host: 'a', port: DEFAULT_DESTINATION_PORT, portDefaulted: true });
    assert.equal(DEFAULT_DESTINATION_PORT, 80);
  });

  it('has nothing to pick from an empty or all-zero list', () => {
    assert.equal(pickDestination([]), undefined);
    assert.equal(pickDestination([dest('a', 1, 0), dest('b', 1, 0)], () => 0.5), undefined);
    assert.equal(pickDestination([dest('a', 1, 0)]), undefined);
  });
});

describe('rewritePath', () => {
  const cases: [path: string, query: string, replacement: string, prefixLength: number | undefined, want: string][] = [
    ['/api/users', '?a=1', '/v2', 4, '/v2/users?a=1'],
    ['/api/users', '', '/', 5, '/users'],
    ['/old', '?x', '/new', undefined, '/new?x'],
  ];
  for (const [path, query, replacement, len, want] of cases) {
    it(`${path}${query} with ${replacement} → ${want}`, () => assert.equal(rewritePath(path, query, replacement, len), want));
  }
});
