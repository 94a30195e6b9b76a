import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { notFoundError } from '../../src/exec/command-error.js';
import type { CommandResult, CommandRunner } from '../../src/exec/runner.js';
import { AgentError } from '../../src/errors/agent-error.js';
import { commandsFor, describeBackend, detectBackend } from '../../src/iptables/backend.js';

const EMPTY = '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n';
const RULES = '*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n';
const HINT = '*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n';

/** Save programs answer from a table; a program absent from it is not installed. */
function runner(outputs: Record<string, Partial<CommandResult>>): CommandRunner & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async run(command, args) {
      calls.push(command);
      const o = outputs[command];
      if (!o) throw notFoundError(command, args);
      return { stdout: o.stdout ?? '', stderr: o.stderr ?? '', exitCode: o.exitCode ?? 0 };
    },
  };
}

describe('detectBackend', () => {
  it('prefers the backend that has rules, legacy first (as istio-iptables)', async () => {
    const legacy = await detectBackend(runner({ 'iptables-legacy-save': { stdout: RULES }, 'iptables-nft-save': { stdout: RULES } }));
    assert.equal(legacy.flavor, 'legacy');
    assert.equal(legacy.ipv4.restore, 'iptables-legacy-restore');
    assert.equal(legacy.saved.ipv4, RULES);
    const nft = await detectBackend(runner({ 'iptables-legacy-save': { stdout: EMPTY }, 'iptables-nft-save': { stdout: RULES } }));
    assert.equal(nft.flavor, 'nft');
    assert.deepEqual(nft.ipv6, { family: 'ipv6', save: 'ip6tables-nft-save', restore: 'ip6tables-nft-restore', iptables: 'ip6tables-nft' });
  });

  it('kubelet\'s empty hint chain counts; IPv6 rules count when IPv6 is asked', async () => {
    assert.equal((await detectBackend(runner({ 'iptables-legacy-save': { stdout: EMPTY }, 'iptables-nft-save': { stdout: HINT } }))).flavor, 'nft');
    const r = runner({ 'iptables-legacy-save': { stdout: '' }, 'iptables-nft-save': { stdout: '' }, 'ip6tables-legacy-save': { stdout: RULES }, 'ip6tables-nft-save': { stdout: '' } });
    const b = await detectBackend(r, { ipv6: true });
    assert.equal(b.flavor, 'legacy');
    assert.equal(b.reason, 'the legacy backend already has rules (ipv6)');
    assert.equal(describeBackend(b), 'legacy (iptables-legacy-restore, ip6tables-legacy-restore): the legacy backend already has rules (ipv6)');
  });

  it('no rules anywhere: the iptables on the PATH, with the (empty) state it read', async () => {
    const b = await detectBackend(runner({ 'iptables-legacy-save': { stdout: '' }, 'iptables-nft-save': { stdout: EMPTY } }));
    assert.equal(b.flavor, 'default');
    assert.deepEqual(b.ipv4, commandsFor('default', 'ipv4'));
    assert.equal(b.ipv4.restore, 'iptables-restore');
    assert.equal(b.saved.ipv4, EMPTY);
  });

  it('a backend the kernel lacks counts as no rules; only one variant installed is fine', async () => {
    const b = await detectBackend(runner({ 'iptables-legacy-save': { exitCode: 1, stderr: 'Failed to list table names in /proc/net/ip_tables_names: No such file or directory' },
      'iptables-nft-save': { stdout: RULES } }));
    assert.equal(b.flavor, 'nft');
    assert.equal((await detectBackend(runner({ 'iptables-nft-save': { stdout: RULES } }))).flavor, 'nft');
    const old = await detectBackend(runner({ 'iptables-save': { stdout: RULES } }));
    assert.equal(old.flavor, 'default');
  });

  it('no permission: ERR_IPTABLES_PERMISSION; no iptables at all: ERR_IPTABLES_UNAVAILABLE', async () => {
    const denied = await detectBackend(runner({ 'iptables-legacy-save': { stdout: '' },
      'iptables-nft-save': { exitCode: 4, stderr: 'iptables-nft-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)\n' } }))
      .then(() => undefined, (e: unknown) => e);
    assert.ok(denied instanceof AgentError && denied.code === 'ERR_IPTABLES_PERMISSION', String(denied));
    assert.match(denied.message, /NET_ADMIN/);
    const none = await detectBackend(runner({})).then(() => undefined, (e: unknown) => e);
    assert.ok(none instanceof AgentError && none.code === 'ERR_IPTABLES_UNAVAILABLE', String(none));
    assert.match(none.message, /install iptables/);
  });
});
