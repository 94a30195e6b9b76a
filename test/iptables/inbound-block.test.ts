// The IPv6 inbound block (`--block-inbound-ipv6`), rule by rule: a table of (name, flags, the
// restore lines). Whole rule sets with the block are golden files (builder-cases.ts, block-ipv6-*).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inboundBlockRules } from '../../src/iptables/inbound-block.js';
import { ruleLine } from '../../src/iptables/rules.js';
import { optionsFromArgs } from '../helpers/iptables-options.js';

const lines = (...args: string[]): string[] => inboundBlockRules(optionsFromArgs(['mesh-iptables', '--block-inbound-ipv6', ...args])).map(ruleLine);

const HEAD = [
  '-I INPUT 1 -p tcp -j MESH_INBOUND_BLOCK',
  '-A MESH_INBOUND_BLOCK -p tcp -i lo -j RETURN',
  '-A MESH_INBOUND_BLOCK -p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN',
];
const TUNNEL = '-A MESH_INBOUND_BLOCK -p tcp --dport 15008 -j RETURN';
const REJECT_ALL = '-A MESH_INBOUND_BLOCK -p tcp -j REJECT --reject-with tcp-reset';

const cases: [string, string[], string[]][] = [
  ['-b * with -d: each excluded port returns, the rest of TCP is reset', ['-b', '*', '-d', '15020,15021,15090'], [
    ...HEAD, TUNNEL,
    '-A MESH_INBOUND_BLOCK -p tcp --dport 15020 -j RETURN',
    '-A MESH_INBOUND_BLOCK -p tcp --dport 15021 -j RETURN',
    '-A MESH_INBOUND_BLOCK -p tcp --dport 15090 -j RETURN',
    REJECT_ALL,
  ]],
  ['a port list: only those ports are reset, -d ignored (as the IPv4 capture ignores it)', ['-b', '8080,9090', '-d', '8080'], [
    ...HEAD, TUNNEL,
    '-A MESH_INBOUND_BLOCK -p tcp --dport 8080 -j REJECT --reject-with tcp-reset',
    '-A MESH_INBOUND_BLOCK -p tcp --dport 9090 -j REJECT --reject-with tcp-reset',
  ]],
  ['-c and -k interfaces are left alone, as the IPv4 capture leaves them', ['-b', '*', '-c', 'eth1,veth+', '-k', 'tap0'], [
    ...HEAD,
    '-A MESH_INBOUND_BLOCK -p tcp -i eth1 -j RETURN',
    '-A MESH_INBOUND_BLOCK -p tcp -i veth+ -j RETURN',
    '-A MESH_INBOUND_BLOCK -p tcp -i tap0 -j RETURN',
    TUNNEL, REJECT_ALL,
  ]],
  ['the tunnel port is the one -e names', ['-b', '*', '-e', '16008'], [
    ...HEAD, '-A MESH_INBOUND_BLOCK -p tcp --dport 16008 -j RETURN', REJECT_ALL,
  ]],
  ['-b \'\': no inbound capture, nothing to block', ['-b', ''], []],
  ['no -b at all: the same', [], []],
];

describe('inboundBlockRules', () => {
  for (const [name, args, want] of cases) it(name, () => assert.deepEqual(lines(...args), want));

  it('is the same for REDIRECT and TPROXY (TPROXY\'s own exemptions are all loopback traffic)', () => {
    assert.deepEqual(lines('-m', 'TPROXY', '-b', '*', '-d', '15020'), lines('-b', '*', '-d', '15020'));
    assert.deepEqual(lines('-m', 'TPROXY', '-b', '80'), lines('-b', '80'));
  });

  it('writes only filter rules, each matching TCP (a tcp-reset needs -p tcp; ICMPv6 never enters)', () => {
    const rules = inboundBlockRules(optionsFromArgs(['mesh-iptables', '-b', '*', '-c', 'eth1', '-d', '1']));
    assert.ok(rules.every((r) => r.table === 'filter' && r.args[0] === '-p' && r.args[1] === 'tcp'));
  });
});
