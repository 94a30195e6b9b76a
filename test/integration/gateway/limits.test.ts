// MESH_MAX_DOWNSTREAM_CONNECTIONS at the gateway: one count for the whole process, every port and
// every worker (--concurrency 2 here) together. Idle connections are held open from inside the
// gateway's namespace; those beyond the maximum are reset at once and counted, a warning is logged
// (once), and the places come back when connections close.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIXTURES, mountCredential, routeTo, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';

const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: gw, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 8443, name: https, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: SIMPLE, credentialName: cert}
---
${routeTo('app', ['*'], 'gw', 9080)}`;

interface Held { readonly open: number; readonly closed: number }

describe('pilot-agent proxy router: MESH_MAX_DOWNSTREAM_CONNECTIONS', () => {
  let pod: GatewayPod;

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'gw.yaml': RESOURCES },
      apps: { 9080: 'app' },
      args: ['--concurrency', '2'],
      env: { MESH_MAX_DOWNSTREAM_CONNECTIONS: '6', PROXY_CONFIG: '{"terminationDrainDuration": "2s"}' },
      prepare: (p) => mountCredential(p.dir, 'cert'),
    });
  });
  after(() => pod?.close());

  it('says the maximum at start', () => {
    assert.match(pod.output(), /at most 6 downstream connections for the process, all workers together \(MESH_MAX_DOWNSTREAM_CONNECTIONS\)/);
  });

  it('holds 6 connections over both ports and both workers, resets the rest at once, counts them and warns once', async () => {
    const batches = [{ host: '127.0.0.1', port: 8080, count: 4 }, { host: '127.0.0.1', port: 8443, count: 4 }];
    const run = spawnSync('ip', ['netns', 'exec', pod.ns.name, process.execPath, join(FIXTURES, 'hold-connections.mjs'), JSON.stringify(batches), '1500'], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout) as Held[], [{ open: 4, closed: 0 }, { open: 2, closed: 2 }]);
    const stats = await pod.ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, /^listener\.0\.0\.0\.0_15006\.downstream_global_cx_overflow: 2$/m);
    const metrics = pod.send([{ url: 'http://127.0.0.1:15090/stats/prometheus' }])[0]!.body;
    assert.match(metrics, /^mesh_downstream_connections_overflow_total\{direction="inbound"\} 2$/m);
    const warnings = pod.output().split('\n').filter((l) => l.includes('downstream connections at'));
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0]!, /downstream connections at (6 of 6|the maximum of 6) \(MESH_MAX_DOWNSTREAM_CONNECTIONS\)/);
  });

  it('gives the places back when connections close', () => {
    const answers = pod.send(Array.from({ length: 8 }, () => ({ url: 'http://127.0.0.1:8080/again' })));
    assert.deepEqual(answers.map((a) => a.status), Array.from({ length: 8 }, () => 200));
  });

  it('exits at the drain duration (2 s, plus at most 1 s) while idle connections stay open on both ports', async () => {
    const holder = spawn('ip', ['netns', 'exec', pod.ns.name, process.execPath, join(FIXTURES, 'hold-connections.mjs'),
      JSON.stringify([{ host: '127.0.0.1', port: 8080, count: 2 }, { host: '127.0.0.1', port: 8443, count: 2 }]), '8000'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const gateway = pod.gateway()!;
      const exited = new Promise<number | null>((resolve) => gateway.once('exit', (code) => resolve(code)));
      const started = Date.now();
      gateway.kill('SIGTERM');
      assert.equal(await exited, 0);
      const took = Date.now() - started;
      assert.ok(took >= 1900 && took < 3500, `exited after ${took} ms`);
    } finally {
      holder.kill('SIGKILL');
    }
  });
});
