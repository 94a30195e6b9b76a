// applyRuleSet and cleanMeshRules against the real kernel, each test in namespaces of its own: apply
// and read back chain by chain; apply twice (no restore the second time); drift with and without
// reconcile; clean-up that leaves every other rule byte for byte; roll-back of a failure part-way;
// backend detection; the errors for no permission and no iptables.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ExecaRunner } from '../../../src/exec/execa-runner.js';
import type { CommandResult, CommandRunner, RunOptions } from '../../../src/exec/runner.js';
import { AgentError } from '../../../src/errors/agent-error.js';
import { applyRuleSet, cleanMeshRules, DriftError, systemIdResolver } from '../../../src/iptables/apply.js';
import { detectBackend } from '../../../src/iptables/backend.js';
import type { Family, RuleSet } from '../../../src/iptables/rules.js';
import { expectedMesh, extractMesh, parseSave, type MeshChain } from '../../../src/iptables/save-parse.js';
import {
  fixtureCases, fixtureRuleSet, fixtureText, haveFixtures, tempGroup, tproxyRoutes,
} from '../../helpers/iptables-fixtures.js';
import { createNamespace, netnsSkip, SpyRunner, type Namespace } from '../../helpers/pod-netns.js';

const skip = netnsSkip || (!haveFixtures && 'no ../shared/fixtures');
const byChain = (chains: readonly MeshChain[]): Record<string, readonly string[]> =>
  Object.fromEntries(chains.map((c) => [`${c.table} ${c.chain}`, c.rules]));
const saveCmd = (f: Family): string => (f === 'ipv6' ? 'ip6tables-save' : 'iptables-save');
const families = (set: RuleSet): Family[] => (set.ipv6 ? ['ipv4', 'ipv6'] : ['ipv4']);

/** The kernel's rules of a family, without the comment lines (they carry a time). */
function saved(ns: Namespace, f: Family): string {
  return ns.exec(saveCmd(f), []).stdout.split('\n').filter((l) => !l.startsWith('#')).join('\n');
}

/** Asserts the kernel holds exactly the rule set's mesh rules, chain by chain, in order, to the byte. */
function assertApplied(ns: Namespace, set: RuleSet): void {
  const resolveId = systemIdResolver();
  for (const f of families(set)) {
    const rules = f === 'ipv6' ? set.ipv6! : set.ipv4;
    const got = extractMesh(parseSave(saved(ns, f)), { family: f, resolveId });
    assert.deepEqual(byChain(got), byChain(expectedMesh(rules, { family: f, resolveId })), `${f} mesh rules`);
    for (const c of got) assert.deepEqual(c.raw, c.rules, `${f} ${c.chain}: kernel text = canonical form`);
  }
}

/**
 * The save text without tables that hold nothing (no rule, no user chain, default policies): a
 * table the mesh created stays behind, empty, after clean-up (iptables has no command to drop one).
 */
function withoutEmptyTables(text: string): string {
  return text.split(/(?=^\*)/m).filter((block) => !block.startsWith('*')
    || /^-A |^:\S+ - /m.test(block) || /^:\S+ (DROP|REJECT)/m.test(block)).join('');
}

function assertNoMesh(ns: Namespace, f: Family): void {
  const text = saved(ns, f);
  assert.doesNotMatch(text, /MESH_/, `${f}: no MESH_ chain or jump left`);
  assert.deepEqual(extractMesh(parseSave(text)), [], `${f}: no mesh rule left`);
}

const ipRules = (ns: Namespace, fam: 'inet' | 'inet6' = 'inet'): string => ns.exec('ip', ['-f', fam, 'rule', 'show']).stdout;
/** Routes of table 133 ('' also when the table does not exist). */
const ipTable = (ns: Namespace, fam: 'inet' | 'inet6' = 'inet'): string =>
  ns.exec('ip', ['-f', fam, 'route', 'show', 'table', '133'], { allowFailure: true }).stdout;

