// The ingress gateway speaking HTTP/2, with clients nobody here wrote, from inside a namespace of
// the test's own: curl (h2c with prior knowledge; ALPN h2 over TLS; HTTP/1.1 beside them),
// @grpc/grpc-js (plaintext and TLS), h2load, a `ws` WebSocket. Every HTTP/2 stream must be judged
// as an HTTP/1.1 request is (VirtualService uri, header and JWT-claim matches with Istio's sample
// tokens, RequestAuthentication), and a gRPC client must get the gateway's own answers as gRPC.
// The apps are test/fixtures/h2-apps.mjs, `a` on 127.0.0.1 and `b` on 127.0.0.2, each with gRPC on
// 7070, HTTP/2 cleartext on 7080, HTTP/1.1 only on 7090 and WebSocket on 7100, all answering their
// name.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  FIXTURES, istioToken, mountCredential, serveIstioJwks, startGatewayPod, type GatewayPod,
} from '../../helpers/gateway.js';
import { grpcArgs, grpcResults, type GrpcCall, type GrpcResult } from '../../helpers/h2-fixtures.js';
import { netnsSkip } from '../../helpers/pod-netns.js';

const H2_PORT = 8080; // a Gateway server with protocol HTTP2
const GRPC_PORT = 8081; // one with protocol GRPC
const HTTPS_PORT = 8443;
const JWKS_PORT = 9999;

/** Istio's sample tokens: `groups-scope.jwt` has `groups: [group1, group2]`, `demo.jwt` has `foo: bar` (and no groups). */
const GROUPS = istioToken('groups-scope.jwt');
const DEMO = istioToken('demo.jwt');
/** groups-scope.jwt with its signature reversed: does not verify. */
const TAMPERED = GROUPS.replace(/[^.]+$/, (sig) => sig.split('').reverse().join(''));

/** What test/fixtures/h2-apps.mjs answers over HTTP (its 7080 and 7090 ports). */
interface Seen {
  readonly app: string;
  readonly version: string;
  readonly method: string;
  readonly authority: string;
  readonly path: string;
}

/** The h2-apps `a` (127.0.0.1) and `b` (127.0.0.2). */
const startApps = (pod: GatewayPod): Promise<unknown> => Promise.all([
  pod.start([join(FIXTURES, 'h2-apps.mjs'), '127.0.0.1', 'a']),
  pod.start([join(FIXTURES, 'h2-apps.mjs'), '127.0.0.2', 'b']),
]);

interface Curled {
  readonly status: number;
  /** The HTTP version curl spoke (`%{http_version}`: 2, 1.1). */
  readonly version: string;
  readonly body: string;
  /** The port of curl's (last) connection. */
  readonly localPort: number;
}

/** curl from inside the pod. */
async function curl(pod: GatewayPod, args: readonly string[]): Promise<Curled> {
  const r = await pod.exec('curl', ['-sS', '--max-time', '10', '-w', '\n%{http_code} %{http_version} %{local_port}', ...args]);
  assert.equal(r.code, 0, `curl ${args.join(' ')}: ${r.stderr}`);
  const cut = r.stdout.lastIndexOf('\n');
  const [status, version, localPort] = r.stdout.slice(cut + 1).split(' ');
  return { status: Number(status), version: version!, body: r.stdout.slice(0, cut), localPort: Number(localPort) };
}

/**
 * The gateway's side of a connection its client has closed (curl closes with a FIN when it exits),
 * if it is still there after 2 s: `ss` lines of sockets on `port` towards `clientPort` not closed yet
 * (CLOSE-WAIT: the client's FIN read, the gateway's own never sent); '' once it let go.
 */
