// Configurations covering every mesh-iptables flag and their combinations, shared by the golden
// tests of the builder and the test that iptables-restore accepts every rule set.
import { buildRuleSet, type PodNetwork } from '../../src/iptables/builder.js';
import type { RuleSet } from '../../src/iptables/rules.js';
import { optionsFromArgs } from '../helpers/iptables-options.js';

/** A case: a name, the flags after the defaults, the environment, the pod. */
export interface Case {
  readonly name: string;
  readonly args: readonly string[];
  readonly env?: Record<string, string>;
  readonly pod?: Partial<PodNetwork>;
}

const BASE = ['mesh-iptables', '-p', '15001', '-z', '15006', '-e', '15008', '-u', '1337', '-g', '1337'];
const V6: Partial<PodNetwork> = { ipv6: true };
const DNS: Partial<PodNetwork> = { dnsServersV4: ['10.96.0.10'], dnsServersV6: ['fd00::a'] };

export const builderCases: readonly Case[] = [
  { name: 'redirect-all-inbound-with-excludes', args: ['-b', '*', '-d', '15090,15021,15020'] },
  { name: 'redirect-all-inbound-excludes-ignored-for-port-list', args: ['-b', '80,443', '-d', '15090'] },
  { name: 'tproxy-port-list', args: ['-m', 'TPROXY', '-b', '8080,9090'] },
  { name: 'tproxy-all-with-excludes-ipv6', args: ['-m', 'TPROXY', '-b', '*', '-d', '15020', '-t', '7777', '-r', '77'], pod: V6 },
  { name: 'tproxy-no-inbound-ports', args: ['-m', 'TPROXY'] },
  { name: 'tproxy-from-env', args: ['-b', '*'], env: { INBOUND_INTERCEPTION_MODE: 'TPROXY', INBOUND_TPROXY_MARK: '4242' } },
  { name: 'outbound-all', args: ['-i', '*'] },
  { name: 'outbound-all-with-excludes', args: ['-i', '*', '-x', '10.0.0.0/8,fd00::/8,169.254.169.254', '-o', '3306,6379'], pod: V6 },
  { name: 'outbound-cidr-list', args: ['-i', '10.96.0.0/12,192.168.0.0/16,fd00:10::/64'], pod: V6 },
  { name: 'outbound-cidr-list-v4-only-pod', args: ['-i', '10.96.0.0/12,fd00:10::/64'] },
  { name: 'outbound-loopback-included', args: ['-i', '127.0.0.1/32,10.0.0.0/8'] },
  // istio-iptables' loopback-outbound-iprange and ipv6-ipnets: MESH_OUTPUT ends with the last `-d CIDR -j MESH_REDIRECT`.
  { name: 'outbound-loopback-range-dns', args: ['-i', '127.1.2.3/32', '--redirect-dns', '-u', '3,4', '-g', '1,2'], pod: { dnsServersV4: ['127.0.0.53'] } },
  { name: 'outbound-cidr-list-ipv6-virt', args: ['-b', '4000,5000', '-d', '6000,7000', '-k', 'eth0,eth1', '-x', '2001:db8::/32', '-i', '2001:db8::/32'], pod: V6 },
  { name: 'outbound-ports-include', args: ['-q', '80,8080', '-o', '22'] },
  { name: 'exclude-interfaces', args: ['-b', '*', '-i', '*', '-c', 'eth1,veth+'] },
  { name: 'exclude-interfaces-tproxy', args: ['-m', 'TPROXY', '-b', '*', '-c', 'eth1'] },
  { name: 'virt-interfaces-wildcard', args: ['-i', '*', '-k', 'tap0,tap1'] },
  { name: 'virt-interfaces-cidrs', args: ['-i', '10.0.0.0/8,172.16.0.0/12', '-k', 'tap0'] },
  { name: 'owner-groups-exclude', args: ['-i', '*'], env: { MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE: '1500,nogroup' } },
  { name: 'owner-groups-include-ignores-exclude', args: [], env: { MESH_OUTBOUND_OWNER_GROUPS: '100', MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE: '200' } },
  { name: 'owner-groups-empty-captures-none', args: ['-i', '*'], env: { MESH_OUTBOUND_OWNER_GROUPS: '' } },
  { name: 'dns-servers', args: ['--redirect-dns', '-i', '*'], pod: { ...DNS, ...V6 } },
  { name: 'dns-servers-v4-pod', args: ['--redirect-dns'], pod: DNS },
  { name: 'dns-capture-all', args: ['--redirect-dns', '--capture-all-dns'], pod: V6 },
  // Each family jumps into the DNS chains only when it has servers of its own (or --capture-all-dns).
  { name: 'dns-v4-servers-dual-stack-tproxy', args: ['-m', 'TPROXY', '-b', '*', '--redirect-dns', '-c', 'eth1'], pod: { ...V6, dnsServersV4: ['10.96.0.10'] } },
  { name: 'dns-v6-servers-only', args: ['--redirect-dns', '-i', '*'], pod: { ...V6, dnsServersV6: ['fd00::a'] } },
  { name: 'dns-v6-servers-only-v4-pod', args: ['--redirect-dns'], pod: { dnsServersV6: ['fd00::a'] } },
  { name: 'dns-without-servers-is-off', args: ['--redirect-dns'] },
  { name: 'dns-from-env', args: [], env: { MESH_META_DNS_CAPTURE: 'true' }, pod: DNS },
  { name: 'dns-env-overridden-by-flag', args: ['--redirect-dns=false'], env: { MESH_META_DNS_CAPTURE: 'true' }, pod: DNS },
  { name: 'dns-multiple-uids-gids', args: ['--redirect-dns', '-u', '1337,1338', '-g', '1337,2000'], pod: DNS },
  { name: 'drop-invalid', args: ['--drop-invalid', '-b', '*'] },
  { name: 'loopback-cidr-env', args: ['-b', '*', '-m', 'TPROXY'], env: { MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: '127.0.0.0/8' } },
  { name: 'trace-logging', args: ['--iptables-trace-logging', '-b', '*', '-i', '*', '--redirect-dns'], pod: DNS },
  { name: 'trace-logging-tproxy', args: ['-m', 'TPROXY', '-b', '*'], env: { IPTABLES_TRACE_LOGGING: '1' } },
  { name: 'custom-ports', args: ['-p', '16001', '-z', '16006', '-e', '16008', '-b', '*', '-i', '*'] },
  { name: 'dual-stack-flag', args: ['--dual-stack', '-b', '*', '-i', '*'], pod: V6 },
  { name: 'everything', args: ['-m', 'TPROXY', '-b', '*', '-d', '15020,15021', '-i', '10.0.0.0/8,fd00::/8', '-x', '10.1.0.0/16',
    '-o', '25', '-q', '8443', '-c', 'eth9', '-k', 'tap0', '--redirect-dns', '--drop-invalid', '-u', '1337,0', '-g', '1337'],
  env: { MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE: '3000' }, pod: { ...DNS, ...V6 } },
  // --block-inbound-ipv6 (this agent's own): an IPv4 pod gets an ip6tables filter block instead of nothing.
  { name: 'block-ipv6-all-inbound-with-excludes', args: ['--block-inbound-ipv6', '-b', '*', '-d', '15020,15021,15090'] },
  { name: 'block-ipv6-port-list', args: ['--block-inbound-ipv6', '-b', '8080,9090,15008', '-d', '15090', '-i', '*'] },
  { name: 'block-ipv6-exclude-interfaces', args: ['--block-inbound-ipv6', '-b', '*', '-i', '*', '-c', 'eth1,veth+', '-k', 'tap0'] },
  { name: 'block-ipv6-tproxy', args: ['--block-inbound-ipv6', '-m', 'TPROXY', '-b', '*', '-d', '15020', '-e', '16008'] },
  { name: 'block-ipv6-from-env', args: ['-b', '80'], env: { MESH_BLOCK_INBOUND_IPV6: 'true' } },
  { name: 'block-ipv6-env-overridden-by-flag', args: ['--block-inbound-ipv6=false', '-b', '80'], env: { MESH_BLOCK_INBOUND_IPV6: 'true' } },
  { name: 'block-ipv6-no-inbound-capture', args: ['--block-inbound-ipv6', '-i', '*'] },
  { name: 'block-ipv6-trace-logging', args: ['--block-inbound-ipv6', '--iptables-trace-logging', '-b', '*'] },
  { name: 'block-ipv6-dual-stack-adds-nothing', args: ['--block-inbound-ipv6', '--dual-stack', '-b', '*', '-i', '*'], pod: V6 },
];

export function ruleSetFor(c: Case): RuleSet {
  const pod: PodNetwork = { ipv6: false, dnsServersV4: [], dnsServersV6: [], ...c.pod };
  return buildRuleSet(optionsFromArgs([...BASE, ...c.args], c.env), pod);
}
