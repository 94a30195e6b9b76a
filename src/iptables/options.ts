// The typed, validated options of `mesh-iptables` and `mesh-clean-iptables` (spec 4.3, 4.4). The CLI
// turns flags and environment into RawIptablesFlags; `validateIptablesOptions` checks every value and
// returns a frozen MeshIptablesOptions, naming the flag and the value on the first bad one.
import { isIP } from 'node:net';
import { usageError } from '../errors/agent-error.js';

export type InterceptionMode = 'REDIRECT' | 'TPROXY';
export const INTERCEPTION_MODES: readonly InterceptionMode[] = ['REDIRECT', 'TPROXY'];

/** `*` (everything), or an explicit list; an empty list captures nothing. */
export type Selection<T> = { readonly all: true } | { readonly all: false; readonly items: readonly T[] };

export interface MeshIptablesOptions {
  readonly proxyPort: number;
  readonly inboundCapturePort: number;
  readonly inboundTunnelPort: number;
  readonly proxyUids: readonly string[];
  readonly proxyGids: readonly string[];
  readonly interceptionMode: InterceptionMode;
  readonly tproxyMark: number;
  readonly tproxyRouteTable: number;
  readonly inboundPorts: Selection<number>;
  readonly localExcludePorts: readonly number[];
  readonly outboundPortsExclude: readonly number[];
  readonly outboundPortsInclude: readonly number[];
  readonly serviceCidrs: Selection<string>;
  readonly serviceExcludeCidrs: readonly string[];
  readonly excludeInterfaces: readonly string[];
  readonly virtInterfaces: readonly string[];
  /** MESH_OUTBOUND_OWNER_GROUPS: groups (names or GIDs) whose traffic is captured. */
  readonly ownerGroupsInclude: Selection<string>;
  /** MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE, effective only when all groups are included. */
  readonly ownerGroupsExclude: readonly string[];
  /** MESH_OUTBOUND_IPV4_LOOPBACK_CIDR. */
  readonly outboundIpv4LoopbackCidr: string;
  readonly redirectDns: boolean;
  readonly captureAllDns: boolean;
  readonly dropInvalid: boolean;
  readonly dualStack: boolean;
  /**
   * `--block-inbound-ipv6` (MESH_BLOCK_INBOUND_IPV6), this agent's own: when no IPv6 capture rules
   * are written, refuse the inbound IPv6 TCP the IPv4 rules would capture (inbound-block.ts).
   */
  readonly blockInboundIpv6: boolean;
  readonly dryRun: boolean;
  /** DRY_RUN_FILE_PATH: with --dry-run, also write the restore input here. */
  readonly dryRunFilePath: string;
  readonly cleanupOnly: boolean;
  readonly cniMode: boolean;
  readonly forceApply: boolean;
  readonly reconcile: boolean;
  readonly runValidation: boolean;
  readonly skipRuleApply: boolean;
  readonly traceLogging: boolean;
  readonly probePort: number;
  readonly probeTimeoutMs: number;
  readonly networkNamespace: string;
}

/** Flag and environment values as text, before validation. Keys name the flag they came from. */
export type RawIptablesFlags = {
  readonly [K in keyof MeshIptablesOptions]: MeshIptablesOptions[K] extends boolean ? boolean
    : K extends 'probePort' | 'probeTimeoutMs' ? number : string;
};

