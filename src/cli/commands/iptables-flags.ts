// Flags shared by `mesh-iptables` and `mesh-clean-iptables`, and the translation of flags plus
// environment into validated options. A flag given on the command line wins over its variable.
import { Option, type Command } from 'commander';
import type { EnvName } from '../../config/env/registry.js';
import {
  INTERCEPTION_MODES, proxyUidFromPasswd, validateIptablesOptions,
  type MeshIptablesOptions, type RawIptablesFlags,
} from '../../iptables/options.js';
import { boolOption } from '../bool-flags.js';
import { completeWith } from '../completion/model.js';
import { durationValue, uint16Value } from '../flag-values.js';
import type { CliContext } from '../context.js';

/** Flags of spec 4.3, which 4.4 repeats. `tproxyMarkDefault` differs: 4.3 has none, 4.4 has 1337. */
export function sharedIptablesFlags(tproxyMarkDefault?: string): Option[] {
  const mark = new Option('-t, --mesh-inbound-tproxy-mark <mark>',
    'Packet mark given to inbound connections in TPROXY mode, and the routing mark of their policy route; '
    + 'INBOUND_TPROXY_MARK, when set, replaces the default'
    + (tproxyMarkDefault === undefined ? ' (default: 1337)' : ''));
  if (tproxyMarkDefault !== undefined) mark.default(tproxyMarkDefault);
  return [
    ...boolOption('--capture-all-dns',
      'Capture all DNS traffic on port 53, not only traffic to the DNS server IPs of /etc/resolv.conf; effective only with --redirect-dns'),
    ...boolOption('-n, --dry-run', 'Print the rules and call no external dependency such as iptables'),
    completeWith(new Option('-m, --mesh-inbound-interception-mode <mode>',
      'Mode used to redirect inbound connections to the proxy, REDIRECT or TPROXY (default: INBOUND_INTERCEPTION_MODE, else REDIRECT)'),
    { values: INTERCEPTION_MODES }),
    mark,
    new Option('-g, --proxy-gid <gids>',
      'Comma-separated GIDs of the users for which the redirection is not applied (default: the same as -u)'),
    new Option('-u, --proxy-uid <uids>',
      'Comma-separated UIDs of the users for which the redirection is not applied; typically the proxy container\'s UID '
      + '(default: the uid of PROXY_USER, else 1337)'),
    ...boolOption('--redirect-dns', 'Enable capture of DNS traffic by the agent (default: MESH_META_DNS_CAPTURE)'),
  ];
}

type FlagValues = Record<string, string | boolean | number | undefined>;

/** Flags of 4.4 beyond the shared ones, their defaults as the spec gives them. */
export function meshIptablesOnlyFlags(): Option[] {
  return [
    ...boolOption('--cleanup-only', 'Remove the mesh chains, jumps and routes without creating new ones'),
    ...boolOption('--cni-mode', 'Whether to run as CNI plugin'),
    ...boolOption('--drop-invalid', 'Enable invalid-packet drop in iptables rules'),
    ...boolOption('--dual-stack', 'Enable IPv4/IPv6 redirection for dual-stack pods (default: MESH_DUAL_STACK)'),
    ...boolOption('--block-inbound-ipv6',
      'When no IPv6 capture rules are written (IPv4 pod, --dual-stack off), reject inbound IPv6 TCP (link-local included) '
      + 'to the ports the IPv4 rules capture; this agent\'s own, not in Istio (default: MESH_BLOCK_INBOUND_IPV6)'),
    new Option('-p, --proxy-port <port>', 'Proxy port to which all TCP traffic is redirected').default('15001'),
    new Option('-z, --inbound-capture-port <port>', 'Port to which all inbound TCP traffic to the pod is redirected').default('15006'),
    new Option('-e, --inbound-tunnel-port <port>', 'Tunnel port for inbound TCP traffic; never captured').default('15008'),
    new Option('--iptables-probe-port <port>', 'Port the --run-validation probe listens on').default(15002)
      .argParser(uint16Value),
    ...boolOption('--iptables-trace-logging',
      'Insert LOG rules tracing every packet through the mesh chains (default: IPTABLES_TRACE_LOGGING); needs NET_ADMIN, debugging only'),
    new Option('-c, --mesh-exclude-interfaces <ifaces>',
      'Comma-separated list of NICs whose inbound and outbound traffic is not captured'),
    new Option('-b, --mesh-inbound-ports <ports>',
      'Comma-separated list of inbound ports redirected to the proxy; "*" redirects all ports; empty disables inbound capture'),
    new Option('-r, --mesh-inbound-tproxy-route-table <table>', 'Routing table of the TPROXY policy route').default('133'),
    new Option('-d, --mesh-local-exclude-ports <ports>',
      'Comma-separated list of inbound ports excluded from redirection; applies only when all inbound traffic ("*") is redirected'),
    new Option('-o, --mesh-local-outbound-ports-exclude <ports>', 'Comma-separated list of outbound ports excluded from redirection'),
    new Option('-q, --mesh-outbound-ports <ports>', 'Comma-separated list of outbound ports explicitly included in redirection'),
    new Option('-i, --mesh-service-cidr <cidrs>',
      'Comma-separated list of IP ranges in CIDR form redirected to the proxy; "*" redirects all outbound traffic; empty disables outbound capture'),
    new Option('-x, --mesh-service-exclude-cidr <cidrs>',
      'Comma-separated list of IP ranges in CIDR form excluded from redirection; applies only when all outbound traffic ("*") is redirected'),
    new Option('-k, --virt-interfaces <ifaces>',
      'Comma-separated list of virtual interfaces whose inbound traffic (from VMs) is treated as outbound'),
    new Option('--network-namespace <name>', 'Network namespace (a name under /var/run/netns or a path) to apply the rules in'),
    new Option('--probe-timeout <duration>', 'Failure-detection timeout of --run-validation, a Go duration')
      .default(5000, '5s').argParser(durationValue),
    ...boolOption('--force-apply', 'Apply the rules even if mesh rules seem to exist already'),
    ...boolOption('--reconcile', 'Replace pre-existing, different mesh rules instead of failing on the detected drift'),
    ...boolOption('--run-validation', 'Validate the redirection after applying the rules'),
    ...boolOption('--skip-rule-apply', 'Skip applying the rules'),
  ];
}

