import assert from 'node:assert/strict';
import { it } from 'node:test';
import { explainRuleSet } from '../../src/iptables/explain.js';
import { optionsFromArgs } from '../helpers/iptables-options.js';

const pod = { ipv6: false, dnsServersV4: ['10.96.0.10'], dnsServersV6: [] };
const explain = (...args: string[]): string => explainRuleSet(optionsFromArgs(['mesh-iptables', ...args]), pod).join('\n');

it('says what is captured inbound, and how', () => {
  assert.match(explain('-b', '*', '-d', '15020'), /Inbound: TCP to every port is captured, except ports 15020: REDIRECT to port 15006 \(the app sees connections from 127\.0\.0\.6\)/);
  assert.match(explain('-b', '80', '-m', 'TPROXY'), /Inbound: TCP to ports 80 is captured: TPROXY to port 15006 \(mark 1337, policy route table 133; the app sees the client's address\)/);
  assert.match(explain(), /Inbound: nothing is captured/);
  assert.match(explain(), /the tunnel port 15008 is never captured/);
});

it('says what is redirected outbound and what is exempt, and why', () => {
  const text = explain('-i', '10.0.0.0/8', '-x', '10.1.0.0/16', '-o', '3306', '-c', 'eth1', '-u', '1337', '-g', '1337');
  assert.match(text, /Outbound: traffic to destinations in 10\.0\.0\.0\/8 is redirected to port 15001\./);
  assert.match(text, /the proxy's own traffic \(uid 1337 \/ gid 1337\), so nothing loops/);
  assert.match(text, /TCP to ports 3306; destinations in 10\.1\.0\.0\/16; everything on interfaces eth1/);
  assert.match(explain(), /Outbound: nothing is captured/);
});

it('explains DNS capture and why it may be off', () => {
  assert.match(explain('--redirect-dns'), /DNS: UDP and TCP to port 53 of 10\.96\.0\.10 \(from \/etc\/resolv\.conf\) is redirected to the agent on 15053/);
  assert.match(explain('--redirect-dns', '--capture-all-dns'), /DNS: all UDP and TCP traffic to port 53/);
  assert.match(explain(), /DNS: not captured \(--redirect-dns is off\)/);
  assert.match(explainRuleSet(optionsFromArgs(['mesh-iptables', '--redirect-dns']), { ...pod, dnsServersV4: [] }).join('\n'),
    /names no server and --capture-all-dns is off/);
});

it('says what --block-inbound-ipv6 does, and why it adds nothing when IPv6 is captured or nothing is', () => {
  const v6pod = { ...pod, ipv6: true };
  const cases: [string, string[], typeof pod, RegExp][] = [
    ['the hole, when off', ['-b', '*'], pod, /IPv6 inbound: not captured .*link-local fe80:: .*reaches the app directly, past the proxy; --block-inbound-ipv6 \(MESH_BLOCK_INBOUND_IPV6\) refuses it\./],
    ['on, -b * -d', ['--block-inbound-ipv6', '-b', '*', '-d', '15020,15090', '-c', 'eth1'], pod,
      /IPv6 inbound \(--block-inbound-ipv6\): .* to every port but the tunnel port 15008 and ports 15020, 15090, the ports the IPv4 rules capture, is refused with a TCP reset .*Left alone: loopback; established connections .*; everything but TCP \(ICMPv6, so neighbour discovery .*\); interfaces eth1 \(-c\)\./],
    ['on, a port list', ['--block-inbound-ipv6', '-b', '80,443'], pod, /to ports 80, 443, the ports the IPv4 rules capture, is refused/],
    ['on, IPv6 captured', ['--block-inbound-ipv6', '-b', '*'], v6pod, /IPv6 inbound \(--block-inbound-ipv6\): adds nothing: the IPv6 capture rules already take inbound IPv6 TCP/],
    ['on, no inbound capture', ['--block-inbound-ipv6'], pod, /IPv6 inbound \(--block-inbound-ipv6\): adds nothing: inbound capture is off/],
  ];
  for (const [name, args, p, want] of cases) {
    assert.match(explainRuleSet(optionsFromArgs(['mesh-iptables', ...args]), p).join('\n'), want, name);
  }
  // Nothing to say: IPv6 is captured, or nothing inbound is.
  assert.doesNotMatch(explainRuleSet(optionsFromArgs(['mesh-iptables', '-b', '*']), v6pod).join('\n'), /IPv6 inbound/);
  assert.doesNotMatch(explain(), /IPv6 inbound/);
});
