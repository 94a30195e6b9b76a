// Traffic management end to end, as in a pod: the pod's capture rules, the sidecar as uid 1337
// (two workers, the default), a ServiceEntry whose address is a virtual IP nobody listens on and
// whose endpoints are three (then four) backends on the peer's addresses (test/fixtures/
// traffic-backends.mjs: HTTP/1.1, HTTP/2, gRPC, TCP, each answering with its name, each told at run
// time to fail, stall, refuse or close idle connections early; each numbering the connections it
// sees). Clients run in the pod: node:http over one keep-alive connection, node:http2 over one
// connection, grpc-js over one channel, raw TCP, curl. Each test writes the resources it needs and
// waits until the sidecar has them in force (hot reload).
//
// The statistical checks count how requests spread; each bound is set 4.5 standard deviations (or
// more) from the expected count of a binomial, so a correct sidecar fails one of them less than once
// in 10,000 runs even with every check of this file taken together (each ≈ 3.4e-6 one-sided).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, PEER_V4 } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const VIP = '240.240.0.10';
const HOST = 'svc.example.com';
const ADDRESSES = { b1: '198.18.0.11', b2: '198.18.0.12', b3: '198.18.0.13', b4: '198.18.0.14' } as const;
type Backend = keyof typeof ADDRESSES;

interface HttpResult { readonly status: number; readonly backend?: string; readonly body?: string; readonly headers: Record<string, string>; readonly error?: string }
interface GrpcResult { readonly code: number; readonly backend?: string; readonly details?: string }
interface H2Result extends HttpResult { readonly ms: number }

/** The ServiceEntry, with the given backends as its endpoints (b1 v1, the others v2). */
function serviceEntry(backends: readonly Backend[]): string {
  return `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: default}
spec:
  hosts: [${HOST}]
  addresses: [${VIP}]
  ports:
  - {number: 80, name: http, protocol: HTTP}
  - {number: 8082, name: http2, protocol: HTTP2}
  - {number: 7070, name: grpc, protocol: GRPC}
  - {number: 9000, name: tcp, protocol: TCP}
  resolution: STATIC
  location: MESH_INTERNAL
  endpoints:
${backends.map((b) => `  - {address: ${ADDRESSES[b]}, ports: {http: 8080}, labels: {version: ${b === 'b1' ? 'v1' : 'v2'}}}`).join('\n')}
`;
}

const SUBSETS = `apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: default}
spec:
  host: ${HOST}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`;

/** A VirtualService for the host with these http routes (YAML, each line indented by two). */
function virtualService(http: string): string {
  return `---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: svc, namespace: default}
spec:
  hosts: [${HOST}]
  http:
${http}`;
}