/** Which flag (or variable) each option comes from, for messages. */
const SOURCE: { readonly [K in keyof MeshIptablesOptions]: string } = {
  proxyPort: '--proxy-port', inboundCapturePort: '--inbound-capture-port', inboundTunnelPort: '--inbound-tunnel-port',
  proxyUids: '--proxy-uid', proxyGids: '--proxy-gid', interceptionMode: '--mesh-inbound-interception-mode',
  tproxyMark: '--mesh-inbound-tproxy-mark', tproxyRouteTable: '--mesh-inbound-tproxy-route-table',
  inboundPorts: '--mesh-inbound-ports', localExcludePorts: '--mesh-local-exclude-ports',
  outboundPortsExclude: '--mesh-local-outbound-ports-exclude', outboundPortsInclude: '--mesh-outbound-ports',
  serviceCidrs: '--mesh-service-cidr', serviceExcludeCidrs: '--mesh-service-exclude-cidr',
  excludeInterfaces: '--mesh-exclude-interfaces', virtInterfaces: '--virt-interfaces',
  ownerGroupsInclude: 'MESH_OUTBOUND_OWNER_GROUPS', ownerGroupsExclude: 'MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE',
  outboundIpv4LoopbackCidr: 'MESH_OUTBOUND_IPV4_LOOPBACK_CIDR', redirectDns: '--redirect-dns',
  captureAllDns: '--capture-all-dns', dropInvalid: '--drop-invalid', dualStack: '--dual-stack',
  blockInboundIpv6: '--block-inbound-ipv6', dryRun: '--dry-run',
  dryRunFilePath: 'DRY_RUN_FILE_PATH', cleanupOnly: '--cleanup-only', cniMode: '--cni-mode',
  forceApply: '--force-apply', reconcile: '--reconcile', runValidation: '--run-validation',
  skipRuleApply: '--skip-rule-apply', traceLogging: '--iptables-trace-logging', probePort: '--iptables-probe-port',
  probeTimeoutMs: '--probe-timeout', networkNamespace: '--network-namespace',
};

const bad = (key: keyof MeshIptablesOptions, value: string, expected: string): Error =>
  usageError(`${SOURCE[key]}: "${value}" is not ${expected}`);

const listItems = (text: string): string[] => text.split(',').map((s) => s.trim()).filter((s) => s !== '');

function port(key: keyof MeshIptablesOptions, text: string): number {
  const n = /^\d{1,5}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!(n >= 1 && n <= 65535)) throw bad(key, text, 'a port (1 to 65535)');
  return n;
}

function ports(key: keyof MeshIptablesOptions, text: string): number[] {
  return listItems(text).map((item) => {
    const n = /^\d{1,5}$/.test(item) ? Number(item) : NaN;
    if (!(n >= 1 && n <= 65535)) throw bad(key, text, `a comma-separated list of ports (1 to 65535); "${item}" is not`);
    return n;
  });
}

function portSelection(key: keyof MeshIptablesOptions, text: string): Selection<number> {
  return text.trim() === '*' ? { all: true } : { all: false, items: ports(key, text) };
}

/** An IPv4 or IPv6 address with an optional prefix length; a bare address means a single host. */
export function normalizeCidr(text: string): string | undefined {
  const [address = '', prefix, ...rest] = text.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return undefined;
  const max = family === 4 ? 32 : 128;
  if (prefix === undefined) return `${address}/${max}`;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return undefined;
  return `${address}/${Number(prefix)}`;
}

function cidrs(key: keyof MeshIptablesOptions, text: string): string[] {
  return listItems(text).map((item) => {
    const cidr = normalizeCidr(item);
    if (!cidr) throw bad(key, text, `a comma-separated list of CIDRs (such as 10.0.0.0/8, fd00::/8); "${item}" is not`);
    return cidr;
  });
}

function cidrSelection(key: keyof MeshIptablesOptions, text: string): Selection<string> {
  return text.trim() === '*' ? { all: true } : { all: false, items: cidrs(key, text) };
}

/** Linux interface names: 1 to 15 bytes, no slash, colon or white space; `+` is iptables' wildcard. */
function interfaces(key: keyof MeshIptablesOptions, text: string): string[] {
  return listItems(text).map((item) => {
    if (!/^[^\s/:]{1,15}$/.test(item) || item === '.' || item === '..') {
      throw bad(key, text, `a comma-separated list of interface names (at most 15 characters, no "/", ":" or spaces); "${item}" is not`);
    }
    return item;
  });
}

/** A user or group: a numeric id or a name as useradd accepts it. */
function principals(key: keyof MeshIptablesOptions, text: string): string[] {
  return listItems(text).map((item) => {
    if (!/^(\d+|[A-Za-z_][A-Za-z0-9_.-]*\$?)$/.test(item)) {
      throw bad(key, text, `a comma-separated list of ids or names; "${item}" is not`);
    }
    return item;
  });
}

function principalSelection(key: keyof MeshIptablesOptions, text: string): Selection<string> {
  return text.trim() === '*' ? { all: true } : { all: false, items: principals(key, text) };
}

