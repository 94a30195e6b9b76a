// `--dry-run` in plain words: what the rule set captures, what it leaves alone and why. Derived
// from the same options and pod facts the builder uses, so the two cannot drift apart.
import type { PodNetwork } from './builder.js';
import { CHAIN, DNS_PROXY_PORT, INBOUND_PASSTHROUGH_V6 } from './constants.js';
import type { MeshIptablesOptions } from './options.js';

const list = (items: readonly (string | number)[]): string => items.join(', ');

export function explainRuleSet(o: MeshIptablesOptions, pod: PodNetwork): string[] {
  const lines: string[] = [];
  const owners = `uid ${list(o.proxyUids)} / gid ${list(o.proxyGids)}`;
  const families = pod.ipv6 ? 'IPv4 and IPv6' : 'IPv4 only (the pod has no IPv6 address and --dual-stack is off)';
  lines.push(`Families: ${families}.`);

  // Inbound.
  const target = o.interceptionMode === 'TPROXY'
    ? `TPROXY to port ${o.inboundCapturePort} (mark ${o.tproxyMark}, policy route table ${o.tproxyRouteTable}; the app sees the client's address)`
    : `REDIRECT to port ${o.inboundCapturePort} (the app sees connections from 127.0.0.6)`;
  if (o.inboundPorts.all) {
    const except = o.localExcludePorts.length > 0 ? `, except ports ${list(o.localExcludePorts)}` : '';
    lines.push(`Inbound: TCP to every port is captured${except}: ${target}.`);
  } else if (o.inboundPorts.items.length > 0) {
    lines.push(`Inbound: TCP to ports ${list(o.inboundPorts.items)} is captured: ${target}; other ports reach the app directly.`);
  } else {
    lines.push('Inbound: nothing is captured (--mesh-inbound-ports is empty).');
  }
  lines.push(`Inbound: the tunnel port ${o.inboundTunnelPort} is never captured.`);
  const ipv6 = explainIpv6Inbound(o, pod);
  if (ipv6) lines.push(ipv6);

  // Outbound.
  const dest = o.serviceCidrs.all ? 'every destination'
    : o.serviceCidrs.items.length > 0 ? `destinations in ${list(o.serviceCidrs.items)}` : undefined;
  const ports = o.outboundPortsInclude.length > 0 ? `TCP to ports ${list(o.outboundPortsInclude)} (any destination)` : undefined;
  if (dest || ports) {
    lines.push(`Outbound: ${[dest && `traffic to ${dest}`, ports].filter(Boolean).join(' and ')} is redirected to port ${o.proxyPort}.`);
  } else {
    lines.push('Outbound: nothing is captured (--mesh-service-cidr and --mesh-outbound-ports are empty).');
  }
  const exempt: string[] = [
    `the proxy's own traffic (${owners}), so nothing loops`,
    'traffic from 127.0.0.6 on lo (the proxy talking to the app)',
    `traffic to ${o.outboundIpv4LoopbackCidr}${pod.ipv6 ? ' and ::1' : ''} (localhost)`,
  ];
  if (!(o.serviceCidrs.all === false && o.serviceCidrs.items.some((c) => c.startsWith('127.') || c.startsWith('::1/')))) {
    exempt.push('the app calling itself over lo');
  }
  if (o.outboundPortsExclude.length > 0) exempt.push(`TCP to ports ${list(o.outboundPortsExclude)}`);
  if (o.serviceExcludeCidrs.length > 0) exempt.push(`destinations in ${list(o.serviceExcludeCidrs)}`);
  if (o.excludeInterfaces.length > 0) exempt.push(`everything on interfaces ${list(o.excludeInterfaces)} (both directions)`);
  if (o.ownerGroupsInclude.all && o.ownerGroupsExclude.length > 0) exempt.push(`processes of groups ${list(o.ownerGroupsExclude)}`);
  if (!o.ownerGroupsInclude.all) exempt.push(`processes in none of the groups ${list(o.ownerGroupsInclude.items)}`);
  lines.push(`Outbound, never captured: ${exempt.join('; ')}.`);
  if (o.virtInterfaces.length > 0) {
    lines.push(`Virtual interfaces ${list(o.virtInterfaces)}: traffic from VMs is treated as outbound.`);
  }

  // DNS.
  if (!o.redirectDns) {
    lines.push('DNS: not captured (--redirect-dns is off).');
  } else if (o.captureAllDns) {
    lines.push(`DNS: all UDP and TCP traffic to port 53 is redirected to the agent on ${DNS_PROXY_PORT}, except the proxy's own.`);
  } else {
    const servers = [...pod.dnsServersV4, ...(pod.ipv6 ? pod.dnsServersV6 : [])];
    if (servers.length > 0) {
      lines.push(`DNS: UDP and TCP to port 53 of ${list(servers)} (from /etc/resolv.conf) is redirected to the agent on ${DNS_PROXY_PORT}, except the proxy's own; conntrack zones keep the two legs of a UDP query apart.`);
    } else if (pod.dnsServersV6.length > 0) {
      lines.push('DNS: not captured: /etc/resolv.conf names only IPv6 servers and the pod gets no IPv6 rules.');
    } else {
      lines.push('DNS: not captured: --redirect-dns is on but /etc/resolv.conf names no server and --capture-all-dns is off.');
    }
    // Each family's rules jump to the DNS chains only when it has servers (as istio-iptables).
    const uncaptured = [
      ...(pod.dnsServersV4.length === 0 ? ['IPv4'] : []),
      ...(pod.ipv6 && pod.dnsServersV6.length === 0 ? ['IPv6'] : []),
    ];
    for (const family of servers.length > 0 ? uncaptured : []) {
      lines.push(`DNS over ${family}: not captured (/etc/resolv.conf names no ${family} server).`);
    }
  }
  if (pod.ipv6) {
    lines.push(`IPv6: ${INBOUND_PASSTHROUGH_V6} is added to lo when missing (kept by clean-up, as istio-iptables does): the proxy's `
      + 'inbound connections to the app come from ::6, and replies to it must stay in the pod.');
  }
  if (o.dropInvalid) lines.push('Packets conntrack finds INVALID are dropped (instead of resetting the connection).');
  if (o.traceLogging) lines.push('Every mesh chain starts with a LOG rule prefixed with its name (see dmesg).');
  return lines;
}

