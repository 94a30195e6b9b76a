// The sidecar's inbound policy, end to end: a pod whose workload labels are selected by a
// RequestAuthentication and an AuthorizationPolicy (files in the sidecar's ./etc/mesh/resources),
// the rules applied by `pilot-agent mesh-iptables`, the sidecar as uid 1337. A peer calls the app:
// a token present but not verifiable is 401 on any path, a protected path without a principal is
// 403, a valid token passes and is not forwarded to the app. Claim routing stays gateway-only.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, POD_V4, type Pod } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const token = (name: string): string => readFileSync(join(FIXTURES, 'jwt', name), 'utf8').trim();

const POLICY = `apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  jwtRules:
  - issuer: testing@secure.istio.io
    jwks: '${readFileSync(join(FIXTURES, 'jwt', 'jwks.json'), 'utf8').replace(/\n/g, '')}'
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: headers-need-a-principal, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  action: DENY
  rules:
  - from:
    - source: {notRequestPrincipals: ["*"]}
    to:
    - operation: {paths: ["/headers*"]}
`;

interface Answer {
  readonly status: number;
  readonly body: string;
}

describe('the sidecar applies RequestAuthentication and AuthorizationPolicy inbound', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let pod: Pod;

  /** Requests from the peer to the app's port (captured inbound by the pod's rules). */
  const call = (path: string, jwt?: string): Answer => {
    const spec = [{ url: `http://${POD_V4}:9080${path}`, headers: jwt ? { authorization: `Bearer ${jwt}` } : {} }];
    const r = pod.peer.exec(process.execPath, [join(FIXTURES, 'http-requests.mjs'), JSON.stringify(spec)]);
    return (JSON.parse(r.stdout) as Answer[])[0]!;
  };

  before(async () => {
    sp = await startSidecarPod({
      files: { 'etc/mesh/pod/labels': 'app="web"\nversion="v1"\n', 'etc/mesh/resources/policy.yaml': POLICY },
      env: ['POD_NAMESPACE=shop'],
      prepare: (p) => untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'app'])),
    });
    pod = sp.pod;
  });
  after(() => sp?.close());

  it('an unprotected path without a token passes', () => {
    const r = call('/hello');
    assert.equal(r.status, 200);
    assert.equal(r.body, 'app saw 127.0.0.6 GET /hello\n');
  });

  it('a token present but not verifiable is 401, whatever the path', () => {
    assert.equal(call('/hello', 'a.b.c').status, 401);
    assert.equal(call('/hello', `${token('demo.jwt')}x`).status, 401);
  });

  it('the protected path without a principal is 403', () => {
    assert.equal(call('/headers').status, 403);
  });

  it('with a valid token the request reaches the app, without the token', () => {
    const r = call('/headers', token('demo.jwt'));
    assert.equal(r.status, 200, r.body);
    const seen = JSON.parse(r.body) as { headers: Record<string, string> };
    assert.equal(seen.headers['authorization'], undefined);
  });

  it('the decisions are readable with request GET /debug/decisions', async () => {
    const r = await runCli(['request', 'GET', '/debug/decisions'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.equal(r.code, 0, r.stderr);
    const decisions = (JSON.parse(r.stdout) as { decisions: { listener: string; status: number; jwt: string; authz: string }[] }).decisions;
    const denied = decisions.find((d) => d.status === 403);
    assert.ok(denied, r.stdout);
    assert.equal(denied.listener, 'inbound');
    assert.match(denied.authz, /denied.*shop\/headers-need-a-principal/);
    assert.ok(decisions.some((d) => d.status === 401 && d.jwt.startsWith('invalid')));
  });
});