describe('applyRuleSet on each fixture', { skip }, () => {
  let group: ReturnType<typeof tempGroup>;
  before(() => { group = tempGroup(); });
  after(() => group?.remove());

  for (const c of fixtureCases()) {
    it(`${c.name}: applied, read back chain by chain, unchanged the second time, cleaned`, async () => {
      const ns = createNamespace();
      try {
        const set = fixtureRuleSet(c, group.name);
        const first = new SpyRunner(ns.runner);
        assert.equal(await applyRuleSet(first, set), 'applied');
        const restores = first.calls.filter((x) => /tables(-nft|-legacy)?-restore$/.test(x.command));
        assert.equal(restores.length, families(set).length, 'one restore per family');
        for (const r of restores) assert.ok(r.args.includes('-w') && r.args.includes('--noflush'), r.args.join(' '));
        assertApplied(ns, set);
        if (set.routes.length > 0) {
          assert.match(ipRules(ns), /fwmark 0x539 lookup 133/);
          assert.match(ipTable(ns), /^local default dev lo/m);
        }

        const second = new SpyRunner(ns.runner);
        assert.equal(await applyRuleSet(second, set), 'unchanged');
        assert.equal(second.calls.filter((x) => /-restore$/.test(x.command)).length, 0, 'no restore');
        assert.equal(second.calls.filter((x) => x.args.includes('add')).length, 0, 'no route added');
        assertApplied(ns, set);
        assert.equal(ipRules(ns).split('\n').filter((l) => /fwmark/.test(l)).length, set.routes.length > 0 ? 1 : 0);

        const cleaned = await cleanMeshRules(ns.runner, { ipv6: set.ipv6 !== undefined, routes: { mark: 1337, table: 133 } });
        assert.ok((cleaned.removed.ipv4 ?? 0) > 0);
        for (const f of families(set)) assertNoMesh(ns, f);
        assert.doesNotMatch(ipRules(ns), /fwmark/);
        assert.equal(ipTable(ns).trim(), '');
      } finally {
        ns.close();
      }
    });
  }
});

describe('drift', { skip }, () => {
  const c = fixtureCases().find((x) => x.name === 'empty');
  it('a changed mesh rule fails with a diff naming it; --reconcile fixes it; --force-apply applies on top', async () => {
    const ns = createNamespace();
    try {
      const set = fixtureRuleSet(c!);
      assert.equal(await applyRuleSet(ns.runner, set), 'applied');
      // Someone replaces rule 3 of MESH_OUTPUT and adds a second jump into it.
      ns.exec('iptables', ['-w', '-t', 'nat', '-R', 'MESH_OUTPUT', '3', '-o', 'lo', '-m', 'owner', '!', '--uid-owner', '1338', '-j', 'RETURN']);
      ns.exec('iptables', ['-w', '-t', 'nat', '-A', 'OUTPUT', '-j', 'MESH_OUTPUT']);
      const before = saved(ns, 'ipv4');

      const err = await applyRuleSet(ns.runner, set).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof DriftError, String(err));
      assert.equal(err.code, 'ERR_IPTABLES_DRIFT');
      assert.equal(err.exitCode, 1);
      assert.match(err.message, /^ipv4 table nat:$/m);
      assert.match(err.message, /^ {2}- -A OUTPUT -j MESH_OUTPUT$/m);
      assert.match(err.message, /^ {2}- -A MESH_OUTPUT -o lo -m owner ! --uid-owner 1338 -j RETURN$/m);
      assert.match(err.message, /^ {2}\+ -A MESH_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN$/m);
      assert.match(err.message, /--reconcile/);
      assert.deepEqual(err.diff.map((d) => `${d.op} ${d.chain} ${d.body}`), [
        '- OUTPUT -j MESH_OUTPUT',
        '- MESH_OUTPUT -o lo -m owner ! --uid-owner 1338 -j RETURN',
        '+ MESH_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN',
      ]);
      assert.equal(saved(ns, 'ipv4'), before, 'a drift error changes nothing');

      assert.equal(await applyRuleSet(ns.runner, set, { reconcile: true }), 'reconciled');
      assertApplied(ns, set);
      assert.equal(await applyRuleSet(ns.runner, set), 'unchanged');

      // --force-apply: no check; MESH_ chains are reset to the expected rules, the jump appended again.
      ns.exec('iptables', ['-w', '-t', 'nat', '-D', 'MESH_OUTPUT', '1']);
      assert.equal(await applyRuleSet(ns.runner, set, { forceApply: true }), 'applied');
      const got = byChain(extractMesh(parseSave(saved(ns, 'ipv4'))));
      const want = byChain(expectedMesh(set.ipv4));
      assert.deepEqual(got['nat MESH_OUTPUT'], want['nat MESH_OUTPUT']);
      assert.deepEqual(got['nat OUTPUT'], ['-j MESH_OUTPUT', '-j MESH_OUTPUT']);
    } finally {
      ns.close();
    }
  });
});

