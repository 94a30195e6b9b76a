// DNS_PROXY_ADDR: parsing and the addresses bound.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { listenHosts, parseProxyAddress } from '../../src/dns/proxy-address.js';

describe('parseProxyAddress', () => {
  const good: [string, string, number][] = [
    ['localhost:15053', 'localhost', 15053], ['127.0.0.1:53', '127.0.0.1', 53], ['[::1]:15053', '::1', 15053],
    [':53', '', 53], ['0.0.0.0:53', '0.0.0.0', 53], ['[::]:53', '::', 53], [' localhost:0 ', 'localhost', 0],
  ];
  for (const [text, host, port] of good) {
    it(`${text} → ${host || '(every address)'} port ${port}`, () => assert.deepEqual(parseProxyAddress(text), { host, port }));
  }
  for (const bad of ['', 'localhost', '15053', 'example.com:53', '::1:53', '[127.0.0.1]:53', 'localhost:65536', 'localhost:-1', '[::1]']) {
    it(`refuses ${JSON.stringify(bad)}, naming the variable and the accepted form`, () => {
      assert.throws(() => parseProxyAddress(bad), (err: Error & { code?: string }) =>
        err.code === 'ERR_ENV_VALUE' && err.message.includes(`DNS_PROXY_ADDR=${JSON.stringify(bad)}`) && err.message.includes('localhost:15053'));
    });
  }
});

describe('listenHosts', () => {
  const local = ['127.0.0.1', '::1', '198.18.0.2', 'fe80::1', '2001:db8::2', '198.18.0.2'];
  it('localhost is both loopbacks', () => assert.deepEqual(listenHosts('localhost', local), ['127.0.0.1', '::1']));
  it('an address is itself', () => assert.deepEqual(listenHosts('198.18.0.2', local), ['198.18.0.2']));
  it('empty or :: is every address but link-local, once each', () =>
    assert.deepEqual(listenHosts('', local), ['127.0.0.1', '::1', '198.18.0.2', '2001:db8::2']));
  it('0.0.0.0 is every IPv4 address', () => assert.deepEqual(listenHosts('0.0.0.0', local), ['127.0.0.1', '198.18.0.2']));
});
