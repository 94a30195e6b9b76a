// The common logging flags, observed on a real process: text and JSON lines, levels per scope,
// targets (stdout, stderr, files), caller and stack traces.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runCli } from '../../helpers/run-cli.js';

// `wait` logs at info (start, ready) and debug (each failed attempt): a convenient log source.
const WAIT_ON_NOTHING = ['wait', '--url', 'http://127.0.0.1:1/', '--timeoutSeconds', '0'];

describe('logging flags', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pa-log-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('writes readable text lines by default: time, level, scope, message', async () => {
    const r = await runCli(WAIT_ON_NOTHING);
    assert.match(r.stdout, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\tinfo\tdefault\tWaiting for the proxy to be ready \(timeout: 0 seconds\)\.\.\.$/m);
    assert.doesNotMatch(r.stdout, /\tdebug\t/);
  });

  it('writes JSON lines with --log_as_json', async () => {
    const r = await runCli(['--log_as_json', ...WAIT_ON_NOTHING]);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, string>);
    assert.ok(lines.length >= 1);
    assert.equal(lines[0]!['level'], 'info');
    assert.equal(lines[0]!['scope'], 'default');
    assert.match(lines[0]!['msg']!, /Waiting for the proxy/);
    assert.match(lines[0]!['time']!, /^\d{4}-/);
  });

  it('lowers and raises levels per scope', async () => {
    const debug = await runCli([...WAIT_ON_NOTHING, '--log_output_level', 'default:debug']);
    assert.match(debug.stdout, /\tdebug\tdefault\tProxy not ready yet: connect ECONNREFUSED/);
    const quiet = await runCli([...WAIT_ON_NOTHING, '--log_output_level', 'error']);
    assert.equal(quiet.stdout, '');
    const all = await runCli([...WAIT_ON_NOTHING, '--log_output_level', 'all:none']);
    assert.equal(all.stdout, '');
    const other = await runCli([...WAIT_ON_NOTHING, '--log_output_level', 'dns:none']);
    assert.match(other.stdout, /\tinfo\tdefault\t/);
  });

  it('writes to every --log_target: stderr and files', async () => {
    const file = join(dir, 'sub', 'agent.log');
    const r = await runCli([...WAIT_ON_NOTHING, '--log_target', 'stderr', '--log_target', file]);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /\tinfo\tdefault\tWaiting for the proxy/);
    assert.match(readFileSync(file, 'utf8'), /\tinfo\tdefault\tWaiting for the proxy/);
  });

  it('adds the caller for --log_caller scopes and stacks at --log_stacktrace_level', async () => {
    const r = await runCli(['--log_as_json', ...WAIT_ON_NOTHING, '--log_caller', 'default', '--log_stacktrace_level', 'default:info']);
    const first = JSON.parse(r.stdout.split('\n')[0]!) as Record<string, string>;
    assert.match(first['caller']!, /wait\.js:\d+:\d+/);
    assert.match(first['stack']!, /at /);
    const plain = JSON.parse((await runCli(['--log_as_json', ...WAIT_ON_NOTHING])).stdout.split('\n')[0]!) as Record<string, string>;
    assert.equal(plain['caller'], undefined);
    assert.equal(plain['stack'], undefined);
  });

  it('refuses a --log_target it cannot open', async () => {
    const file = join(dir, 'plain-file');
    writeFileSync(file, '');
    const target = join(file, 'agent.log'); // a file cannot be a folder
    const r = await runCli(['version', '--log_target', target]);
    assert.equal(r.code, 2);
    assert.ok(r.stderr.includes(`--log_target: cannot open "${target}"`), r.stderr);
    assert.equal(r.stdout, '');
  });
});
