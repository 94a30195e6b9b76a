// A ServiceEntry port's declared protocol, end to end in a pod (capture rules, the sidecar as uid
// 1337): a port declared TCP (or MYSQL...) is relayed from the first byte, never parsed, so an
// application protocol that looks like HTTP reaches its server byte for byte; a port declared HTTP
// is HTTP, and bytes that are not go to the original destination (Istio's fall-through chain), not
// to the service's endpoints; nothing is opened for it before the client speaks. Ports nothing
// declares are sniffed as before. The apps (test/fixtures/protocol-apps.mjs) live on the peer's
// addresses and say what they received.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { startSidecarPod, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
/** The `apps` entry's address (resolution NONE: the apps listen there themselves). */
const APPS = '198.18.0.21';
/** The `web` entry's address, where an app also listens (what the original destination reaches), and its endpoint. */
const WEB = '198.18.0.23';
const WEB_ENDPOINT = '198.18.0.22';
/** The endpoint of `db`, an entry without addresses. */
const DB_ENDPOINT = '198.18.0.24';
/** No ServiceEntry has this address. */
const OTHER = '198.18.0.25';

const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: apps, namespace: default}
spec:
  hosts: [apps.example.com]
  addresses: [${APPS}]
  ports:
  - {number: 7000, name: tcp, protocol: TCP}
  - {number: 7001, name: unset}
  - {number: 7002, name: mysql, protocol: MYSQL}
  resolution: NONE
---
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: default}
spec:
  hosts: [web.example.com]
  addresses: [${WEB}]
  ports:
  - {number: 8000, name: http, protocol: HTTP}
  - {number: 8001, name: unset}
  - {number: 8002, name: http-late, protocol: HTTP}
  - {number: 8003, name: grpc, protocol: GRPC}
  resolution: STATIC
  endpoints: [{address: ${WEB_ENDPOINT}}]
---
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec:
  hosts: [db.example.com]
  ports: [{number: 7000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: ${DB_ENDPOINT}}]
