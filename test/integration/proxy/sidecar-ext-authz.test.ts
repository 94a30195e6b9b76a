// External authorization at the sidecar's inbound, end to end: a pod (capture rules, the sidecar as
// uid 1337) whose workload a CUSTOM policy selects, a gRPC authorizer (test/fixtures/ext-authz-servers.mjs)
// inside the pod on loopback, named by the mesh config. A peer calls the app: what the authorizer
// allows arrives with its headers, what it refuses comes back as it wrote it, the check is told
// the connection's addresses; a TCP connection a CUSTOM rule selects is closed (no authorizer is
// asked for connections here).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, PEER_V4, POD_V4, type Namespace, type Pod } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');

const MESH = `extensionProviders:
- name: authz
  envoyExtAuthzGrpc: {service: 127.0.0.1, port: 9292, timeout: 2s}
`;

const POLICY = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  action: CUSTOM
  provider: {name: authz}
  rules:
  - to: [{operation: {ports: ["9080", "7080"], notPaths: ["/public*"]}}]
  - to: [{operation: {ports: ["9081"]}}]
`;

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

function call(ns: Namespace, path: string, headers: Record<string, string> = {}): Answer {
  const r = ns.exec(process.execPath, [join(FIXTURES, 'http-requests.mjs'), JSON.stringify([{ url: `http://${POD_V4}:9080${path}`, headers }])]);
  return (JSON.parse(r.stdout) as Answer[])[0]!;
}

/** Connects, sends `ping\n`, half-closes, reads until the close: what came back. */
function tcpFrom(ns: Namespace, host: string, port: number): string {
  const script = `const s = require('net').connect(${port}, ${JSON.stringify(host)}, () => s.end('ping\\n'));
    let got = ''; s.on('data', (d) => got += d); s.on('close', () => process.stdout.write(got));
    s.on('error', (e) => process.stdout.write('error ' + e.code)); setTimeout(() => process.exit(0), 4000).unref();`;
  return ns.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
}

describe('the sidecar asks a gRPC authorizer for its inbound CUSTOM policies', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let pod: Pod;
  let log = '';
  const checks = (): Record<string, any>[] => log.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>);

  before(async () => {
    sp = await startSidecarPod({
      files: { 'etc/mesh/pod/labels': 'app="web"\n', 'etc/mesh/resources/policy.yaml': POLICY, 'etc/mesh/config/mesh': MESH },
      env: ['POD_NAMESPACE=shop'],
      prepare: async (p) => {
        await untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'app']));
        await untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'h2-apps.mjs'), '0.0.0.0', 'app']));
        const authz: ChildProcess = p.start(process.execPath, [join(FIXTURES, 'ext-authz-servers.mjs'), '127.0.0.1', '9191', '9292']);
        await untilFirstOutput(authz);
        authz.stdout!.on('data', (d: string) => { log += d; });
      },
    });
    pod = sp.pod;
  });
  after(() => sp?.close());

  it('an allowed request reaches the app with the authorizer\'s headers, the proxy-owned ones never', () => {
    const r = call(pod.peer, '/headers', { 'x-drop-me': '1', 'x-forwarded-client-cert': 'By=client' });
    assert.equal(r.status, 200, r.body);
    const seen = (JSON.parse(r.body) as { headers: Record<string, string> }).headers;
    assert.deepEqual([seen['x-authz-user'], seen['x-authz-extra'], seen['x-drop-me'], seen['x-forwarded-client-cert']], ['alice', 'one', undefined, undefined]);
    assert.equal(r.headers['x-downstream-note'], 'checked');
  });

  it('the check names the peer and the original destination', async () => {
    call(pod.peer, '/headers/addresses');
    const check = await waitFor('the check', () => checks().find((c) => c['request']?.attributes?.request?.http?.path === '/headers/addresses'));
    const a = check['request'].attributes;
    assert.equal(a.source.address.socket_address.address, PEER_V4);
    assert.deepEqual([a.destination.address.socket_address.address, a.destination.address.socket_address.port_value], [POD_V4, 9080]);
    assert.equal(a.request.http.host, `${POD_V4}:9080`);
  });

  it('a refusal comes back as the authorizer wrote it; an unselected path passes unchecked', () => {
    const r = call(pod.peer, '/deny/x');
    assert.deepEqual([r.status, r.body, r.headers['x-authz-reason']], [401, 'denied by the grpc authorizer', 'nope']);
    assert.match(call(pod.peer, '/public').body, /^app saw 127\.0\.0\.6 GET \/public/);
  });

  it('HTTP/2 requests are checked too: allowed with the client\'s lines, refused as written', () => {
    const script = `const h2 = require('node:http2'); const c = h2.connect('http://${POD_V4}:7080'); const out = [];
      const one = (path) => new Promise((resolve) => { const s = c.request({ ':path': path }); let body = '', head;
        s.on('response', (h) => { head = h; }); s.setEncoding('utf8'); s.on('data', (d) => { body += d; });
        s.on('end', () => resolve({ status: head[':status'], note: head['x-downstream-note'], reason: head['x-authz-reason'], body })); s.end(); });
      (async () => { for (const p of ['/ok', '/deny/h2']) out.push(await one(p)); c.close(); process.stdout.write(JSON.stringify(out)); })();
      setTimeout(() => process.exit(1), 8000).unref();`;
    const [ok, denied] = JSON.parse(pod.peer.exec(process.execPath, ['-e', script]).stdout) as { status: number; note?: string; reason?: string; body: string }[];
    assert.deepEqual([ok!.status, ok!.note], [200, 'checked'], ok!.body);
    assert.match(ok!.body, /"path":"\/ok"/);
    assert.deepEqual([denied!.status, denied!.reason, denied!.body], [401, 'nope', 'denied by the grpc authorizer']);
  });

  it('a TCP connection a CUSTOM rule selects is closed before a byte reaches the app', () => {
    assert.doesNotMatch(tcpFrom(pod.peer, POD_V4, 9081), /app-tcp-hello/);
  });
});
