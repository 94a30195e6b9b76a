// The attacks of the security review, end to end at the sidecar's inbound: a pod with capture rules,
// the sidecar as uid 1337, policies selecting the workload, and an app that logs every connection
// and request it parses (ECHO_LOG). A raw client in the peer namespace writes exact bytes. For each
// attack: what the client got, and what reached the app: nothing the policy did not judge.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, POD_V4, type Pod } from '../../helpers/pod-netns.js';
import { rawConnections, statuses, type RawCase, type Received } from '../../helpers/raw-connections.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, type SidecarPod } from '../../helpers/sidecar-pod.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const token = (name: string): string => readFileSync(join(FIXTURES, 'jwt', name), 'utf8').trim();
const JWKS = readFileSync(join(FIXTURES, 'jwt', 'jwks.json'), 'utf8').replace(/\n/g, '');

const POLICIES = `apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  jwtRules:
  - issuer: testing@secure.istio.io
    jwks: '${JWKS}'
    outputClaimToHeaders: [{header: x-jwt-sub, claim: sub}]
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-known, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  action: ALLOW
  rules:
  - to: [{operation: {paths: ["/public*", "/secret*", "/headers*"]}}]
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-some, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  action: DENY
  rules:
  - to: [{operation: {paths: ["/secret", "/public/private*"]}}]
  - to: [{operation: {hosts: ["blocked.example"]}}]
  - when: [{key: "request.headers[X-Role]", values: ["admin"]}]
`;

