// The HTTP/2 upstream sessions and the HTTP/1.1 leg of HTTP/2 clients under a traffic cluster's
// connectionPool, against real servers on 127.0.0.1 (node:http2, node:http) that count the
// connections they see: maxRequestsPerConnection, maxConcurrentStreams, maxConnectionDuration,
// idleTimeout, a replaced cluster, maxConnections (and the slot of a probe that found HTTP/1.1 by ALPN).
// The policy's arithmetic (sessionPolicy, LegConnection) is checked on its own first.
import assert from 'node:assert/strict';
import { createServer as createHttp1, type Server as Http1Server } from 'node:http';
import { createServer as createHttp2, type Http2Server, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { createSecureContext, createServer as createTlsServer } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { Http1Upstream, LegConnection, type LegConnectError } from '../../../src/proxy/http2/http1-upstream.js';
import {
  Http2UpstreamPool, IDLE_SESSION_MS, sessionCapacity, sessionPolicy, type UpstreamRoute, type UpstreamTarget,
} from '../../../src/proxy/http2/upstream-sessions.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import type { UpstreamTls } from '../../../src/proxy/tls/origination.js';
import { ClusterRuntime } from '../../../src/traffic/cluster.js';
import { privateTrafficStore, type TrafficStore } from '../../../src/traffic/shared-state.js';
import type { ConnectionPoolSpec } from '../../../src/traffic/spec.js';
import { createRootCa, generateTestKey, signCertificate } from '../../helpers/mesh-certs.js';
import { clusterSpec, endpoint, ISTIO_POOL } from '../../traffic/support.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
type Pool = { tcp?: Partial<ConnectionPoolSpec['tcp']>; http?: Partial<ConnectionPoolSpec['http']> };

describe('sessionPolicy and LegConnection (pure)', () => {
  it('reads a cluster\'s pool once: Istio\'s defaults mean the peer\'s limits, no request limit, no duration, 60 s idle', () => {
    const p = sessionPolicy(ISTIO_POOL);
    assert.deepEqual(p, { idleMs: IDLE_SESSION_MS, maxStreams: Infinity, maxRequests: Infinity, maxDurationMs: undefined, keepalive: undefined, connectTimeoutMs: 10_000, limited: false });
  });
  it('takes every field that is set; durations past a node timer wait the longest one', () => {
    const p = sessionPolicy({
      tcp: { ...ISTIO_POOL.tcp, maxConnections: 5, connectTimeoutMs: 250, maxConnectionDurationMs: 90 * 86_400_000, tcpKeepalive: { timeMs: 7000, probes: 2 } },
      http: { ...ISTIO_POOL.http, idleTimeoutMs: 1500, maxRequestsPerConnection: 3, maxConcurrentStreams: 4 },
    });
    assert.deepEqual(p, { idleMs: 1500, maxStreams: 4, maxRequests: 3, maxDurationMs: 2_147_483_647, keepalive: { timeMs: 7000, probes: 2 }, connectTimeoutMs: 250, limited: true });
  });
  it('a session takes the peer\'s SETTINGS_MAX_CONCURRENT_STREAMS within the policy\'s', () => {
    assert.equal(sessionCapacity(undefined, Infinity), 100);
    assert.equal(sessionCapacity(1000, Infinity), 1000);
    assert.equal(sessionCapacity(1000, 4), 4);
    assert.equal(sessionCapacity(2, 4), 2);
  });
  it('a leg connection is not kept past maxRequestsPerConnection or maxConnectionDuration, nor for waiting workers or a replaced cluster', () => {
    const c = new LegConnection({ maxRequests: 2 }, 0);
    assert.deepEqual([c.done(1), c.done(2)], [true, false]);
    assert.equal(new LegConnection({ maxDurationMs: 100 }, 0).done(99), true);
    assert.equal(new LegConnection({ maxDurationMs: 100 }, 0).done(100), false);
    assert.equal(new LegConnection({ othersWaiting: () => true }, 0).done(1), false);
    assert.equal(new LegConnection({ retired: () => true }, 0).done(1), false);
    assert.equal(new LegConnection({ maxRequests: 0 }, 0).done(1), true);
  });
  it('a kept leg connection closes idle at idleTimeout, or sooner when its maxConnectionDuration ends first', () => {
    assert.equal(new LegConnection({}, 0).idleLimit(10), Infinity);
    assert.equal(new LegConnection({ idleTimeoutMs: 500 }, 0).idleLimit(10), 500);
    assert.equal(new LegConnection({ idleTimeoutMs: 500, maxDurationMs: 300 }, 0).idleLimit(100), 200);
    assert.equal(new LegConnection({ maxDurationMs: 300 }, 0).idleLimit(100), 200);
  });
});

describe('HTTP/2 upstream sessions of a traffic cluster', () => {
  let server: Http2Server;
  let port = 0;
  let opened = 0;
  let closed = 0;
  /** The server's sessions, by number, and the streams each carried at once at most. */
  const peak = new Map<ServerHttp2Session, { n: number; now: number; max: number }>();
  let store: TrafficStore;
  const runtimes: ClusterRuntime[] = [];

  before(async () => {
    server = createHttp2();
    server.on('session', (s) => {
      opened++;
      peak.set(s, { n: opened, now: 0, max: 0 });
      s.on('close', () => { closed++; });
    });
    server.on('stream', (stream, headers) => {
      const p = peak.get(stream.session as ServerHttp2Session)!;
      p.now++;
      p.max = Math.max(p.max, p.now);
      stream.on('close', () => { p.now--; });
      const delay = Number(/^\/slow\/(\d+)/.exec(String(headers[':path']))?.[1] ?? 0);
      setTimeout(() => {
        if (!stream.closed) stream.respond({ ':status': 200 }, { endStream: false });
        if (!stream.closed) stream.end(String(p.n));
      }, delay);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 16 });
  });
  after(() => {
    for (const r of runtimes) if (!r.isClosed) r.close();
    server.close();
  });

  const newPool = (): Http2UpstreamPool => new Http2UpstreamPool({ kind: 'direct' }, new DirectionStats(), { maxHeaderListSize: 65_536 });
  const cluster = (pool: Pool, name = 'outbound|80||h2.test'): ClusterRuntime => {
    const r = new ClusterRuntime({ spec: clusterSpec({ name, pool }), endpoints: [endpoint('127.0.0.1', { port })], store });
    runtimes.push(r);
    return r;
  };
  const target = (r?: ClusterRuntime, p = port): UpstreamTarget => ({
    address: '127.0.0.1', port: p, ...(r ? { cluster: { runtime: r, endpoint: r.endpoints[0]! } } : {}),
  });
  const acquire = (pool: Http2UpstreamPool, t: UpstreamTarget): Promise<UpstreamRoute> => new Promise((resolve) => pool.acquire(t, resolve));

  /** One request over the pool: the number of the server session that answered. */
  async function get(pool: Http2UpstreamPool, t: UpstreamTarget, path = '/'): Promise<number> {
    const route = await acquire(pool, t);
    assert.equal(route.kind, 'h2', route.kind === 'failed' ? route.error.message : route.kind);
    if (route.kind !== 'h2') return -1;
    const stream = route.session.request([':method', 'GET', ':scheme', 'http', ':authority', `127.0.0.1:${t.port}`, ':path', path], { endStream: true });
    let body = '';
    stream.on('data', (d: Buffer) => { body += d.toString('utf8'); });
    await new Promise<void>((resolve, reject) => {
      stream.once('close', () => (body === '' ? reject(new Error(`stream closed without an answer (code ${stream.rstCode})`)) : resolve()));
    });
    route.release();
    return Number(body);
  }

  it('without a cluster: one session carries every request, in turn and at once', async () => {
    const pool = newPool();
    const first = await get(pool, target());
    const rest = await Promise.all([get(pool, target()), get(pool, target(), '/slow/50'), get(pool, target(), '/slow/50')]);
    assert.deepEqual(rest, [first, first, first]);
    pool.closeAll();
  });

  it('maxRequestsPerConnection 2: every second request opens a new session, and the spent one closes', async () => {
    const pool = newPool();
    const r = cluster({ http: { maxRequestsPerConnection: 2 } });
    const closedBefore = closed;
    const seen: number[] = [];
    for (let i = 0; i < 6; i++) seen.push(await get(pool, target(r)));
    assert.equal(new Set(seen).size, 3, `sessions: ${seen.join(',')}`);
    assert.equal(seen[0], seen[1]);
    assert.notEqual(seen[1], seen[2]);
    // Each spent session is closed once its last stream is done (the last one too: it was given its second stream).
    for (let i = 0; i < 50 && closed - closedBefore < 3; i++) await sleep(20);
    assert.equal(closed - closedBefore, 3);
    pool.closeAll();
  });

  it('maxRequestsPerConnection: streams given at once past the limit go to another session, each drained when done', async () => {
    const pool = newPool();
    const r = cluster({ http: { maxRequestsPerConnection: 2 } });
    const seen = await Promise.all([1, 2, 3, 4, 5].map(() => get(pool, target(r), '/slow/30')));
    assert.equal(new Set(seen).size, 3, `sessions: ${seen.join(',')}`);
    pool.closeAll();
  });

  it('maxRequestsPerConnection 1 with maxConnections 1: a spent session gives its slot back as it closes, so the next request is not refused', async () => {
    const pool = newPool();
    const r = cluster({ tcp: { maxConnections: 1 }, http: { maxRequestsPerConnection: 1 } }, 'outbound|80||one.h2.test');
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) seen.push(await get(pool, target(r)));
    assert.equal(new Set(seen).size, 5);
    pool.closeAll();
  });

  it('maxConcurrentStreams 1: streams at once go to as many sessions, each carrying one at a time', async () => {
    const pool = newPool();
    const r = cluster({ http: { maxConcurrentStreams: 1 } });
    const seen = await Promise.all([1, 2, 3].map(() => get(pool, target(r), '/slow/100')));
    assert.equal(new Set(seen).size, 3, `sessions: ${seen.join(',')}`);
    for (const [, p] of peak) if (seen.includes(p.n)) assert.equal(p.max, 1);
    // In turn, they are reused (one at a time each).
    const again = [await get(pool, target(r)), await get(pool, target(r))];
    assert.ok(again.every((n) => seen.includes(n)), `${again.join(',')} not among ${seen.join(',')}`);
    pool.closeAll();
  });

  it('maxConcurrentStreams 2 with maxConnections 2: a fifth stream at once has no session (EOVERFLOW)', async () => {
    const pool = newPool();
    const r = cluster({ tcp: { maxConnections: 2 }, http: { maxConcurrentStreams: 2 } }, 'outbound|80||limited.h2.test');
    const routes = await Promise.all([1, 2, 3, 4, 5].map(() => acquire(pool, target(r))));
    const kinds = routes.map((x) => (x.kind === 'failed' ? x.error.code : x.kind));
    assert.deepEqual(kinds.filter((k) => k === 'h2').length, 4, kinds.join(','));
    assert.deepEqual(kinds.filter((k) => k === 'EOVERFLOW').length, 1, kinds.join(','));
    for (const x of routes) if (x.kind === 'h2') x.release();
    pool.closeAll();
  });

  it('maxConnectionDuration: an old session takes no new stream, finishes the one it carries, then closes', async () => {
    const pool = newPool();
    const r = cluster({ tcp: { maxConnectionDurationMs: 200 } });
    const first = await get(pool, target(r));
    const slow = get(pool, target(r), '/slow/400'); // still running when the session's time is up
    await sleep(250);
    const later = await get(pool, target(r));
    assert.notEqual(later, first, 'a request after maxConnectionDuration goes on a new session');
    assert.equal(await slow, first, 'the stream in flight finished on the old session');
    const old = [...peak].find(([, p]) => p.n === first)![0];
    for (let i = 0; i < 50 && !old.closed; i++) await sleep(20);
    assert.ok(old.closed, 'the old session closed once its stream ended');
    pool.closeAll();
  });

  it('idleTimeout: a session without streams that long is closed; the next request opens another', async () => {
    const pool = newPool();
    const r = cluster({ http: { idleTimeoutMs: 100 } });
    const first = await get(pool, target(r));
    const s = [...peak].find(([, p]) => p.n === first)![0];
    for (let i = 0; i < 50 && !s.closed; i++) await sleep(20);
    assert.ok(s.closed, 'closed after 100 ms idle');
    assert.notEqual(await get(pool, target(r)), first);
    pool.closeAll();
  });

  it('maxConnections: an idle session is closed when a request waits for the cluster\'s slot (any worker)', async () => {
    const pool = newPool();
    const r = cluster({ tcp: { maxConnections: 1 } }, 'outbound|80||waiters.h2.test');
    await get(pool, target(r));
    assert.equal(r.limits.active('cx'), 1);
    const started = performance.now();
    const woke = await r.waitForConnection(3000); // what a waiting HTTP/1.1 request does
    assert.ok(woke && performance.now() - started < 1500, `the slot came back after ${Math.round(performance.now() - started)} ms`);
    for (let i = 0; i < 50 && r.limits.active('cx') > 0; i++) await sleep(10);
    assert.equal(r.limits.active('cx'), 0);
    pool.closeAll();
  });

  it('a replaced cluster: the new version\'s requests do not use the old version\'s session, which closes', async () => {
    const pool = newPool();
    const old = cluster({}, 'outbound|80||replaced.h2.test');
    const first = await get(pool, target(old));
    old.close();
    const next = cluster({}, 'outbound|80||replaced.h2.test');
    assert.notEqual(await get(pool, target(next)), first);
    const s = [...peak].find(([, p]) => p.n === first)![0];
    for (let i = 0; i < 50 && !s.closed; i++) await sleep(20);
    assert.ok(s.closed);
    pool.closeAll();
  });

  it('a TLS destination that chooses HTTP/1.1 (ALPN): the probe\'s connection slot is given back before its streams go on as HTTP/1.1', async () => {
    const root = await createRootCa();
    const key = await generateTestKey();
    const cert = await signCertificate(key.keys.publicKey, root, { subject: 'CN=app', ipAddresses: ['127.0.0.1'] });
    const tls = createTlsServer({ cert: `${cert.toString('pem')}\n`, key: key.keyPem, ALPNProtocols: ['http/1.1'] }, (socket) => socket.on('error', () => {}));
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    const tlsPort = (tls.address() as AddressInfo).port;
    try {
      const pool = newPool();
      const r = new ClusterRuntime({ spec: clusterSpec({ name: 'outbound|443||h1only.test', pool: { tcp: { maxConnections: 1 } } }), endpoints: [endpoint('127.0.0.1', { port: tlsPort })], store });
      runtimes.push(r);
      const upstreamTls: UpstreamTls = {
        kind: 'tls', key: 'test', secureContext: createSecureContext({ ca: root.certPem }), servername: undefined, alpn: [],
        subjectAltNames: [], insecureSkipVerify: false, mesh: false, describe: 'SIMPLE (test)',
      };
      // Looked at when the stream is told (the exchange opens its HTTP/1.1 connection right then).
      const [route, slots] = await new Promise<[UpstreamRoute, number]>((resolve) => {
        pool.acquire({ ...target(r, tlsPort), tls: upstreamTls }, (x) => resolve([x, r.limits.active('cx')]));
      });
      assert.equal(route.kind, 'http1', route.kind === 'failed' ? route.error.message : route.kind);
      assert.equal(slots, 0, 'the slot of maxConnections 1 is free for the HTTP/1.1 connection');
      pool.closeAll();
    } finally {
      tls.close();
    }
  });
});

