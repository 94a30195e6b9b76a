// Options → rule set, the way istio-iptables builds it, rule for rule and in order (with MESH_
// chain names). Pure: no I/O. The order of the steps below is the order of the rules and matters:
// earlier rules win inside a chain.
import {
  CHAIN, DNS_PROXY_PORT, INBOUND_PASSTHROUGH_V4, INBOUND_PASSTHROUGH_V6, LOCALHOST_V6, MESH_CHAIN_PREFIX, type Table,
} from './constants.js';
import { inboundBlockRules } from './inbound-block.js';
import type { MeshIptablesOptions, Selection } from './options.js';
import type { Family, Rule, RouteCommand, RuleSet } from './rules.js';
import { normalizeAddress } from './save-parse.js';

/** What the builder needs to know about the pod besides the options. */
export interface PodNetwork {
  /** Install IPv6 rules (the pod's first address is IPv6, or dual stack). */
  readonly ipv6: boolean;
  /** Name servers of the pod's /etc/resolv.conf, for `--redirect-dns`. */
  readonly dnsServersV4: readonly string[];
  readonly dnsServersV6: readonly string[];
}

/** Stands for the family's address in a rule written once for both families. */
const ADDR = Symbol('address');
type Arg = string | typeof ADDR;

/** Accumulates rules for both families in istio-iptables' order. */
class RuleAccumulator {
  readonly v4: Rule[] = [];
  readonly v6: Rule[] = [];

  add(families: readonly Family[], table: Table, chain: string, position: number | undefined,
    args: readonly Arg[], addr: { ipv4: string; ipv6: string } = { ipv4: '', ipv6: '' }): void {
    for (const family of families) {
      const concrete = args.map((a) => (a === ADDR ? addr[family] : a));
      const rule: Rule = position === undefined ? { table, chain, args: concrete } : { table, chain, position, args: concrete };
      (family === 'ipv4' ? this.v4 : this.v6).push(rule);
    }
  }

  append(table: Table, chain: string, ...args: string[]): void {
    this.add(['ipv4', 'ipv6'], table, chain, undefined, args);
  }

  appendV4(table: Table, chain: string, ...args: string[]): void {
    this.add(['ipv4'], table, chain, undefined, args);
  }

  appendV6(table: Table, chain: string, ...args: string[]): void {
    this.add(['ipv6'], table, chain, undefined, args);
  }

  /** One rule per family, with ADDR replaced by that family's address. */
  appendVersioned(ipv4: string, ipv6: string, table: Table, chain: string, ...args: Arg[]): void {
    this.add(['ipv4', 'ipv6'], table, chain, undefined, args, { ipv4, ipv6 });
  }

  insert(table: Table, chain: string, position: number, ...args: string[]): void {
    this.add(['ipv4', 'ipv6'], table, chain, position, args);
  }

  insertFamily(family: Family, table: Table, chain: string, position: number, ...args: string[]): void {
    this.add([family], table, chain, position, args);
  }
}

interface CidrRanges {
  readonly wildcard: boolean;
  readonly cidrs: readonly string[];
  /** A range's address is a loopback address: the app wants its loopback traffic captured. */
  readonly hasLoopback: boolean;
}

function splitFamilies(selection: Selection<string>): { ipv4: CidrRanges; ipv6: CidrRanges } {
  if (selection.all) {
    const all = { wildcard: true, cidrs: [], hasLoopback: false };
    return { ipv4: all, ipv6: all };
  }
  const v4 = selection.items.filter((c) => c.includes('.') && !c.includes(':'));
  const v6 = selection.items.filter((c) => c.includes(':'));
  // As istio-iptables asks of the address written (not its network): 127.1.2.3/8 counts, ::1 in any spelling.
  const loopback = (c: string): boolean => c.startsWith('127.') || normalizeAddress(c.split('/')[0] ?? '') === LOCALHOST_V6;
  return {
    ipv4: { wildcard: false, cidrs: v4, hasLoopback: v4.some(loopback) },
    ipv6: { wildcard: false, cidrs: v6, hasLoopback: v6.some(loopback) },
  };
}

/** Inbound capture is on: `-b '*'` or a non-empty port list. */
function inboundCaptured(o: MeshIptablesOptions): boolean {
  return o.inboundPorts.all || o.inboundPorts.items.length > 0;
}