describe('the sidecar against the attacks of the security review (inbound, policies in force)', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let pod: Pod;
  let app: ChildProcess;
  let appLog = '';

  interface AppEvent { connection?: string; request?: { method: string; url: string; headers: Record<string, string>; body: string } }
  const appEvents = (): AppEvent[] => appLog.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as AppEvent);

  /** Sends raw connections from the peer to the app's port (captured inbound); what each got back. */
  const raw = (cases: RawCase[], parallel = false): Received[] =>
    rawConnections((command, args, input) => pod.peer.exec(command, args, { input }).stdout, POD_V4, 9080, cases, { parallel });
  /** Runs `fn`, then answers what reached the app meanwhile (after a moment for its log to come). */
  const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 200));
  const seenByApp = async (fn: () => void): Promise<AppEvent[]> => {
    await settle(); // the app's log of what came before has arrived (the client ran synchronously)
    const before = appEvents().length;
    fn();
    await settle();
    return appEvents().slice(before);
  };
  const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: web\r\n${extra}\r\n`;

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="web"\n', 'etc/mesh/resources/policy.yaml': POLICIES,
        'etc/mesh/config/mesh': 'accessLogFile: ./access.log\n',
      },
      writable: true,
      env: ['POD_NAMESPACE=shop', 'MESH_REQUEST_HEADERS_TIMEOUT=1s'],
      prepare: async (p) => {
        app = p.start('env', ['ECHO_LOG=1', process.execPath, join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'app']);
        app.stdout!.setEncoding('utf8').on('data', (d: string) => { appLog += d; });
        await new Promise<void>((resolve, reject) => {
          app.once('exit', (code) => reject(new Error(`app exited with ${code}`)));
          const poll = setInterval(() => {
            if (!appLog.includes('listening')) return;
            clearInterval(poll);
            resolve();
          }, 20);
        });
      },
    });
    pod = sp.pod;
  });
  after(() => sp?.close());

  it('1. Connection cannot take Content-Length away: the body stays a body, no request is smuggled', async () => {
    const smuggled = get('/secret');
    for (const connection of ['content-length', 'close, Content-Length', 'CONTENT-LENGTH']) {
      const events = await seenByApp(() => {
        const [r] = raw([{ data: `POST /public HTTP/1.1\r\nHost: web\r\nConnection: ${connection}\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}` }]);
        assert.deepEqual(statuses(r!), [200], r!.received);
      });
      const requests = events.flatMap((e) => (e.request ? [e.request] : []));
      assert.deepEqual(requests.map((q) => [q.method, q.url, q.body]), [['POST', '/public', smuggled]], connection);
    }
    const [host] = raw([{ data: get('/public', 'Connection: host\r\n') }]);
    assert.deepEqual(statuses(host!), [200], 'Host stays');
    const [coded] = raw([{ data: 'POST /public HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n' }]);
    assert.deepEqual(statuses(coded!), [501]);
  });

  it('2. what is HTTP is parsed as HTTP: a leading CRLF, any upper-case method; lower-case is 400', async () => {
    const events = await seenByApp(() => {
      const r = raw([
        { data: `\r\n${get('/secret')}` },
        { data: `\r\n\r\n${get('/public/private/x')}` },
        { data: 'FOO /secret HTTP/1.1\r\nHost: web\r\n\r\n' },
        { data: 'PURGE /public HTTP/1.1\r\nHost: web\r\n\r\n' },
        { data: 'get /public HTTP/1.1\r\nHost: web\r\n\r\n' },
      ]);
      assert.deepEqual(r.map(statuses), [[403], [403], [403], [200], [400]]);
      // A method node:http does not know is judged and passed on all the same (node answers it 400 itself).
      const [foo] = raw([{ data: 'FOO /public HTTP/1.1\r\nHost: web\r\n\r\n' }]);
      assert.deepEqual(statuses(foo!), [400]);
      assert.doesNotMatch(foo!.received, /Bad Request: /, 'the app\'s own 400, not the proxy\'s refusal');
    });
    assert.deepEqual(events.flatMap((e) => (e.request ? [[e.request.method, e.request.url]] : [])), [['PURGE', '/public']]);
  });

  // (The HTTP/2 preface is HTTP now, judged per stream: sidecar-http2.test.ts.)
  it('2. what is not HTTP gets TCP semantics: ALLOW rules need HTTP, so it is closed before a byte reaches the app', async () => {
    const clientHello = Buffer.from('16030100a5010000a10303' + '00'.repeat(40), 'hex').toString('latin1');
    const events = await seenByApp(() => {
      const r = raw([
        { data: clientHello },
        { data: 'hello /secret\r\nGET /secret HTTP/1.1\r\n\r\n' },
        { data: '\x00\x01\x02GET /secret HTTP/1.1\r\nHost: web\r\n\r\n' },
      ]);
      for (const x of r) {
        assert.equal(x.received, '', 'nothing comes back');
        assert.equal(x.closed, true, 'the connection is closed');
      }
    });
    assert.deepEqual(events, [], JSON.stringify(events));
    const stats = await runCli(['request', 'GET', '/stats?filter=rbac'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.match(stats.stdout, /tcp\.inbound\.rbac\.denied: [3-9]/, stats.stdout);
    const decisions = await runCli(['request', 'GET', '/debug/decisions'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.match(decisions.stdout, /"method": "TCP",[^}]*"authz": "denied: (tls|tcp) connection/);
  });

  it('3. an Upgrade answered without 101 keeps the connection HTTP: the next request is judged', async () => {
    const events = await seenByApp(() => {
      const [r] = raw([{ data: get('/public/ws', 'Connection: upgrade\r\nUpgrade: websocket\r\n') + get('/secret') + get('/public/next') }]);
      assert.deepEqual(statuses(r!), [200, 403, 200], JSON.stringify(r));
    });
    assert.deepEqual(events.flatMap((e) => (e.request ? [e.request.url] : [])), ['/public/ws', '/public/next']);
  });

  it('4. absolute-form: policy judges the URI\'s path and authority; the app gets origin-form', async () => {
    const events = await seenByApp(() => {
      const r = raw([
        { data: 'GET http://web/secret HTTP/1.1\r\nHost: web\r\n\r\n' },
        { data: 'GET http://blocked.example/public HTTP/1.1\r\nHost: ok.example\r\n\r\n' },
        { data: 'GET http://web/public/x?q=1 HTTP/1.1\r\nHost: elsewhere\r\n\r\n' },
        { data: 'POST http://web/secret HTTP/1.1\r\nHost: web\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi' },
      ]);
      assert.deepEqual(r.map(statuses), [[403], [403], [200], [403]]);
    });
    const reqs = events.flatMap((e) => (e.request ? [e.request] : []));
    assert.deepEqual(reqs.map((q) => [q.url, q.headers['host']]), [['/public/x?q=1', 'web']]);
  });

  it('4. a Bearer token in a second Authorization line or after another scheme is verified: a forged one is 401', () => {
    const good = token('demo.jwt');
    const forged = `${good.slice(0, -4)}AAAA`;
    const r = raw([
      { data: get('/headers', `Authorization: Basic Zm9v, Bearer ${forged}\r\n`) },
      { data: get('/headers', `Authorization: Bearer ${good}\r\nAuthorization: Bearer ${forged}\r\n`) },
      { data: get('/headers', `Authorization: Basic Zm9v\r\nAuthorization: Bearer ${forged}\r\n`) },
      { data: get('/headers', `Authorization: Bearer ${good}\r\n`) },
    ]);
    assert.deepEqual(r.map(statuses), [[401], [401], [401], [200]]);
  });

  it('5. paths are normalized before policy, and the app gets the normalized path', async () => {
    const attacks = ['/public/../secret', '/./secret', '/%73ecret', '/public/%2e%2e/secret', '/secret#x', '/public\\..\\secret', '/public/./private/x', '/%2e/secret'];
    const events = await seenByApp(() => {
      const r = raw(attacks.map((p) => ({ data: get(p) })));
      assert.deepEqual(r.map(statuses), attacks.map(() => [403]), JSON.stringify(r));
      const bad = raw([{ data: get('/public/%00') }, { data: get('/public/..;/secret') }]);
      assert.deepEqual(bad.map(statuses), [[400], [400]]);
      const fine = raw([{ data: get('/public/a/../b?x=../../secret') }]);
      assert.deepEqual(fine.map(statuses), [[200]]);
    });
    assert.deepEqual(events.flatMap((e) => (e.request ? [e.request.url] : [])), ['/public/b?x=../../secret']);
  });

  it('5. a header condition sees every value, repeated lines or a comma list, any name case', () => {
    const r = raw([
      { data: get('/public', 'x-role: user\r\nx-role: admin\r\n') },
      { data: get('/public', 'x-role: user, admin\r\n') },
      { data: get('/public', 'X-ROLE: admin\r\n') },
      { data: get('/public', 'x-role: user\r\n') },
    ]);
    assert.deepEqual(r.map(statuses), [[403], [403], [403], [200]]);
  });

  it('6. a client\'s own claim header never reaches the app; a verified token\'s claim does', () => {
    const [forged, real] = raw([
      { data: get('/headers', 'x-jwt-sub: admin\r\n') },
      { data: get('/headers', `x-jwt-sub: admin\r\nAuthorization: Bearer ${token('demo.jwt')}\r\n`) },
    ]);
    const seen = (r: Received): Record<string, string> => (JSON.parse(r.received.slice(r.received.indexOf('\r\n\r\n') + 4)) as { headers: Record<string, string> }).headers;
    assert.equal(seen(forged!)['x-jwt-sub'], undefined);
    assert.equal(seen(real!)['x-jwt-sub'], 'testing@secure.istio.io');
  });

  it('7. a client that sends half a head holds no connection at the app, and is closed at the head time-out', async () => {
    const events = await seenByApp(() => {
      const r = raw(Array.from({ length: 100 }, () => ({ data: 'G', quietMs: 3000 })), true);
      for (const x of r) assert.equal(x.closed, true, 'closed by the proxy within the 1 s head time-out');
    });
    assert.deepEqual(events.filter((e) => e.connection), [], 'the app saw no connection');
  });

  it('the access log says why: RBAC with the deciding policy, UAEX for a bad token, RBAC for a refused connection', async () => {
    const forged = `${token('demo.jwt').slice(0, -4)}AAAA`;
    const r = raw([
      { data: get('/secret?why=deny') },
      { data: get('/nowhere-why') },
      { data: get('/public/why-token', `Authorization: Bearer ${forged}\r\n`) },
      { data: 'why-tcp\r\n' },
    ]);
    assert.deepEqual(r.map(statuses), [[403], [403], [401], []]);
    await settle();
    const lines = readFileSync(join(sp.dir, 'access.log'), 'utf8').split('\n');
    const line = (marker: string): string => lines.find((l) => l.includes(marker)) ?? assert.fail(`no ${marker} in\n${lines.join('\n')}`);
    assert.match(line('"GET /secret?why=deny '), / 403 RBAC rbac_access_denied_matched_policy\[ns\[shop\]-policy\[deny-some\]-rule\[0\]\] .* InboundPassthroughCluster - .* default jwt="absent" principal=- authz="denied by DENY policy shop\/deny-some rule 0" route=-$/);
    assert.match(line('"GET /nowhere-why '), / 403 RBAC rbac_access_denied_matched_policy\[none\] .* authz="denied: no ALLOW policy matched \(1 apply\)"/);
    assert.match(line('"GET /public/why-token '), / 401 UAEX jwt_authn_access_denied\{[^ ]+\} .* jwt="invalid: bad_signature: [^"]*" principal=- authz="not evaluated"/);
    // As TCP, the DENY rule's HTTP fields are ignored (it denies more): the first DENY rule decides.
    assert.ok(lines.some((l) => /"- - -" 0 RBAC - rbac_access_denied_matched_policy\[ns\[shop\]-policy\[deny-some\]-rule\[0\]\] "-" \d+ 0 \d+ - .* InboundPassthroughCluster - .* jwt="-" principal=- authz="denied: tcp connection: denied by DENY policy shop\/deny-some rule 0" route=-$/.test(l)),
      lines.join('\n'));
  });
});
