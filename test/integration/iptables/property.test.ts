// A property test of `mesh-iptables` over a few hundred generated configurations (every rule-changing
// flag and variable of spec 4.4, both families, REDIRECT and TPROXY, DNS with IPv4/IPv6/both/no
// servers, CIDR lists of both families, owner groups: test/helpers/iptables-combos.ts), each:
//   1. what `--dry-run` prints restores cleanly, per family, for real (not `--test`: the nf_tables
//      backend's --test accepts a jump into a chain that does not exist), in a scratch namespace
//      flushed after each, and every jump into a MESH_ chain lands on a chain the same input creates;
//   2. for every APPLY_EVERY-th combo, the command for real in a namespace: applied, the second run
//      a no-op (no restore, no `ip ... add`), `--cleanup-only` leaves no rule, chain or policy route.
// Seeded: the seed is printed; replay with MESH_IPTABLES_PROPERTY_SEED=<seed> (and
// MESH_IPTABLES_PROPERTY_ONLY=<i> for one combo). Longer runs: MESH_IPTABLES_PROPERTY_RUNS=<n>,
// MESH_IPTABLES_PROPERTY_APPLY_EVERY=1 (every combo applied for real). Namespaces are made once per
// worker and reused (each check leaves them empty, and says so), and deleted at the end.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Output } from '../../../src/cli/context.js';
import { RecordingRunner } from '../../../src/exec/recording-runner.js';
import type { CommandRunner } from '../../../src/exec/runner.js';
import { setScopeLevel } from '../../../src/log/logger.js';
import type { MeshIptablesOptions } from '../../../src/iptables/options.js';
import { runMeshIptables, type IptablesIo } from '../../../src/iptables/run.js';
import { combo, describeCombo, type Combo } from '../../helpers/iptables-combos.js';
import { tempGroup } from '../../helpers/iptables-fixtures.js';
import { optionsFromArgs } from '../../helpers/iptables-options.js';
import { createNamespace, netnsSkip, SpyRunner, type Namespace } from '../../helpers/pod-netns.js';

const envNumber = (name: string, fallback: number): number => {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : fallback;
};
const SEED = envNumber('MESH_IPTABLES_PROPERTY_SEED', Math.floor(Math.random() * 2 ** 31));
const RUNS = envNumber('MESH_IPTABLES_PROPERTY_RUNS', 300);
const APPLY_EVERY = envNumber('MESH_IPTABLES_PROPERTY_APPLY_EVERY', 12);
const ONLY = process.env['MESH_IPTABLES_PROPERTY_ONLY'];
const WORKERS = 2;

const indexes = ONLY !== undefined ? [Number(ONLY)] : Array.from({ length: RUNS }, (_, i) => i);
const replay = (i: number): string => `replay: MESH_IPTABLES_PROPERTY_SEED=${SEED} MESH_IPTABLES_PROPERTY_ONLY=${i}`;

/** The command's side effects for a generated pod: its addresses and resolv.conf, commands through `runner`. */
function podIo(c: Combo, runner: CommandRunner, out: string[] = []): IptablesIo {
  const stdout: Output = { write: (chunk) => { out.push(String(chunk)); return true; } };
  return {
    stdout,
    readFile: (path) => (path === '/etc/resolv.conf' ? c.resolvConf : undefined),
    writeFile: () => undefined,
    localAddresses: () => c.addresses,
    runner: () => runner,
  };
}

/** The combo's options; parsing configures logging anew, so the command's own log is silenced after. */
function options(c: Combo, ...extra: string[]): MeshIptablesOptions {
  const o = optionsFromArgs(['mesh-iptables', ...c.args, ...extra], { ...c.env });
  setScopeLevel('iptables', 'none');
  return o;
}

/** The `--dry-run` output's restore inputs, keyed by the program its comment names. */
function restoreInputs(printed: string): Map<string, string> {
  const out = new Map<string, string>();
  let program: string | undefined;
  for (const line of printed.split('\n')) {
    const m = /^# (ip6?tables-restore) --noflush$/.exec(line);
    if (m) program = m[1];
    else if (line.startsWith('#')) program = undefined;
    else if (program && line !== '') out.set(program, `${out.get(program) ?? ''}${line}\n`);
  }
  return out;
}

/** Jumps into MESH_ chains that the same restore input does not create (per table). */
function danglingJumps(input: string): string[] {
  const created = new Set<string>();
  const jumps: [string, string, string][] = [];
  let table = '';
  for (const line of input.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1);
    const n = /^-N (\S+)$/.exec(line);
    if (n) created.add(`${table} ${n[1]}`);
    const j = /\s-j (MESH_\S+)/.exec(line);
    if (j) jumps.push([table, j[1]!, line]);
  }
  return jumps.filter(([t, chain]) => !created.has(`${t} ${chain}`)).map(([t, , line]) => `${t}: ${line}`);
}

/**
 * Appended to each restore input (same run, --noflush): empties every table again (`-F` all
 * chains, then `-X` all user chains), so the scratch namespace is ready for the next combo after
 * one program run instead of two.
 */