/** The families whose DNS is captured: all with --capture-all-dns, else those with resolv.conf servers. */
function dnsFamilies(o: MeshIptablesOptions, pod: PodNetwork): Family[] {
  if (o.captureAllDns) return ['ipv4', 'ipv6'];
  return [...(pod.dnsServersV4.length > 0 ? ['ipv4' as const] : []), ...(pod.dnsServersV6.length > 0 ? ['ipv6' as const] : [])];
}

/**
 * IPv6 has no 127.0.0.0/8: the proxy's inbound passthrough source ::6 must be made an address of lo
 * (istio-iptables' configureIPv6Addresses, whenever IPv6 is on), or the app's replies to it are
 * routed away, and a connection to it has no route when the pod has no default route.
 */
const PASSTHROUGH_V6_ADDRESS: RouteCommand = {
  family: 'ipv6', args: ['-f', 'inet6', 'addr', 'add', INBOUND_PASSTHROUGH_V6, 'dev', 'lo'],
};

/** Builds the complete rule set of a configuration. */
export function buildRuleSet(o: MeshIptablesOptions, pod: PodNetwork): RuleSet {
  const b = new RuleAccumulator();
  const tproxy = o.interceptionMode === 'TPROXY';
  const loopback4 = o.outboundIpv4LoopbackCidr;
  const tunnelPort = String(o.inboundTunnelPort);
  const mark = String(o.tproxyMark);
  const outboundMark = String(o.tproxyMark + 1);
  const include = splitFamilies(o.serviceCidrs);
  const exclude = splitFamilies({ all: false, items: o.serviceExcludeCidrs });
  const keepLoopback = include.ipv4.hasLoopback || include.ipv6.hasLoopback;

  // DNS capture needs somewhere to capture to: all port-53 traffic, or the resolv.conf servers.
  const redirectDns = o.redirectDns
    && (o.captureAllDns || pod.dnsServersV4.length > 0 || pod.dnsServersV6.length > 0);

  // Excluded interfaces bypass everything.
  for (const iface of o.excludeInterfaces) {
    b.append('nat', 'PREROUTING', '-i', iface, '-j', 'RETURN');
    b.append('nat', 'OUTPUT', '-o', iface, '-j', 'RETURN');
  }
  if (tproxy) {
    // The TPROXY marks (mangle) must not touch them either, in either direction.
    for (const iface of o.excludeInterfaces) {
      b.append('mangle', 'PREROUTING', '-i', iface, '-j', 'RETURN');
      b.append('mangle', 'OUTPUT', '-o', iface, '-j', 'RETURN');
    }
  }
  // Traffic arriving from VMs on virtual interfaces is not inbound; outbound rules below may redirect it.
  for (const iface of o.virtInterfaces) b.insert('nat', 'PREROUTING', 1, '-i', iface, '-j', 'RETURN');

  if (o.dropInvalid) {
    // Out-of-window packets are dropped instead of resetting the connection.
    b.append('mangle', 'PREROUTING', '-m', 'conntrack', '--ctstate', 'INVALID', '-j', CHAIN.drop);
    b.append('mangle', CHAIN.drop, '-j', 'DROP');
  }

  b.append('nat', CHAIN.inbound, '-p', 'tcp', '--dport', tunnelPort, '-j', 'RETURN');
  b.append('nat', CHAIN.redirect, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', String(o.proxyPort));
  b.append('nat', CHAIN.inRedirect, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', String(o.inboundCapturePort));

  addInbound(b, o, mark);

  b.append('nat', 'OUTPUT', '-j', CHAIN.output);
  for (const port of o.outboundPortsExclude) {
    b.append('nat', CHAIN.output, '-p', 'tcp', '--dport', String(port), '-j', 'RETURN');
  }
  // The proxy's inbound connections to the app come from 127.0.0.6 (REDIRECT mode).
  b.appendVersioned(INBOUND_PASSTHROUGH_V4, INBOUND_PASSTHROUGH_V6, 'nat', CHAIN.output, '-o', 'lo', '-s', ADDR, '-j', 'RETURN');

  for (const [owner, ids] of [['--uid-owner', o.proxyUids], ['--gid-owner', o.proxyGids]] as const) {
    for (const id of ids) {
      // The proxy calling the app through a service VIP comes back over lo: send it to inbound.
      // With DNS capture, port 53 stays out so the agent's queries go straight to the server.
      const ports = redirectDns && owner === '--uid-owner'
        ? ['-m', 'multiport', '!', '--dports', `53,${tunnelPort}`] : ['!', '--dport', tunnelPort];
      b.appendVersioned(loopback4, LOCALHOST_V6, 'nat', CHAIN.output,
        '-o', 'lo', '!', '-d', ADDR, '-p', 'tcp', ...ports, '-m', 'owner', owner, id, '-j', CHAIN.inRedirect);
      // The app calling itself over lo is not captured, unless loopback ranges were included.
      if (!keepLoopback) {
        if (redirectDns) {
          // ...but its TCP DNS to a local server is, further down.
          b.append('nat', CHAIN.output, '-o', 'lo', '-p', 'tcp', '!', '--dport', '53', '-m', 'owner', '!', owner, id, '-j', 'RETURN');
        } else {
          b.append('nat', CHAIN.output, '-o', 'lo', '-m', 'owner', '!', owner, id, '-j', 'RETURN');
        }
      }
      // The proxy's own outbound traffic is never captured again (no loops).
      b.append('nat', CHAIN.output, '-m', 'owner', owner, id, '-j', 'RETURN');
    }
  }

  addOwnerGroups(b, o.ownerGroupsInclude, o.ownerGroupsExclude);
  if (redirectDns) addDns(b, o, pod);

  // Envoy-aware apps and container-to-container traffic use localhost explicitly.
  b.appendVersioned(loopback4, LOCALHOST_V6, 'nat', CHAIN.output, '-d', ADDR, '-j', 'RETURN');
  for (const cidr of exclude.ipv4.cidrs) b.appendV4('nat', CHAIN.output, '-d', cidr, '-j', 'RETURN');
  for (const cidr of exclude.ipv6.cidrs) b.appendV6('nat', CHAIN.output, '-d', cidr, '-j', 'RETURN');
  for (const port of o.outboundPortsInclude) {
    b.append('nat', CHAIN.output, '-p', 'tcp', '--dport', String(port), '-j', CHAIN.redirect);
  }
  addOutboundInclude(b, 'ipv4', include.ipv4, o.virtInterfaces);
  if (pod.ipv6) addOutboundInclude(b, 'ipv6', include.ipv6, o.virtInterfaces);

  if (tproxy) addTproxyMarks(b, o, mark, outboundMark);

  // Without IPv6 capture, the opt-in block is the only IPv6 rule set (this agent's own, not Istio's);
  // with it, the capture already covers IPv6. No rule at all: no ip6tables call at all.
  const v6 = pod.ipv6 ? b.v6 : o.blockInboundIpv6 ? inboundBlockRules(o) : [];
  const traced = (rules: Rule[]): Rule[] => (o.traceLogging ? withTraceLogging(rules) : rules);
  return {
    ipv4: traced(b.v4),
    ...(pod.ipv6 || v6.length > 0 ? { ipv6: traced(v6) } : {}),
    routes: [...(tproxy && inboundCaptured(o) ? policyRoutes(o, pod.ipv6) : []), ...(pod.ipv6 ? [PASSTHROUGH_V6_ADDRESS] : [])],
  };
}

function addInbound(b: RuleAccumulator, o: MeshIptablesOptions, mark: string): void {
  const ports = o.inboundPorts;
  if (!inboundCaptured(o)) return;
  const tproxy = o.interceptionMode === 'TPROXY';
  const table: Table = tproxy ? 'mangle' : 'nat';
  if (tproxy) {
    // Marked packets are routed to lo by the policy route, where TPROXY hands them to the proxy.
    b.append('mangle', CHAIN.divert, '-j', 'MARK', '--set-mark', mark);
    b.append('mangle', CHAIN.divert, '-j', 'ACCEPT');
    b.appendVersioned(o.outboundIpv4LoopbackCidr, LOCALHOST_V6, 'mangle', CHAIN.tproxy,
      '!', '-d', ADDR, '-p', 'tcp', '-j', 'TPROXY', '--tproxy-mark', `${mark}/0xffffffff`, '--on-port', String(o.inboundCapturePort));
  }
  b.append(table, 'PREROUTING', '-p', 'tcp', '-j', CHAIN.inbound);
  if (ports.all) {
    for (const port of o.localExcludePorts) b.append(table, CHAIN.inbound, '-p', 'tcp', '--dport', String(port), '-j', 'RETURN');
    if (tproxy) {
      // Packets of established connections only need the mark; new ones go through TPROXY.
      b.append('mangle', CHAIN.inbound, '-p', 'tcp', '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', CHAIN.divert);
      b.append('mangle', CHAIN.inbound, '-p', 'tcp', '-j', CHAIN.tproxy);
    } else {
      b.append('nat', CHAIN.inbound, '-p', 'tcp', '-j', CHAIN.inRedirect);
    }
    return;
  }
  for (const port of ports.items) {
    const p = String(port);
    if (tproxy) {
      b.append('mangle', CHAIN.inbound, '-p', 'tcp', '--dport', p, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', CHAIN.divert);
      b.append('mangle', CHAIN.inbound, '-p', 'tcp', '--dport', p, '-j', CHAIN.tproxy);
    } else {
      b.append('nat', CHAIN.inbound, '-p', 'tcp', '--dport', p, '-j', CHAIN.inRedirect);
    }
  }
}

/** MESH_OUTBOUND_OWNER_GROUPS(_EXCLUDE): only some groups' outbound traffic is captured. */
function addOwnerGroups(b: RuleAccumulator, include: Selection<string>, exclude: readonly string[]): void {
  if (include.all) {
    for (const group of exclude) b.append('nat', CHAIN.output, '-m', 'owner', '--gid-owner', group, '-j', 'RETURN');
    return;
  }
  // Traffic of a process in none of the groups is left alone.
  const noneOf = include.items.flatMap((group) => ['-m', 'owner', '!', '--gid-owner', group]);
  b.append('nat', CHAIN.output, ...noneOf, '-j', 'RETURN');
}

function addDns(b: RuleAccumulator, o: MeshIptablesOptions, pod: PodNetwork): void {
  const port = String(DNS_PROXY_PORT);
  // A family gets the jumps into the DNS chains only where it has something to capture (its own
  // servers, or all of port 53): a jump into a chain the family never creates fails its restore.
  const families = dnsFamilies(o, pod);
  b.append('raw', 'OUTPUT', '-j', CHAIN.outputDns);
  b.add(families, 'nat', CHAIN.output, undefined, ['-j', CHAIN.outputDns]);
  if (o.captureAllDns) {
    b.append('nat', CHAIN.outputDns, '-p', 'tcp', '--dport', '53', '-j', 'REDIRECT', '--to-ports', port);
  } else {
    for (const s of pod.dnsServersV4) b.appendV4('nat', CHAIN.outputDns, '-p', 'tcp', '--dport', '53', '-d', `${s}/32`, '-j', 'REDIRECT', '--to-ports', port);
    for (const s of pod.dnsServersV6) b.appendV6('nat', CHAIN.outputDns, '-p', 'tcp', '--dport', '53', '-d', `${s}/128`, '-j', 'REDIRECT', '--to-ports', port);
  }
  if (o.captureAllDns) {
    b.append('nat', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-j', 'REDIRECT', '--to-port', port);
  } else {
    for (const s of pod.dnsServersV4) b.appendV4('nat', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/32`, '-j', 'REDIRECT', '--to-port', port);
    for (const s of pod.dnsServersV6) b.appendV6('nat', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/128`, '-j', 'REDIRECT', '--to-port', port);
  }
  // UDP has no connection for NAT to follow: the app→agent and agent→server legs of one query
  // share ports, so each leg gets its own conntrack zone or the kernel merges them.
  for (const [owner, ids] of [['--uid-owner', o.proxyUids], ['--gid-owner', o.proxyGids]] as const) {
    for (const id of ids) {
      b.append('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-m', 'owner', owner, id, '-j', 'CT', '--zone', '1');
      b.append('raw', CHAIN.outputDns, '-p', 'udp', '--sport', port, '-m', 'owner', owner, id, '-j', 'CT', '--zone', '2');
    }
  }
  b.add(families, 'raw', 'PREROUTING', undefined, ['-j', CHAIN.inbound]);
  if (o.captureAllDns) {
    b.append('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-j', 'CT', '--zone', '2');
    b.append('raw', CHAIN.inbound, '-p', 'udp', '--sport', '53', '-j', 'CT', '--zone', '1');
    return;
  }
  for (const s of pod.dnsServersV4) {
    b.appendV4('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/32`, '-j', 'CT', '--zone', '2');
    b.appendV4('raw', CHAIN.inbound, '-p', 'udp', '--sport', '53', '-s', `${s}/32`, '-j', 'CT', '--zone', '1');
  }
  for (const s of pod.dnsServersV6) {
    b.appendV6('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/128`, '-j', 'CT', '--zone', '2');
    b.appendV6('raw', CHAIN.inbound, '-p', 'udp', '--sport', '53', '-s', `${s}/128`, '-j', 'CT', '--zone', '1');
  }
}

function addOutboundInclude(b: RuleAccumulator, family: Family, ranges: CidrRanges, virtInterfaces: readonly string[]): void {
  const append = (...args: string[]): void => b.add([family], 'nat', CHAIN.output, undefined, args);
  if (ranges.wildcard) {
    append('-j', CHAIN.redirect);
    for (const iface of virtInterfaces) b.insertFamily(family, 'nat', 'PREROUTING', 1, '-i', iface, '-j', CHAIN.redirect);
    return;
  }
  if (ranges.cidrs.length === 0) return;
  // Everything else falls off the end of MESH_OUTPUT and goes out untouched: istio-iptables writes
  // no closing `-j RETURN` (handleOutboundIncludeRules).
  for (const cidr of ranges.cidrs) {
    for (const iface of virtInterfaces) {
      b.insertFamily(family, 'nat', 'PREROUTING', 1, '-i', iface, '-d', cidr, '-j', CHAIN.redirect);
    }
    append('-d', cidr, '-j', CHAIN.redirect);
  }
}

function addTproxyMarks(b: RuleAccumulator, o: MeshIptablesOptions, mark: string, outboundMark: string): void {
  // Keep the proxy's original-source mark on the connection, and give it back to reply packets.
  b.append('mangle', 'PREROUTING', '-p', 'tcp', '-m', 'mark', '--mark', mark, '-j', 'CONNMARK', '--save-mark');
  b.append('mangle', 'OUTPUT', '-p', 'tcp', '-o', 'lo', '-m', 'mark', '--mark', mark, '-j', 'RETURN');
  for (const [owner, ids] of [['--uid-owner', o.proxyUids], ['--gid-owner', o.proxyGids]] as const) {
    for (const id of ids) {
      // The proxy's outbound leg calling its own inbound over lo gets a mark of its own (mark + 1).
      b.appendVersioned(o.outboundIpv4LoopbackCidr, LOCALHOST_V6, 'mangle', 'OUTPUT',
        '!', '-d', ADDR, '-p', 'tcp', '-o', 'lo', '-m', 'owner', owner, id, '-j', 'MARK', '--set-mark', outboundMark);
    }
  }
  b.append('mangle', 'OUTPUT', '-p', 'tcp', '-m', 'connmark', '--mark', mark, '-j', 'CONNMARK', '--restore-mark');
  b.insert('mangle', CHAIN.inbound, 1, '-p', 'tcp', '-m', 'mark', '--mark', mark, '-j', 'RETURN');
  b.insertFamily('ipv4', 'mangle', CHAIN.inbound, 2, '-p', 'tcp', '-s', INBOUND_PASSTHROUGH_V4, '-i', 'lo', '-j', 'RETURN');
  b.insertFamily('ipv6', 'mangle', CHAIN.inbound, 2, '-p', 'tcp', '-s', INBOUND_PASSTHROUGH_V6, '-i', 'lo', '-j', 'RETURN');
  b.insert('mangle', CHAIN.inbound, 3, '-p', 'tcp', '-i', 'lo', '-m', 'mark', '!', '--mark', outboundMark, '-j', 'RETURN');
}

/** TPROXY-marked packets are delivered locally: `ip rule` + a local default route in its own table. */
function policyRoutes(o: MeshIptablesOptions, ipv6: boolean): RouteCommand[] {
  const mark = String(o.tproxyMark);
  const table = String(o.tproxyRouteTable);
  const families: [Family, string][] = ipv6 ? [['ipv4', 'inet'], ['ipv6', 'inet6']] : [['ipv4', 'inet']];
  return families.flatMap(([family, f]) => [
    { family, args: ['-f', f, 'rule', 'add', 'fwmark', mark, 'lookup', table] },
    { family, args: ['-f', f, 'route', 'add', 'local', 'default', 'dev', 'lo', 'table', table] },
  ]);
}

/**
 * `--iptables-trace-logging`: a LOG rule at the head of every mesh chain, prefixed with the chain's
 * name, so the kernel log shows each packet's path through the chains (in a network namespace other
 * than the host's, the kernel logs only with sysctl net.netfilter.nf_log_all_netns=1).
 */
export function withTraceLogging(rules: readonly Rule[]): Rule[] {
  const chains = new Map<string, Rule>();
  for (const r of rules) {
    const key = `${r.table}:${r.chain}`;
    if (r.chain.startsWith(MESH_CHAIN_PREFIX) && !chains.has(key)) {
      chains.set(key, { table: r.table, chain: r.chain, position: 1, args: ['-j', 'LOG', '--log-prefix', `${r.chain}:`] });
    }
  }
  return [...rules, ...chains.values()];
}
