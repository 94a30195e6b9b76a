// HTTP/2 sessions that went away are let go at once: the client's (through a real Http2Handler) and
// the upstream's (through the pool), with real sockets on 127.0.0.1. Watched with WeakRefs and a
// forced collection: a session still reachable after it closed is memory held for every client that
// came and went (node's session.setTimeout held each one for five minutes: idle-close.ts).
import assert from 'node:assert/strict';
import { connect as connectHttp2, createServer as createHttp2, type Http2Server, type ServerHttp2Session } from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { RequestDecider } from '../../../src/proxy/decider.js';
import { Http2Handler } from '../../../src/proxy/http2/handler.js';
import { closeWhenIdle } from '../../../src/proxy/http2/idle-close.js';
import { Http2UpstreamPool, type UpstreamRoute } from '../../../src/proxy/http2/upstream-sessions.js';
import { DirectionStats } from '../../../src/proxy/stats.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// Made outside the tests' async functions: a suspended async function keeps its locals (the last
// session seen among them) alive until it returns.
const weakRefs = <T extends object>(xs: Iterable<T>): WeakRef<T>[] => [...xs].map((x) => new WeakRef(x));
const distinct = (refs: readonly WeakRef<object>[]): number => new Set(refs.map((r) => r.deref())).size;

/** How many of `refs` are still reachable once the closes have run and the heap is collected. */
async function survivors(refs: readonly WeakRef<object>[]): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await sleep(20);
    gc();
  }
  return refs.filter((r) => r.deref() !== undefined).length;
}

describe('HTTP/2 sessions that went away are not held', () => {
  let upstream: Http2Server;
  let upstreamPort: number;
  const upstreamSessions = new Set<ServerHttp2Session>();
  before(async () => {
    upstream = createHttp2();
    upstream.on('session', (s) => {
      upstreamSessions.add(s);
      s.once('close', () => upstreamSessions.delete(s));
    });
    upstream.on('stream', (stream) => {
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamPort = (upstream.address() as AddressInfo).port;
  });
  after(() => upstream.close());

  it('a client\'s session, once the client has gone (FIN or reset), is collectable', async () => {
    const decider: RequestDecider = { decide: () => ({ kind: 'forward', address: '127.0.0.1', port: upstreamPort }) };
    const handler = new Http2Handler({
      stats: new DirectionStats(), upstream: { kind: 'direct' }, destinationOf: () => ({ address: '127.0.0.1', port: upstreamPort }), decider,
    });
    // As the capture listener hands a connection over: its first bytes read, then the socket paused.
    const server: Server = createNetServer({ pauseOnConnect: true }, (s) => {
      s.once('data', (head: Buffer) => {
        s.pause();
        handler.accept(s, head);
      });
      s.resume();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const held = (handler as unknown as { sessions: Map<ServerHttp2Session, unknown> }).sessions;
    const refs: WeakRef<ServerHttp2Session>[] = [];
    try {
      for (let i = 0; i < 20; i++) {
        const client = connectHttp2(`http://127.0.0.1:${port}`);
        client.on('error', () => { /* the reset below */ });
        const stream = client.request({ ':path': `/${i}` }, { endStream: true });
        stream.resume();
        await new Promise((resolve) => stream.once('close', resolve));
        refs.push(...weakRefs(held.keys()));
        // Half of them leave with a FIN, half with a reset.
        if (i % 2 === 0) client.close();
        else client.socket.resetAndDestroy();
        await new Promise((resolve) => client.once('close', resolve));
        await sleep(5);
      }
      assert.ok(distinct(refs) >= 20, `a session per client seen (${distinct(refs)})`);
      // The proxy sees each client leave a moment after the client has closed.
      for (let waited = 0; handler.connections > 0 && waited < 5000; waited += 20) await sleep(20);
      assert.equal(handler.connections, 0, 'every session closed');
      assert.equal(await survivors(refs), 0, 'closed sessions still reachable');
    } finally {
      handler.closeIdle();
      server.close();
    }
  });

  it('an upstream session, once the upstream has gone, is collectable', async () => {
    const pool = new Http2UpstreamPool({ kind: 'direct' }, new DirectionStats(), { maxHeaderListSize: 65_536 });
    const refs: WeakRef<object>[] = [];
    try {
      for (let i = 0; i < 10; i++) {
        const route = await new Promise<UpstreamRoute>((resolve) => pool.acquire({ address: '127.0.0.1', port: upstreamPort }, resolve));
        assert.equal(route.kind, 'h2');
        if (route.kind !== 'h2') return;
        refs.push(...weakRefs([route.session]));
        const stream = route.session.request([':method', 'GET', ':scheme', 'http', ':authority', `127.0.0.1:${upstreamPort}`, ':path', '/'], { endStream: true });
        stream.resume();
        await new Promise((resolve) => stream.once('close', resolve));
        route.release();
        const closed = new Promise((resolve) => route.session.once('close', resolve));
        for (const s of upstreamSessions) s.destroy();
        await closed;
      }
      assert.equal(await survivors(refs), 0, 'closed upstream sessions still reachable');
    } finally {
      pool.closeAll();
    }
  });

  it('closeWhenIdle: calls back once its time has passed without streams, never while one is open, and stops with the session', async () => {
    const session = createHttp2().listen(0); // an emitter with a session's 'close' is all it needs
    let open = 1;
    let since = performance.now();
    const calls: number[] = [];
    const fake = session as unknown as Parameters<typeof closeWhenIdle>[0];
    closeWhenIdle(fake, 60, () => (open === 0 ? performance.now() - since : 0), () => { calls.push(performance.now() - since); });
    await sleep(200);
    assert.deepEqual(calls, [], 'busy: never idle');
    open = 0;
    since = performance.now();
    for (let waited = 0; calls.length === 0 && waited < 2000; waited += 10) await sleep(10);
    assert.ok(calls.length > 0 && calls[0]! >= 60, `idle once 60 ms have passed since its last stream (${calls.join(', ')} ms)`);
    session.emit('close');
    const seen = calls.length;
    await sleep(200);
    assert.equal(calls.length, seen, 'its session closed: no more checks');
    session.close();
  });
});
