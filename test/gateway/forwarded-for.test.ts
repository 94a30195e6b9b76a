import assert from 'node:assert/strict';
import { it } from 'node:test';
import { clientAddress, plainAddress } from '../../src/gateway/forwarded-for.js';

it('clientAddress: the peer unless proxies are trusted; then the N-th X-Forwarded-For entry from the right', () => {
  const cases: [string | undefined, number, string][] = [
    ['203.0.113.7', 0, '10.0.0.1'], // nobody trusted: the header proves nothing
    [undefined, 1, '10.0.0.1'],
    ['203.0.113.7', 1, '203.0.113.7'],
    ['1.1.1.1, 203.0.113.7', 1, '203.0.113.7'],
    ['1.1.1.1, 203.0.113.7', 2, '1.1.1.1'],
    ['203.0.113.7', 2, '10.0.0.1'], // fewer entries than trusted proxies
    [' 2001:db8::1 ,,', 1, '2001:db8::1'],
    ['not-an-address', 1, '10.0.0.1'],
  ];
  for (const [xff, n, want] of cases) assert.equal(clientAddress(xff, '10.0.0.1', n), want, `${xff} / ${n}`);
});

it('plainAddress drops the IPv4-mapped prefix', () => {
  assert.equal(plainAddress('::ffff:10.0.0.1'), '10.0.0.1');
  assert.equal(plainAddress('2001:db8::1'), '2001:db8::1');
  assert.equal(plainAddress(undefined), '');
});