/**
 * Inbound IPv6 when the pod gets no IPv6 capture: the hole istio-iptables leaves, or what
 * `--block-inbound-ipv6` does about it (inbound-block.ts), or why the opt-in adds nothing.
 */
function explainIpv6Inbound(o: MeshIptablesOptions, pod: PodNetwork): string | undefined {
  const opt = 'IPv6 inbound (--block-inbound-ipv6)';
  const captured = o.inboundPorts.all || o.inboundPorts.items.length > 0;
  if (pod.ipv6) {
    return o.blockInboundIpv6
      ? `${opt}: adds nothing: the IPv6 capture rules already take inbound IPv6 TCP as the IPv4 ones take IPv4.` : undefined;
  }
  if (!captured) {
    return o.blockInboundIpv6
      ? `${opt}: adds nothing: inbound capture is off (--mesh-inbound-ports is empty), so IPv6, like IPv4, reaches the app directly.`
      : undefined;
  }
  if (!o.blockInboundIpv6) {
    return 'IPv6 inbound: not captured (no IPv6 rules, as istio-iptables): TCP to the pod\'s IPv6 addresses, such as the '
      + 'link-local fe80:: one every interface has, reaches the app directly, past the proxy; --block-inbound-ipv6 '
      + '(MESH_BLOCK_INBOUND_IPV6) refuses it.';
  }
  const tunnel = o.inboundTunnelPort;
  const ports = o.inboundPorts.all
    ? `every port but the tunnel port ${tunnel}${o.localExcludePorts.length > 0 ? ` and ports ${list(o.localExcludePorts)}` : ''}`
    : `ports ${list(o.inboundPorts.items.filter((p) => p !== tunnel)) || '(none: only the tunnel port is listed)'}`;
  const open = [
    'loopback',
    'established connections (replies to the pod\'s own IPv6 connections)',
    'everything but TCP (ICMPv6, so neighbour discovery and outbound IPv6 keep working; UDP, which IPv4 does not capture either)',
    ...(o.excludeInterfaces.length > 0 ? [`interfaces ${list(o.excludeInterfaces)} (-c)`] : []),
    ...(o.virtInterfaces.length > 0 ? [`virtual interfaces ${list(o.virtInterfaces)} (-k)`] : []),
  ];
  return `${opt}: the pod gets no IPv6 capture, so inbound TCP over IPv6 (to the link-local fe80:: address every `
    + `interface has, or any other) to ${ports}, the ports the IPv4 rules capture, is refused with a TCP reset instead of `
    + `reaching the app past the proxy (ip6tables filter INPUT -> ${CHAIN.inboundBlock}). Left alone: ${open.join('; ')}.`;
}