/** Rules of someone else's, in every table, both families, including a user chain. */
const FOREIGN_V4 = `*filter
:APP_CHAIN - [0:0]
-A OUTPUT -p udp --dport 9999 -j ACCEPT
-A INPUT -j APP_CHAIN
-A APP_CHAIN -s 10.9.0.0/16 -m comment --comment "app rule" -j DROP
COMMIT
*mangle
-A PREROUTING -m mark --mark 0x7 -j RETURN
-A OUTPUT -p tcp --dport 5000 -j MARK --set-mark 9
COMMIT
*nat
:APP_NAT - [0:0]
-A OUTPUT -p tcp --dport 8080 -j APP_NAT
-A APP_NAT -p tcp -j REDIRECT --to-ports 8081
-A PREROUTING -p tcp --dport 8443 -j REDIRECT --to-ports 8444
COMMIT
*raw
-A OUTPUT -p udp --dport 5353 -j CT --notrack
COMMIT
`;
const FOREIGN_V6 = `*filter
:APP_CHAIN - [0:0]
-A OUTPUT -p udp --dport 9999 -j ACCEPT
-A APP_CHAIN -s fd00:9::/64 -j DROP
COMMIT
*nat
-A OUTPUT -p tcp --dport 8080 -j REDIRECT --to-ports 8081
COMMIT
`;

describe('clean-up', { skip }, () => {
  for (const name of ['dns-uid-gid', 'inbound-ports-wildcard-tproxy']) {
    it(`${name}: leaves exactly the other rules, byte for byte`, async () => {
      const ns = createNamespace();
      try {
        ns.exec('iptables-restore', ['-w', '--noflush'], { input: FOREIGN_V4 });
        ns.exec('ip6tables-restore', ['-w', '--noflush'], { input: FOREIGN_V6 });
        const before = { ipv4: saved(ns, 'ipv4'), ipv6: saved(ns, 'ipv6') };
        const set = fixtureRuleSet(fixtureCases().find((x) => x.name === name)!);
        assert.equal(await applyRuleSet(ns.runner, set), 'applied');
        assertApplied(ns, set);
        assert.notEqual(saved(ns, 'ipv4'), before.ipv4);

        const spy = new SpyRunner(ns.runner);
        await cleanMeshRules(spy, { ipv6: true, routes: { mark: 1337, table: 133 } });
        assert.ok(spy.calls.filter((x) => /-restore$/.test(x.command)).length <= 2, 'one restore per family at most');
        assert.equal(withoutEmptyTables(saved(ns, 'ipv4')), withoutEmptyTables(before.ipv4));
        assert.equal(withoutEmptyTables(saved(ns, 'ipv6')), withoutEmptyTables(before.ipv6));
        assert.match(saved(ns, 'ipv4'), /^-A APP_CHAIN -s 10\.9\.0\.0\/16 -m comment --comment "app rule" -j DROP$/m);
        assert.doesNotMatch(ipRules(ns), /fwmark/);
      } finally {
        ns.close();
      }
    });
  }

  it('succeeds when nothing is there, and restores nothing', async () => {
    const ns = createNamespace();
    try {
      ns.exec('iptables-restore', ['-w', '--noflush'], { input: FOREIGN_V4 });
      const before = saved(ns, 'ipv4');
      const spy = new SpyRunner(ns.runner);
      const r = await cleanMeshRules(spy, { ipv6: true, routes: { mark: 1337, table: 133 } });
      assert.deepEqual(r, { removed: { ipv4: 0, ipv6: 0 }, routesRemoved: 0 });
      assert.equal(spy.calls.filter((x) => /-restore$/.test(x.command)).length, 0);
      assert.equal(saved(ns, 'ipv4'), before);
    } finally {
      ns.close();
    }
  });

  it('removes the TPROXY mark rules of another mark too (recognised by shape), and duplicates', async () => {
    const ns = createNamespace();
    try {
      const text = fixtureText('inbound-ports-wildcard-tproxy', 'v4')!.replaceAll('1337', '4242').replaceAll('1338', '4243');
      ns.exec('iptables-restore', ['-w', '--noflush'], { input: text });
      ns.exec('iptables', ['-w', '-t', 'nat', '-A', 'OUTPUT', '-j', 'MESH_OUTPUT']);
      await cleanMeshRules(ns.runner, { ipv6: false });
      assertNoMesh(ns, 'ipv4');
      assert.doesNotMatch(saved(ns, 'ipv4'), /^-A /m, 'nothing at all is left');
    } finally {
      ns.close();
    }
  });
});

