// `pilot-agent proxy` as a real process in a network namespace of the test's own (its fixed ports
// never touch the host): readiness, `wait` with no flags, drain on SIGTERM, bad configuration.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';
import { binPath } from '../../helpers/repo.js';
import { cleanEnv } from '../../helpers/run-cli.js';

interface Running {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  output(): string;
}

function startProxy(ns: Netns, args: string[], env: Record<string, string>, cwd: string): Running {
  const child = spawn('ip', ['netns', 'exec', ns.name, process.execPath, binPath, 'proxy', ...args],
    { env: cleanEnv(env), cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => out };
}

describe('pilot-agent proxy (process)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pa-proxy-'));
  const namespaces: Netns[] = [];
  const children: ChildProcess[] = [];
  after(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const ns of namespaces) ns.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const netns = (): Netns => {
    const ns = createNetns();
    assert.ok(ns, 'needs root to create a network namespace');
    namespaces.push(ns);
    return ns;
  };

  it('becomes ready (wait with no flags), answers on 15021, drains on SIGTERM and exits 0', async () => {
    const ns = netns();
    // 2 s: the readiness check after SIGTERM is a CLI run (a node start-up), which a loaded host can make slow.
    const proxy = startProxy(ns, [], { PROXY_CONFIG: 'terminationDrainDuration: 2s' }, dir);
    children.push(proxy.child);
    const wait = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '10']);
    assert.equal(wait.code, 0, `${wait.stderr}\n${proxy.output()}`);
    const ready = await ns.runCli(['request', 'GET', '/healthz/ready', '--debug-port', '15021']);
    assert.equal(ready.code, 0, ready.stderr);
    const stats = await ns.runCli(['request', 'GET', 'stats']);
    assert.equal(stats.code, 0, stats.stderr);
    assert.match(stats.stdout, /^server\.live: 1$/m);
    assert.match(stats.stdout, /^listener\.0\.0\.0\.0_15001\.downstream_cx_total: 0$/m);
    const merged = await ns.runCli(['request', 'GET', '/stats/prometheus', '--debug-port', '15020']);
    assert.equal(merged.code, 0, merged.stderr);
    assert.match(merged.stdout, /^# TYPE mesh_build gauge$/m);
    assert.match(merged.stdout, /^startup_duration_seconds \d/m);
    assert.match(merged.stdout, /^mesh_requests_active\{direction="outbound"\} 0$/m);
    const proxyMetrics = spawnSync('ip', ['netns', 'exec', ns.name, process.execPath, '-e',
      "require('http').get('http://127.0.0.1:15090/stats/prometheus', (r) => { let b = ''; r.on('data', (d) => b += d); r.on('end', () => process.stdout.write(r.statusCode + '\\n' + b)); })"],
    { encoding: 'utf8' });
    assert.match(proxyMetrics.stdout, /^200\n/);
    assert.match(proxyMetrics.stdout, /^# HELP proxy_connection_terminations /m);
    proxy.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 200));
    const draining = await ns.runCli(['request', 'GET', '/healthz/ready', '--debug-port', '15021']);
    assert.equal(draining.code, 1);
    assert.match(draining.stderr, /status code 503/, proxy.output());
    const started = Date.now();
    assert.equal(await proxy.exited, 0, proxy.output());
    assert.ok(Date.now() - started < 3000, 'exits at the drain duration');
    assert.match(proxy.output(), /SIGTERM: draining/);
  });

  it('refuses a mesh config that does not parse, naming the file and the field', async () => {
    const ns = netns();
    const file = join(dir, 'mesh.yaml');
    writeFileSync(file, 'defaultConfig:\n  terminationDrainDuration: soon\n');
    const proxy = startProxy(ns, ['--meshConfig', file], {}, dir);
    children.push(proxy.child);
    assert.equal(await proxy.exited, 1);
    assert.ok(proxy.output().includes(`${file}: defaultConfig.terminationDrainDuration: "soon" is not a duration`), proxy.output());
  });

  it('runs the agent surfaces only with DISABLE_PROXY', async () => {
    const ns = netns();
    const proxy = startProxy(ns, [], { DISABLE_PROXY: 'true' }, dir);
    children.push(proxy.child);
    const wait = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '10']);
    assert.equal(wait.code, 0, proxy.output());
    assert.match(proxy.output(), /DISABLE_PROXY: no capture listeners/);
    proxy.child.kill('SIGKILL');
  });

  it('starts with variables it does not act on, and names each one set, with why; never one it honours or one set to what it does', async () => {
    const ns = netns();
    const proxy = startProxy(ns, [], {
      DISABLE_PROXY: 'true', PILOT_PUSH_THROTTLE: '10', PILOT_ENABLE_MYSQL_FILTER: 'true', MESH_BOOTSTRAP: '/etc/b.json',
      PILOT_SCOPE_GATEWAY_TO_NAMESPACE: 'false', ENABLE_AUTO_SNI: 'false', PILOT_DRAINING_LABEL: '',
    }, dir);
    children.push(proxy.child);
    const wait = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '10']);
    assert.equal(wait.code, 0, proxy.output());
    const out = proxy.output();
    assert.match(out, /warn\t.*PILOT_PUSH_THROTTLE is set but has no effect here: an istiod setting/);
    assert.match(out, /PILOT_ENABLE_MYSQL_FILTER is set but has no effect here: not supported by this agent yet: MySQL traffic is relayed as TCP/);
    assert.match(out, /MESH_BOOTSTRAP is set but has no effect here: this agent runs no Envoy process/);
    assert.equal((out.match(/is set but has no effect here/g) ?? []).length, 3, out);
    proxy.child.kill('SIGKILL');
  });
});