async function heldAfterClientLeft(pod: GatewayPod, port: number, clientPort: number): Promise<string> {
  for (let i = 0; ; i++) {
    const r = await pod.exec('ss', ['-Htan', 'state', 'close-wait', `( sport = :${port} and dport = :${clientPort} )`]);
    if (r.stdout.trim() === '' || i === 20) return r.stdout.trim();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** What the app said it saw, from a curl answer (app, the version it was spoken to, path). */
const seen = (body: string): Pick<Seen, 'app' | 'version' | 'path'> => {
  const s = JSON.parse(body) as Seen;
  return { app: s.app, version: s.version, path: s.path };
};

/** grpc-js calls over one channel from inside the pod (test/fixtures/h2-clients.mjs), in order. */
async function grpcCalls(pod: GatewayPod, target: string, calls: readonly GrpcCall[], tls?: { ca: string; serverName: string }): Promise<GrpcResult[]> {
  const r = await pod.exec(process.execPath, grpcArgs(target, calls, tls));
  return grpcResults(r.code, r.stdout, r.stderr);
}

/** `name: value` of the gateway's /stats (the listener's HTTP counters are `http.inbound.*`). */
async function stats(pod: GatewayPod): Promise<Map<string, number>> {
  const r = await pod.ns.runCli(['request', 'GET', '/stats']);
  assert.equal(r.code, 0, r.stderr);
  return new Map([...r.stdout.matchAll(/^(\S+): (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

/** Waits (at most 5 s) until the gateway's output after `since` has a line matching each of `patterns`; answers those lines. */
async function logLines(pod: GatewayPod, since: number, patterns: readonly RegExp[]): Promise<string[]> {
  for (let i = 0; ; i++) {
    const lines = pod.output().slice(since).split('\n');
    const found = patterns.map((re) => lines.find((l) => re.test(l)));
    if (found.every((l) => l !== undefined) || i === 100) return found.map((l) => l ?? '');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('gateway HTTP/2: plaintext HTTP2 and GRPC ports (prior knowledge beside HTTP/1.1), JWT claims, gRPC', { skip: netnsSkip }, () => {
  const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: gw, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${H2_PORT}, name: http2, protocol: HTTP2}
    hosts: ["*"]
  - port: {number: ${GRPC_PORT}, name: grpc, protocol: GRPC}
    hosts: ["*"]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: edge, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - name: by-header
    match: [{headers: {x-backend: {exact: b}}}]
    route: [{destination: {host: 127.0.0.2, port: {number: 7090}}}]
  - name: by-uri
    match: [{uri: {prefix: /h2}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 7080}}}]
  - name: websocket
    match: [{uri: {prefix: /ws}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 7100}}}]
  - name: group1
    match: [{uri: {prefix: /test.Echo/}, headers: {"@request.auth.claims.groups": {exact: group1}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 7070}}}]
  - name: nothing-there
    match: [{uri: {exact: /test.Echo/Stream}, headers: {"@request.auth.claims.foo": {exact: bar}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 7999}}}]
  - name: foo-bar
    match: [{uri: {prefix: /test.Echo/}, headers: {"@request.auth.claims.foo": {exact: bar}}}]
    route: [{destination: {host: 127.0.0.2, port: {number: 7070}}}]
---
apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  jwtRules:
  - issuer: testing@secure.istio.io
    jwksUri: http://127.0.0.1:${JWKS_PORT}/jwks.json
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: no-admin, namespace: mesh-system}
spec:
  action: DENY
  rules:
  - to: [{operation: {paths: [/test.Echo/Admin]}}]
`;
  const GRPC_TARGET = `127.0.0.1:${GRPC_PORT}`;
  let pod: GatewayPod;

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'edge.yaml': RESOURCES },
      prepare: async (p) => {
        await startApps(p);
        await serveIstioJwks(p, JWKS_PORT);
      },
    });
  });
  after(() => pod?.close());

  it('h2c with prior knowledge (curl) is routed by uri and by header; upstreams get HTTP/2 when they speak it, else HTTP/1.1', async () => {
    const h2 = ['--http2-prior-knowledge'];
    const byUri = await curl(pod, [...h2, `http://127.0.0.1:${H2_PORT}/h2/one`]);
    assert.equal(byUri.version, '2', byUri.body);
    assert.deepEqual(seen(byUri.body), { app: 'a', version: '2.0', path: '/h2/one' }, 'a: its HTTP/2 port, spoken HTTP/2');
    // b's 7090 speaks HTTP/1.1 only: the gateway falls back to HTTP/1.1 for it (twice: the first
    // request finds out, the second is sent so), the client still speaks HTTP/2.
    for (const n of [1, 2]) {
      const byHeader = await curl(pod, [...h2, '-H', 'x-backend: b', `http://127.0.0.1:${H2_PORT}/h2/two?n=${n}`]);
      assert.equal(byHeader.version, '2');
      assert.deepEqual(seen(byHeader.body), { app: 'b', version: '1.1', path: `/h2/two?n=${n}` }, 'the header rule comes first');
    }
    const none = await curl(pod, [...h2, `http://127.0.0.1:${H2_PORT}/elsewhere`]);
    assert.deepEqual([none.status, none.version], [404, '2']);
    const grpcPort = await curl(pod, [...h2, `http://127.0.0.1:${GRPC_PORT}/h2/three`]);
    assert.deepEqual([grpcPort.version, seen(grpcPort.body)], ['2', { app: 'a', version: '2.0', path: '/h2/three' }], 'the GRPC server\'s port too');
  });

  it('plain HTTP/1.1 on the same ports still works', async () => {
    for (const port of [H2_PORT, GRPC_PORT]) {
      const r = await curl(pod, ['--http1.1', '-H', 'x-backend: b', `http://127.0.0.1:${port}/h1`]);
      assert.equal(r.version, '1.1');
      assert.deepEqual(seen(r.body), { app: 'b', version: '1.1', path: '/h1' });
      const none = await curl(pod, ['--http1.1', `http://127.0.0.1:${port}/elsewhere`]);
      assert.deepEqual([none.status, none.version], [404, '1.1']);
    }
  });

  it('a gRPC call is routed by JWT claims as an HTTP/1.1 request is: the same rule, the same upstream', async () => {
    const [a, b] = await grpcCalls(pod, GRPC_TARGET, [{ method: 'Ping', text: 'x', token: GROUPS }, { method: 'Ping', text: 'y', token: DEMO }]);
    assert.deepEqual([a?.code, a?.texts], [0, ['a: x']], pod.output());
    assert.deepEqual([b?.code, b?.texts], [0, ['b: y']]);
    // The same two requests over HTTP/1.1 (the gRPC apps cannot answer them: only the decisions count).
    const url = `http://127.0.0.1:${GRPC_PORT}/test.Echo/Ping`;
    pod.send([GROUPS, DEMO].map((t) => ({ url, method: 'POST', headers: { authorization: `Bearer ${t}` } })));
    const r = await pod.ns.runCli(['request', 'GET', '/debug/decisions?limit=4']);
    const decisions = (JSON.parse(r.stdout) as { decisions: Record<string, unknown>[] }).decisions
      .map((d) => ({ path: d['path'], jwt: d['jwt'], principal: d['principal'], route: d['route'], upstream: d['upstream'] }));
    assert.equal(decisions.length, 4);
    const [grpcA, grpcB, http1A, http1B] = decisions;
    assert.deepEqual(grpcA, http1A);
    assert.deepEqual(grpcB, http1B);
    assert.deepEqual([grpcA?.upstream, grpcB?.upstream], ['127.0.0.1:7070', '127.0.0.2:7070']);
    assert.match(String(grpcA?.route), /rule 3 "group1"/);
    assert.match(String(grpcB?.route), /rule 5 "foo-bar"/);
  });

  it('the gateway\'s own answers come as gRPC statuses, for the same decisions an HTTP/1.1 request gets: 404, 401, 403, 503', async () => {
    const cases: [GrpcCall, number, number][] = [
      [{ method: 'Ping', text: 'x' }, 404, 12], // no token: no claim route; UNIMPLEMENTED
      [{ method: 'Ping', text: 'x', token: TAMPERED }, 401, 16], // UNAUTHENTICATED
      [{ method: 'Admin', text: 'x', token: GROUPS }, 403, 7], // the DENY policy; PERMISSION_DENIED
      [{ method: 'Stream', count: 1, token: DEMO }, 503, 14], // routed to a port nobody listens on; UNAVAILABLE
    ];
    const calls = await grpcCalls(pod, GRPC_TARGET, cases.map(([call]) => call));
    const http1 = pod.send(cases.map(([call]) => ({
      url: `http://127.0.0.1:${GRPC_PORT}/test.Echo/${call.method}`, method: 'POST', headers: call.token ? { authorization: `Bearer ${call.token}` } : {} as Record<string, string>,
    })));
    assert.deepEqual(http1.map((a) => a.status), cases.map(([, status]) => status));
    // The same reason as the HTTP/1.1 body, in grpc-message.
    assert.deepEqual(calls.map((c) => [c.code, c.details]), cases.map(([, , code], i) => [code, http1[i]!.body.trim()]));
  });

  it('gRPC through the gateway: unary, server streaming, a non-OK status passed on unchanged, 5 MB each way', async () => {
    const [ok, stream, fail, big] = await grpcCalls(pod, GRPC_TARGET, [
      { method: 'Ping', text: 'hello', token: GROUPS },
      { method: 'Stream', count: 5, token: GROUPS },
      { method: 'Fail', text: 'widget', token: GROUPS },
      { method: 'Ping', text: 'big', bytes: 5 * 1024 * 1024, token: GROUPS },
    ]);
    assert.deepEqual(ok, { ...ok, code: 0, details: '', texts: ['a: hello'] });
    assert.deepEqual(stream, { ...stream, code: 0, texts: ['a #1', 'a #2', 'a #3', 'a #4', 'a #5'] });
    assert.deepEqual([fail?.code, fail?.details, fail?.texts], [5, 'no such thing: widget', []], 'NOT_FOUND and its message, as the app said');
    assert.deepEqual([big?.code, big?.texts, big?.bytes, big?.intact], [0, ['a: big'], 5 * 1024 * 1024, true]);
  });

  it('h2load: 200 requests over 2 connections, 10 streams at a time on each, all answered 200', async () => {
    const r = await pod.exec('h2load', ['-n', '200', '-c', '2', '-m', '10', `http://127.0.0.1:${H2_PORT}/h2/load`], 30_000);
    assert.equal(r.code, 0, r.stderr);
    // h2load exits 0 whatever happened to the requests: its summary says.
    assert.match(r.stdout, /^requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout$/m, r.stdout);
    assert.match(r.stdout, /^status codes: 200 2xx, 0 3xx, 0 4xx, 0 5xx$/m);
    assert.match(r.stdout, /^Application protocol: h2c$/m);
  });

  it('a WebSocket (ws, HTTP/1.1 Upgrade) through the gateway still works', async () => {
    const r = await pod.exec(process.execPath, [join(FIXTURES, 'h2-clients.mjs'), 'ws', `ws://127.0.0.1:${H2_PORT}/ws/chat`, 'hello']);
    assert.deepEqual([r.code, r.stdout], [0, 'a echo: hello\n'], r.stderr);
  });

  it('a client that hangs up is let go: the gateway closes its side of the connection, HTTP/1.1 and HTTP/2 alike', async () => {
    const http1 = await curl(pod, ['--http1.1', '-H', 'x-backend: b', `http://127.0.0.1:${H2_PORT}/bye`]);
    assert.equal(await heldAfterClientLeft(pod, H2_PORT, http1.localPort), '', 'HTTP/1.1');
    const h2 = await curl(pod, ['--http2-prior-knowledge', `http://127.0.0.1:${H2_PORT}/h2/bye`]);
    assert.equal(h2.status, 200);
    // Else every such connection holds a descriptor and a place in the connection budget until the
    // 300 s idle time-out (and /stats counts it active): a client that reconnects often exhausts it.
    assert.equal(await heldAfterClientLeft(pod, H2_PORT, h2.localPort), '', 'HTTP/2 with prior knowledge: the gateway still holds the connection curl closed');
  });

  it('the access log says HTTP/2 and the gRPC status; /stats counts HTTP/2 requests and gRPC calls', async () => {
    const before = await stats(pod);
    const mark = pod.output().length;
    const [ok] = await grpcCalls(pod, GRPC_TARGET, [{ method: 'Ping', text: 'logged', token: GROUPS }, { method: 'Fail', text: 'logged', token: GROUPS }, { method: 'Ping' }]);
    assert.equal(ok?.code, 0);
    await curl(pod, ['--http2-prior-knowledge', `http://127.0.0.1:${H2_PORT}/h2/logged`]);
    await curl(pod, ['--http1.1', '-H', 'x-backend: b', `http://127.0.0.1:${H2_PORT}/h1/logged`]);
    const [routed, failed, local, curled, http1] = await logLines(pod, mark, [
      /"POST \/test\.Echo\/Ping HTTP\/2" 200 - via_upstream .* grpc_status=OK jwt="valid"/,
      /"POST \/test\.Echo\/Fail HTTP\/2" 200 - via_upstream .* grpc_status=NotFound jwt="valid"/,
      /"POST \/test\.Echo\/Ping HTTP\/2" 200 NR route_not_found .* grpc_status=Unimplemented jwt="absent"/,
      /"GET \/h2\/logged HTTP\/2" 200 /,
      /"GET \/h1\/logged HTTP\/1\.1" 200 /,
    ]);
    assert.match(routed!, new RegExp('^\\[[^\\]]+\\] "POST /test\\.Echo/Ping HTTP/2" 200 - via_upstream - "-" 17 18 \\d+ \\d+ "127\\.0\\.0\\.1" "grpc-node-js/[^"]+" "-" '
      + '"127\\.0\\.0\\.1:8081" "127\\.0\\.0\\.1:7070" outbound\\|7070\\|\\|127\\.0\\.0\\.1 127\\.0\\.0\\.1:\\d+ 127\\.0\\.0\\.1:8081 127\\.0\\.0\\.1:\\d+ - group1 grpc_status=OK '
      + 'jwt="valid" principal="testing@secure\\.istio\\.io/testing@secure\\.istio\\.io" authz="allowed: no DENY policy matched and no ALLOW policy applies" route="vs mesh-system/edge rule 3 \\\\"group1\\\\" \\(match 0\\)"$'), routed);
    assert.match(failed!, / group1 grpc_status=NotFound jwt="valid" /);
    assert.match(local!, /"127\.0\.0\.1:8081" "-" - - 127\.0\.0\.1:8081 127\.0\.0\.1:\d+ - - grpc_status=Unimplemented jwt="absent" /);
    assert.match(curled!, / by-uri jwt="absent" /, 'not a gRPC call: no grpc_status');
    assert.match(http1!, / by-header jwt="absent" /);
    const now = await stats(pod);
    const delta = (name: string): number => (now.get(`http.inbound.${name}`) ?? 0) - (before.get(`http.inbound.${name}`) ?? 0);
    // Four HTTP/2 streams on two connections (grpc-js's channel, curl's), one HTTP/1.1 request; nothing left
    // open. gRPC statuses are counted by number, as Envoy's gRPC stats name them.
    assert.deepEqual({
      http2: delta('downstream_rq_http2_total'), all: delta('downstream_rq_total'), connections: delta('downstream_cx_http2_total'),
      grpc: delta('grpc.total'), ok: delta('grpc.status_0'), notFound: delta('grpc.status_5'), unimplemented: delta('grpc.status_12'),
      active: now.get('http.inbound.downstream_rq_active'),
    }, { http2: 4, all: 5, connections: 2, grpc: 3, ok: 1, notFound: 1, unimplemented: 1, active: 0 }, [...now].filter(([k]) => k.startsWith('http.inbound')).join('\n'));
    assert.ok(now.get('http.inbound.downstream_rq_http2_total')! > 200, 'h2load\'s 200 among them');
  });
});

