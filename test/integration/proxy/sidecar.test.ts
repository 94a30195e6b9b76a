// The sidecar end to end, as in a pod: a pod namespace and a peer joined by a veth, the pod's rules
// applied by `pilot-agent mesh-iptables`, the sidecar (`pilot-agent proxy`) running as uid 1337, an
// app in the pod and a service in the peer. Then: outbound HTTP and raw TCP, inbound HTTP and raw TCP
// (the app sees 127.0.0.6, or in TPROXY mode the client's address), a slow request finishing across SIGTERM, and the same traffic failing
// with the sidecar gone (it really was captured).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createPod, netnsSkip, PEER_V4, POD_V4, type Namespace, type Pod } from '../../helpers/pod-netns.js';
import { binPath, repoRoot } from '../../helpers/repo.js';
import { cleanEnv, runCli } from '../../helpers/run-cli.js';
import { untilFirstOutput } from '../../helpers/sidecar-pod.js';

const APP = join(repoRoot, 'test', 'fixtures', 'echo-app.mjs');

/** Waits for a child's first line of output (fixtures print `listening ...`). */
const ready = untilFirstOutput;

/** One HTTP GET or one TCP exchange from inside a namespace, by a node one-liner (uid 0: captured). */
function fetchFrom(ns: Namespace, url: string): { code: number; body: string } {
  const script = `fetch(${JSON.stringify(url)}, { signal: AbortSignal.timeout(4000) })
    .then(async (r) => process.stdout.write(r.status + ' ' + await r.text()))
    .catch((e) => process.stdout.write('000 ' + (e.cause?.code ?? e.name)))`;
  const r = ns.exec(process.execPath, ['-e', script], { allowFailure: true });
  const [code = '0', ...rest] = r.stdout.split(' ');
  return { code: Number(code), body: rest.join(' ') };
}

function tcpFrom(ns: Namespace, host: string, port: number): string {
  const script = `const s = require('net').connect(${port}, ${JSON.stringify(host)}, () => s.end('ping\\n'));
    let got = ''; s.on('data', (d) => got += d); s.on('close', () => process.stdout.write(got));
    s.on('error', (e) => process.stdout.write('error ' + e.code)); setTimeout(() => process.exit(0), 4000).unref();`;
  return ns.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
}

