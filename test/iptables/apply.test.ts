// The applier's decisions with a scripted runner (no kernel): what it runs, in which order, and how
// it names failures. The same paths against the real kernel: test/integration/iptables/apply.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CommandError, failedError, notFoundError } from '../../src/exec/command-error.js';
import { RecordingRunner, type RecordedCall } from '../../src/exec/recording-runner.js';
import type { CommandResult } from '../../src/exec/runner.js';
import { AgentError } from '../../src/errors/agent-error.js';
import { applyRuleSet, cleanInput, cleanMeshRules, DriftError, iptablesError } from '../../src/iptables/apply.js';
import { fixedBackend } from '../../src/iptables/backend.js';
import type { RuleSet } from '../../src/iptables/rules.js';
import { extractMesh, parseRestore, parseSave } from '../../src/iptables/save-parse.js';

const RULES = `*nat
-N MESH_INBOUND
-N MESH_OUTPUT
-A MESH_INBOUND -p tcp --dport 15008 -j RETURN
-A OUTPUT -j MESH_OUTPUT
-A MESH_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN
COMMIT
`;
const SAVED_SAME = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:MESH_INBOUND - [0:0]
:MESH_OUTPUT - [0:0]
-A OUTPUT -p udp -m udp --dport 9999 -j ACCEPT
-A OUTPUT -j MESH_OUTPUT
-A MESH_INBOUND -p tcp -m tcp --dport 15008 -j RETURN
-A MESH_OUTPUT -s 127.0.0.6/32 -o lo -j RETURN
COMMIT
`;
const set: RuleSet = { ipv4: parseRestore(RULES), routes: [] };
const backend = fixedBackend('nft');
const resolveId = (): undefined => undefined;

/** A runner whose iptables-save prints `state[family]` and whose other commands answer `answer(call)`. */
function scripted(state: { ipv4: string; ipv6?: string }, answer: (c: RecordedCall) => Partial<CommandResult> | undefined = () => undefined): RecordingRunner {
  return new RecordingRunner((c) => {
    if (c.command === 'iptables-nft-save') return { stdout: state.ipv4 };
    if (c.command === 'ip6tables-nft-save') return { stdout: state.ipv6 ?? '' };
    return answer(c);
  });
}

describe('applyRuleSet (scripted)', () => {
  it('nothing there: one restore per family with the restore input, -w and --noflush', async () => {
    const r = scripted({ ipv4: '*nat\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n' });
    assert.equal(await applyRuleSet(r, set, { backend, resolveId }), 'applied');
    assert.deepEqual(r.calls.map((c) => c.command), ['iptables-nft-save', 'iptables-nft-restore']);
    assert.deepEqual(r.calls[1]!.args, ['-w', '30', '--noflush']);
    assert.equal(r.calls[1]!.input, RULES);
  });

  it('the same rules there (in the kernel\'s form, among others): unchanged, no restore', async () => {
    const r = scripted({ ipv4: SAVED_SAME });
    assert.equal(await applyRuleSet(r, set, { backend, resolveId }), 'unchanged');
    assert.deepEqual(r.calls.map((c) => c.command), ['iptables-nft-save']);
  });

  it('different rules: DriftError with the diff; nothing run after the read', async () => {
    const r = scripted({ ipv4: SAVED_SAME.replace('-s 127.0.0.6/32', '-s 127.0.0.7/32') });
    const err = await applyRuleSet(r, set, { backend, resolveId }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof DriftError);
    assert.equal(err.exitCode, 1);
    assert.match(err.message, /\n {2}- -A MESH_OUTPUT -s 127\.0\.0\.7\/32 -o lo -j RETURN\n {2}\+ -A MESH_OUTPUT -s 127\.0\.0\.6\/32 -o lo -j RETURN\n/);
    assert.deepEqual(r.calls.map((c) => c.command), ['iptables-nft-save']);
  });

  it('reconcile: one restore removing ours (-D by the kernel\'s text, -F, -X), then one applying', async () => {
    const r = scripted({ ipv4: SAVED_SAME.replace('-s 127.0.0.6/32', '-s 127.0.0.7/32') });
    assert.equal(await applyRuleSet(r, set, { backend, resolveId, reconcile: true }), 'reconciled');
    assert.deepEqual(r.calls.map((c) => c.command), ['iptables-nft-save', 'iptables-nft-restore', 'iptables-nft-restore']);
    assert.equal(r.calls[1]!.input, '*nat\n-D OUTPUT -j MESH_OUTPUT\n-F MESH_INBOUND\n-F MESH_OUTPUT\n-X MESH_INBOUND\n-X MESH_OUTPUT\nCOMMIT\n');
    assert.equal(r.calls[2]!.input, RULES);
  });

  it('forceApply: no read; chains declared so that existing ones are emptied', async () => {
    const r = scripted({ ipv4: SAVED_SAME });
    assert.equal(await applyRuleSet(r, set, { backend, resolveId, forceApply: true }), 'applied');
    assert.deepEqual(r.calls.map((c) => c.command), ['iptables-nft-restore']);
    assert.match(r.calls[0]!.input!, /^:MESH_INBOUND - \[0:0\]\n:MESH_OUTPUT - \[0:0\]\n/m);
  });

  it('IPv6 restore fails: the IPv4 rules are removed again and the error says both', async () => {
    let applied = false;
    const r = new RecordingRunner((c) => {
      if (c.command === 'iptables-nft-save') return { stdout: applied ? SAVED_SAME : '' };
      if (c.command === 'ip6tables-nft-save') return { stdout: '' };
      if (c.command === 'iptables-nft-restore') { applied = !c.input!.includes('-X'); return undefined; }
      if (c.command === 'ip6tables-nft-restore') return { exitCode: 2, stderr: 'ip6tables-nft-restore: line 4 failed: Bad argument\n' };
      return undefined;
    });
    const err = await applyRuleSet(r, { ...set, ipv6: set.ipv4 }, { backend, resolveId }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof AgentError);
    assert.equal(err.code, 'ERR_IPTABLES_APPLY');
    assert.match(err.message, /^applying the IPv6 rules \(ip6tables-nft-restore\): .*line 4 failed: Bad argument.*; rolled back: nothing this run applied remains/);
    assert.equal(applied, false, 'the IPv4 rules were removed');
    const clean = r.calls.filter((c) => c.command === 'iptables-nft-restore')[1]!;
    assert.match(clean.input!, /^-D OUTPUT -j MESH_OUTPUT$/m);
  });

  it('routes: added when missing, left when there (ip rule is not idempotent: it is checked first)', async () => {
    const routes = [
      { family: 'ipv4' as const, args: ['-f', 'inet', 'rule', 'add', 'fwmark', '1337', 'lookup', '133'] },
      { family: 'ipv4' as const, args: ['-f', 'inet', 'route', 'add', 'local', 'default', 'dev', 'lo', 'table', '133'] },
    ];
    const r = scripted({ ipv4: SAVED_SAME }, (c) => {
      if (c.args.join(' ') === '-f inet rule show') return { stdout: '0:\tfrom all lookup local\n32765:\tfrom all fwmark 0x539 lookup 133\n' };
      if (c.args.join(' ') === '-f inet route show table 133') return { stdout: '' };
      return undefined;
    });
    assert.equal(await applyRuleSet(r, { ...set, routes }, { backend, resolveId }), 'applied');
    assert.deepEqual(r.lines().filter((l) => l.startsWith('ip ')), [
      'ip -f inet rule show',
      'ip -f inet route show table 133',
      'ip -f inet route add local default dev lo table 133',
    ]);
  });
});

describe('cleanMeshRules (scripted)', () => {
  it('one restore for the family, then the policy routes, each rule line as many times as present', async () => {
    const r = scripted({ ipv4: SAVED_SAME, ipv6: '' }, (c) => {
      if (c.args.join(' ') === '-f inet rule show') return { stdout: '32764:\tfrom all fwmark 0x539 lookup 133\n32765:\tfrom all fwmark 0x539 lookup 133\n' };
      if (c.args.join(' ') === '-f inet route show table 133') return { stdout: 'local default dev lo scope host \n' };
      return undefined;
    });
    const res = await cleanMeshRules(r, { ipv6: true, routes: { mark: 1337, table: 133 }, backend, resolveId });
    assert.deepEqual(res, { removed: { ipv4: 3, ipv6: 0 }, routesRemoved: 3 });
    // The families run side by side: each one's commands in order.
    const of = (re: RegExp): string[] => r.lines().filter((l) => re.test(l));
    assert.deepEqual(of(/^iptables|^ip -f inet /), [
      'iptables-nft-save', 'iptables-nft-restore -w 30 --noflush',
      'ip -f inet rule show', 'ip -f inet rule del fwmark 1337 lookup 133', 'ip -f inet rule del fwmark 1337 lookup 133',
      'ip -f inet route show table 133', 'ip -f inet route flush table 133',
    ]);
    assert.deepEqual(of(/^ip6tables|^ip -f inet6 /), ['ip6tables-nft-save', 'ip -f inet6 rule show', 'ip -f inet6 route show table 133']);
    assert.equal(r.calls.length, 10);
  });

  it('cleanInput: -D for rules in other chains, then -F and -X for MESH_ chains, per table', () => {
    const present = extractMesh(parseSave(SAVED_SAME));
    assert.equal(cleanInput(present), '*nat\n-D OUTPUT -j MESH_OUTPUT\n-F MESH_INBOUND\n-F MESH_OUTPUT\n-X MESH_INBOUND\n-X MESH_OUTPUT\nCOMMIT\n');
    assert.equal(cleanInput([]), '');
  });
});

describe('iptablesError: which of missing, not permitted, kernel', () => {
  const failure = (stderr: string): CommandError => failedError('iptables-restore', ['--noflush'], { stdout: '', stderr, exitCode: 2 });
  const cases: [string, CommandError, string, RegExp][] = [
    ['no binary', notFoundError('iptables-restore', []), 'ERR_IPTABLES_UNAVAILABLE', /iptables-restore not found: install iptables/],
    ['no ip', notFoundError('ip', []), 'ERR_COMMAND_NOT_FOUND', /ip not found: install iproute2/],
    ['nft without root', failure('iptables-restore v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)\n'),
      'ERR_IPTABLES_PERMISSION', /not permitted.*NET_ADMIN.*you must be root/],
    ['legacy without root', failure('iptables-restore v1.8.9 (legacy): can\'t initialize iptables table `nat\': Permission denied (you must be root)\n'),
      'ERR_IPTABLES_PERMISSION', /NET_ADMIN/],
    ['EPERM', failure('iptables-restore: Operation not permitted\n'), 'ERR_IPTABLES_PERMISSION', /NET_ADMIN/],
    ['no TPROXY module', failure("iptables-restore v1.8.9 (legacy): Couldn't load target `TPROXY':No such file or directory\n\nError occurred at line: 9\nTry `iptables-restore -h' or 'iptables-restore --help' for more information.\n"),
      'ERR_IPTABLES_KERNEL', /kernel lacks.*Couldn't load target `TPROXY'/],
    ['no nat table', failure("iptables-restore v1.8.9 (legacy): can't initialize iptables table `nat': Table does not exist (do you need to insmod?)\n"),
      'ERR_IPTABLES_KERNEL', /kernel lacks/],
    ['no match', failure('iptables-restore: line 5 failed: No chain/target/match by that name.\n'), 'ERR_IPTABLES_KERNEL', /kernel lacks/],
    ['missing extension', failure('Warning: Extension owner revision 0 not supported, missing kernel module?\n'), 'ERR_IPTABLES_KERNEL', /kernel lacks/],
    ['our own chain missing is not the kernel', failure("iptables-restore v1.8.9 (legacy): Couldn't load target `MESH_B':No such file or directory\n"),
      'ERR_IPTABLES_APPLY', /MESH_B/],
    ['a bad rule', failure('iptables-restore v1.8.9 (nf_tables): invalid port/service `99999\' specified\n'), 'ERR_IPTABLES_APPLY', /99999/],
  ];
  for (const [name, err, code, message] of cases) {
    it(name, () => {
      const e = iptablesError(err, 'applying the IPv4 rules');
      assert.equal(e.code, code);
      assert.equal(e.exitCode, 1);
      assert.match(e.message, /^applying the IPv4 rules: /);
      assert.match(e.message, message);
      assert.equal(e.cause, err);
    });
  }
});
