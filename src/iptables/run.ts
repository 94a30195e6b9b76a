// `mesh-iptables` and `mesh-clean-iptables`: detect the pod's network, build the rule set, then
// print it (--dry-run) or apply it, and optionally prove it works (--run-validation).
import type { Output } from '../cli/context.js';
import type { CommandRunner } from '../exec/runner.js';
import { scope } from '../log/logger.js';
import { applyRuleSet, cleanMeshRules, systemIdResolver } from './apply.js';
import { buildRuleSet, type PodNetwork } from './builder.js';
import { explainRuleSet } from './explain.js';
import type { MeshIptablesOptions } from './options.js';
import { detectPodNetwork, parseIpAddrOutput } from './pod-network.js';
import { toRestore, type RuleSet } from './rules.js';
import { validateRedirect, validationTarget } from './validation.js';

/** The side effects the commands need, passed in (tests and --dry-run replace them). */
export interface IptablesIo {
  readonly stdout: Output;
  readonly readFile: (path: string) => string | undefined;
  readonly writeFile: (path: string, text: string) => void;
  /** Addresses of this process's network namespace, in the kernel's order. */
  readonly localAddresses: () => readonly string[];
  /** Runs commands in the pod's network namespace (execa, wrapped for --network-namespace). */
  readonly runner: (o: MeshIptablesOptions) => CommandRunner;
}

const log = scope('iptables');

/** resolv.conf as `ip netns exec NAME` would show it to a process in that namespace. */
function resolvConfPath(o: MeshIptablesOptions, io: IptablesIo): string {
  const perNamespace = `/etc/netns/${o.networkNamespace}/resolv.conf`;
  return o.networkNamespace && !o.networkNamespace.includes('/') && io.readFile(perNamespace) !== undefined
    ? perNamespace : '/etc/resolv.conf';
}

async function podNetwork(o: MeshIptablesOptions, io: IptablesIo): Promise<PodNetwork> {
  return detectPodNetwork(o, {
    resolvConf: () => io.readFile(resolvConfPath(o, io)),
    addresses: async () => {
      if (!o.networkNamespace) return io.localAddresses();
      // Reading addresses changes nothing, but --dry-run calls nothing at all.
      if (o.dryRun) {
        log.info('--dry-run with --network-namespace: the namespace\'s addresses are not read; IPv6 rules only with --dual-stack');
        return [];
      }
      return parseIpAddrOutput((await io.runner(o).run('ip', ['-o', 'addr', 'show'])).stdout);
    },
  });
}

/** What --dry-run prints: the explanation as comments, the restore input per family, the routes. */
export function dryRunText(o: MeshIptablesOptions, pod: PodNetwork, set: RuleSet): string {
  const comment = (lines: readonly string[]): string => lines.map((l) => (l === '' ? '#\n' : `# ${l}\n`)).join('');
  let text = comment(['pilot-agent mesh-iptables --dry-run: nothing was applied.', '', ...explainRuleSet(o, pod), '']);
  text += comment(['iptables-restore --noflush']) + toRestore(set.ipv4);
  if (set.ipv6) text += comment(['ip6tables-restore --noflush']) + toRestore(set.ipv6);
  if (set.routes.length > 0) {
    text += comment(['ip commands (TPROXY policy routes; ::6 on lo for IPv6)']) + set.routes.map((r) => `ip ${r.args.join(' ')}\n`).join('');
  }
  return text;
}

export async function runMeshIptables(o: MeshIptablesOptions, io: IptablesIo): Promise<void> {
  let pod: PodNetwork | undefined;
  if (o.skipRuleApply) {
    log.info('--skip-rule-apply: no rule is built or applied');
  } else if (o.cleanupOnly) {
    await runMeshCleanIptables(o, io);
    return;
  } else {
    pod = await podNetwork(o, io);
    const set = buildRuleSet(o, pod);
    if (o.dryRun) {
      io.stdout.write(dryRunText(o, pod, set));
      if (o.dryRunFilePath) io.writeFile(o.dryRunFilePath, toRestore(set.ipv4) + (set.ipv6 ? toRestore(set.ipv6) : ''));
      return;
    }
    await applyAndReport(o, set, io);
  }
  if (o.runValidation && !o.dryRun) await validate(o, io, pod ?? await podNetwork(o, io));
}

