import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cidrContains, parseCidr, parseIp } from '../../../src/security/authz/cidr.js';

const hex = (b: Uint8Array | undefined): string | undefined => (b ? Buffer.from(b).toString('hex') : undefined);

describe('parseIp', () => {
  const cases: [string, string | undefined][] = [
    ['10.1.2.3', '0a010203'],
    ['255.255.255.255', 'ffffffff'],
    ['256.1.1.1', undefined],
    ['1.2.3', undefined],
    ['1.2.3.4.5', undefined],
    ['a.b.c.d', undefined],
    ['::1', '00000000000000000000000000000001'],
    ['::', '00000000000000000000000000000000'],
    ['2001:db8::1', '20010db8000000000000000000000001'],
    ['2001:DB8:0:0:0:0:0:1', '20010db8000000000000000000000001'],
    ['fe80::1%eth0', 'fe800000000000000000000000000001'],
    ['[::1]', '00000000000000000000000000000001'],
    ['::ffff:10.1.2.3', '0a010203'], // v4-mapped: the IPv4 address
    ['64:ff9b::1.2.3.4', '0064ff9b000000000000000001020304'],
    ['1:2:3:4:5:6:7:8:9', undefined],
    ['1::2::3', undefined],
    ['12345::', undefined],
    ['1:2:3:4:5:6:7::8', undefined],
    ['', undefined],
  ];
  for (const [s, want] of cases) it(`${JSON.stringify(s)} → ${want ?? 'invalid'}`, () => assert.equal(hex(parseIp(s)), want));
});

describe('CIDR membership', () => {
  const cases: [cidr: string, ip: string, want: boolean][] = [
    ['10.0.0.0/8', '10.255.1.2', true],
    ['10.0.0.0/8', '11.0.0.1', false],
    ['192.168.1.1', '192.168.1.1', true],
    ['192.168.1.1', '192.168.1.2', false],
    ['192.168.1.0/25', '192.168.1.127', true],
    ['192.168.1.0/25', '192.168.1.128', false],
    ['0.0.0.0/0', '8.8.8.8', true],
    ['10.0.0.0/8', '::ffff:10.0.0.1', true],
    ['10.0.0.0/8', '::1', false],
    ['2001:db8::/32', '2001:db8:ffff::1', true],
    ['2001:db8::/32', '2001:db9::1', false],
    ['2001:db8::/33', '2001:db8:8000::1', false],
    ['::1', '::1', true],
    ['::/0', '10.0.0.1', false],
    ['::ffff:10.0.0.0/104', '10.1.1.1', true],
  ];
  for (const [cidr, ip, want] of cases) {
    it(`${ip} ${want ? 'in' : 'not in'} ${cidr}`, () => {
      const c = parseCidr(cidr);
      const a = parseIp(ip);
      assert.ok(c && a);
      assert.equal(cidrContains(c, a), want);
    });
  }

  for (const bad of ['10.0.0.0/33', '::/129', '10.0.0.0/x', '10.0.0/8', 'host/8']) {
    it(`rejects ${bad}`, () => assert.equal(parseCidr(bad), undefined));
  }
});