describe('a failure part-way leaves nothing applied', { skip }, () => {
  const base = (): RuleSet => fixtureRuleSet(fixtureCases().find((x) => x.name === 'ipv6-inbound-ports')!);

  it('IPv6 restore fails after IPv4 succeeded: IPv4 rolled back', async () => {
    const ns = createNamespace();
    try {
      const good = base();
      const set: RuleSet = { ...good, ipv6: [...good.ipv6!, { table: 'nat', chain: 'MESH_OUTPUT', args: ['-p', 'tcp', '--dport', '99999', '-j', 'RETURN'] }] };
      const err = await applyRuleSet(ns.runner, set).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AgentError, String(err));
      assert.equal(err.code, 'ERR_IPTABLES_APPLY');
      assert.match(err.message, /applying the IPv6 rules \(ip6tables(-nft|-legacy)?-restore\)/);
      assert.match(err.message, /99999/);
      assert.match(err.message, /rolled back/);
      assertNoMesh(ns, 'ipv4');
      assertNoMesh(ns, 'ipv6');
    } finally {
      ns.close();
    }
  });

  it('a policy route fails: the rules and the routes added before are removed', async () => {
    const ns = createNamespace();
    try {
      const good = fixtureRuleSet(fixtureCases().find((x) => x.name === 'inbound-ports-wildcard-tproxy')!);
      const set: RuleSet = { ...good, routes: [...tproxyRoutes(1337, 133).slice(0, 1),
        { family: 'ipv4', args: ['-f', 'inet', 'route', 'add', 'local', 'default', 'dev', 'nosuchdev0', 'table', '133'] }] };
      const err = await applyRuleSet(ns.runner, set).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AgentError, String(err));
      assert.equal(err.code, 'ERR_IPTABLES_APPLY');
      assert.match(err.message, /adding the policy route "ip -f inet route add local default dev nosuchdev0 table 133"/);
      assert.match(err.message, /rolled back/);
      assertNoMesh(ns, 'ipv4');
      assert.doesNotMatch(ipRules(ns), /fwmark/);
    } finally {
      ns.close();
    }
  });
});

