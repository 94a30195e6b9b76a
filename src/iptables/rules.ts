// The rule set a configuration needs: plain data, produced by the builder, consumed by the applier,
// `--dry-run` and the drift check. No I/O here.
import { BUILTIN_CHAINS, TABLES, type Table } from './constants.js';

export type Family = 'ipv4' | 'ipv6';

export interface Rule {
  readonly table: Table;
  readonly chain: string;
  /** Insert at this 1-based position (`-I chain N`); absent: append (`-A chain`). */
  readonly position?: number;
  /** Match and target, as iptables takes them: `['-p', 'tcp', '-j', 'RETURN']`. */
  readonly args: readonly string[];
}

/**
 * An `ip` command the rules need besides iptables, as its arguments: TPROXY's policy routes, and
 * for IPv6 the inbound passthrough address ::6 on lo. Each is run only when its effect is missing.
 */
export interface RouteCommand {
  readonly family: Family;
  /** `['-f', 'inet', 'rule', 'add', 'fwmark', '1337', 'lookup', '133']` */
  readonly args: readonly string[];
}

export interface RuleSet {
  readonly ipv4: readonly Rule[];
  /**
   * Absent when no IPv6 rule is needed (no ip6tables call at all): the pod has no IPv6 and
   * `--block-inbound-ipv6` is off (or has nothing to block).
   */
  readonly ipv6?: readonly Rule[];
  readonly routes: readonly RouteCommand[];
}

/** `-A CHAIN args...` or `-I CHAIN N args...` */
export function ruleLine(rule: Rule): string {
  const head = rule.position === undefined ? ['-A', rule.chain] : ['-I', rule.chain, String(rule.position)];
  return [...head, ...rule.args].join(' ');
}

/**
 * The `iptables-restore --noflush` input for one family: per table (alphabetical, as
 * istio-iptables writes them), `-N` for each non-built-in chain in the order its first rule
 * appears, then the rules in order, then COMMIT. Tables without rules are left out.
 */
export function toRestore(rules: readonly Rule[]): string {
  let out = '';
  for (const table of TABLES) {
    const inTable = rules.filter((r) => r.table === table);
    if (inTable.length === 0) continue;
    const chains = [...new Set(inTable.map((r) => r.chain))].filter((c) => !BUILTIN_CHAINS.has(c));
    out += `*${table}\n${chains.map((c) => `-N ${c}\n`).join('')}${inTable.map((r) => `${ruleLine(r)}\n`).join('')}COMMIT\n`;
  }
  return out;
}