/**
 * Builds validated options from the command's flags and the environment. Flags absent from the
 * command (mesh-clean-iptables has fewer) take their 4.4 defaults.
 */
export function iptablesOptionsFrom(command: Command, ctx: CliContext): MeshIptablesOptions {
  const flags = command.opts<FlagValues>();
  const env = ctx.env.values;
  const fromCli = (key: string): boolean => command.getOptionValueSource(key) === 'cli';
  const text = (key: string, fallback = ''): string => {
    const v = flags[key];
    return v === undefined ? fallback : String(v);
  };
  /** The flag when given, else the variable when set, else the flag's default. */
  const withEnv = <T>(key: string, name: EnvName, envValue: T, flagDefault: T): T => {
    if (fromCli(key)) return flags[key] as T;
    if (ctx.env.explicit.has(name)) return envValue;
    return (flags[key] as T | undefined) ?? flagDefault;
  };
  const uids = text('proxyUid') || proxyUidFromPasswd(env.PROXY_USER, ctx.readFile('/etc/passwd') ?? '');
  const raw: RawIptablesFlags = {
    proxyPort: text('proxyPort', '15001'),
    inboundCapturePort: text('inboundCapturePort', '15006'),
    inboundTunnelPort: text('inboundTunnelPort', '15008'),
    proxyUids: uids,
    proxyGids: text('proxyGid') || uids,
    interceptionMode: withEnv('meshInboundInterceptionMode', 'INBOUND_INTERCEPTION_MODE',
      env.INBOUND_INTERCEPTION_MODE, 'REDIRECT') || 'REDIRECT',
    tproxyMark: withEnv('meshInboundTproxyMark', 'INBOUND_TPROXY_MARK', env.INBOUND_TPROXY_MARK, '1337') || '1337',
    tproxyRouteTable: text('meshInboundTproxyRouteTable', '133'),
    inboundPorts: text('meshInboundPorts'),
    localExcludePorts: text('meshLocalExcludePorts'),
    outboundPortsExclude: text('meshLocalOutboundPortsExclude'),
    outboundPortsInclude: text('meshOutboundPorts'),
    serviceCidrs: text('meshServiceCidr'),
    serviceExcludeCidrs: text('meshServiceExcludeCidr'),
    excludeInterfaces: text('meshExcludeInterfaces'),
    virtInterfaces: text('virtInterfaces'),
    ownerGroupsInclude: env.MESH_OUTBOUND_OWNER_GROUPS,
    ownerGroupsExclude: env.MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE,
    outboundIpv4LoopbackCidr: env.MESH_OUTBOUND_IPV4_LOOPBACK_CIDR,
    redirectDns: withEnv('redirectDns', 'MESH_META_DNS_CAPTURE', env.MESH_META_DNS_CAPTURE, false),
    captureAllDns: flags['captureAllDns'] === true,
    dropInvalid: flags['dropInvalid'] === true,
    dualStack: withEnv('dualStack', 'MESH_DUAL_STACK', env.MESH_DUAL_STACK, false),
    blockInboundIpv6: withEnv('blockInboundIpv6', 'MESH_BLOCK_INBOUND_IPV6', env.MESH_BLOCK_INBOUND_IPV6, false),
    dryRun: flags['dryRun'] === true,
    dryRunFilePath: env.DRY_RUN_FILE_PATH,
    cleanupOnly: flags['cleanupOnly'] === true,
    cniMode: flags['cniMode'] === true,
    forceApply: flags['forceApply'] === true,
    reconcile: flags['reconcile'] === true,
    runValidation: flags['runValidation'] === true,
    skipRuleApply: flags['skipRuleApply'] === true,
    traceLogging: withEnv('iptablesTraceLogging', 'IPTABLES_TRACE_LOGGING', env.IPTABLES_TRACE_LOGGING, false),
    probePort: Number(flags['iptablesProbePort'] ?? 15002),
    probeTimeoutMs: Number(flags['probeTimeout'] ?? 5000),
    networkNamespace: text('networkNamespace'),
  };
  return validateIptablesOptions(raw);
}
