// `--block-inbound-ipv6` (MESH_BLOCK_INBOUND_IPV6): this agent's own addition, not in Istio. Pure.
//
// istio-iptables writes no ip6tables rule for an IPv4 pod without dual stack, so TCP to any IPv6
// address of the pod (the link-local fe80:: address every interface gets, at least) reaches the app
// past the sidecar and every policy. When the opt-in is on and the pod gets no IPv6 capture rules,
// this refuses (TCP reset) the inbound IPv6 TCP the IPv4 capture would have taken, and leaves every
// other packet to whatever the pod's own rules decide (RETURN, never ACCEPT). With IPv6 capture
// rules the capture already covers IPv6 and nothing is added (see buildRuleSet).
//
// What the IPv4 inbound capture exempts, mirrored here:
// - everything but TCP: it only jumps for `-p tcp`, so ICMPv6 (neighbour discovery, hence outbound
//   IPv6 too) and UDP never enter the chain;
// - loopback: nat PREROUTING never sees a locally made connection (it is NATed in OUTPUT), and
//   TPROXY's exemptions (the mark, 127.0.0.6 on lo, lo without the outbound mark) are all lo
//   traffic; here `-i lo` covers them (the proxy's own legs to the app, the app calling itself);
// - connections already there: nat sees only a connection's first packet, TPROXY marks established
//   ones; here RELATED,ESTABLISHED (replies to the pod's own outbound IPv6 connections);
// - `-c` interfaces (everything on them) and `-k` interfaces (traffic from VMs is not inbound);
// - the inbound tunnel port, always; with `-b '*'` the `-d` ports; with a port list only those
//   ports are captured; with `-b ''` nothing is, so nothing is written at all.
// The jump is inserted first in INPUT: the IPv4 capture (nat/mangle PREROUTING) acts before any
// filter rule, and a REJECT after someone's `-j ACCEPT` would close nothing.
import { CHAIN } from './constants.js';
import type { MeshIptablesOptions } from './options.js';
import type { Rule } from './rules.js';

const RESET = ['-j', 'REJECT', '--reject-with', 'tcp-reset'] as const;

/** The ip6tables rules of the block (filter table); empty when inbound capture is off. */
export function inboundBlockRules(o: MeshIptablesOptions): Rule[] {
  const ports = o.inboundPorts;
  if (!ports.all && ports.items.length === 0) return [];
  const rule = (...args: string[]): Rule => ({ table: 'filter', chain: CHAIN.inboundBlock, args: ['-p', 'tcp', ...args] });
  const exempt = (...match: string[]): Rule => rule(...match, '-j', 'RETURN');
  const dport = (port: number): string[] => ['--dport', String(port)];
  return [
    { table: 'filter', chain: 'INPUT', position: 1, args: ['-p', 'tcp', '-j', CHAIN.inboundBlock] },
    exempt('-i', 'lo'),
    exempt('-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED'),
    ...[...o.excludeInterfaces, ...o.virtInterfaces].map((iface) => exempt('-i', iface)),
    exempt(...dport(o.inboundTunnelPort)),
    ...(ports.all
      ? [...o.localExcludePorts.map((p) => exempt(...dport(p))), rule(...RESET)]
      : ports.items.map((p) => rule(...dport(p), ...RESET))),
  ];
}