describe('the HTTP/1.1 leg of HTTP/2 clients under a traffic cluster', () => {
  let server: Http1Server;
  let port = 0;
  let connections = 0;
  const sockets: Socket[] = [];
  let store: TrafficStore;
  const runtimes: ClusterRuntime[] = [];

  before(async () => {
    server = createHttp1((req, res) => {
      const s = req.socket as Socket & { n?: number };
      const delay = Number(/^\/slow\/(\d+)/.exec(req.url ?? '')?.[1] ?? 0);
      setTimeout(() => res.end(String(s.n)), delay);
    });
    server.keepAliveTimeout = 60_000;
    server.on('connection', (s: Socket & { n?: number }) => {
      s.n = ++connections;
      sockets.push(s);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 16 });
  });
  after(() => {
    for (const r of runtimes) if (!r.isClosed) r.close();
    server.closeAllConnections();
    server.close();
  });

  const cluster = (pool: Pool, name: string): ClusterRuntime => {
    const r = new ClusterRuntime({ spec: clusterSpec({ name, pool }), endpoints: [endpoint('127.0.0.1', { port })], store });
    runtimes.push(r);
    return r;
  };
  const target = (r?: ClusterRuntime, p = port): UpstreamTarget => ({
    address: '127.0.0.1', port: p, ...(r ? { cluster: { runtime: r, endpoint: r.endpoints[0]! } } : {}),
  });
  /** One request on the leg: the server connection's number, or the error. */
  const get = (leg: Http1Upstream, t: UpstreamTarget, path = '/'): Promise<number | LegConnectError> => new Promise((resolve) => {
    const req = leg.request(t, 'GET', path, { host: 'leg.test' });
    req.on('error', (err: LegConnectError) => resolve(err));
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; });
      res.on('end', () => resolve(Number(body)));
    });
    req.end();
  });

  it('without a cluster: keep-alive, one connection for requests in turn', async () => {
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const seen = [await get(leg, target()), await get(leg, target()), await get(leg, target())];
    assert.equal(new Set(seen).size, 1, seen.join(','));
    leg.closeIdle();
  });

  it('maxRequestsPerConnection 2: a connection carries two requests, then closes', async () => {
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const r = cluster({ http: { maxRequestsPerConnection: 2 } }, 'outbound|80||mrpc.leg.test');
    const seen: (number | LegConnectError)[] = [];
    for (let i = 0; i < 6; i++) seen.push(await get(leg, target(r)));
    assert.equal(new Set(seen).size, 3, seen.join(','));
    assert.equal(r.limits.active('cx') <= 1, true, 'spent connections gave their slots back');
    leg.closeIdle();
  });

  it('maxConnections 1: a second connection at once is refused (EOVERFLOW); the slot comes back when the connection closes', async () => {
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const r = cluster({ tcp: { maxConnections: 1 } }, 'outbound|80||limited.leg.test');
    const [a, b] = await Promise.all([get(leg, target(r), '/slow/100'), get(leg, target(r), '/slow/100')]);
    assert.equal(typeof a, 'number');
    assert.equal((b as LegConnectError).code, 'EOVERFLOW');
    assert.equal(r.limits.active('cx'), 1, 'the kept connection holds its slot');
    leg.closeIdle();
    for (let i = 0; i < 50 && r.limits.active('cx') > 0; i++) await sleep(10);
    assert.equal(r.limits.active('cx'), 0);
  });

  it('idleTimeout: a kept connection closes after that long idle', async () => {
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const r = cluster({ http: { idleTimeoutMs: 100 } }, 'outbound|80||idle.leg.test');
    const first = await get(leg, target(r));
    const s = sockets.find((x) => (x as Socket & { n?: number }).n === first)!;
    for (let i = 0; i < 50 && !s.destroyed; i++) await sleep(20);
    assert.ok(s.destroyed, 'closed after 100 ms idle');
    assert.notEqual(await get(leg, target(r)), first);
    leg.closeIdle();
  });

  it('maxConnectionDuration: a connection that old is not kept for another request', async () => {
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const r = cluster({ tcp: { maxConnectionDurationMs: 150 } }, 'outbound|80||duration.leg.test');
    const first = await get(leg, target(r));
    assert.equal(await get(leg, target(r), '/slow/200'), first);
    assert.notEqual(await get(leg, target(r)), first, 'past its duration, the connection was closed after its response');
    leg.closeIdle();
  });

  it('maxConnections: a kept connection is closed when a request waits for the cluster\'s slot (any worker)', async () => {
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const r = cluster({ tcp: { maxConnections: 1 } }, 'outbound|80||waiters.leg.test');
    await get(leg, target(r));
    assert.equal(r.limits.active('cx'), 1);
    const started = performance.now();
    const woke = await r.waitForConnection(3000);
    assert.ok(woke && performance.now() - started < 1500, `the slot came back after ${Math.round(performance.now() - started)} ms`);
    leg.closeIdle();
  });

  it('a replaced cluster: its kept connections close (their slots go to the new version)', async () => {
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const old = cluster({}, 'outbound|80||replaced.leg.test');
    const first = await get(leg, target(old));
    const s = sockets.find((x) => (x as Socket & { n?: number }).n === first)!;
    old.close();
    for (let i = 0; i < 50 && !s.destroyed; i++) await sleep(20);
    assert.ok(s.destroyed, 'closed within a few checks');
    leg.closeIdle();
  });

  it('a connection refused before it was made is marked as a connect failure', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const s = createHttp1();
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const leg = new Http1Upstream({ kind: 'direct' }, new DirectionStats());
    const r = cluster({}, 'outbound|80||refused.leg.test');
    const err = await get(leg, target(r, closedPort)) as LegConnectError;
    assert.equal(err.code, 'ECONNREFUSED');
    assert.equal(err.connecting, true);
    for (let i = 0; i < 50 && r.limits.active('cx') > 0; i++) await sleep(10);
    assert.equal(r.limits.active('cx'), 0, 'its slot is back');
  });
});