const FLUSH = ['filter', 'nat', 'mangle', 'raw'].map((t) => `*${t}\n-F\n-X\nCOMMIT\n`).join('');

/** Runs a restore program inside the namespace (plain spawn: a few hundred of these, execa's cost adds up). */
function restoreIn(ns: Namespace, program: string, input: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', ns.name, program, '--noflush'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stderr }));
    child.stdin.end(input);
  });
}

/** Nothing of any rule set left: no rule, no user chain, in either family; no policy rule. */
function assertEmpty(ns: Namespace, what: string): void {
  for (const save of ['iptables-save', 'ip6tables-save']) {
    const text = ns.exec(save, []).stdout;
    assert.doesNotMatch(text, /^-A |^:MESH_|MESH_/m, `${what}: ${save} shows rules or mesh chains:\n${text}`);
  }
  for (const f of ['inet', 'inet6']) {
    assert.doesNotMatch(ns.exec('ip', ['-f', f, 'rule', 'show']).stdout, /fwmark/, `${what}: an ${f} fwmark rule is left`);
  }
}

type Scratch = Namespace & { close(): void };

/**
 * Runs `job` over `items`, one worker per namespace of `spaces`, each job on a namespace no other job
 * uses meanwhile. A job may replace its worker's namespace (`spaces[w]`), e.g. after a failure.
 */
async function onWorkers<T>(spaces: Scratch[], items: readonly T[], job: (w: number, item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(spaces.map(async (_, w) => {
    while (next < items.length) await job(w, items[next++]!);
  }));
}

describe(`mesh-iptables over generated configurations (seed ${SEED}, ${indexes.length} combos)`, { skip: netnsSkip }, () => {
  let group: ReturnType<typeof tempGroup>;
  const spaces: Scratch[] = [];
  before(() => {
    group = tempGroup();
    for (let i = 0; i < WORKERS; i++) spaces.push(createNamespace());
  });
  after(() => {
    for (const ns of spaces) ns.close();
    group?.remove();
    setScopeLevel('iptables', 'info');
  });

  it('what --dry-run prints restores for real, every jump landing on a chain the input creates', async (t) => {
    t.diagnostic(`seed ${SEED}; ${replay(0).replace(/=0$/, '=<i>')}`);
    const failures: string[] = [];
    await onWorkers(spaces, indexes, async (w, i) => {
      const ns = spaces[w]!;
      const c = combo(SEED, i, group.name);
      const out: string[] = [];
      await runMeshIptables(options(c, '--dry-run'), podIo(c, new RecordingRunner(), out));
      const inputs = restoreInputs(out.join(''));
      const problems: string[] = [];
      if (!inputs.has('iptables-restore')) problems.push('no IPv4 restore input printed');
      for (const [program, input] of inputs) {
        for (const d of danglingJumps(input)) problems.push(`${program}: jump into a chain it never creates: ${d}`);
        const r = await restoreIn(ns, program, input + FLUSH);
        if (r.code !== 0) {
          problems.push(`${program}: exit ${r.code}: ${r.stderr.trim()}\n${input}`);
          // The tables committed before the failing line stay: empty them.
          const flushed = await restoreIn(ns, program, FLUSH);
          assert.equal(flushed.code, 0, `emptying the scratch namespace: ${flushed.stderr}`);
        }
      }
      if (problems.length > 0) failures.push(`#${i} ${describeCombo(c)}\n  ${problems.join('\n  ')}\n  ${replay(i)}`);
    });
    for (const ns of spaces) assertEmpty(ns, 'the scratch namespaces after the restores');
    assert.deepEqual(failures, [], `${failures.length} of ${indexes.length} configurations failed (seed ${SEED})`);
  });

  it(`applied for real (every ${APPLY_EVERY}th combo): a second run is a no-op, --cleanup-only leaves nothing`, async (t) => {
    const applied = indexes.filter((i) => ONLY !== undefined || i % APPLY_EVERY === 0);
    t.diagnostic(`${applied.length} combos applied for real`);
    const failures: string[] = [];
    await onWorkers(spaces, applied, async (w, i) => {
      const ns = spaces[w]!;
      const c = combo(SEED, i, group.name);
      const where = `#${i} ${describeCombo(c)}\n  ${replay(i)}`;
      try {
        await runMeshIptables(options(c), podIo(c, ns.runner));
        const spy = new SpyRunner(ns.runner);
        await runMeshIptables(options(c), podIo(c, spy));
        const changed = spy.calls.filter((x) => /-restore$/.test(x.command) || (x.command === 'ip' && x.args.includes('add')));
        assert.deepEqual(changed.map((x) => `${x.command} ${x.args.join(' ')}`), [], 'the second run changed something');
        await runMeshIptables(options(c, '--cleanup-only'), podIo(c, ns.runner));
        assertEmpty(ns, 'after --cleanup-only');
      } catch (err) {
        failures.push(`${where}\n  ${err instanceof Error ? err.message : String(err)}`);
        // Whatever it left, the next combo gets an empty namespace.
        ns.close();
        spaces[w] = createNamespace();
      }
    });
    assert.deepEqual(failures, [], `${failures.length} of ${applied.length} configurations failed (seed ${SEED})`);
  });
});
