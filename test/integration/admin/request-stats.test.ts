// The everyday tool against the real admin API: `pilot-agent request GET /stats` can only reach
// port 15000, so the admin runs on 15000 in a network namespace of the test's own (host untouched).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { sumOf } from '../../helpers/prom-samples.js';

describe('pilot-agent request against the admin API on 15000', () => {
  let ns: Netns | undefined;
  let child: ChildProcess | undefined;
  before(async () => {
    ns = createNetns();
    if (!ns) return;
    child = spawn('ip', ['netns', 'exec', ns.name, process.execPath,
      join(repoRoot, 'dist', 'test', 'integration', 'admin', 'admin-child.js'), '15000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child!.once('error', reject);
      child!.once('exit', (code) => reject(new Error(`admin child exited with ${code}`)));
      child!.stdout!.setEncoding('utf8').once('data', (line: string) => {
        if (line.startsWith('listening 15000')) resolve();
        else reject(new Error(`admin child said: ${line}`));
      });
    });
  });
  after(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    ns?.close();
  });

  const run = (args: string[]) => {
    assert.ok(ns, 'needs root to create a network namespace');
    return ns.runCli(['request', ...args]);
  };

  it('GET /stats prints the Envoy stats on stdout', async () => {
    const r = await run(['GET', '/stats']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^listener\.0\.0\.0\.0_15001\.downstream_cx_total: 3$/m);
    assert.match(r.stdout, /^http\.outbound\.downstream_rq_2xx: 1$/m);
    assert.match(r.stdout, /^server\.live: 1$/m);
  });

  it('GET stats?filter=... and /stats/prometheus', async () => {
    const filtered = await run(['GET', 'stats?filter=^server\\.live$']);
    assert.equal(filtered.stdout, 'server.live: 1\n');
    const prom = await run(['GET', '/stats/prometheus']);
    assert.equal(prom.code, 0);
    assert.equal(sumOf(prom.stdout, 'mesh_requests_total', { reporter: 'source', response_code: '200', request_protocol: 'http' }), 1, prom.stdout);
  });

  it('an unknown path exits 1 and still prints the list of endpoints', async () => {
    const r = await run(['GET', '/nothing']);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /admin endpoints:/);
  });

  it('POST /quitquitquit answers OK and the admin exits', async () => {
    const exited = new Promise<number | null>((resolve) => child!.once('exit', resolve));
    const r = await run(['POST', '/quitquitquit']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'OK\n');
    assert.equal(await exited, 0);
  });
});
