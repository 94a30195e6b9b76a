// `--concurrency`: several workers share the gateway's port (SO_REUSEPORT); what an operator reads
// (/stats, /debug/decisions, the Prometheus series) is the sum over every worker, exactly.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';
import { binPath, repoRoot } from '../../helpers/repo.js';
import { cleanEnv } from '../../helpers/run-cli.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const REQUESTS = 40;

const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: gw, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: app, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /app}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
`;

describe('pilot-agent proxy router --concurrency 3', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pa-gateway-workers-'));
  const children: ChildProcess[] = [];
  let ns: Netns;
  let output = '';

  before(async () => {
    const created = createNetns();
    assert.ok(created, 'needs root to create a network namespace');
    ns = created;
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, 'etc', 'mesh', 'resources'), { recursive: true });
    mkdirSync(join(dir, 'etc', 'mesh', 'pod'), { recursive: true });
    writeFileSync(join(dir, 'etc', 'mesh', 'pod', 'labels'), 'mesh="ingressgateway"\n');
    writeFileSync(join(dir, 'etc', 'mesh', 'resources', 'gw.yaml'), RESOURCES);
    const app = spawn('ip', ['netns', 'exec', ns.name, process.execPath, join(FIXTURES, 'echo-app.mjs'), '127.0.0.1', '9080', 'app'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(app);
    await new Promise((resolve) => app.stdout!.once('data', resolve));
    const gateway = spawn('ip', ['netns', 'exec', ns.name, process.execPath, binPath, 'proxy', 'router', '--concurrency', '3'],
      { cwd: dir, env: cleanEnv({ POD_NAMESPACE: 'mesh-system' }), stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(gateway);
    gateway.stdout!.setEncoding('utf8').on('data', (d: string) => { output += d; });
    gateway.stderr!.setEncoding('utf8').on('data', (d: string) => { output += d; });
    const wait = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '15']);
    assert.equal(wait.code, 0, `${wait.stderr}\n${output}`);
  });
  after(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    ns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says how many workers run', async () => {
    assert.match(output, /in 3 worker\(s\)/);
    const info = await ns.runCli(['request', 'GET', '/server_info']);
    assert.equal((JSON.parse(info.stdout) as { command_line_options: { concurrency: number } }).command_line_options.concurrency, 3);
  });

  it('every request, on its own connection, is answered and counted once in the totals', async () => {
    // Each request on a new connection: the kernel spreads them over the workers' sockets.
    const specs = Array.from({ length: REQUESTS }, (_, i) => ({ url: `http://127.0.0.1:8080/app/${i}` }));
    const run = spawnSync('ip', ['netns', 'exec', ns.name, process.execPath, join(FIXTURES, 'http-requests.mjs'), JSON.stringify(specs)], { encoding: 'utf8' });
    const answers = JSON.parse(run.stdout) as { status: number }[];
    assert.deepEqual(answers.map((a) => a.status), specs.map(() => 200));
    const stats = await ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, new RegExp(`^http\\.inbound\\.downstream_rq_total: ${REQUESTS}$`, 'm'));
    assert.match(stats.stdout, new RegExp(`^http\\.gateway\\.decisions\\.route\\.routed: ${REQUESTS}$`, 'm'));
    const decisions = await ns.runCli(['request', 'GET', '/debug/decisions']);
    const paths = (JSON.parse(decisions.stdout) as { decisions: { path: string }[] }).decisions.map((d) => d.path).sort();
    assert.deepEqual(paths, specs.map((_, i) => `/app/${i}`).sort());
    const metrics = spawnSync('ip', ['netns', 'exec', ns.name, process.execPath, join(FIXTURES, 'http-requests.mjs'),
      JSON.stringify([{ url: 'http://127.0.0.1:15090/stats/prometheus' }])], { encoding: 'utf8' });
    const body = (JSON.parse(metrics.stdout) as { body: string }[])[0]!.body;
    assert.match(body, new RegExp(`^mesh_request_decisions_total\\{stage="route",outcome="routed"\\} ${REQUESTS}$`, 'm'));
  });
});
