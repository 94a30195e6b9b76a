// Putting a rule set into the kernel, and taking the mesh's rules out again. Everything goes through
// a CommandRunner (execa for real, wrapped for --network-namespace; recorded for --dry-run):
//   apply  = read (iptables-save) → compare the mesh part with the expected one → one
//            `iptables-restore --noflush` per family → the `ip` commands: TPROXY's policy routes
//            (`ip rule`/`ip route`), ::6 on lo for IPv6 (each only when not there yet);
//   clean  = read → one restore per family with `-D` for our rules in other chains, `-F`/`-X` for
//            the MESH_ chains → remove the policy routes.
// A failure part-way rolls back what this call added, so the pod never keeps half a configuration.
import { readFileSync } from 'node:fs';
import { CommandError, failedError } from '../exec/command-error.js';
import type { CommandRunner } from '../exec/runner.js';
import { AgentError, type ErrorCode } from '../errors/agent-error.js';
import { scope } from '../log/logger.js';
import {
  describeBackend, detectBackend, PERMISSION_PATTERN, RESTORE_ARGS, type IptablesBackend, type IptablesCommands,
} from './backend.js';
import { toRestore, type Family, type RouteCommand, type Rule, type RuleSet } from './rules.js';
import {
  diffMesh, expectedBuiltinKeys, expectedMesh, extractMesh, formatDiff, parseSave,
  type MeshChain, type MeshDiffLine, type NormalizeOptions,
} from './save-parse.js';

const log = scope('iptables');

export type ApplyOutcome = 'applied' | 'unchanged' | 'reconciled';

export interface ApplyOptions {
  /** Mesh rules that differ are present: remove them, then apply (instead of failing). */
  readonly reconcile?: boolean;
  /** Apply without looking at what is there (MESH_ chains are reset, other rules appended again). */
  readonly forceApply?: boolean;
  /** The iptables programs to use; detected (see backend.ts) when absent. */
  readonly backend?: IptablesBackend;
  /** Names in `--uid-owner`/`--gid-owner` → ids, as iptables resolves them; default /etc/passwd, /etc/group. */
  readonly resolveId?: NormalizeOptions['resolveId'];
}

export interface CleanOptions {
  /** Also IPv6 (ip6tables; skipped quietly where the kernel has no IPv6). */
  readonly ipv6: boolean;
  /** The TPROXY policy routes to remove: `ip rule ... fwmark <mark> lookup <table>`, routes of <table>. */
  readonly routes?: { readonly mark: number | string; readonly table: number | string };
  readonly backend?: IptablesBackend;
  /**
   * The configuration being cleaned (pass it whenever the options are known): its rules in built-in
   * chains count as ours even when nothing marks them so — `-c eth1`'s `-i eth1 -j RETURN` in
   * PREROUTING, `-o eth1 -j RETURN` in nat OUTPUT. Without it, only MESH_ chains, jumps into them
   * and TPROXY's mark rules (by shape) are recognised.
   */
  readonly expected?: RuleSet;
  readonly resolveId?: NormalizeOptions['resolveId'];
}

export interface CleanResult {
  /** Rules removed from other chains plus MESH_ chains deleted, per family. */
  readonly removed: Partial<Record<Family, number>>;
  readonly routesRemoved: number;
}

/** Mesh rules that differ from the expected ones: the diff, rule by rule. */
export class DriftError extends AgentError {
  readonly diff: readonly (MeshDiffLine & { readonly family: Family })[];
  constructor(message: string, diff: readonly (MeshDiffLine & { readonly family: Family })[]) {
    super('ERR_IPTABLES_DRIFT', message);
    this.name = 'DriftError';
    this.diff = diff;
  }
}

export type FamilyState = 'absent' | 'same' | 'different';

export interface MeshCheck {
  readonly backend: IptablesBackend;
  readonly families: Partial<Record<Family, {
    readonly state: FamilyState;
    readonly diff: readonly MeshDiffLine[];
    /** The mesh part found, with the kernel's text of each rule (for `-D`). */
    readonly present: ReturnType<typeof extractMesh>;
  }>>;
}