describe('backend', { skip }, () => {
  it('nothing anywhere: the iptables on the PATH; legacy rules: legacy; nft rules: nft', async () => {
    const ns = createNamespace();
    try {
      assert.equal((await detectBackend(ns.runner, { ipv6: true })).flavor, 'default');
      ns.exec('iptables-nft', ['-w', '-A', 'OUTPUT', '-j', 'ACCEPT']);
      const nft = await detectBackend(ns.runner, { ipv6: true });
      assert.equal(nft.flavor, 'nft');
      assert.equal(nft.ipv4.restore, 'iptables-nft-restore');
      assert.equal(nft.ipv6.save, 'ip6tables-nft-save');
      ns.exec('ip6tables-legacy', ['-w', '-A', 'OUTPUT', '-j', 'ACCEPT']);
      const legacy = await detectBackend(ns.runner, { ipv6: true });
      assert.equal(legacy.flavor, 'legacy');
      assert.match(legacy.reason, /legacy backend already has rules \(ipv6\)/);
    } finally {
      ns.close();
    }
  });

  it('applies through the legacy backend when it holds the pod\'s rules', async () => {
    const ns = createNamespace();
    try {
      ns.exec('iptables-legacy', ['-w', '-t', 'filter', '-A', 'OUTPUT', '-p', 'udp', '--dport', '9999', '-j', 'ACCEPT']);
      const set = fixtureRuleSet(fixtureCases().find((x) => x.name === 'inbound-ports-include')!);
      assert.equal(await applyRuleSet(ns.runner, set), 'applied');
      const legacy = ns.exec('iptables-legacy-save', []).stdout;
      assert.match(legacy, /^-A PREROUTING -p tcp -j MESH_INBOUND$/m);
      assert.doesNotMatch(ns.exec('iptables-nft-save', []).stdout, /MESH_/);
      assert.equal(await applyRuleSet(ns.runner, set), 'unchanged');
      await cleanMeshRules(ns.runner, { ipv6: false });
      assert.doesNotMatch(ns.exec('iptables-legacy-save', []).stdout, /MESH_/);
      assert.match(ns.exec('iptables-legacy-save', []).stdout, /--dport 9999 -j ACCEPT/);
    } finally {
      ns.close();
    }
  });
});

/** Runs every command inside the namespace as nobody, without capabilities. */
class UnprivilegedRunner implements CommandRunner {
  readonly #inner = new ExecaRunner();
  constructor(readonly ns: string) {}
  run(command: string, args: readonly string[], o?: RunOptions): Promise<CommandResult> {
    return this.#inner.run('ip', ['netns', 'exec', this.ns, 'setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
      '--inh-caps=-all', '--bounding-set=-all', command, ...args], o);
  }
}

/** Pretends iptables is not installed: the programs are looked up under names that do not exist. */
class NoIptablesRunner implements CommandRunner {
  constructor(readonly inner: CommandRunner) {}
  run(command: string, args: readonly string[], o?: RunOptions): Promise<CommandResult> {
    return this.inner.run(command.replace(/^(ip6?tables)/, 'pa-absent-$1'), args, o);
  }
}

describe('environment errors, before anything is applied', { skip }, () => {
  const set = (): RuleSet => fixtureRuleSet(fixtureCases().find((x) => x.name === 'empty')!);

  it('no CAP_NET_ADMIN: ERR_IPTABLES_PERMISSION, exit 1, saying so', async () => {
    const ns = createNamespace();
    try {
      const err = await applyRuleSet(new UnprivilegedRunner(ns.name), set()).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AgentError, String(err));
      assert.equal(err.code, 'ERR_IPTABLES_PERMISSION');
      assert.equal(err.exitCode, 1);
      assert.match(err.message, /NET_ADMIN/);
      assertNoMesh(ns, 'ipv4');
    } finally {
      ns.close();
    }
  });

  it('no iptables: ERR_IPTABLES_UNAVAILABLE, "install iptables"', async () => {
    const ns = createNamespace();
    try {
      const err = await applyRuleSet(new NoIptablesRunner(ns.runner), set()).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AgentError, String(err));
      assert.equal(err.code, 'ERR_IPTABLES_UNAVAILABLE');
      assert.match(err.message, /not found.*install iptables/);
      const clean = await cleanMeshRules(new NoIptablesRunner(ns.runner), { ipv6: false }).then(() => undefined, (e: unknown) => e);
      assert.ok(clean instanceof AgentError && clean.code === 'ERR_IPTABLES_UNAVAILABLE', String(clean));
    } finally {
      ns.close();
    }
  });
});