/** Packet marks are 32-bit; decimal as Istio writes them, or 0x hex. */
function mark(key: keyof MeshIptablesOptions, text: string): number {
  const t = text.trim();
  const n = /^\d+$/.test(t) ? Number(t) : /^0x[0-9a-f]+$/i.test(t) ? parseInt(t, 16) : NaN;
  if (!(n >= 1 && n <= 0xffffffff)) throw bad(key, text, 'a packet mark (1 to 4294967295)');
  return n;
}

function routeTable(key: keyof MeshIptablesOptions, text: string): number {
  const t = text.trim();
  const n = /^\d+$/.test(t) ? Number(t) : NaN;
  if (!(n >= 1 && n <= 0xffffffff) || n === 253 || n === 254 || n === 255) {
    throw bad(key, text, 'a routing table id (1 to 4294967295, not the reserved 253 default, 254 main or 255 local)');
  }
  return n;
}

function mode(text: string): InterceptionMode {
  const m = INTERCEPTION_MODES.find((x) => x === text.trim());
  if (!m) throw bad('interceptionMode', text, `an interception mode (${INTERCEPTION_MODES.join(' or ')})`);
  return m;
}

/** Validates every value; throws a usage error naming the first bad flag and value. */
export function validateIptablesOptions(raw: RawIptablesFlags): MeshIptablesOptions {
  const loopback = normalizeCidr(raw.outboundIpv4LoopbackCidr.trim());
  if (!loopback || !loopback.includes('.')) {
    throw bad('outboundIpv4LoopbackCidr', raw.outboundIpv4LoopbackCidr, 'an IPv4 CIDR such as 127.0.0.1/32');
  }
  const probeTimeoutMs = raw.probeTimeoutMs;
  if (!(probeTimeoutMs > 0)) throw bad('probeTimeoutMs', `${probeTimeoutMs}ms`, 'a positive duration');
  if (raw.probePort < 1) throw bad('probePort', String(raw.probePort), 'a port (1 to 65535)');
  return Object.freeze({
    ...raw,
    proxyPort: port('proxyPort', raw.proxyPort),
    inboundCapturePort: port('inboundCapturePort', raw.inboundCapturePort),
    inboundTunnelPort: port('inboundTunnelPort', raw.inboundTunnelPort),
    proxyUids: principals('proxyUids', raw.proxyUids),
    proxyGids: principals('proxyGids', raw.proxyGids),
    interceptionMode: mode(raw.interceptionMode),
    tproxyMark: mark('tproxyMark', raw.tproxyMark),
    tproxyRouteTable: routeTable('tproxyRouteTable', raw.tproxyRouteTable),
    inboundPorts: portSelection('inboundPorts', raw.inboundPorts),
    localExcludePorts: ports('localExcludePorts', raw.localExcludePorts),
    outboundPortsExclude: ports('outboundPortsExclude', raw.outboundPortsExclude),
    outboundPortsInclude: ports('outboundPortsInclude', raw.outboundPortsInclude),
    serviceCidrs: cidrSelection('serviceCidrs', raw.serviceCidrs),
    serviceExcludeCidrs: cidrs('serviceExcludeCidrs', raw.serviceExcludeCidrs),
    excludeInterfaces: interfaces('excludeInterfaces', raw.excludeInterfaces),
    virtInterfaces: interfaces('virtInterfaces', raw.virtInterfaces),
    ownerGroupsInclude: principalSelection('ownerGroupsInclude', raw.ownerGroupsInclude),
    ownerGroupsExclude: principals('ownerGroupsExclude', raw.ownerGroupsExclude),
    outboundIpv4LoopbackCidr: loopback,
  });
}

/**
 * The uid of the proxy user from /etc/passwd text, or Istio's fallback 1337 when the user is not
 * there; the CLI uses it when `--proxy-uid` is not given.
 */
export function proxyUidFromPasswd(user: string, passwd: string): string {
  for (const line of passwd.split('\n')) {
    const fields = line.split(':');
    if (fields[0] === user && fields[2] && /^\d+$/.test(fields[2])) return fields[2];
  }
  return '1337';
}
