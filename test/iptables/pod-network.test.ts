import assert from 'node:assert/strict';
import { it } from 'node:test';
import { detectPodNetwork, firstAddressIsIpv6, parseIpAddrOutput, parseResolvConf } from '../../src/iptables/pod-network.js';
import { optionsFromArgs } from '../helpers/iptables-options.js';

it('reads nameservers of resolv.conf by family, in order', () => {
  const text = '# generated\nsearch default.svc.cluster.local\nnameserver 10.96.0.10\nnameserver fd00::a\n  nameserver 1.1.1.1 \nnameserver fe80::1%eth0\noptions ndots:5\n';
  assert.deepEqual(parseResolvConf(text), { v4: ['10.96.0.10', '1.1.1.1'], v6: ['fd00::a', 'fe80::1'] });
  assert.deepEqual(parseResolvConf('nameserver not-an-ip\n'), { v4: [], v6: [] });
});

it('takes the first address that is neither loopback nor link-local', () => {
  assert.equal(firstAddressIsIpv6(['127.0.0.1', '::1', 'fe80::1', '2001:db8::5', '10.0.0.5']), true);
  assert.equal(firstAddressIsIpv6(['127.0.0.1', '10.0.0.5', '2001:db8::5']), false);
  assert.equal(firstAddressIsIpv6(['169.254.1.1', 'fd00::5']), true);
  assert.equal(firstAddressIsIpv6(['127.0.0.1', '::1']), false);
});

it('parses `ip -o addr show`', () => {
  const out = '1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n'
    + '1: lo    inet6 ::1/128 scope host \\       valid_lft forever\n'
    + '7: eth0    inet6 fd00::2/64 scope global \\       valid_lft forever\n'
    + '7: eth0    inet 10.1.0.2/24 brd 10.1.0.255 scope global eth0\\       valid_lft forever\n';
  assert.deepEqual(parseIpAddrOutput(out), ['127.0.0.1', '::1', 'fd00::2', '10.1.0.2']);
});

it('reads DNS servers only with --redirect-dns, and IPv6 from the addresses or --dual-stack', async () => {
  const sources = (addresses: string[]) => ({
    addresses: async () => addresses, resolvConf: () => 'nameserver 10.96.0.10\nnameserver fd00::a\n',
  });
  assert.deepEqual(await detectPodNetwork(optionsFromArgs(['mesh-iptables']), sources(['10.0.0.2'])),
    { ipv6: false, dnsServersV4: [], dnsServersV6: [] });
  assert.deepEqual(await detectPodNetwork(optionsFromArgs(['mesh-iptables', '--redirect-dns']), sources(['fd00::2'])),
    { ipv6: true, dnsServersV4: ['10.96.0.10'], dnsServersV6: ['fd00::a'] });
  assert.equal((await detectPodNetwork(optionsFromArgs(['mesh-iptables', '--dual-stack']), sources(['10.0.0.2']))).ipv6, true);
  assert.equal((await detectPodNetwork(optionsFromArgs(['mesh-iptables'], { MESH_DUAL_STACK: 'true' }), sources([]))).ipv6, true);
});