describe('gateway HTTP/2: an HTTPS port offering h2 and http/1.1 in ALPN', { skip: netnsSkip }, () => {
  const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: tls, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${HTTPS_PORT}, name: https, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: SIMPLE, credentialName: localhost-cert}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: tls, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [tls]
  http:
  - name: grpc
    match: [{uri: {prefix: /test.Echo/}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 7070}}}]
  - name: web
    route: [{destination: {host: 127.0.0.1, port: {number: 7090}}}]
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: by-connection, namespace: mesh-system}
spec:
  action: DENY
  rules:
  - to: [{operation: {paths: ["/guarded/sni"]}}]
    when: [{key: connection.sni, values: ["localhost"]}]
  - to: [{operation: {paths: ["/guarded/ip"]}}]
    when: [{key: destination.ip, values: ["127.0.0.2"]}]
`;
  /** The mounted credential is the fixtures' self-signed localhost certificate: its own trust root. */
  const CA = join(FIXTURES, 'localhost.crt');
  const https = (...args: string[]): string[] => ['--cacert', CA, '--resolve', `localhost:${HTTPS_PORT}:127.0.0.1`, ...args];
  let pod: GatewayPod;

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'tls.yaml': RESOURCES },
      prepare: async (p) => {
        mountCredential(p.dir, 'localhost-cert');
        await startApps(p);
      },
    });
  });
  after(() => pod?.close());

  it('curl --http2 negotiates h2 and is routed; curl --http1.1 on the same port gets HTTP/1.1', async () => {
    const h2 = await curl(pod, https('--http2', `https://localhost:${HTTPS_PORT}/over/h2`));
    assert.equal(h2.version, '2', h2.body);
    assert.deepEqual(seen(h2.body), { app: 'a', version: '1.1', path: '/over/h2' });
    const h1 = await curl(pod, https('--http1.1', `https://localhost:${HTTPS_PORT}/over/h1`));
    assert.equal(h1.version, '1.1');
    assert.deepEqual(seen(h1.body), { app: 'a', version: '1.1', path: '/over/h1' });
  });

  it('an HTTP/2 request is judged with its connection too: connection.sni, destination.ip', async () => {
    const status = async (args: string[]): Promise<[string, number]> => {
      const r = await curl(pod, ['--http2', ...args]);
      return [r.version, r.status];
    };
    assert.deepEqual(await status(https(`https://localhost:${HTTPS_PORT}/guarded/sni`)), ['2', 403], 'SNI localhost');
    // -k: the certificate names localhost only; the SNI is other.test.
    assert.deepEqual(await status(['-k', '--resolve', `other.test:${HTTPS_PORT}:127.0.0.1`, `https://other.test:${HTTPS_PORT}/guarded/sni`]), ['2', 200], 'another SNI');
    assert.deepEqual(await status(['--cacert', CA, '--resolve', `localhost:${HTTPS_PORT}:127.0.0.2`, `https://localhost:${HTTPS_PORT}/guarded/ip`]), ['2', 403], 'to 127.0.0.2');
    assert.deepEqual(await status(https(`https://localhost:${HTTPS_PORT}/guarded/ip`)), ['2', 200], 'to 127.0.0.1');
  });

  it('a client that hangs up is let go, over TLS too', async () => {
    for (const version of ['--http1.1', '--http2']) {
      const r = await curl(pod, https(version, `https://localhost:${HTTPS_PORT}/bye`));
      assert.equal(r.status, 200);
      assert.equal(await heldAfterClientLeft(pod, HTTPS_PORT, r.localPort), '', version);
    }
  });

  it('grpc-js with TLS credentials (the certificate as root, its name checked) makes its calls', async () => {
    const [ping, stream] = await grpcCalls(pod, `127.0.0.1:${HTTPS_PORT}`, [{ method: 'Ping', text: 'secure' }, { method: 'Stream', count: 2 }],
      { ca: CA, serverName: 'localhost' });
    assert.deepEqual([ping?.code, ping?.texts], [0, ['a: secure']], pod.output());
    assert.deepEqual([stream?.code, stream?.texts], [0, ['a #1', 'a #2']]);
    // The access log names the SNI the client gave (ssl_target_name_override).
    const [line] = await logLines(pod, 0, [/"POST \/test\.Echo\/Ping HTTP\/2" 200 /]);
    assert.match(line!, /127\.0\.0\.1:8443 127\.0\.0\.1:\d+ localhost grpc grpc_status=OK /);
  });
});