for (const mode of ['REDIRECT', 'TPROXY'] as const) describe(`the sidecar in a pod (${mode})`, { skip: netnsSkip }, () => {
  let pod: Pod;
  let sidecar: ChildProcess | undefined;
  // REDIRECT: the app sees 127.0.0.6; TPROXY: it sees the client's own address.
  const seenByApp = mode === 'TPROXY' ? PEER_V4 : '127.0.0.6';
  const startSidecar = async (env: readonly string[] = []): Promise<ChildProcess> => {
    // TPROXY needs NET_ADMIN (IP_TRANSPARENT, SO_MARK) and SETUID/SETGID (root-owned app connections).
    const caps = mode === 'TPROXY' ? ['--inh-caps=+net_admin,+setuid,+setgid', '--ambient-caps=+net_admin,+setuid,+setgid'] : [];
    const child = pod.start('env', [`INBOUND_INTERCEPTION_MODE=${mode}`, ...env, 'setpriv', '--reuid=1337', '--regid=1337', '--clear-groups', ...caps, '--',
      process.execPath, binPath, 'proxy', '--log_target', 'stderr']);
    const r = await runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '10'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.equal(r.code, 0, r.stderr);
    return child;
  };
  /** Ends the running sidecar (if any) and starts one with `env`: one sidecar per pod. */
  const restartSidecar = async (env: readonly string[] = []): Promise<ChildProcess> => {
    const old = sidecar;
    if (old && old.exitCode === null && old.signalCode === null) {
      const gone = new Promise((resolve) => old.once('exit', resolve));
      old.kill('SIGKILL');
      await gone;
    }
    sidecar = await startSidecar(env);
    return sidecar;
  };

  before(async () => {
    pod = createPod();
    const init = await runCli(['mesh-iptables', '-m', mode, '-i', '*', '-b', '*', '-d', '15020,15021,15090', '-u', '1337', '-g', '1337'],
      { prefix: ['ip', 'netns', 'exec', pod.name], env: cleanEnv() });
    assert.equal(init.code, 0, init.stderr);
    await ready(pod.peer.start(process.execPath, [APP, PEER_V4, '8080', 'peer']));
    await ready(pod.start(process.execPath, [APP, '0.0.0.0', '9080', 'app']));
    sidecar = await startSidecar();
  });
  after(() => pod?.close());

  it('carries outbound HTTP to the original destination', () => {
    const r = fetchFrom(pod, `http://${PEER_V4}:8080/hello`);
    assert.equal(r.code, 200);
    assert.equal(r.body, `peer saw ${POD_V4} GET /hello\n`);
  });

  it('carries outbound raw TCP, the server speaking first', () => {
    assert.equal(tcpFrom(pod, PEER_V4, 8081), `peer-tcp-hello from ${POD_V4}\nping\n`);
  });

  it(`carries inbound HTTP and TCP to the app, which sees ${seenByApp}`, () => {
    const r = fetchFrom(pod.peer, `http://${POD_V4}:9080/in`);
    assert.equal(r.code, 200);
    assert.equal(r.body, `app saw ${seenByApp} GET /in\n`);
    assert.equal(tcpFrom(pod.peer, POD_V4, 9081), `app-tcp-hello from ${seenByApp}\nping\n`);
  });

  it('carries outbound raw TCP the client speaks first, whatever its first bytes look like', async () => {
    // A sink in the peer answers how many bytes it got. 300 KiB of `a` (a run of token bytes, as a
    // method starts) and of `GET ` (a method, again and again) are not HTTP: relayed whole.
    await ready(pod.peer.start(process.execPath, ['-e', `require('net').createServer({ allowHalfOpen: true }, (s) => {
      let n = 0; s.on('data', (d) => { n += d.length; }); s.on('end', () => s.end(String(n))); s.on('error', () => {});
    }).listen(9999, () => console.log('listening'));`]));
    for (const fill of ['a', 'GET ']) {
      const script = `const s = require('net').connect(9999, ${JSON.stringify(PEER_V4)}, () => s.end(Buffer.alloc(300 * 1024, ${JSON.stringify(fill)})));
        let r = ''; s.on('data', (d) => { r += d; }); s.on('end', () => process.stdout.write(r)); s.on('error', (e) => process.stdout.write(e.message));
        setTimeout(() => process.exit(1), 5000).unref();`;
      assert.equal(pod.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout, String(300 * 1024), JSON.stringify(fill));
    }
  });

  it('answers 503 for an unreachable upstream and counts it all in /stats', async () => {
    assert.equal(fetchFrom(pod, `http://${PEER_V4}:8099/nothing`).code, 503);
    const stats = await runCli(['request', 'GET', 'stats'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.equal(stats.code, 0, stats.stderr);
    assert.match(stats.stdout, /^http\.outbound\.downstream_rq_2xx: [1-9]/m);
    assert.match(stats.stdout, /^http\.outbound\.downstream_rq_5xx: [1-9]/m);
  });

  it('lets a slow inbound request finish across SIGTERM, then exits', async () => {
    const client = pod.peer.start(process.execPath, ['-e', `fetch('http://${POD_V4}:9080/slow')
      .then(async (r) => process.stdout.write(r.status + ' ' + await r.text()), (e) => process.stdout.write('000 ' + e.message))`]);
    let out = '';
    client.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    const done = new Promise((resolve) => client.on('exit', resolve));
    await new Promise((r) => setTimeout(r, 500)); // the request is in flight (the app takes 1.5 s)
    const started = Date.now();
    sidecar!.kill('SIGTERM');
    const exited = new Promise<number | null>((resolve) => sidecar!.on('exit', (code) => resolve(code)));
    await done;
    assert.equal(out, `200 app saw ${seenByApp} GET /slow\n`);
    assert.ok(Date.now() - started >= 500, 'the answer came after SIGTERM');
    assert.equal(await exited, 0);
  });

  it('exits at the drain duration (plus at most its 1 s margin) whatever is open: idle TCP, a silent or half-sent request', async () => {
    await restartSidecar(['PROXY_CONFIG={"terminationDrainDuration": "2s"}']);
    // Held open from the peer, inbound: a TCP connection (the app greets, then nothing), one that sent
    // nothing at all, one that sent half a request head; and from the pod, outbound, an idle TCP one.
    const hold = (ns: Namespace, host: string, port: number, bytes: string): ChildProcess => ns.start(process.execPath, ['-e',
      `const s = require('net').connect(${port}, ${JSON.stringify(host)}, () => { s.write(${JSON.stringify(bytes)}); console.log('open'); }); s.on('error', () => {}); setTimeout(() => {}, 60000);`]);
    const holders = [hold(pod.peer, POD_V4, 9081, ''), hold(pod.peer, POD_V4, 9080, ''), hold(pod.peer, POD_V4, 9080, 'GET /sl'), hold(pod, PEER_V4, 8081, '')];
    await Promise.all(holders.map((h) => ready(h)));
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    const exited = new Promise<number | null>((resolve) => sidecar!.on('exit', (code) => resolve(code)));
    sidecar!.kill('SIGTERM');
    assert.equal(await exited, 0);
    const took = Date.now() - started;
    assert.ok(took >= 1900 && took < 3500, `exited after ${took} ms (drain 2 s, margin 1 s)`);
    for (const h of holders) h.kill('SIGKILL');
    await restartSidecar();
  });

  it('with EXIT_ON_ZERO_ACTIVE_CONNECTIONS, closes idle HTTP and silent connections after MINIMUM_DRAIN_DURATION and exits', async () => {
    await restartSidecar(['EXIT_ON_ZERO_ACTIVE_CONNECTIONS=true', 'MINIMUM_DRAIN_DURATION=1s', 'PROXY_CONFIG={"terminationDrainDuration": "20s"}']);
    // A keep-alive HTTP connection, idle after its answer (outbound), and a connection that never sent a byte (inbound).
    const keepAlive = pod.start(process.execPath, ['-e', `const s = require('net').connect(8080, ${JSON.stringify(PEER_V4)}, () => s.write('GET /k HTTP/1.1\\r\\nHost: peer\\r\\n\\r\\n'));
      s.once('data', () => console.log('answered')); s.on('error', () => {}); setTimeout(() => {}, 60000);`]);
    const silent = pod.peer.start(process.execPath, ['-e', `const s = require('net').connect(9080, ${JSON.stringify(POD_V4)}, () => console.log('open')); s.on('error', () => {}); setTimeout(() => {}, 60000);`]);
    await Promise.all([ready(keepAlive), ready(silent)]);
    const started = Date.now();
    const exited = new Promise<number | null>((resolve) => sidecar!.on('exit', (code) => resolve(code)));
    sidecar!.kill('SIGTERM');
    assert.equal(await exited, 0);
    const took = Date.now() - started;
    assert.ok(took >= 900 && took < 5000, `exited after ${took} ms (MINIMUM_DRAIN_DURATION 1 s, polled each second; drain 20 s)`);
    keepAlive.kill('SIGKILL');
    silent.kill('SIGKILL');
    await restartSidecar();
  });

  it('fails the same traffic with the sidecar gone: it was captured', async () => {
    sidecar!.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(fetchFrom(pod, `http://${PEER_V4}:8080/hello`).code, 0);
    assert.equal(fetchFrom(pod.peer, `http://${POD_V4}:9080/in`).code, 0);
  });
});