describe('traffic management: services, balancing, routes, retries, time-outs, ejection, limits', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let backends: ChildProcess;
  let seen: { backend: string; conn?: number; path?: string; mode?: string; ack?: number | null; proto?: string; h2?: 'open' | 'close'; tags?: string[] }[] = [];
  let version = 0;

  const file = (name: string): string => join(sp.dir, name);

  /** What the sidecar has in force (/config_dump's configuration_version). */
  const configVersion = async (): Promise<number> => {
    const r = await runCli(['request', 'GET', '/config_dump'], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
    return r.code === 0 ? (JSON.parse(r.stdout) as { configuration_version: number }).configuration_version : 0;
  };

  /** Writes the resources and waits until the sidecar has a newer configuration in force. */
  const resources = async (text: string): Promise<void> => {
    const before = await configVersion();
    writeFileSync(file('etc/mesh/resources/traffic.yaml'), text);
    version = await waitFor('the new resources in force', async () => {
      const v = await configVersion();
      return v > before ? v : undefined;
    }, 10_000);
    // Every worker reads the files on its own: give the other worker the same moment.
    await new Promise((resolve) => setTimeout(resolve, 300));
  };

  /** Sets a backend's behaviour and waits for its acknowledgement. */
  let acks = 0;
  const mode = async (name: Backend | 'all', m: string): Promise<void> => {
    for (const b of name === 'all' ? (Object.keys(ADDRESSES) as Backend[]) : [name]) {
      const id = ++acks;
      backends.stdin!.write(`${JSON.stringify({ name: b, mode: m, id })}\n`);
      await waitFor(`backend ${b} in mode ${m}`, () => seen.find((e) => e.ack === id));
    }
  };

  const client = (kind: 'http' | 'h2' | 'grpc' | 'tcp', o: Record<string, unknown>): unknown => {
    const r = sp.pod.exec(process.execPath, [join(FIXTURES, 'traffic-client.mjs'), kind, JSON.stringify(o)], { allowFailure: true });
    assert.equal(r.exitCode, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  const http = (o: Record<string, unknown> = {}): HttpResult[] => client('http', { url: `http://${VIP}/`, count: 1, ...o }) as HttpResult[];
  /** HTTP/2 requests over one connection (prior knowledge): to port 8082 (HTTP/2 backends) unless `url` says otherwise. */
  const h2 = (o: Record<string, unknown> = {}): H2Result[] => client('h2', { url: `http://${VIP}:8082/`, count: 1, ...o }) as H2Result[];
  /** The same, run in the background (the test acts while it runs). */
  const h2Later = (o: Record<string, unknown>): Promise<H2Result[]> => new Promise((resolve, reject) => {
    const child = sp.pod.start(process.execPath, [join(FIXTURES, 'traffic-client.mjs'), 'h2', JSON.stringify({ count: 1, ...o })]);
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as H2Result[]) : reject(new Error(`the h2 client exited with ${code}`))));
  });
  /** The backend connections that carried the HTTP/2 requests seen since `seen` was emptied. */
  const h2Conns = (): Set<number | undefined> => new Set(seen.filter((e) => e.proto === 'h2').map((e) => e.conn));
  /** The DestinationRule of the host with this connectionPool (YAML, its lines under `connectionPool:`). */
  const pool = (lines: string): string => `---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy:
    connectionPool:
${lines.split('\n').map((l) => `      ${l}`).join('\n')}
`;
  const NO_RETRIES = virtualService(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 0}
`);
  /**
   * The kernel's keep-alive timers (seconds left) of the sidecar's connections to `dst` (address:port),
   * as `ss -o` shows them: `2min3sec`, `7.492ms` (7.492 s: iproute2 6's spelling), `492ms`.
   */
  const keepaliveTimers = (dst: string): number[] => {
    const out = execFileSync('ip', ['netns', 'exec', sp.pod.name, 'ss', '-tnoH', 'state', 'established', 'dst', dst], { encoding: 'utf8' });
    return [...out.matchAll(/timer:\(keepalive,([^,)]+)/g)].map((m) => {
      const t = /^(?:(\d+)min)?(?:(\d+)(?:\.(\d+))?(ms|sec|s)?)?$/.exec(m[1]!);
      if (!t) return NaN;
      const minutes = Number(t[1] ?? 0) * 60;
      if (t[3] !== undefined) return minutes + Number(`${t[2]}.${t[3]}`);
      return minutes + (t[4] === 'ms' ? Number(t[2] ?? 0) / 1000 : Number(t[2] ?? 0));
    });
  };
  /** Lets the backends' lines about `n` HTTP/2 requests (or HTTP/1.1 ones: `h1`) arrive (the clients run synchronously). */
  const requestsSeen = async (n: number, h1 = false): Promise<void> => {
    await waitFor(`${n} requests seen by the backends`, () => seen.filter((e) => e.path !== undefined && (e.proto === 'h2') !== h1).length >= n || undefined);
    await new Promise((resolve) => setTimeout(resolve, 200)); // and any more that would come
  };
  const countBy = <T>(list: readonly T[], key: (x: T) => string | undefined): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const x of list) {
      const k = key(x) ?? '?';
      out[k] = (out[k] ?? 0) + 1;
    }
    return out;
  };
  const accessLog = (): string[] => (existsSync(file('access.log')) ? readFileSync(file('access.log'), 'utf8').split('\n') : []);

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="client"\n',
        'etc/mesh/config/mesh': 'accessLogFile: ./access.log\n',
        'etc/mesh/resources/traffic.yaml': serviceEntry(['b1', 'b2', 'b3']),
      },
      writable: true,
      env: ['POD_NAMESPACE=default'],
      args: ['--outlierLogPath', './outlier.log'],
      prepare: async (pod) => {
        for (const address of Object.values(ADDRESSES)) pod.peer.exec('ip', ['addr', 'add', `${address}/24`, 'dev', 'peer0']);
        backends = pod.peer.start(process.execPath, [join(FIXTURES, 'traffic-backends.mjs'),
          JSON.stringify(Object.entries(ADDRESSES).map(([name, address]) => ({ name, address })))], { stdin: true });
        let out = '';
        backends.stdout!.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          let nl;
          while ((nl = out.indexOf('\n')) >= 0) {
            const line = out.slice(0, nl);
            out = out.slice(nl + 1);
            if (line.startsWith('{')) seen.push(JSON.parse(line) as (typeof seen)[number]);
            else if (line === 'listening') seen.push({ backend: '', mode: 'listening' });
          }
        });
        await waitFor('the backends listening', () => seen.find((e) => e.mode === 'listening'), 15_000);
      },
    });
    version = await configVersion();
  });
  after(() => sp?.close());

  it('every request on one keep-alive connection chooses its endpoint (LEAST_REQUEST, Istio\'s default)', async () => {
    seen = [];
    const answers = http({ count: 300 });
    assert.deepEqual(countBy(answers, (a) => String(a.status)), { 200: 300 });
    const per = countBy(answers, (a) => a.backend);
    // Binomial(300, 1/3): mean 100, sd 8.2; 55 is 5.5 sd below.
    for (const b of ['b1', 'b2', 'b3']) assert.ok((per[b] ?? 0) >= 55, `${b} got ${per[b] ?? 0} of 300: ${JSON.stringify(per)}`);
    // The sidecar pools connections per endpoint: a handful of connections carried the 300 requests.
    await requestsSeen(300, true);
    const conns = new Set(seen.filter((e) => e.path === '/').map((e) => e.conn));
    assert.ok(conns.size <= 12, `${conns.size} upstream connections for 300 requests`);
  });

  it('curl reaches the service by its virtual IP and by its host name', () => {
    const byIp = sp.pod.exec('curl', ['-sS', '--max-time', '5', `http://${VIP}/`]).stdout;
    assert.match(byIp, /"backend":"b[123]"/);
    // The Host names the service: any address on a captured port (here the peer's own) goes to its endpoints.
    const byHost = sp.pod.exec('curl', ['-sS', '--max-time', '5', '-H', `host: ${HOST}`, `http://${PEER_V4}:80/`], { allowFailure: true });
    assert.match(byHost.stdout, /"backend":"b[123]"/, byHost.stderr);
  });

  it('a canary split between subsets (90/10) holds per request, within one connection', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']) + '---\n' + SUBSETS + virtualService(`  - route:
    - destination: {host: ${HOST}, subset: v1}
      weight: 90
    - destination: {host: ${HOST}, subset: v2}
      weight: 10
`));
    const answers = http({ count: 1000 });
    const per = countBy(answers, (a) => a.backend);
    const v2 = (per['b2'] ?? 0) + (per['b3'] ?? 0);
    // Binomial(1000, 0.1): mean 100, sd 9.5; [57, 143] is ±4.5 sd.
    assert.ok(v2 >= 57 && v2 <= 143, `subset v2 got ${v2} of 1000: ${JSON.stringify(per)}`);
    assert.equal((per['b1'] ?? 0) + v2, 1000);
  });

  it('a route\'s request headers: add appends a line (the client\'s stays), set replaces, remove removes', async () => {
    await resources(serviceEntry(['b1']) + '---\n' + virtualService(`  - route:
    - destination: {host: ${HOST}}
    headers:
      request:
        add: {x-tag: route}
        set: {x-set: route}
        remove: [x-drop]
`));
    seen = [];
    const [answer] = http({ url: `http://${VIP}/tagged`, headers: { 'x-tag': 'client', 'x-set': 'client', 'x-drop': 'client' } });
    assert.equal(answer!.status, 200, JSON.stringify(answer));
    await waitFor('the request seen', () => seen.find((e) => e.path === '/tagged'));
    assert.deepEqual(seen.find((e) => e.path === '/tagged')!.tags, ['client', 'route']);
  });

  it('a route to a subset no DestinationRule defines: 503 with flag NC, and a warning naming both resources', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']) + '---\n' + SUBSETS + virtualService(`  - route:
    - destination: {host: ${HOST}, subset: v3}
`));
    const [a] = http();
    assert.equal(a!.status, 503);
    await waitFor('an NC line in the access log', () => accessLog().find((l) => / 503 NC /.test(l)));
    assert.match(sp.stderr(), /VirtualService default\/svc .*subset v3.*DestinationRule default\/svc|DestinationRule default\/svc.*subset v3/);
  });

  it('default retries: a refused endpoint is retried on another (every request answered); a 503 is not retried', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']));
    await mode('b1', 'down');
    try {
      const answers = http({ count: 150 });
      assert.deepEqual(countBy(answers, (a) => String(a.status)), { 200: 150 });
      assert.equal(answers.filter((a) => a.backend === 'b1').length, 0);
    } finally {
      await mode('b1', 'ok');
    }
    await mode('b1', '503');
    try {
      const answers = http({ count: 150 });
      // ~50 reach b1; Binomial(150, 1/3) ≥ 20 is 5.2 sd below the mean.
      const failed = answers.filter((a) => a.status === 503).length;
      assert.ok(failed >= 20, `${failed} 503s passed on of 150 (Istio's default policy does not retry a 503)`);
    } finally {
      await mode('b1', 'ok');
    }
  });

  it('retries: 5xx with 3 attempts: every request answered 200 while one endpoint fails; each retry goes elsewhere', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']) + virtualService(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 3, retryOn: 5xx}
`));
    await mode('b1', '503');
    try {
      const answers = http({ count: 150 });
      assert.deepEqual(countBy(answers, (a) => String(a.status)), { 200: 150 });
    } finally {
      await mode('b1', 'ok');
    }
    // Why a request went where it went: its attempts in /debug/decisions.
    const r = await runCli(['request', 'GET', '/debug/decisions'], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
    assert.match(r.stdout, /198\.18\.0\.11:8080: 503, retried \(5xx\)/);
    assert.match(r.stdout, /outbound\|80\|\|svc\.example\.com/);
  });

  it('a route timeout: 504 "upstream request timeout" (UT), and it covers the retries', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']) + virtualService(`  - route:
    - destination: {host: ${HOST}}
    timeout: 300ms
`));
    await mode('all', 'slow:3000');
    try {
      const started = Date.now();
      const [a] = http();
      assert.equal(a!.status, 504);
      assert.equal(a!.body, 'upstream request timeout\n');
      assert.ok(Date.now() - started < 2500, 'answered at the time-out, not at the backend\'s answer');
      await waitFor('a UT line in the access log', () => accessLog().find((l) => / 504 UT /.test(l)));
    } finally {
      await mode('all', 'ok');
    }
  });

  it('outlier detection: an endpoint answering 503 is ejected for every worker, an EJECT line is logged, it gets no more requests', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']) + `---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 2, interval: 1s, baseEjectionTime: 60s, maxEjectionPercent: 100}
