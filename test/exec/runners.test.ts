import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { CommandError, commandLine } from '../../src/exec/command-error.js';
import { ExecaRunner } from '../../src/exec/execa-runner.js';
import { NetnsRunner, netnsPrefix, netnsRef } from '../../src/exec/netns-runner.js';
import { RecordingRunner } from '../../src/exec/recording-runner.js';
import { createNamespace, netnsSkip } from '../helpers/pod-netns.js';

const rejection = async (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (e: unknown) => e);

describe('ExecaRunner', () => {
  const runner = new ExecaRunner();

  it('feeds stdin and returns the output', async () => {
    const r = await runner.run('sh', ['-c', 'tr a-z A-Z'], { input: '*nat\ncommit\n' });
    assert.deepEqual(r, { stdout: '*NAT\nCOMMIT\n', stderr: '', exitCode: 0 });
  });

  it('rejects a non-zero exit naming the command, the exit code and stderr', async () => {
    const err = await rejection(runner.run('sh', ['-c', 'echo "line 3 failed" >&2; exit 2']));
    assert.ok(err instanceof CommandError);
    assert.equal(err.code, 'ERR_COMMAND_FAILED');
    assert.equal(err.exitCode, 1);
    assert.equal(err.commandExitCode, 2);
    assert.equal(err.stderr, 'line 3 failed\n');
    assert.equal(err.message, `sh -c 'echo "line 3 failed" >&2; exit 2' failed with exit code 2: line 3 failed`);
  });

  it('resolves a failure with allowFailure', async () => {
    assert.deepEqual(await runner.run('sh', ['-c', 'echo out; exit 4'], { allowFailure: true }), { stdout: 'out\n', stderr: '', exitCode: 4 });
  });

  it('a missing program says which package to install', async () => {
    const err = await rejection(runner.run('iptables-pa-absent-restore', ['--noflush']));
    assert.ok(err instanceof CommandError);
    assert.equal(err.code, 'ERR_COMMAND_NOT_FOUND');
    assert.equal(err.message, 'iptables-pa-absent-restore not found: install iptables');
    const other = await rejection(runner.run('pa-absent-tool', []));
    assert.ok(other instanceof CommandError);
    assert.equal(other.message, 'pa-absent-tool not found on the PATH');
  });

  it('asks programs for English messages (callers classify them)', async () => {
    assert.equal((await runner.run('sh', ['-c', 'echo $LC_ALL'])).stdout, 'C\n');
  });
});

describe('RecordingRunner', () => {
  it('records command, arguments and input, and answers success (what --dry-run uses)', async () => {
    const r = new RecordingRunner();
    assert.deepEqual(await r.run('iptables-restore', ['-w', '--noflush'], { input: '*nat\nCOMMIT\n' }), { stdout: '', stderr: '', exitCode: 0 });
    await r.run('ip', ['-f', 'inet', 'rule', 'add', 'fwmark', '1337', 'lookup', '133']);
    assert.deepEqual(r.calls, [
      { command: 'iptables-restore', args: ['-w', '--noflush'], input: '*nat\nCOMMIT\n' },
      { command: 'ip', args: ['-f', 'inet', 'rule', 'add', 'fwmark', '1337', 'lookup', '133'] },
    ]);
    assert.deepEqual(r.lines(), ['iptables-restore -w --noflush', 'ip -f inet rule add fwmark 1337 lookup 133']);
  });

  it('answers what the responder says', async () => {
    const r = new RecordingRunner((c) => (c.command === 'iptables-save' ? { stdout: '*nat\nCOMMIT\n' } : undefined));
    assert.equal((await r.run('iptables-save', [])).stdout, '*nat\nCOMMIT\n');
    assert.equal((await r.run('ip', [])).stdout, '');
  });
});

describe('NetnsRunner', () => {
  it('by name: ip netns exec; by path: nsenter --net', async () => {
    assert.deepEqual(netnsRef('pod1'), { name: 'pod1' });
    assert.deepEqual(netnsRef('/proc/42/ns/net'), { path: '/proc/42/ns/net' });
    assert.deepEqual(netnsPrefix({ name: 'pod1' }), ['ip', 'netns', 'exec', 'pod1']);
    assert.deepEqual(netnsPrefix({ path: '/proc/42/ns/net' }), ['nsenter', '--net=/proc/42/ns/net', '--']);
    const inner = new RecordingRunner();
    await new NetnsRunner(inner, 'pod1').run('iptables-save', []);
    await new NetnsRunner(inner, '/var/run/netns/pod1').run('iptables-restore', ['--noflush'], { input: 'x' });
    assert.deepEqual(inner.calls, [
      { command: 'ip', args: ['netns', 'exec', 'pod1', 'iptables-save'] },
      { command: 'nsenter', args: ['--net=/var/run/netns/pod1', '--', 'iptables-restore', '--noflush'], input: 'x' },
    ]);
  });

  it('reports a program missing inside as missing, and a namespace that does not exist', async () => {
    const missing = new NetnsRunner(new RecordingRunner(() => ({ exitCode: 255, stderr: 'exec of "iptables-save" failed: No such file or directory\n' })), 'pod1');
    const err = await rejection(missing.run('iptables-save', []));
    assert.ok(err instanceof CommandError && err.code === 'ERR_COMMAND_NOT_FOUND', String(err));
    assert.equal(err.message, 'iptables-save not found: install iptables');
    const gone = new NetnsRunner(new RecordingRunner(() => ({ exitCode: 255, stderr: 'Cannot open network namespace "pod9": No such file or directory\n' })), 'pod9');
    const err2 = await rejection(gone.run('iptables-save', []));
    assert.match(String(err2), /cannot enter network namespace "pod9"/);
    const failing = new NetnsRunner(new RecordingRunner(() => ({ exitCode: 1, stderr: 'boom\n' })), 'pod1');
    assert.match(String(await rejection(failing.run('iptables-save', []))), /iptables-save failed with exit code 1: boom/);
    assert.equal((await failing.run('iptables-save', [], { allowFailure: true })).exitCode, 1);
  });

  it('runs inside a real namespace, by name and by path', { skip: netnsSkip }, async () => {
    const ns = createNamespace();
    try {
      const byName = new NetnsRunner(new ExecaRunner(), ns.name);
      ns.exec('ip', ['link', 'add', 'probe0', 'type', 'veth', 'peer', 'name', 'probe1']);
      assert.match((await byName.run('ip', ['-o', 'link', 'show'])).stdout, /probe0/);
      const byPath = new NetnsRunner(new ExecaRunner(), `/var/run/netns/${ns.name}`);
      assert.match((await byPath.run('ip', ['-o', 'link', 'show'])).stdout, /probe1/);
      assert.doesNotMatch(spawnSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' }).stdout, /probe0/, 'not in the host');
      const err = await rejection(byName.run('iptables-pa-absent', []));
      assert.ok(err instanceof CommandError && err.code === 'ERR_COMMAND_NOT_FOUND', String(err));
      const err2 = await rejection(byPath.run('iptables-pa-absent', []));
      assert.ok(err2 instanceof CommandError && err2.code === 'ERR_COMMAND_NOT_FOUND', String(err2));
    } finally {
      ns.close();
    }
  });

  it('commandLine quotes what a shell would need', () => {
    assert.equal(commandLine('ip', ['-f', 'inet', 'rule', 'add']), 'ip -f inet rule add');
    assert.equal(commandLine('iptables', ['--log-prefix', 'MESH: x']), "iptables --log-prefix 'MESH: x'");
  });
});
