// Which iptables the pod uses: the nf_tables or the legacy (x_tables) backend. Rules written through
// the wrong one are invisible to the other and to whoever manages the node, so, as istio-iptables
// does, we look at which backend already holds rules in the pod's network namespace:
//   1. `iptables-legacy-save` shows rules (or user chains, such as kubelet's KUBE-IPTABLES-HINT) → legacy;
//   2. else `iptables-nft-save` does → nft;
//   3. else neither: the `iptables` on the PATH (whatever the distribution's alternatives point to).
// Both families are looked at when IPv6 is wanted; legacy wins if either family has legacy rules.
// Only iptables-restore and iptables take `-w` (wait for the xtables lock); iptables-save has no
// such option (it only reads).
import { CommandError } from '../exec/command-error.js';
import type { CommandRunner } from '../exec/runner.js';
import { AgentError } from '../errors/agent-error.js';
import type { Family } from './rules.js';
import { hasRules } from './save-parse.js';

export type IptablesFlavor = 'nft' | 'legacy';

/** The programs for one family. */
export interface IptablesCommands {
  readonly family: Family;
  /** e.g. `iptables-nft-save` */
  readonly save: string;
  /** e.g. `iptables-nft-restore` */
  readonly restore: string;
  /** e.g. `iptables-nft` */
  readonly iptables: string;
}

export interface IptablesBackend {
  /** `nft`/`legacy` when that backend already had rules; `default` for the iptables on the PATH. */
  readonly flavor: IptablesFlavor | 'default';
  /** Why this one, for the log. */
  readonly reason: string;
  readonly ipv4: IptablesCommands;
  readonly ipv6: IptablesCommands;
  /**
   * The iptables-save output of the chosen programs, per family, when detection already read it
   * (saves the applier one call). Absent: read it again.
   */
  readonly saved: Partial<Record<Family, string>>;
}

/** Arguments of every restore: wait up to 30 s for the xtables lock, and keep what is there. */
export const RESTORE_ARGS: readonly string[] = ['-w', '30', '--noflush'];

export function commandsFor(flavor: IptablesFlavor | 'default', family: Family): IptablesCommands {
  const base = family === 'ipv6' ? 'ip6tables' : 'iptables';
  const suffix = flavor === 'default' ? '' : `-${flavor}`;
  return { family, save: `${base}${suffix}-save`, restore: `${base}${suffix}-restore`, iptables: `${base}${suffix}` };
}

/** A backend fixed by name (no detection): for tests, or a flag forcing one. */
export function fixedBackend(flavor: IptablesFlavor | 'default', reason = 'chosen by the caller'): IptablesBackend {
  return { flavor, reason, ipv4: commandsFor(flavor, 'ipv4'), ipv6: commandsFor(flavor, 'ipv6'), saved: {} };
}

/** `nft (iptables-nft-restore, ip6tables-nft-restore): ...` for logs and messages. */
export function describeBackend(b: IptablesBackend, families: readonly Family[] = ['ipv4', 'ipv6']): string {
  const programs = families.map((f) => b[f].restore).join(', ');
  return `${b.flavor} (${programs}): ${b.reason}`;
}

/** The programs' own words for "you may not": not root, or CAP_NET_ADMIN dropped. */
export const PERMISSION_PATTERN = /Permission denied|Operation not permitted|you must be root|can't open lock file/i;

interface Probe { readonly output?: string; readonly rules: boolean }

/** Runs one save program; a missing program or a backend the kernel lacks counts as "no rules". */
async function probe(runner: CommandRunner, program: string): Promise<Probe> {
  try {
    const r = await runner.run(program, [], { allowFailure: true });
    if (r.exitCode === 0) return { output: r.stdout, rules: hasRules(r.stdout) };
    if (PERMISSION_PATTERN.test(r.stderr)) {
      throw new AgentError('ERR_IPTABLES_PERMISSION',
        `${program}: no permission to read the netfilter rules: run as root or with the NET_ADMIN capability `
        + `(${r.stderr.trim().split('\n')[0]})`);
    }
    return { rules: false };
  } catch (err) {
    if (err instanceof CommandError && err.code === 'ERR_COMMAND_NOT_FOUND') return { rules: false };
    throw err;
  }
}

/**
 * Looks at both backends (for ipv4, and ipv6 when asked) and picks the one in use; throws
 * ERR_IPTABLES_UNAVAILABLE when no iptables program is installed at all, ERR_IPTABLES_PERMISSION
 * when the rules cannot even be read.
 */
export async function detectBackend(runner: CommandRunner, o: { readonly ipv6?: boolean } = {}): Promise<IptablesBackend> {
  const families: Family[] = o.ipv6 ? ['ipv4', 'ipv6'] : ['ipv4'];
  const flavors: IptablesFlavor[] = ['legacy', 'nft'];
  const probes = new Map<string, Probe>();
  await Promise.all(families.flatMap((family) => flavors.map(async (flavor) => {
    probes.set(`${flavor} ${family}`, await probe(runner, commandsFor(flavor, family).save));
  })));
  const has = (flavor: IptablesFlavor): Family[] => families.filter((f) => probes.get(`${flavor} ${f}`)!.rules);
  const savedOf = (flavor: IptablesFlavor): Partial<Record<Family, string>> => {
    const saved: Partial<Record<Family, string>> = {};
    for (const f of families) {
      const output = probes.get(`${flavor} ${f}`)!.output;
      if (output !== undefined) saved[f] = output;
    }
    return saved;
  };
  for (const flavor of flavors) {
    const withRules = has(flavor);
    if (withRules.length > 0) {
      return { flavor, reason: `the ${flavor} backend already has rules (${withRules.join(', ')})`,
        ipv4: commandsFor(flavor, 'ipv4'), ipv6: commandsFor(flavor, 'ipv6'), saved: savedOf(flavor) };
    }
  }
  const anyFound = [...probes.values()].some((p) => p.output !== undefined);
  if (!anyFound) {
    // Neither suffixed program ran: an iptables without them (old builds) or none at all.
    const r = await probe(runner, commandsFor('default', 'ipv4').save);
    if (r.output === undefined) {
      throw new AgentError('ERR_IPTABLES_UNAVAILABLE',
        'iptables-save not found (nor iptables-nft-save, iptables-legacy-save): install iptables');
    }
  }
  // Neither backend has any rule, so whichever the default is, its save output reads "nothing
  // there" as these do: keep one per family.
  const saved: Partial<Record<Family, string>> = { ...savedOf('legacy'), ...savedOf('nft') };
  return { flavor: 'default', reason: 'neither backend has rules yet: the iptables on the PATH',
    ipv4: commandsFor('default', 'ipv4'), ipv6: commandsFor('default', 'ipv6'), saved };
}