`;

const APPS_ON_PEER = [
  { address: APPS, port: 7000, kind: 'record', name: 'apps-7000' },
  { address: APPS, port: 7001, kind: 'record', name: 'apps-7001' },
  { address: APPS, port: 7002, kind: 'greet', name: 'mysql' },
  { address: DB_ENDPOINT, port: 7000, kind: 'record', name: 'db-7000' },
  { address: OTHER, port: 7000, kind: 'record', name: 'other-7000' },
  ...[8000, 8001].flatMap((port) => [
    { address: WEB, port, kind: 'tag', name: 'original-destination' },
    { address: WEB_ENDPOINT, port, kind: 'tag', name: 'endpoint' },
  ]),
  { address: WEB, port: 8002, kind: 'greet', name: 'late-original' },
  { address: WEB_ENDPOINT, port: 8002, kind: 'greet', name: 'late-endpoint' },
];

/** An HTTP/1 request line with a lower-case method: the HTTP path answers it 400 and forwards nothing. */
const LOWER_CASE = 'get /status HTTP/1.1\r\nHost: apps.example.com\r\n\r\n';
/** A request the HTTP path would rewrite (dot segments, header spacing) or refuse (two content-lengths). */
const REWRITTEN = 'GET /a/../b//c HTTP/1.1\r\nHost: apps.example.com\r\nX-Odd:   spaced  \r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc';

interface Exchange { readonly received: string; readonly error?: string }

describe('a ServiceEntry port\'s declared protocol', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let apps: ChildProcess;
  const events: { name: string; event: string; received?: string }[] = [];

  /**
   * One connection from the app's side of the pod: `bytes` written at once and the write side closed
   * (`after-first`: once the server's first bytes came; `silent`: nothing written; `request`: not
   * closed — a FIN behind a request is a client leaving — and the answer taken once nothing more came
   * for 300 ms), then everything read until the connection closes, or `ms` pass.
   */
  const exchange = (host: string, port: number, bytes: string, how: 'at-once' | 'after-first' | 'silent' | 'request' = 'at-once', ms = 4000): Exchange => {
    const script = `const [host, port, b64, how, ms] = process.argv.slice(1);
      const s = require('net').connect(Number(port), host);
      const got = []; let sent = false; let quiet;
      const send = () => {
        if (sent || how === 'silent') return;
        sent = true;
        const bytes = Buffer.from(b64, 'base64');
        if (how === 'request') s.write(bytes); else s.end(bytes);
      };
      const done = (error) => { process.stdout.write(JSON.stringify({ received: Buffer.concat(got).toString('latin1'), ...(error ? { error } : {}) })); process.exit(0); };
      s.on('connect', () => { if (how === 'at-once' || how === 'request') send(); });
      s.on('data', (d) => {
        got.push(d);
        if (how === 'after-first') send();
        if (how === 'request') { clearTimeout(quiet); quiet = setTimeout(() => done(), 300); }
      });
      s.on('close', () => done());
      s.on('error', (e) => done(e.code));
      setTimeout(() => done('timeout'), Number(ms));`;
    const r = sp.pod.exec(process.execPath, ['-e', script, host, String(port), Buffer.from(bytes, 'latin1').toString('base64'), how, String(ms)]);
    return JSON.parse(r.stdout) as Exchange;
  };
  /** What the app `name` recorded of its connections' bytes, in order. */
  const recorded = (name: string): string[] =>
    events.filter((e) => e.name === name && e.event === 'bytes').map((e) => Buffer.from(e.received!, 'base64').toString('latin1'));
  const connections = (name: string): number => events.filter((e) => e.name === name && e.event === 'connection').length;

  before(async () => {
    sp = await startSidecarPod({
      files: { 'etc/mesh/resources/protocol.yaml': RESOURCES },
      env: ['POD_NAMESPACE=default'],
      prepare: async (pod) => {
        for (const address of [APPS, WEB_ENDPOINT, WEB, DB_ENDPOINT, OTHER]) pod.peer.exec('ip', ['addr', 'add', `${address}/24`, 'dev', 'peer0']);
        apps = pod.peer.start(process.execPath, [join(FIXTURES, 'protocol-apps.mjs'), JSON.stringify(APPS_ON_PEER)]);
        let out = '';
        let listening = false;
        apps.stdout!.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          let nl;
          while ((nl = out.indexOf('\n')) >= 0) {
            const line = out.slice(0, nl);
            out = out.slice(nl + 1);
            if (line.startsWith('{')) events.push(JSON.parse(line) as (typeof events)[number]);
            else if (line === 'listening') listening = true;
          }
        });
        await waitFor('the apps listening', () => listening || undefined, 15_000);
      },
    });
  });
  after(() => sp?.close());

  it('a port declared TCP: an HTTP-looking request reaches the app byte for byte, never parsed', async () => {
    for (const bytes of [LOWER_CASE, REWRITTEN]) {
      const before = recorded('apps-7000').length;
      const r = exchange(APPS, 7000, bytes);
      assert.equal(r.received, `apps-7000: ${Buffer.byteLength(bytes, 'latin1')}`, JSON.stringify(r));
      await waitFor('the app\'s record', () => recorded('apps-7000').length > before || undefined);
      assert.equal(recorded('apps-7000').at(-1), bytes);
    }
  });

  it('a port of an entry without addresses, declared TCP: its endpoints\' connections are relayed the same', async () => {
    const r = exchange(DB_ENDPOINT, 7000, LOWER_CASE);
    assert.equal(r.received, `db-7000: ${LOWER_CASE.length}`, JSON.stringify(r));
    await waitFor('the app\'s record', () => recorded('db-7000').length > 0 || undefined);
    assert.deepEqual(recorded('db-7000'), [LOWER_CASE]);
  });

  it('MYSQL (a TCP protocol): the server speaks first, then HTTP-looking bytes are relayed as they are', () => {
    const r = exchange(APPS, 7002, REWRITTEN, 'after-first');
    assert.equal(r.received, `mysql-hello\n${REWRITTEN}`, JSON.stringify(r));
  });

  it('undeclared: a port of unset protocol, and an address no entry has, are sniffed as before (the HTTP path answers 400)', async () => {
    for (const [host, port, name] of [[APPS, 7001, 'apps-7001'], [OTHER, 7000, 'other-7000']] as const) {
      const r = exchange(host, port, LOWER_CASE);
      assert.match(r.received, /^HTTP\/1\.1 400 /, `${host}:${port}: ${JSON.stringify(r)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      // (The connection opened at accept for a server that might speak first is closed unused: no byte.)
      assert.deepEqual(recorded(name).filter((b) => b.length > 0), [], `${name} got no byte`);
    }
  });

  it('a port declared HTTP: HTTP goes to the service\'s endpoint; other bytes pass through to the original destination', () => {
    for (const port of [8000, 8001]) {
      const http = exchange(WEB, port, 'GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n', 'request');
      assert.match(http.received, /^HTTP\/1\.1 200 [^]*\r\n\r\nendpoint$/, `${port}: ${JSON.stringify(http)}\n${sp.stderr()}`);
    }
    const binary = '\x00\x01not http\n';
    assert.equal(exchange(WEB, 8000, binary).received, `original-destination:${binary}`);
    const tls = '\x16\x03\x01\x00\x05hello';
    assert.equal(exchange(WEB, 8000, tls).received, `original-destination:${tls}`);
    // Unset: the same bytes are sniffed as TCP, and TCP goes to the service's endpoint (as before).
    assert.equal(exchange(WEB, 8001, binary).received, `endpoint:${binary}`);
  });

  it('a port declared HTTP: an HTTP/2 client\'s request reaches the endpoint as HTTP/1.1, no HTTP/2 connection tried', async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const before = connections('endpoint');
    const script = `const c = require('http2').connect('http://${WEB}:8000');
      const req = c.request({ ':path': '/', ':authority': 'web.example.com' }); let body = ''; let status = 0;
      req.on('response', (h) => { status = h[':status']; }); req.setEncoding('utf8'); req.on('data', (d) => { body += d; });
      req.on('end', () => { process.stdout.write(status + ' ' + body); c.close(); }); req.on('error', (e) => process.stdout.write('error ' + e.code));
      setTimeout(() => process.exit(0), 4000).unref();`;
    assert.equal(sp.pod.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout, '200 endpoint');
    await new Promise((resolve) => setTimeout(resolve, 300));
    // A probe would have opened a connection the app answers as bytes (the preface is no HTTP/1 request line), then another.
    assert.equal(connections('endpoint') - before, 1);
  });

  it('HTTP2, GRPC: a warning at load names the field (an HTTP/1.1 client\'s requests are not sent as HTTP/2)', () => {
    assert.match(sp.stderr(), /ServiceEntry default\/web: spec\.ports\[3\]\.protocol: GRPC: an HTTP\/1\.1 client's requests go upstream as HTTP\/1\.1 here/);
  });

  it('a port declared HTTP: nothing is opened before the client speaks (a server that speaks first gets no connection)', () => {
    const r = exchange(WEB, 8002, '', 'silent', 1500);
    assert.deepEqual(r, { received: '', error: 'timeout' });
    assert.equal(connections('late-original') + connections('late-endpoint'), 0);
  });
});
