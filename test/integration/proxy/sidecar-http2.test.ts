// HTTP/2 and gRPC through the sidecar, end to end, as in a pod: the pod's rules applied by
// `pilot-agent mesh-iptables` (REDIRECT), the sidecar as uid 1337 with an access log, an inbound
// AuthorizationPolicy denying one gRPC method, and the same apps on both sides (test/fixtures/
// h2-apps.mjs: gRPC, HTTP/2 cleartext, HTTP/1.1 only, WebSocket). Clients nobody here wrote —
// @grpc/grpc-js, curl --http2-prior-knowledge, h2load, ws — call them outbound (from the pod to the
// peer) and inbound (from the peer to the pod): calls and streams pass with their status, message
// and trailers, an HTTP/1.1-only upstream is reached over HTTP/1.1, a local answer to a gRPC client
// is gRPC (PERMISSION_DENIED, UNAVAILABLE), everything is counted and logged as HTTP/2, a connection
// its client closes is closed, a flood on one connection leaves the others alone, a client slow to
// send its preface is still proxied at L7, and a drain sends GOAWAY while the stream in flight ends.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { grpcCallsIn, H2_APPS as APPS, H2_CLIENTS as CLIENTS, type GrpcCall, type GrpcResult } from '../../helpers/h2-fixtures.js';
import { netnsSkip, PEER_V4, POD_V4, type Namespace, type Pod } from '../../helpers/pod-netns.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';
import { sumOf } from '../../helpers/prom-samples.js';

/** The apps' ports (h2-apps.mjs), and one where nothing listens. */
const GRPC = 7070;
const H2C = 7080;
const HTTP1 = 7090;
const WS = 7100;
const DOWN = 7999;
const MB5 = 5 * 1024 * 1024;

// Inbound only: the pod's workload may not be asked /test.Echo/Admin; every other method passes.
const POLICY = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: no-admin, namespace: shop}
spec:
  selector: {matchLabels: {app: echo}}
  action: DENY
  rules:
  - to:
    - operation: {paths: ["/test.Echo/Admin"]}