const familiesOf = (set: RuleSet): Family[] => (set.ipv6 ? ['ipv4', 'ipv6'] : ['ipv4']);
const rulesOf = (set: RuleSet, f: Family): readonly Rule[] => (f === 'ipv6' ? set.ipv6 ?? [] : set.ipv4);
const label = (f: Family): string => (f === 'ipv6' ? 'IPv6' : 'IPv4');

// ---------------------------------------------------------------------------------------------
// errors

/** A table, match or target the kernel does not have (module not loaded or not built). */
export const KERNEL_PATTERN = new RegExp([
  "can't initialize ip6?tables table",
  'Table does not exist \\(do you need to insmod\\?\\)',
  'No chain/target/match by that name',
  "Couldn't load (?:target|match) `(?!MESH_)[^']*'",
  "Couldn't find (?:target|match) `(?!MESH_)[^']*'",
  'Extension \\S+ revision \\d+ not supported, missing kernel module',
  'Address family not supported by protocol',
  'Protocol not supported',
].join('|'));

/** Turns a failed command into the error the CLI shows: which of "missing", "not allowed", "kernel". */
export function iptablesError(err: unknown, doing: string): AgentError {
  if (err instanceof CommandError) {
    if (err.code === 'ERR_COMMAND_NOT_FOUND') {
      const code: ErrorCode = /tables/.test(err.command) ? 'ERR_IPTABLES_UNAVAILABLE' : 'ERR_COMMAND_NOT_FOUND';
      return new AgentError(code, `${doing}: ${err.message}`, { cause: err });
    }
    const said = err.stderr.trim().split('\n').filter((l) => !/^Try `/.test(l)).join(' ').trim() || err.message;
    if (PERMISSION_PATTERN.test(err.stderr)) {
      return new AgentError('ERR_IPTABLES_PERMISSION', `${doing}: not permitted to change netfilter rules: run as root `
        + `or with the NET_ADMIN capability (${err.command} said: ${said})`, { cause: err });
    }
    if (KERNEL_PATTERN.test(err.stderr)) {
      return new AgentError('ERR_IPTABLES_KERNEL', `${doing}: the kernel lacks a table, match or target these rules `
        + `need (a netfilter module such as xt_TPROXY, xt_owner, xt_conntrack, xt_CT, nf_nat or iptable_mangle is not `
        + `available) (${err.command} said: ${said})`, { cause: err });
    }
    return new AgentError('ERR_IPTABLES_APPLY', `${doing}: ${err.message}`, { cause: err });
  }
  if (err instanceof AgentError) return err;
  return new AgentError('ERR_IPTABLES_APPLY', `${doing}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

// ---------------------------------------------------------------------------------------------
// reading and comparing

/** /etc/passwd and /etc/group, read once per call that needs them. */
export function systemIdResolver(files = { passwd: '/etc/passwd', group: '/etc/group' }): NonNullable<NormalizeOptions['resolveId']> {
  const tables: Partial<Record<'user' | 'group', Map<string, number>>> = {};
  const load = (path: string): Map<string, number> => {
    const map = new Map<string, number>();
    let text = '';
    try { text = readFileSync(path, 'utf8'); } catch { /* no file: names stay unresolved */ }
    for (const line of text.split('\n')) {
      const [name, , id] = line.split(':');
      if (name && id && /^\d+$/.test(id)) map.set(name, Number(id));
    }
    return map;
  };
  return (kind, name) => {
    const map = tables[kind] ??= load(kind === 'user' ? files.passwd : files.group);
    return map.get(name);
  };
}

async function save(runner: CommandRunner, cmds: IptablesCommands): Promise<string> {
  try {
    return (await runner.run(cmds.save, [])).stdout;
  } catch (err) {
    throw iptablesError(err, `reading the ${label(cmds.family)} rules`);
  }
}

async function restore(runner: CommandRunner, cmds: IptablesCommands, input: string): Promise<void> {
  try {
    await runner.run(cmds.restore, RESTORE_ARGS, { input });
  } catch (err) {
    // An iptables-restore older than 1.6.2 has no -w: run it without.
    if (err instanceof CommandError && /(unrecognized|invalid) option.*\bw\b|option.*-w/.test(err.stderr)) {
      await runner.run(cmds.restore, ['--noflush'], { input });
      return;
    }
    throw err;
  }
}

/**
 * Compares what the kernel holds with a rule set, per family: `absent` (nothing of the mesh),
 * `same` (exactly the expected mesh rules, chain by chain and in order), `different` (with the diff).
 */
export async function checkRuleSet(runner: CommandRunner, set: RuleSet, o: ApplyOptions = {}): Promise<MeshCheck> {
  const backend = o.backend ?? await detectBackend(runner, { ipv6: set.ipv6 !== undefined });
  const resolveId = o.resolveId ?? systemIdResolver();
  const families: MeshCheck['families'] = {};
  await Promise.all(familiesOf(set).map(async (family) => {
    const rules = rulesOf(set, family);
    const text = backend.saved[family] ?? await save(runner, backend[family]);
    const norm = { family, resolveId };
    const present = extractMesh(parseSave(text), { ...norm, expectedBuiltin: expectedBuiltinKeys(rules, norm) });
    const diff = diffMesh(present, expectedMesh(rules, norm));
    const state: FamilyState = present.length === 0 ? 'absent' : diff.length === 0 ? 'same' : 'different';
    families[family] = { state, diff, present };
  }));
  return { backend, families };
}

// ---------------------------------------------------------------------------------------------
// policy routes

const ipFamily = (f: Family): string => (f === 'ipv6' ? 'inet6' : 'inet');
const markHex = (mark: number | string): string => {
  const n = typeof mark === 'number' ? mark : /^0x/i.test(mark) ? parseInt(mark, 16) : Number(mark);
  return Number.isFinite(n) ? `0x${(n >>> 0).toString(16)}` : String(mark);
};

/** `ip rule show` lines for `fwmark M lookup T`. */
function ruleLines(shown: string, mark: number | string, table: number | string): number {
  const re = new RegExp(`\\bfwmark ${markHex(mark)}(?:/0xffffffff)?\\s.*\\blookup ${table}\\b`);
  return shown.split('\n').filter((l) => re.test(l)).length;
}

/** Whether a `-f F rule|route add ...` command's effect is already there. Undefined: cannot tell. */
async function routePresent(runner: CommandRunner, r: RouteCommand): Promise<boolean | undefined> {
  const args = [...r.args];
  const f = args[0] === '-f' ? args[1]! : ipFamily(r.family);
  const rest = args[0] === '-f' ? args.slice(2) : args;
  const [object, verb, ...spec] = rest;
  if (verb !== 'add') return undefined;
  const value = (key: string): string | undefined => {
    const i = spec.indexOf(key);
    return i === -1 ? undefined : spec[i + 1];
  };
  if (object === 'rule') {
    const mark = value('fwmark');
    const table = value('lookup') ?? value('table');
    if (mark === undefined || table === undefined || spec.length !== 4) return undefined;
    const shown = await runner.run('ip', ['-f', f, 'rule', 'show']);
    return ruleLines(shown.stdout, mark, table) > 0;
  }
  if (object === 'addr') {
    // `addr add ADDRESS dev DEV`: answers "address already assigned" when there, not "File exists".
    const dev = value('dev');
    const address = spec[0];
    if (dev === undefined || address === undefined) return undefined;
    const shown = await runner.run('ip', ['-f', f, 'addr', 'show', 'dev', dev]);
    return new RegExp(`\\binet6? ${address.replace(/[.]/g, '\\.')}\\s`).test(shown.stdout);
  }
  if (object === 'route') {
    const table = value('table');
    if (table === undefined) return undefined;
    const words = spec.filter((_, i) => spec[i] !== 'table' && spec[i - 1] !== 'table').filter((w, i) => !(i === 0 && w === 'unicast'));
    const shown = await runner.run('ip', ['-f', f, 'route', 'show', 'table', table], { allowFailure: true });
    // A table nobody used yet: "Error: ipv4: FIB table does not exist."
    if (shown.exitCode !== 0) {
      if (/table does not exist/i.test(shown.stderr)) return false;
      throw failedError('ip', ['-f', f, 'route', 'show', 'table', table], shown);
    }
    return shown.stdout.split('\n').some((line) => {
      const have = line.trim().split(/\s+/);
      let j = 0;
      for (const w of have) if (w === words[j]) j++;
      return j === words.length && have[0] === words[0];
    });
  }
  return undefined;
}

/**
 * Adds a policy route (or address) unless it is there; true when it added it. `ip rule add` is
 * checked first always (the kernel takes duplicates), `ip addr add` too (its refusal is worded
 * differently per family); `ip route add` only with `check` (else its "File exists" says so, one
 * command fewer).
 */
async function ensureRoute(runner: CommandRunner, r: RouteCommand, check: boolean): Promise<boolean> {
  if ((check || !r.args.includes('route')) && await routePresent(runner, r)) return false;
  const res = await runner.run('ip', r.args, { allowFailure: true });
  if (res.exitCode === 0) return true;
  if (/File exists/.test(res.stderr)) return false;
  throw failedError('ip', r.args, res);
}

/** The command that undoes an `add`. */
const undo = (r: RouteCommand): readonly string[] => {
  const i = r.args.indexOf('add');
  return i === -1 ? r.args : [...r.args.slice(0, i), 'del', ...r.args.slice(i + 1)];
};

async function removeRoutes(runner: CommandRunner, family: Family, mark: number | string, table: number | string): Promise<number> {
  const f = ipFamily(family);
  const shown = await runner.run('ip', ['-f', f, 'rule', 'show'], { allowFailure: true });
  if (shown.exitCode !== 0) {
    if (family === 'ipv6' && KERNEL_PATTERN.test(shown.stderr)) return 0;
    throw failedError('ip', ['-f', f, 'rule', 'show'], shown);
  }
  let removed = 0;
  for (let n = ruleLines(shown.stdout, mark, table); n > 0; n--) {
    await runner.run('ip', ['-f', f, 'rule', 'del', 'fwmark', String(mark), 'lookup', String(table)]);
    removed++;
  }
  const routes = await runner.run('ip', ['-f', f, 'route', 'show', 'table', String(table)], { allowFailure: true });
  if (routes.exitCode === 0 && routes.stdout.trim() !== '') {
    await runner.run('ip', ['-f', f, 'route', 'flush', 'table', String(table)]);
    removed += routes.stdout.trim().split('\n').length;
  }
  return removed;
}

// ---------------------------------------------------------------------------------------------
// cleaning

/**
 * The restore input that removes a family's mesh part in one transaction: per table, `-D` for our
 * rules in other chains (by the kernel's own text of the rule), then `-F` and `-X` for MESH_ chains.
 */
export function cleanInput(present: ReturnType<typeof extractMesh>): string {
  let out = '';
  const tables = [...new Set(present.map((c) => c.table))];
  for (const table of tables) {
    const chains = present.filter((c) => c.table === table);
    const lines = [
      ...chains.filter((c) => !c.own).flatMap((c) => c.raw.map((body) => `-D ${c.chain} ${body}`)),
      ...chains.filter((c) => c.own).map((c) => `-F ${c.chain}`),
      ...chains.filter((c) => c.own).map((c) => `-X ${c.chain}`),
    ];
    if (lines.length > 0) out += `*${table}\n${lines.join('\n')}\nCOMMIT\n`;
  }
  return out;
}

async function cleanFamily(runner: CommandRunner, cmds: IptablesCommands, present: ReturnType<typeof extractMesh>): Promise<number> {
  const input = cleanInput(present);
  if (input === '') return 0;
  await restore(runner, cmds, input);
  return present.reduce((n, c) => n + (c.own ? 1 : c.raw.length), 0);
}

/**
 * Removes every MESH_ chain, every rule that jumps into one, and the other mesh rules of built-in
 * chains, in every table (both families when `ipv6`), plus the TPROXY policy routes; leaves every
 * other rule alone. Succeeds when nothing is there.
 */
export async function cleanMeshRules(runner: CommandRunner, o: CleanOptions): Promise<CleanResult> {
  const families: Family[] = o.ipv6 ? ['ipv4', 'ipv6'] : ['ipv4'];
  const backend = o.backend ?? await detectBackend(runner, { ipv6: o.ipv6 });
  const resolveId = o.resolveId ?? systemIdResolver();
  const removed: Partial<Record<Family, number>> = {};
  // The families are independent: cleaned side by side.
  await Promise.all(families.map(async (family) => {
    const cmds = backend[family];
    let text: string;
    try {
      text = backend.saved[family] ?? (await runner.run(cmds.save, [])).stdout;
    } catch (err) {
      // A kernel without IPv6 (or without ip6tables): nothing of ours can be there.
      if (family === 'ipv6' && err instanceof CommandError && (err.code === 'ERR_COMMAND_NOT_FOUND' || KERNEL_PATTERN.test(err.stderr))) {
        log.debug('no IPv6 netfilter here: nothing to clean', { reason: err.message });
        return;
      }
      throw iptablesError(err, `reading the ${label(family)} rules`);
    }
    const norm = { family, resolveId };
    const expected = o.expected ? expectedBuiltinKeys(rulesOf(o.expected, family), norm) : undefined;
    const present = extractMesh(parseSave(text), expected ? { ...norm, expectedBuiltin: expected } : norm);
    try {
      removed[family] = await cleanFamily(runner, cmds, present);
    } catch (err) {
      throw iptablesError(err, `removing the ${label(family)} mesh rules`);
    }
  }));
  let routesRemoved = 0;
  if (o.routes) {
    const { mark, table } = o.routes;
    const counts = await Promise.all(families.map(async (family) => {
      try {
        return await removeRoutes(runner, family, mark, table);
      } catch (err) {
        throw iptablesError(err, `removing the ${label(family)} policy routes`);
      }
    }));
    routesRemoved = counts.reduce((a, b) => a + b, 0);
  }
  log.info('mesh rules removed', { backend: describeBackend(backend, families), ...removed, routes: routesRemoved });
  return { removed, routesRemoved };
}

// ---------------------------------------------------------------------------------------------
// applying

/** Which step of an apply failed, and how. */
class StepFailure {
  constructor(readonly doing: string, readonly err: unknown) {}
}

/** `-N CHAIN` → `:CHAIN - [0:0]`: creates the chain, or empties it when it exists (--force-apply). */
const resetChains = (input: string): string => input.replace(/^-N (\S+)$/gm, ':$1 - [0:0]');

/**
 * Applies a rule set: 'unchanged' when exactly these mesh rules are there (no restore at all),
 * 'applied' when none were, 'reconciled' when different ones were replaced (`reconcile`). Different
 * mesh rules without `reconcile` or `forceApply`: DriftError naming each differing rule. A failure
 * part-way removes what this call added and throws (ERR_IPTABLES_APPLY, _PERMISSION, _KERNEL...).
 */
export async function applyRuleSet(runner: CommandRunner, set: RuleSet, o: ApplyOptions = {}): Promise<ApplyOutcome> {
  const families = familiesOf(set);
  let backend = o.backend;
  let toApply: Family[] = families;
  let outcome: ApplyOutcome = 'applied';
  const resolveId = o.resolveId ?? systemIdResolver();

  if (!o.forceApply) {
    const check = await checkRuleSet(runner, set, { ...o, resolveId });
    backend = check.backend;
    const different = families.filter((f) => check.families[f]!.state === 'different');
    if (different.length > 0 && !o.reconcile) {
      const diff = different.flatMap((f) => check.families[f]!.diff.map((d) => ({ ...d, family: f })));
      throw new DriftError(
        `mesh rules already present differ from the ones this configuration needs (- present but not expected, `
        + `+ expected but missing); rerun with --reconcile to replace them, or --force-apply to apply on top:\n`
        + different.map((f) => formatDiff(check.families[f]!.diff, f)).join(''), diff);
    }
    if (different.length > 0) {
      log.info('mesh rules differ: removing them before applying (--reconcile)', { families: different });
      for (const f of different) {
        try {
          await cleanFamily(runner, backend[f], check.families[f]!.present);
        } catch (err) {
          throw iptablesError(err, `removing the differing ${label(f)} mesh rules (--reconcile)`);
        }
      }
      outcome = 'reconciled';
    }
    toApply = families.filter((f) => check.families[f]!.state !== 'same');
  }
  backend ??= await detectBackend(runner, { ipv6: set.ipv6 !== undefined });

  // One restore per family, the families side by side (independent tables); then the policy routes,
  // each family's in order (rule before route), the families side by side.
  const touched: Family[] = [...toApply];
  const added: RouteCommand[] = [];
  const firstFailure = async (jobs: readonly { doing: string; run: () => Promise<void> }[]): Promise<void> => {
    const results = await Promise.allSettled(jobs.map((j) => j.run()));
    const i = results.findIndex((r) => r.status === 'rejected');
    if (i !== -1) throw new StepFailure(jobs[i]!.doing, (results[i] as PromiseRejectedResult).reason);
  };
  try {
    await firstFailure(toApply.map((f) => ({
      doing: `applying the ${label(f)} rules (${backend![f].restore})`,
      run: async () => {
        const input = toRestore(rulesOf(set, f));
        if (input !== '') await restore(runner, backend![f], o.forceApply ? resetChains(input) : input);
      },
    })));
    const routeFamilies = [...new Set(set.routes.map((r) => r.family))];
    const failures: StepFailure[] = [];
    await Promise.all(routeFamilies.map(async (f) => {
      for (const r of set.routes.filter((x) => x.family === f)) {
        try {
          if (await ensureRoute(runner, r, !toApply.includes(f))) added.push(r);
        } catch (err) {
          failures.push(new StepFailure(`adding the policy route "ip ${r.args.join(' ')}"`, err));
          return;
        }
      }
    }));
    if (failures.length > 0) throw failures[0];
  } catch (failure) {
    const { doing, err } = failure instanceof StepFailure ? failure : new StepFailure('applying the rules', failure);
    const problem = iptablesError(err, doing);
    const rolledBack = await rollBack(runner, backend, set, touched, added, resolveId);
    throw new AgentError(problem.code, `${problem.message}; ${rolledBack}`, { cause: err });
  }
  if (toApply.length === 0 && added.length === 0) {
    log.info('mesh rules already in place: nothing to do', { backend: describeBackend(backend, families) });
    return 'unchanged';
  }
  log.info(`mesh rules ${outcome}`, { backend: describeBackend(backend, families), families: toApply, routes: added.length });
  return outcome;
}

/** Removes what a failed apply added; says what it did, for the error message. */
async function rollBack(runner: CommandRunner, backend: IptablesBackend, set: RuleSet, touched: readonly Family[],
  added: readonly RouteCommand[], resolveId: NonNullable<NormalizeOptions['resolveId']>): Promise<string> {
  if (touched.length === 0 && added.length === 0) return 'nothing had been applied';
  const problems: string[] = [];
  for (const r of [...added].reverse()) {
    const res = await runner.run('ip', undo(r), { allowFailure: true }).catch((e: unknown) => ({ exitCode: -1, stderr: String(e) }));
    if (res.exitCode !== 0) problems.push(`ip ${undo(r).join(' ')}: ${res.stderr.trim()}`);
  }
  for (const f of touched) {
    try {
      const text = (await runner.run(backend[f].save, [])).stdout;
      // This call's rules in built-in chains that mark nothing as ours (e.g. -c's `-i eth1 -j RETURN`)
      // are known from the rule set itself.
      const norm = { family: f, resolveId };
      const expectedBuiltin = expectedBuiltinKeys(rulesOf(set, f), norm);
      await cleanFamily(runner, backend[f], extractMesh(parseSave(text), { ...norm, expectedBuiltin }));
    } catch (err) {
      problems.push(`${label(f)}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const what = `${touched.map(label).join(' and ')} mesh rules${added.length > 0 ? ' and policy routes' : ''}`;
  return problems.length === 0
    ? `rolled back: nothing this run applied remains (${what} checked and removed)`
    : `rolling back failed too (${problems.join('; ')}): the pod may hold part of the rules, run mesh-clean-iptables`;
}

/** A mesh part as `-A` lines, for messages and tests. */
export function meshLines(chains: readonly MeshChain[]): string[] {
  return chains.flatMap((c) => c.rules.map((r) => `-A ${c.chain} ${r}`));
}
