// includeRequestBodyInCheck at the sidecar's inbound: a pod whose workload a CUSTOM policy selects,
// an HTTP authorizer in the pod that reads the body it is sent (test/fixtures/ext-authz-servers.mjs
// refuses one holding `deny-me`), an echo app that logs the bodies it receives. A peer posts: the
// authorizer judges the body, the app receives exactly that body, or nothing when it was refused.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, POD_V4, type Namespace } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');

const MESH = `extensionProviders:
- name: authz
  envoyExtAuthzHttp:
    service: 127.0.0.1
    port: 9191
    timeout: 2s
    includeRequestBodyInCheck: {maxRequestBytes: 300000}
`;

const POLICY = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  action: CUSTOM
  provider: {name: authz}
  rules: [{to: [{operation: {ports: ["9080"]}}]}]
`;

const lines = (text: string): Record<string, any>[] => text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>);

function post(ns: Namespace, path: string, body: string, headers: Record<string, string> = {}): number {
  const r = ns.exec(process.execPath, [join(FIXTURES, 'http-requests.mjs'), JSON.stringify([{ url: `http://${POD_V4}:9080${path}`, method: 'POST', headers, body }])]);
  return (JSON.parse(r.stdout) as { status: number }[])[0]!.status;
}

describe('the sidecar sends the request body to its inbound authorizer', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let authzLog = '';
  let appLog = '';

  before(async () => {
    sp = await startSidecarPod({
      files: { 'etc/mesh/pod/labels': 'app="web"\n', 'etc/mesh/resources/policy.yaml': POLICY, 'etc/mesh/config/mesh': MESH },
      env: ['POD_NAMESPACE=shop'],
      prepare: async (p) => {
        const app: ChildProcess = p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'app', 'log']);
        await untilFirstOutput(app);
        app.stdout!.on('data', (d: string) => { appLog += d; });
        const authz: ChildProcess = p.start(process.execPath, [join(FIXTURES, 'ext-authz-servers.mjs'), '127.0.0.1', '9191', '9292']);
        await untilFirstOutput(authz);
        authz.stdout!.on('data', (d: string) => { authzLog += d; });
      },
    });
  });
  after(() => sp?.close());

  it('the body judged is the body received; a body the authorizer refuses never reaches the app', async () => {
    assert.equal(post(sp.pod.peer, '/order', 'item=42&qty=1', { 'transfer-encoding': 'chunked' }), 200);
    const check = await waitFor('the check', () => lines(authzLog).find((l) => l['kind'] === 'http' && l['path'] === '/order'));
    assert.equal(check['body'], 'item=42&qty=1');
    const got = await waitFor('the app\'s request', () => lines(appLog).find((l) => l['request']?.url === '/order'));
    assert.equal(got['request'].body, 'item=42&qty=1');
    assert.equal(post(sp.pod.peer, '/refused', 'deny-me'), 401);
    assert.equal(post(sp.pod.peer, '/long', 'x'.repeat(100), { 'content-length': '300001' }), 413, 'declared over the limit: 413 at once');
    await waitFor('the refused check', () => lines(authzLog).find((l) => l['path'] === '/refused'));
    assert.equal(lines(appLog).find((l) => l['request']?.url === '/refused' || l['request']?.url === '/long'), undefined);
  });

  it('a body larger than what the proxy holds by default (64 KiB) is read up to maxRequestBytes and judged whole', async () => {
    // 250 000 bytes of a counting pattern, made and sent by the client (too long for an argument), chunked.
    const make = 'Array.from({ length: 25000 }, (_, i) => String(i).padStart(9, "0") + "\\n").join("")';
    const body = Array.from({ length: 25000 }, (_, i) => `${String(i).padStart(9, '0')}\n`).join('');
    const script = `const body = ${make};
      const r = require('http').request('http://${POD_V4}:9080/large', { method: 'POST', headers: { 'transfer-encoding': 'chunked' } },
        (res) => { res.resume(); res.on('end', () => process.stdout.write(String(res.statusCode))); });
      r.on('error', (e) => process.stdout.write(e.message)); r.end(body);`;
    assert.equal(sp.pod.peer.exec(process.execPath, ['-e', script]).stdout, '200');
    const check = await waitFor('the check', () => lines(authzLog).find((l) => l['kind'] === 'http' && l['path'] === '/large'));
    assert.ok(check['body'] === body, 'the authorizer got the whole body');
    const got = await waitFor('the app\'s request', () => lines(appLog).find((l) => l['request']?.url === '/large'));
    assert.ok(got['request'].body === body, 'the app got the whole body');
  });
});