`;

/** gRPC calls over one grpc-js channel (one connection) from inside `ns`. */
function grpcCalls(ns: Namespace, host: string, calls: readonly GrpcCall[], port = GRPC): GrpcResult[] {
  return grpcCallsIn(ns, `${host}:${port}`, calls);
}

/** curl with HTTP/2 prior knowledge from inside `ns`: the status, the HTTP version used and the body. */
function curlH2(ns: Namespace, url: string, body?: string): { status: number; version: string; body: string } {
  const r = ns.exec('curl', ['-sS', '--http2-prior-knowledge', '--max-time', '5', '-w', '\n%{http_code} %{http_version}',
    ...(body === undefined ? [] : ['--data-binary', body]), url], { allowFailure: true });
  const nl = r.stdout.lastIndexOf('\n');
  const [status = '0', version = ''] = r.stdout.slice(nl + 1).split(' ');
  return { status: Number(status), version, body: r.stdout.slice(0, nl) };
}

/** Resolves with what a started child printed, once it exits. */
function output(child: ChildProcess): Promise<string> {
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  return new Promise((resolve) => child.once('close', () => resolve(out)));
}

/** The agent's counters (`name: value` lines of the admin's /stats). */
async function stats(pod: Pod): Promise<Map<string, number>> {
  const r = await runCli(['request', 'GET', '/stats'], { prefix: ['ip', 'netns', 'exec', pod.name] });
  assert.equal(r.code, 0, r.stderr);
  return new Map(r.stdout.split('\n').filter((l) => l.includes(': ')).map((l) => {
    const [name, value] = l.split(': ');
    return [name!, Number(value)];
  }));
}

/** The sum of the mesh_requests_total series with these labels in the admin's /stats/prometheus (0 when absent). */
async function requestsTotal(pod: Pod, labels: Record<string, string>): Promise<number> {
  const r = await runCli(['request', 'GET', '/stats/prometheus'], { prefix: ['ip', 'netns', 'exec', pod.name] });
  assert.equal(r.code, 0, r.stderr);
  return sumOf(r.stdout, 'mesh_requests_total', labels);
}

describe('HTTP/2 and gRPC through the sidecar (REDIRECT)', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let pod: Pod;
  let logFile = '';

  /** Access log lines of connections carried as opaque TCP (Envoy's `"- - -"`) to `hostPort`. */
  const tcpLines = (hostPort: string): string[] => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '').split('\n')
    .filter((l) => l.includes('"- - -"') && l.includes(` "${hostPort}" `));

  /**
   * The first access log line matching `re` (waiting for it: lines are written when the stream
   * closes). Missing, the failure says how many connections to the HTTP/2 apps were carried as
   * opaque TCP instead (then no request line is written).
   */
  const logLine = (re: RegExp): Promise<string> => waitFor(`an access log line matching ${re}`, () => {
    const text = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
    return text.split('\n').find((l) => re.test(l));
  }).catch((e: Error) => assert.fail(`${e.message}; connections to the HTTP/2 apps relayed as opaque TCP: `
    + `${[PEER_V4, POD_V4].flatMap((h) => [GRPC, H2C].flatMap((p) => tcpLines(`${h}:${p}`))).length}`));

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="echo"\n',
        'etc/mesh/resources/policy.yaml': POLICY,
        'etc/mesh/config/mesh': 'accessLogFile: ./access.log\n',
      },
      writable: true, // the sidecar (uid 1337) creates its access log there
      env: ['POD_NAMESPACE=shop'],
      prepare: async (p) => {
        await untilFirstOutput(p.peer.start(process.execPath, [APPS, PEER_V4, 'peer']));
        await untilFirstOutput(p.start(process.execPath, [APPS, '0.0.0.0', 'app']));
      },
    });
    pod = sp.pod;
    logFile = join(sp.dir, 'access.log');
  });
  after(() => sp?.close());

  // Outbound: the pod calls the peer's apps (captured to 15001); inbound: the peer calls the pod's
  // (captured to 15006). The answering app names itself.
  const ways = [
    { dir: 'outbound', client: (): Namespace => pod, host: PEER_V4, app: 'peer' },
    { dir: 'inbound', client: (): Namespace => pod.peer, host: POD_V4, app: 'app' },
  ] as const;

  for (const w of ways) {
    it(`${w.dir}: grpc-js unary, server streaming, a NOT_FOUND status with its message, 5 MB each way`, () => {
      const [ping, stream, fail, big] = grpcCalls(w.client(), w.host, [
        { method: 'Ping', text: 'hello' },
        { method: 'Stream', count: 5 },
        { method: 'Fail', text: 'the answer' },
        { method: 'Ping', text: 'big', bytes: MB5 },
      ]);
      assert.deepEqual([ping!.code, ping!.texts], [0, [`${w.app}: hello`]]);
      assert.deepEqual([stream!.code, stream!.texts], [0, [1, 2, 3, 4, 5].map((i) => `${w.app} #${i}`)]);
      // The status and message come from the server's trailers, untouched.
      assert.deepEqual([fail!.code, fail!.details, fail!.texts], [5, 'no such thing: the answer', []]);
      assert.deepEqual([big!.code, big!.texts, big!.bytes, big!.intact], [0, [`${w.app}: big`], MB5, true]);
    });

    it(`${w.dir}: curl --http2-prior-knowledge GET and POST; the upstream sees the authority and path`, () => {
      const get = curlH2(w.client(), `http://${w.host}:${H2C}/curl/get?q=1`);
      assert.deepEqual([get.status, get.version], [200, '2']);
      assert.deepEqual(JSON.parse(get.body), { app: w.app, version: '2.0', method: 'GET', authority: `${w.host}:${H2C}`, path: '/curl/get?q=1', body: '' });
      const post = curlH2(w.client(), `http://${w.host}:${H2C}/curl/post`, 'a body\nof two lines');
      assert.deepEqual([post.status, post.version], [200, '2']);
      assert.deepEqual(JSON.parse(post.body),
        { app: w.app, version: '2.0', method: 'POST', authority: `${w.host}:${H2C}`, path: '/curl/post', body: 'a body\nof two lines' });
    });

    it(`${w.dir}: h2load, 200 requests on 2 connections of 10 concurrent streams, all succeed`, () => {
      // h2load exits 0 whatever became of the requests: its summary says.
      const r = w.client().exec('h2load', ['-n', '200', '-c', '2', '-m', '10', '-T', '5', `http://${w.host}:${H2C}/load`], { allowFailure: true });
      assert.match(r.stdout, /^requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout$/m, r.stdout);
      assert.match(r.stdout, /^status codes: 200 2xx, 0 3xx, 0 4xx, 0 5xx$/m, r.stdout);
    });

    it(`${w.dir}: an upstream that speaks only HTTP/1.1 is reached over HTTP/1.1, the client still on HTTP/2`, () => {
      const r = curlH2(w.client(), `http://${w.host}:${HTTP1}/old?x=2`, 'posted');
      assert.deepEqual([r.status, r.version], [200, '2']);
      assert.deepEqual(JSON.parse(r.body), { app: w.app, version: '1.1', method: 'POST', authority: `${w.host}:${HTTP1}`, path: '/old?x=2', body: 'posted' });
    });

    it(`${w.dir}: a WebSocket (HTTP/1.1 Upgrade) still works`, () => {
      const r = w.client().exec(process.execPath, [CLIENTS, 'ws', `ws://${w.host}:${WS}/chat`, 'hi there'], { allowFailure: true });
      assert.equal(r.stdout, `${w.app} echo: hi there\n`, r.stderr);
    });

    it(`${w.dir}: nothing listening upstream: grpc-js gets UNAVAILABLE at once, curl 503`, () => {
      const [down] = grpcCalls(w.client(), w.host, [{ method: 'Ping', text: 'anyone?' }], DOWN);
      assert.equal(down!.code, 14, JSON.stringify(down));
      assert.ok(down!.ms < 2000, `answered after ${down!.ms} ms`);
      assert.equal(curlH2(w.client(), `http://${w.host}:${DOWN}/`).status, 503);
    });

    it(`${w.dir}: counted in /stats (HTTP/2 connection and streams, gRPC statuses) and in mesh_requests_total`, async () => {
      // One channel, three calls: the counters move by exactly that much.
      const series = (grpcStatus: string): Record<string, string> => ({
        reporter: w.dir === 'inbound' ? 'destination' : 'source', response_code: '200', request_protocol: 'grpc', grpc_response_status: grpcStatus,
        response_flags: '-', connection_security_policy: w.dir === 'inbound' ? 'none' : 'unknown', source_principal: 'unknown',
      });
      const s0 = await stats(pod);
      const [ok0, notFound0] = [await requestsTotal(pod, series('0')), await requestsTotal(pod, series('5'))];
      const calls = grpcCalls(w.client(), w.host, [{ method: 'Ping' }, { method: 'Fail' }, { method: 'Ping' }]);
      assert.deepEqual(calls.map((c) => c.code), [0, 5, 0]);
      const http = `http.${w.dir}`;
      const delta = (s: Map<string, number>, name: string): number => (s.get(`${http}.${name}`) ?? 0) - (s0.get(`${http}.${name}`) ?? 0);
      let last = s0;
      const s1 = await waitFor('the three calls counted', async () => {
        last = await stats(pod);
        return delta(last, 'grpc.total') >= 3 && last;
      }).catch((e: Error) => assert.fail(`${e.message}: ${[...last].filter(([k]) => k.startsWith(http)).map(([k, v]) => `${k}=${v} (was ${s0.get(k)})`).join(', ')}; `
        + `connections relayed as opaque TCP to the gRPC port: ${tcpLines(`${w.host}:${GRPC}`).length}`));
      assert.deepEqual({
        cx: delta(s1, 'downstream_cx_http2_total'), rq: delta(s1, 'downstream_rq_http2_total'), grpc: delta(s1, 'grpc.total'),
        ok: delta(s1, 'grpc.status_0'), notFound: delta(s1, 'grpc.status_5'),
      }, { cx: 1, rq: 3, grpc: 3, ok: 2, notFound: 1 });
      assert.equal(await requestsTotal(pod, series('0')) - ok0, 2);
      assert.equal(await requestsTotal(pod, series('5')) - notFound0, 1);
    });
  }

  it('inbound AuthorizationPolicy: the denied method is PERMISSION_DENIED, another passes; outbound both pass', () => {
    const [denied, allowed] = grpcCalls(pod.peer, POD_V4, [{ method: 'Admin', text: 'x' }, { method: 'Ping', text: 'y' }]);
    assert.deepEqual([denied!.code, denied!.texts], [7, []]);
    assert.deepEqual([allowed!.code, allowed!.texts], [0, ['app: y']]);
    const [out] = grpcCalls(pod, PEER_V4, [{ method: 'Admin', text: 'z' }]);
    assert.deepEqual([out!.code, out!.texts], [0, ['peer: z']]);
  });

  it('the access log: HTTP/2 lines, gRPC ones with their grpc_status', async () => {
    // An outbound call with its status, an inbound one, a curl request (no grpc_status), the policy's denial, a refused upstream.
    assert.match(await logLine(/"POST \/test\.Echo\/Fail HTTP\/2" 200 .*"198\.18\.0\.1:7070" PassthroughCluster /),
      new RegExp(`^\\[[^\\]]+Z\\] "POST /test\\.Echo/Fail HTTP/2" 200 - via_upstream - "-" \\d+ \\d+ \\d+ \\d+ "-" "grpc-node-js/[^"]+" "-" `
        + `"${PEER_V4}:${GRPC}" "${PEER_V4}:${GRPC}" PassthroughCluster ${POD_V4}:\\d+ ${PEER_V4}:${GRPC} ${POD_V4}:\\d+ - allow_any grpc_status=NotFound$`));
    assert.match(await logLine(/"POST \/test\.Echo\/Stream HTTP\/2" 200 .*InboundPassthroughCluster /),
      new RegExp(`"POST /test\\.Echo/Stream HTTP/2" 200 - via_upstream .* "${POD_V4}:${GRPC}" InboundPassthroughCluster 127\\.0\\.0\\.6:\\d+ `
        + `${POD_V4}:${GRPC} ${PEER_V4}:\\d+ - default grpc_status=OK `
        // Inbound a policy is in force: the decision follows.
        + 'jwt="absent" principal=- authz="allowed: no DENY policy matched and no ALLOW policy applies" route=-$'));
    assert.match(await logLine(/"GET \/curl\/get\?q=1 HTTP\/2" .*"198\.18\.0\.1:7080"/), /" 200 - via_upstream .* allow_any$/);
    assert.match(await logLine(/"POST \/test\.Echo\/Admin HTTP\/2" .*InboundPassthroughCluster/),
      / 200 RBAC rbac_access_denied_matched_policy\[ns\[shop\]-policy\[no-admin\]-rule\[0\]\] .* grpc_status=PermissionDenied jwt="absent" principal=- authz="denied by DENY policy shop\/no-admin rule 0" route=-$/);
    assert.match(await logLine(/"POST \/test\.Echo\/Ping HTTP\/2" .*"198\.18\.0\.1:7999"/), /" 200 UF .* grpc_status=Unavailable$/);
  });

  /** Connections the sidecar holds open on a capture listener (its /stats). */
  const openConnections = async (dir: 'outbound' | 'inbound'): Promise<number> =>
    (await stats(pod)).get(`listener.0.0.0.0_${dir === 'outbound' ? 15001 : 15006}.downstream_cx_active`) ?? -1;
  /** Waits for the sidecar to hold `count` connections on a listener; the failure says how many it holds. */
  const untilOpen = (dir: 'outbound' | 'inbound', count: number, why: string): Promise<unknown> =>
    waitFor(why, async () => (await openConnections(dir)) === count, 3000)
      .catch(async (e: Error) => assert.fail(`${e.message}: listener ${dir} downstream_cx_active ${await openConnections(dir)}, expected ${count}`));

  // curl ends with GOAWAY and a FIN; the sidecar must close its end too, not keep it (CLOSE-WAIT)
  // counted as active and holding a slot of the connection budget.
  for (const w of ways) {
    it(`${w.dir}: a client that closes its HTTP/2 connection (curl: GOAWAY, FIN) leaves nothing open in the sidecar`, async () => {
      const before = await openConnections(w.dir);
      assert.equal(curlH2(w.client(), `http://${w.host}:${H2C}/close-${w.dir}`).status, 200);
      assert.match(await logLine(new RegExp(`"GET /close-${w.dir} HTTP/2" `)), / 200 - via_upstream /); // it was proxied at L7
      await untilOpen(w.dir, before, 'the sidecar to close its end of the connection curl closed');
    });
  }

  // The floods and the drain are inbound: a policy is in force there, so no upstream connection is
  // opened before the client speaks and every connection is proxied at L7 whatever the timing
  // (outbound, see 'a client that waits before its preface').
  for (const flood of [
    { name: 'streams far past its concurrency limit (2000 requests held 1.5 s upstream)', args: ['/slow', '2000'] },
    { name: 'rapid reset (3000 streams opened and cancelled at once)', args: ['/slow', '3000', 'reset'] },
  ]) {
    it(`a flood on one HTTP/2 connection, ${flood.name}: closed with an error GOAWAY; another connection's calls pass`, async () => {
      const before = await openConnections('inbound');
      const flooding = output(pod.peer.start(process.execPath, [CLIENTS, 'flood', POD_V4, String(H2C), ...flood.args]));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const during = grpcCalls(pod.peer, POD_V4, [{ method: 'Ping', text: 'during' }, { method: 'Stream', count: 3 }]);
      assert.deepEqual(during.map((r) => [r.code, r.texts.length]), [[0, 1], [0, 3]]);
      const summary = JSON.parse(await flooding) as { responses: number; resets: Record<string, number>; goaway: number | null; closed: boolean };
      // Which of nghttp2's limits trips first depends on timing: the refused-stream count (GOAWAY with an
      // error) or the session's memory (its streams reset with an error, the connection closed).
      const resetWithError = Object.keys(summary.resets).some((code) => code !== '0');
      assert.ok((summary.goaway !== null && summary.goaway !== 0) || (summary.closed && resetWithError),
        `the flooding connection was ended with an error (GOAWAY, or resets and a close): ${JSON.stringify(summary)}`);
      assert.equal(sp.sidecar.exitCode, null, 'the sidecar is alive');
      const [after] = grpcCalls(pod.peer, POD_V4, [{ method: 'Ping', text: 'after' }]);
      assert.deepEqual([after!.code, after!.texts], [0, ['app: after']]);
      // The flooding client is gone (and grpc-js closed its channels): the sidecar holds nothing more than before.
      await untilOpen('inbound', before, `the sidecar to close the flooding connection (the flood saw ${JSON.stringify(summary)})`);
    });
  }

  // A client may connect and say nothing for a while (a slow start, a lazy connect): an HTTP/2
  // server sends its SETTINGS at once, and that must not make the connection opaque TCP (the
  // listener opens the upstream at accept time for protocols whose server speaks first). Relayed as
  // TCP, the connection would escape per-request policy, stats and the access log.
  for (const w of ways) {
    it(`${w.dir}: a client that waits 200 ms before its preface is still proxied at L7 (the sidecar's SETTINGS, an HTTP/2 log line)`, async () => {
      const r = w.client().exec(process.execPath, [CLIENTS, 'late', w.host, String(H2C), `/late-${w.dir}`, '200'], { allowFailure: true });
      const got = JSON.parse(r.stdout) as { maxConcurrentStreams: number; status: number; body: string };
      assert.equal(got.status, 200, r.stdout);
      // 256: the sidecar's SETTINGS_MAX_CONCURRENT_STREAMS; the app's (node's default) is 4294967295.
      assert.equal(got.maxConcurrentStreams, 256, `the preface was answered by the app, not the sidecar: ${r.stdout}`);
      assert.match(await logLine(new RegExp(`"GET /late-${w.dir} HTTP/2" `)), / 200 - via_upstream /);
    });
  }

  // Last: the listeners stop accepting for good.
  it('POST /drain_listeners: an open HTTP/2 connection is told GOAWAY and its stream in flight completes', async () => {
    const holder = pod.peer.start(process.execPath, [CLIENTS, 'hold', POD_V4, String(H2C), '/slow?ms=3000']);
    const out = output(holder);
    await untilFirstOutput(holder);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the request is at the app (3 s)
    const r = await runCli(['request', 'POST', '/drain_listeners'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.equal(r.code, 0, r.stderr);
    // GOAWAY first (NO_ERROR, last stream 1: the one in flight is taken, no other), then the answer;
    // whatever follows (a repeated GOAWAY) does not matter.
    const lines = (await out).split('\n');
    assert.deepEqual(lines.slice(0, 3), ['sent', 'goaway 0 1',
      `response 200 ${JSON.stringify({ app: 'app', version: '2.0', method: 'GET', authority: `${POD_V4}:${H2C}`, path: '/slow?ms=3000', body: '' })}`]);
    assert.equal(sp.sidecar.exitCode, null, 'the sidecar stays (only its listeners drain)');
  });
});