export async function runMeshCleanIptables(o: MeshIptablesOptions, io: IptablesIo): Promise<void> {
  if (o.dryRun) {
    io.stdout.write(`# pilot-agent mesh-clean-iptables --dry-run: nothing was removed.\n`
      + `# Would remove every MESH_ chain and every rule that jumps into one (IPv4${o.dualStack ? ' and IPv6' : ', and IPv6 where present'}),\n`
      + `# and the TPROXY policy routes: ip rule fwmark ${o.tproxyMark} lookup ${o.tproxyRouteTable}, ip route table ${o.tproxyRouteTable}.\n`);
    return;
  }
  await clean(o, io);
}

async function applyAndReport(o: MeshIptablesOptions, set: RuleSet, io: IptablesIo): Promise<void> {
  const outcome = await applyRuleSet(io.runner(o), set, { reconcile: o.reconcile, forceApply: o.forceApply });
  const families = set.ipv6 ? 'IPv4 and IPv6' : 'IPv4';
  const what = { applied: 'applied', unchanged: 'already in place: nothing to do', reconciled: 'reconciled (differing mesh rules replaced)' }[outcome];
  log.info(`mesh rules ${what} (${families}, ${set.ipv4.length + (set.ipv6?.length ?? 0)} rules, ${set.routes.length} route commands)`);
}

async function clean(o: MeshIptablesOptions, io: IptablesIo): Promise<void> {
  // The rules this configuration would make identify the mesh rules of built-in chains that carry
  // no MESH_ name (excluded and virtual interfaces); the rest is found by name.
  const expected = buildRuleSet(o, await podNetwork(o, io));
  const result = await cleanMeshRules(io.runner(o), {
    ipv6: true, routes: { mark: o.tproxyMark, table: o.tproxyRouteTable }, expected,
  });
  const removed = (result.removed.ipv4 ?? 0) + (result.removed.ipv6 ?? 0);
  log.info(removed + result.routesRemoved === 0
    ? 'no mesh rules found: nothing to clean'
    : `removed ${removed} mesh rules and chains and ${result.routesRemoved} policy routes`);
}

async function validate(o: MeshIptablesOptions, io: IptablesIo, pod: PodNetwork): Promise<void> {
  const ipv6Only = pod.ipv6 && !io.localAddresses().some((a) => a.includes('.') && !a.startsWith('127.'));
  const target = validationTarget({ serviceCidrs: o.serviceCidrs, serviceExcludeCidrs: o.serviceExcludeCidrs, ipv6Only });
  const resolve = systemIdResolver();
  const id = (kind: 'user' | 'group', text: string | undefined): number | undefined =>
    text === undefined ? undefined : /^\d+$/.test(text) ? Number(text) : resolve(kind, text);
  const uid = id('user', o.proxyUids[0]);
  const gid = id('group', o.proxyGids[0]);
  // Istio's check: only the proxy's own traffic is redirected on the loopback path, so connect as
  // the proxy. It is the check without outbound capture, else the fallback when the outbound target
  // has no route (a pod without a default route).
  const connectAs = uid !== undefined && gid !== undefined && process.getuid?.() !== uid ? { uid, gid } : undefined;
  const loopback = { family: ipv6Only ? 'ipv6' : 'ipv4', ...(connectAs ? { connectAs } : {}) } as const;
  const result = await validateRedirect({
    probePort: o.probePort, proxyPort: o.proxyPort, inboundCapturePort: o.inboundCapturePort,
    timeoutMs: o.probeTimeoutMs, loopback,
    ...(target.loopback ? {} : { target: target.address }),
    ...(o.networkNamespace ? { runner: io.runner(o) } : {}),
  });
  const where = result.target.includes(':') ? `[${result.target}]:${result.port}` : `${result.target}:${result.port}`;
  const check = result.check === 'loopback'
    ? `Istio's loopback check${connectAs ? ` (as uid ${connectAs.uid})` : ''}${result.fallbackReason ? `, because ${result.fallbackReason}` : ''}`
    : 'outbound check';
  log.info(`validation passed (${check}): a connection to ${where} reached port ${result.reachedPort} in ${Math.round(result.elapsedMs)}ms`);
}
