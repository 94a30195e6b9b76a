import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isLocalAddress, isLoopbackAddress, localAddresses } from '../../src/net/local-addresses.js';

describe('isLoopbackAddress (METRICS_LOCALHOST_ACCESS_ONLY)', () => {
  const cases: [string | undefined, boolean][] = [
    ['127.0.0.1', true], ['127.1.2.3', true], ['::1', true], ['::ffff:127.0.0.1', true], ['[::1]', true],
    ['0:0:0:0:0:0:0:1', true], ['10.0.0.1', false], ['::ffff:10.0.0.1', false], ['fe80::1%eth0', false],
    ['::', false], ['0.0.0.0', false], ['128.0.0.1', false], ['', false], [undefined, false],
  ];
  for (const [address, expected] of cases) {
    it(`${String(address)} → ${expected}`, () => assert.equal(isLoopbackAddress(address), expected));
  }
});

describe('isLocalAddress (a loop back into the proxy)', () => {
  const local = new Set(['10.1.2.3', 'fd00::3']);
  const cases: [string, boolean][] = [
    ['127.0.0.1', true], ['::1', true], ['10.1.2.3', true], ['::ffff:10.1.2.3', true], ['fd00::3', true],
    ['10.1.2.4', false], ['::ffff:10.1.2.4', false], ['fd00::4', false],
  ];
  for (const [address, expected] of cases) {
    it(`${address} → ${expected}`, () => assert.equal(isLocalAddress(address, local), expected));
  }
});

describe('localAddresses', () => {
  it('lists this host\'s addresses, loopback included', () => {
    assert.ok(localAddresses().includes('127.0.0.1'));
  });
});