` + virtualService(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 0}
`));
    await mode('b1', '503');
    try {
      // Several connections: both workers carry requests.
      const first = http({ count: 120, concurrency: 4 });
      const failed = first.filter((a) => a.status === 503).length;
      assert.ok(failed >= 2 && failed <= 6, `${failed} 503s before the ejection (2 consecutive ones eject; a few may race it)`);
      const then = http({ count: 90, concurrency: 4 });
      assert.deepEqual(countBy(then, (a) => String(a.status)), { 200: 90 }, 'the ejected endpoint gets nothing more');
      const log = await waitFor('an EJECT line', () => (existsSync(file('outlier.log')) ? readFileSync(file('outlier.log'), 'utf8') : '').split('\n').find((l) => l.includes('EJECT')));
      const e = JSON.parse(log) as Record<string, unknown>;
      assert.equal(e['action'], 'EJECT');
      assert.equal(e['cluster_name'], `outbound|80||${HOST}`);
      assert.equal(e['upstream_url'], `${ADDRESSES.b1}:8080`);
      assert.equal(e['type'], 'CONSECUTIVE_5XX');
      // Each later request's decision line says which endpoint it passed over.
      const d = await runCli(['request', 'GET', '/debug/decisions'], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
      assert.match(d.stdout, /passed over as ejected: 198\.18\.0\.11:8080/);
    } finally {
      await mode('b1', 'ok');
    }
  });

  it('connection limits: maxConnections 1 and one pending request; the rest is 503 UO with x-envoy-overloaded', async () => {
    await resources(serviceEntry(['b1']) + `---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: 1}
      http: {http1MaxPendingRequests: 1}
` + virtualService(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 0}
`));
    await mode('b1', 'slow:800');
    try {
      const answers = http({ count: 10, concurrency: 10 });
      const overflowed = answers.filter((a) => a.status === 503);
      const served = answers.filter((a) => a.status === 200);
      assert.ok(served.length >= 1 && served.length <= 3, `served ${served.length}: ${JSON.stringify(countBy(answers, (a) => String(a.status)))}`);
      assert.ok(overflowed.length >= 7, `${overflowed.length} overflowed`);
      for (const a of overflowed) assert.equal(a.headers['x-envoy-overloaded'], 'true');
      await waitFor('a UO line in the access log', () => accessLog().find((l) => / 503 UO /.test(l)));
    } finally {
      await mode('b1', 'ok');
    }
  });

  it('the keep-alive race: an app that closes idle connections as they are reused never fails a client', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']) + virtualService(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 0}
`));
    await mode('all', 'idle:1200');
    try {
      // Requests 1.2 s apart: every pooled connection is about to be closed by the app when reused.
      const answers = http({ count: 6, gapMs: 1200 });
      assert.deepEqual(countBy(answers, (a) => String(a.status)), { 200: 6 }, JSON.stringify(answers));
    } finally {
      await mode('all', 'idle:60000');
    }
  });

  it('gRPC: the calls of one grpc-js channel are spread over every endpoint (per stream)', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']));
    const calls = client('grpc', { target: `${VIP}:7070`, count: 90 }) as GrpcResult[];
    assert.deepEqual(countBy(calls, (c) => String(c.code)), { 0: 90 });
    const per = countBy(calls, (c) => c.backend);
    // Binomial(90, 1/3): mean 30, sd 4.5; 10 is 4.5 sd below.
    for (const b of ['b1', 'b2', 'b3']) assert.ok((per[b] ?? 0) >= 10, `${b} got ${per[b] ?? 0} of 90 calls: ${JSON.stringify(per)}`);
  });

  it('TCP: each connection chooses its endpoint', () => {
    const conns = client('tcp', { host: VIP, port: 9000, count: 60 }) as { backend?: string; error?: string }[];
    const per = countBy(conns, (c) => c.backend ?? c.error);
    // Binomial(60, 1/3): mean 20, sd 3.7; 4 is 4.4 sd below.
    for (const b of ['b1', 'b2', 'b3']) assert.ok((per[b] ?? 0) >= 4, `${b} got ${per[b] ?? 0} of 60 connections: ${JSON.stringify(per)}`);
  });

  it('HTTP/2 upstreams: one session carries a client\'s streams; maxRequestsPerConnection opens a new one every N, and closes the spent ones', async () => {
    await resources(serviceEntry(['b1']));
    seen = [];
    const plain = h2({ count: 6 });
    assert.deepEqual(countBy(plain, (a) => `${a.status} ${a.backend}`), { '200 b1': 6 }, JSON.stringify(plain));
    await requestsSeen(6);
    assert.equal(h2Conns().size, 1, 'without a limit, one upstream HTTP/2 connection');
    await resources(serviceEntry(['b1']) + pool('http: {maxRequestsPerConnection: 3}'));
    seen = [];
    const limited = h2({ count: 9 });
    assert.deepEqual(countBy(limited, (a) => String(a.status)), { 200: 9 });
    await requestsSeen(9);
    const conns = h2Conns();
    assert.equal(conns.size, 3, `9 requests, 3 per connection: ${[...conns].join(',')}`);
    // Each spent session is closed once its last stream is done (the third too: it was given its third stream).
    await waitFor('the three spent connections closed', () => seen.filter((e) => e.h2 === 'close' && conns.has(e.conn)).length === 3 || undefined);
  });

  it('HTTP/2 upstreams: maxConcurrentStreams 1 spreads streams at once over as many connections; with maxConnections 2, the rest waits as pending (over http1MaxPendingRequests: 503 UO)', async () => {
    await resources(serviceEntry(['b1']) + pool('http: {maxConcurrentStreams: 1}') + NO_RETRIES);
    await mode('b1', 'slow:600');
    try {
      seen = [];
      const spread = h2({ count: 4, concurrency: 4 });
      assert.deepEqual(countBy(spread, (a) => String(a.status)), { 200: 4 }, JSON.stringify(spread));
      await requestsSeen(4);
      assert.equal(h2Conns().size, 4, 'one connection per stream in flight');
      // maxConnections 2: two streams go at once, the others wait as pending requests (Envoy's queue),
      // at most http1MaxPendingRequests of them; the rest is 503 UO.
      await resources(serviceEntry(['b1']) + pool('tcp: {maxConnections: 2}\nhttp: {maxConcurrentStreams: 1, http1MaxPendingRequests: 1}') + NO_RETRIES);
      seen = [];
      const capped = h2({ count: 4, concurrency: 4 });
      assert.deepEqual(countBy(capped, (a) => String(a.status)), { 200: 3, 503: 1 }, JSON.stringify(capped));
      for (const a of capped.filter((x) => x.status === 503)) assert.equal(a.headers['x-envoy-overloaded'], 'true');
      const waited = capped.filter((x) => x.status === 200).sort((a, b) => a.ms - b.ms).at(-1)!;
      assert.ok(waited.ms >= 1100, `the pending stream was answered after ${waited.ms} ms: it did not wait for a slot`);
      await requestsSeen(3);
      const conns = h2Conns().size;
      assert.ok(conns >= 2 && conns <= 3, `${conns} connections with maxConnections 2 (a pending stream takes a freed session or a new one)`);
      await resources(serviceEntry(['b1']) + pool('tcp: {maxConnections: 2}\nhttp: {maxConcurrentStreams: 1}') + NO_RETRIES);
      const queued = h2({ count: 4, concurrency: 4 });
      assert.deepEqual(countBy(queued, (a) => String(a.status)), { 200: 4 }, JSON.stringify(queued));
    } finally {
      await mode('b1', 'ok');
    }
  });

  it('HTTP/2 upstreams: maxConnections 1 over three endpoints: a busy session gives its slot up, so no pending stream waits for ever', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b3']) + pool('tcp: {maxConnections: 1}') + NO_RETRIES);
    await mode('all', 'slow:300');
    try {
      seen = [];
      // 12 streams at once, balanced over three endpoints, one connection at a time for the cluster:
      // the session in use drains when others wait, and the slot moves on until every stream is served.
      const answers = h2({ count: 12, concurrency: 12, timeoutMs: 15000 });
      assert.deepEqual(countBy(answers, (a) => String(a.status)), { 200: 12 }, JSON.stringify(answers));
      assert.ok(new Set(answers.map((a) => a.backend)).size >= 2, `served by ${JSON.stringify(countBy(answers, (a) => a.backend))}`);
    } finally {
      await mode('all', 'ok');
    }
  });

  it('HTTP/2 upstreams: idleTimeout closes an idle connection; maxConnectionDuration retires an old one (its stream in flight finishes)', async () => {
    await resources(serviceEntry(['b1']) + pool('http: {idleTimeout: 400ms}'));
    seen = [];
    const idle = h2({ count: 3, gapMs: 1000 });
    assert.deepEqual(countBy(idle, (a) => String(a.status)), { 200: 3 });
    await requestsSeen(3);
    const idleConns = h2Conns();
    assert.equal(idleConns.size, 3, 'a new connection after each idle second');
    await waitFor('the idle connections closed', () => seen.filter((e) => e.h2 === 'close' && idleConns.has(e.conn)).length === 3 || undefined);

    await resources(serviceEntry(['b1']) + pool('tcp: {maxConnectionDuration: 1s}'));
    await mode('b1', 'slow:1500');
    try {
      seen = [];
      // Two streams at once, 1.5 s each, on one connection that is 1 s old when they are half done:
      // both finish, then the connection closes.
      const slow = h2({ count: 2, concurrency: 2 });
      assert.deepEqual(countBy(slow, (a) => String(a.status)), { 200: 2 }, JSON.stringify(slow));
      await requestsSeen(2);
      const first = h2Conns();
      assert.equal(first.size, 1);
      await waitFor('the old connection closed after its streams', () => seen.find((e) => e.h2 === 'close' && first.has(e.conn)));
    } finally {
      await mode('b1', 'ok');
    }
    seen = [];
    const spread = h2({ count: 6, gapMs: 400 }); // 2.4 s: three or so connections of 1 s
    assert.deepEqual(countBy(spread, (a) => String(a.status)), { 200: 6 });
    await requestsSeen(6);
    const aged = h2Conns().size;
    assert.ok(aged >= 2 && aged <= 4, `${aged} connections for 6 requests over 2.4 s with maxConnectionDuration 1s`);
  });

  it('tcpKeepalive: the kernel\'s keep-alive on the sidecar\'s HTTP/2 connections and on the HTTP/1.1 leg of HTTP/2 clients', async () => {
    await resources(serviceEntry(['b1']) + pool('tcp: {tcpKeepalive: {time: 9s, interval: 3s, probes: 2}}'));
    // An HTTP/2 backend (8082), and an HTTP/1.1 one reached by an HTTP/2 client (80 → 8080: the leg).
    assert.deepEqual(countBy(h2({ count: 2 }), (a) => String(a.status)), { 200: 2 });
    assert.deepEqual(countBy(h2({ url: `http://${VIP}/`, count: 2 }), (a) => String(a.status)), { 200: 2 });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    for (const dst of [`${ADDRESSES.b1}:8082`, `${ADDRESSES.b1}:8080`]) {
      const timers = keepaliveTimers(dst);
      assert.ok(timers.length >= 1, `no keep-alive timer on the sidecar's connections to ${dst}`);
      // Idle for 2 s of the 9 s: about 7 s left (node's own 1 s keep-alive would show 1 s or less).
      for (const t of timers) assert.ok(t > 4 && t <= 9, `keep-alive timer ${t}s to ${dst}`);
    }
  });

  it('the HTTP/1.1 leg of HTTP/2 clients: maxConnections counts its connections (the rest pending, then 503 UO); connectTimeout bounds its connect', async () => {
    await resources(serviceEntry(['b1']) + pool('tcp: {maxConnections: 1}\nhttp: {http1MaxPendingRequests: 2}') + NO_RETRIES);
    await mode('b1', 'slow:600');
    try {
      seen = [];
      // An HTTP/2 client to an HTTP/1.1 backend: after the probe, each stream needs a connection of its
      // own, one at a time; two streams wait as pending, the fourth is 503 UO.
      const answers = h2({ url: `http://${VIP}/`, count: 4, concurrency: 4 });
      assert.deepEqual(countBy(answers, (a) => String(a.status)), { 200: 3, 503: 1 }, JSON.stringify(answers));
      for (const a of answers.filter((x) => x.status === 503)) assert.equal(a.headers['x-envoy-overloaded'], 'true');
      const last = answers.filter((x) => x.status === 200).sort((a, b) => a.ms - b.ms).at(-1)!;
      assert.ok(last.ms >= 1700, `three 600 ms requests over one connection at a time, the last after ${last.ms} ms`);
      await requestsSeen(3, true);
    } finally {
      await mode('b1', 'ok');
    }

    // New connections only (one request each), and the backend stops answering connection attempts
    // (its SYNs dropped) between the first request and the second.
    await resources(serviceEntry(['b1']) + pool('tcp: {connectTimeout: 300ms}\nhttp: {maxRequestsPerConnection: 1}') + NO_RETRIES);
    const drop = ['INPUT', '-p', 'tcp', '-d', ADDRESSES.b1, '--dport', '8080', '--syn', '-j', 'DROP'];
    const running = h2Later({ url: `http://${VIP}/`, count: 2, gapMs: 1500, timeoutMs: 8000 });
    await new Promise((resolve) => setTimeout(resolve, 700));
    sp.pod.peer.exec('iptables', ['-I', ...drop]);
    try {
      const [first, second] = await running;
      assert.equal(first!.status, 200, JSON.stringify(first));
      assert.equal(second!.status, 503, JSON.stringify(second));
      assert.match(second!.body ?? '', /reset reason: connection timeout/);
      assert.ok(second!.ms < 2000, `answered after ${second!.ms} ms (connectTimeout 300ms)`);
      await waitFor('a UF line in the access log', () => accessLog().find((l) => / 503 UF /.test(l) && l.includes(`${ADDRESSES.b1}:8080`)));
    } finally {
      sp.pod.peer.exec('iptables', ['-D', ...drop]);
    }
  });

  it('endpoints change with the file: a removed one gets no new request, an added one gets traffic at once', async () => {
    await resources(serviceEntry(['b1', 'b2', 'b4']));
    const answers = http({ count: 150 });
    const per = countBy(answers, (a) => a.backend);
    assert.equal(per['b3'] ?? 0, 0, JSON.stringify(per));
    assert.ok((per['b4'] ?? 0) >= 25, `b4 got ${per['b4'] ?? 0} of 150: ${JSON.stringify(per)}`);
    assert.ok(version > 0);
  });
});
