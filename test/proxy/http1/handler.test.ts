// The HTTP/1.1 path against real sockets on loopback: a client (raw bytes, parsed by the test), the
// handler behind a listener that reads the first bytes like the capture listener, and a node:http upstream.
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Verdict } from '../../../src/proxy/decider.js';
import {
  echo, eventually, RawClient, Recorder, sleep, startProxy, startRawServer, startUpstream, toDestination,
  type Proxy, type RawServer, type Upstream,
} from './harness.js';

const GET = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: app\r\n${extra}\r\n`;

interface Echoed { method: string; url: string; rawHeaders: string[]; body: string }
const echoed = (body: Buffer): Echoed => JSON.parse(body.toString('latin1')) as Echoed;
const headerNames = (e: Echoed): string[] => e.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());

/** Routes of the test upstream, beyond the echo. */
function routes(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://x');
  const delay = Number(url.searchParams.get('delay') ?? 0);
  const answer = (): void => {
    switch (url.pathname) {
      case '/chunked': // no content-length: node sends it chunked
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('one,');
        setTimeout(() => res.end('two'), 5);
        return;
      case '/big': {
        const size = Number(url.searchParams.get('size'));
        const chunk = Buffer.alloc(64 * 1024, 'b');
        res.writeHead(200, { 'content-length': size });
        let left = size;
        const pump = (): void => {
          while (left > 0) {
            const n = Math.min(left, chunk.length);
            left -= n;
            if (!res.write(chunk.subarray(0, n))) { res.once('drain', pump); return; }
          }
          res.end();
        };
        pump();
        return;
      }
      case '/count': { // counts the body bytes, slowly (a slow reader of a big upload)
        let n = 0;
        req.on('data', (c: Buffer) => { n += c.length; req.pause(); setTimeout(() => req.resume(), 1); });
        req.on('end', () => res.end(String(n)));
        return;
      }
      case '/hop': // hop-by-hop response headers the client must not see
        res.writeHead(200, [['Connection', 'x-secret'], ['X-Secret', '1'], ['Keep-Alive', 'timeout=1'], ['X-Kept', 'yes'], ['Content-Length', '2']]);
        res.end('ok');
        return;
      case '/hang':
        return; // never answers
      case '/drip': // a slow response: a head, then a chunk every 20 ms
        res.writeHead(200, { 'content-type': 'text/plain' });
        {
          const t = setInterval(() => res.write('x'), 20);
          res.on('close', () => clearInterval(t));
        }
        return;
      default:
        echo(req, res);
    }
  };
  if (delay) setTimeout(answer, delay); else answer();
}

describe('Http1Handler', () => {
  let upstream: Upstream;
  const proxies: Proxy[] = [];
  const clients: RawClient[] = [];
  const raws: RawServer[] = [];
  const raw = async (onConnection: Parameters<typeof startRawServer>[0]): Promise<RawServer> => {
    const r = await startRawServer(onConnection);
    raws.push(r);
    return r;
  };
  const proxy = async (o: Omit<Parameters<typeof startProxy>[0], 'destination'> = {}): Promise<Proxy> => {
    const p = await startProxy({ destination: upstream.endpoint, ...o });
    proxies.push(p);
    return p;
  };
  const client = async (p: Proxy): Promise<RawClient> => {
    const c = await RawClient.connect(p.port);
    clients.push(c);
    return c;
  };

  before(async () => {
    upstream = await startUpstream(routes);
    upstream.server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Path: ${req.url}\r\n\r\n`);
      if (head.length > 0) socket.write(head);
      socket.pipe(socket); // an echo, once switched
    });
  });
  after(async () => {
    for (const c of clients) c.destroy();
    for (const p of proxies) await p.close();
    for (const r of raws) await r.close();
    await upstream.close();
  });

  it('forwards requests on a keep-alive connection, reusing the upstream connection', async () => {
    const rec = new Recorder(toDestination);
    const p = await proxy({ decider: rec });
    const before = upstream.connections;
    const c = await client(p);
    for (const path of ['/a', '/b', '/c']) {
      c.write(GET(path));
      const r = await c.response();
      assert.equal(r.status, 200);
      assert.equal(echoed(r.body).url, path);
      assert.equal(r.headers['connection'], undefined);
    }
    assert.equal(upstream.connections - before, 1, 'one upstream connection for three requests');
    await rec.waitFor(3);
    assert.deepEqual(rec.completions.map((x) => [x.url, x.status]), [['/a', 200], ['/b', 200], ['/c', 200]]);
    assert.equal(rec.duplicates, 0);
    assert.equal(p.stats.rqTotal, 3);
    assert.equal(p.stats.rqActive, 0);
    assert.equal(p.stats.rqByCode.get(200), 3);
    assert.equal(p.stats.rqDurationMs.count, 3);
  });

  it('works with the default decider (original destination, no decider call)', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write(GET('/default'));
    const r = await c.response();
    assert.equal(r.status, 200);
    assert.equal(echoed(r.body).url, '/default');
  });

  it('answers pipelined requests in order, the first one slowest', async () => {
    const rec = new Recorder(toDestination);
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write(GET('/1?delay=60') + GET('/2?delay=20') + GET('/3'));
    const urls = [];
    for (let i = 0; i < 3; i++) urls.push(echoed((await c.response()).body).url);
    assert.deepEqual(urls, ['/1?delay=60', '/2?delay=20', '/3']);
    await rec.waitFor(3);
    assert.deepEqual(rec.completions.map((x) => x.url), urls);
  });

  it('carries a chunked request body and a chunked response', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write('POST /up HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
    await sleep(20);
    c.write('6\r\n world\r\n0\r\n\r\n');
    const r = await c.response();
    assert.equal(echoed(r.body).body, 'hello world');
    assert.ok(!headerNames(echoed(r.body)).includes('content-length'));
    c.write(GET('/chunked'));
    const r2 = await c.response();
    assert.equal(r2.status, 200);
    assert.equal(r2.chunked, true);
    assert.equal(r2.body.toString(), 'one,two');
  });

  it('streams a large response to a slow reader and a large upload to a slow upstream, whole', async () => {
    const p = await proxy();
    const c = await client(p);
    const size = 8 * 1024 * 1024;
    c.socket.pause();
    c.write(GET(`/big?size=${size}`));
    await sleep(200); // the client reads nothing: the proxy must hold back, not buffer 8 MiB
    c.socket.resume();
    const r = await c.response();
    assert.equal(r.body.length, size);
    assert.ok(r.body.every((b) => b === 0x62));
    const body = Buffer.alloc(4 * 1024 * 1024, 'u');
    c.write(`POST /count HTTP/1.1\r\nHost: app\r\nContent-Length: ${body.length}\r\n\r\n`);
    c.write(body);
    const r2 = await c.response();
    assert.equal(r2.body.toString(), String(body.length));
    assert.equal(p.stats.rsBodyBytes >= size, true);
    assert.equal(p.stats.rqBodyBytes, body.length);
  });

  it('drops hop-by-hop headers both ways, those Connection names included', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write(GET('/echo', 'Connection: keep-alive, X-Private\r\nX-Private: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nProxy-Connection: x\r\nUpgrade: h2c\r\nX-Public: 2\r\n'));
    const names = headerNames(echoed((await c.response()).body));
    assert.deepEqual(names.sort(), ['host', 'x-public']);
    c.write(GET('/hop'));
    const r = await c.response();
    assert.equal(r.headers['x-secret'], undefined);
    assert.equal(r.headers['keep-alive'], undefined);
    assert.equal(r.headers['connection'], undefined);
    assert.equal(r.headers['x-kept'], 'yes');
  });

  it('applies the verdict\'s header edits and path', async () => {
    const p = await proxy({
      decider: new Recorder((_req, dst) => ({
        kind: 'forward', address: dst!.address, port: dst!.port, path: '/rewritten?q=1',
        removeHeaders: ['authorization'], setHeaders: [['x-user', 'alice'], ['host', 'internal']],
      })),
    });
    const c = await client(p);
    c.write(GET('/original', 'Authorization: Bearer t\r\nX-Other: o\r\n'));
    const e = echoed((await c.response()).body);
    assert.equal(e.url, '/rewritten?q=1');
    assert.deepEqual(e.rawHeaders, ['X-Other', 'o', 'x-user', 'alice', 'host', 'internal']);
  });

  it('answers an invalid edit 500, not with a broken request', async () => {
    const p = await proxy({ decider: new Recorder((_req, dst) => ({ kind: 'forward', address: dst!.address, port: dst!.port, setHeaders: [['x-a', 'a\r\nx-b: b']] })) });
    const c = await client(p);
    c.write(GET('/bad-edit'));
    assert.equal((await c.response()).status, 500);
  });

  it('answers a local reply; with the body unread the connection closes, with it read it goes on', async () => {
    const rec = new Recorder((req) => ({ kind: 'reply', status: 401, body: 'no', headers: { 'www-authenticate': `Bearer realm="${req.headers.host ?? ''}"` } }));
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write('POST /x HTTP/1.1\r\nHost: app\r\nContent-Length: 2\r\n\r\nok');
    const r = await c.response();
    assert.equal(r.status, 401);
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="app"');
    assert.equal(r.headers['connection'], undefined, 'the body was complete: keep-alive');
    assert.equal(r.body.toString(), 'no');
    c.write('POST /y HTTP/1.1\r\nHost: app\r\nContent-Length: 100000\r\n\r\npart');
    const r2 = await c.response();
    assert.equal(r2.status, 401);
    assert.equal(r2.headers['connection'], 'close');
    c.write(Buffer.alloc(1000, 'z')); // the rest of the body, which nobody reads
    await c.end();
    await rec.waitFor(2);
    assert.deepEqual(rec.completions.map((x) => x.status), [401, 401]);
    assert.equal(p.stats.rqActive, 0);
  });

  it('answers HEAD local replies without a body', async () => {
    const p = await proxy({ decider: new Recorder(() => ({ kind: 'reply', status: 404, body: 'nothing here' })) });
    const c = await client(p);
    c.write('HEAD / HTTP/1.1\r\nHost: a\r\n\r\n');
    const r = await c.response({ head: true });
    assert.equal(r.status, 404);
    assert.equal(r.headers['content-length'], '12');
    c.write(GET('/after-head'));
    assert.equal((await c.response()).body.toString(), 'nothing here');
  });

  it('waits for an async decider, holding the body that arrives meanwhile', async () => {
    const rec = new Recorder(async (req, dst) => {
      await sleep(30);
      return { kind: 'forward', address: dst!.address, port: dst!.port, setHeaders: [['x-decided', req.url ?? '']] };
    });
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write('POST /async HTTP/1.1\r\nHost: app\r\nContent-Length: 6\r\n\r\nabc');
    await sleep(5);
    c.write('def');
    const e = echoed((await c.response()).body);
    assert.equal(e.body, 'abcdef');
    assert.deepEqual(e.rawHeaders.slice(-4), ['x-decided', '/async', 'content-length', '6'], 'the framing line is the proxy\'s, last');
    await rec.waitFor(1);
    assert.equal(rec.completions[0]!.status, 200);
  });

  it('answers 500 when the decider throws or rejects', async () => {
    const p = await proxy({ decider: new Recorder((req) => {
      if (req.url === '/throw') throw new Error('boom');
      return Promise.reject(new Error('async boom'));
    }) });
    const c = await client(p);
    c.write(GET('/throw') + GET('/reject'));
    assert.equal((await c.response()).status, 500);
    assert.equal((await c.response()).status, 500);
  });

  it('answers 503 when the upstream refuses, and counts it', async () => {
    const closed = new Server();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const rec = new Recorder(toDestination);
    const p = await startProxy({ destination: { address: '127.0.0.1', port }, decider: rec });
    proxies.push(p);
    const c = await client(p);
    c.write(GET('/refused'));
    const r = await c.response();
    assert.equal(r.status, 503);
    assert.match(r.body.toString(), /connection failure/);
    // A local answer keeps the connection (as Envoy's do): the client asks again on it.
    assert.equal(r.headers['connection'], undefined);
    c.write(GET('/refused-again'));
    assert.equal((await c.response()).status, 503);
    c.socket.end();
    await c.end();
    assert.equal(p.stats.upstreamCxConnectFail, 2);
    assert.equal(p.stats.upstreamRqErrors, 2);
    await rec.waitFor(2);
    assert.deepEqual(rec.completions.map((x) => x.status), [503, 503]);
  });

  it('answers 504 when the route timeout passes before the response head', async () => {
    const rec = new Recorder((_req, dst) => ({ kind: 'forward', address: dst!.address, port: dst!.port, timeoutMs: 50 }));
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write(GET('/hang'));
    const r = await c.response();
    assert.equal(r.status, 504);
    assert.equal(r.body.toString(), 'upstream request timeout\n');
    assert.equal(r.headers['connection'], undefined, 'a local answer keeps the connection, as Envoy\'s do');
    c.socket.end();
    await c.end();
    assert.equal(p.stats.upstreamRqTimeouts, 1);
    await rec.waitFor(1);
    assert.deepEqual(rec.completions.map((x) => x.status), [504]);
    assert.equal(rec.duplicates, 0);
  });

  it('answers a malformed request 400 and closes that connection only', async () => {
    const p = await proxy();
    const good = await client(p);
    good.write(GET('/before'));
    assert.equal((await good.response()).status, 200);
    const bad = await client(p);
    bad.write('GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n');
    const r = await bad.response();
    assert.equal(r.status, 400);
    await bad.end();
    good.write(GET('/after'));
    assert.equal(echoed((await good.response()).body).url, '/after');
    assert.equal(p.stats.rqProtocolErrors, 1);
  });

  it('takes heads up to 60 KiB both ways; a larger request head is 431, counted as a 4xx, not a protocol error', async () => {
    const big = await raw((s) => s.once('data', () => s.end(`HTTP/1.1 200 OK\r\nX-Big: ${'r'.repeat(59 * 1024)}\r\nContent-Length: 2\r\n\r\nok`)));
    const p = await startProxy({ destination: big.endpoint });
    proxies.push(p);
    const c = await client(p);
    c.write(GET('/big', `X-Big: ${'q'.repeat(59 * 1024)}\r\n`));
    const r = await c.response();
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-big']!.length, 59 * 1024);
    const over = await client(p);
    over.write(GET('/over', `X-Big: ${'q'.repeat(61 * 1024)}\r\n`));
    assert.equal((await over.response()).status, 431);
    await over.end();
    assert.equal(p.stats.rqByCode.get(431), 1);
    assert.equal(p.stats.rqProtocolErrors, 0);
    const small = await proxy({ limits: { maxHeadBytes: 1024, maxHeaders: 100 } });
    const s2 = await client(small);
    s2.write(GET('/x', `X-Big: ${'q'.repeat(2000)}\r\n`));
    assert.equal((await s2.response()).status, 431, 'the limit is a setting');
  });

  it('answers the requests before a malformed one, then 400', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write(`${GET('/fine?delay=20')}GARBAGE\r\n\r\n`);
    assert.equal(echoed((await c.response()).body).url, '/fine?delay=20');
    assert.equal((await c.response()).status, 400);
    await c.end();
  });

  for (const pipelined of [false, true]) {
    it(`tunnels an Upgrade that is the second request of a keep-alive connection${pipelined ? ', pipelined' : ''}`, async () => {
      const rec = new Recorder(toDestination);
      const p = await proxy({ decider: rec });
      const c = await client(p);
      const upgrade = 'GET /ws HTTP/1.1\r\nHost: app\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nearly';
      if (pipelined) {
        c.write(GET('/first?delay=30') + upgrade);
      } else {
        c.write(GET('/first'));
        assert.equal((await c.response()).status, 200);
        c.write(upgrade);
      }
      if (pipelined) assert.equal(echoed((await c.response()).body).url, '/first?delay=30');
      const sw = await c.response();
      assert.equal(sw.status, 101);
      assert.equal(sw.headers['x-path'], '/ws');
      c.write('-ping');
      await eventually(() => c.buf.toString().includes('early-ping'));
      assert.equal(c.buf.toString(), 'early-ping');
      assert.equal(p.stats.rqTunnels, 1);
      await rec.waitFor(1);
      // Both requests were decided; the tunnel's is completed when the tunnel closes.
      assert.deepEqual(rec.completions.map((x) => x.url), ['/first' + (pipelined ? '?delay=30' : '')]);
      c.destroy();
      await rec.waitFor(2);
      assert.deepEqual(rec.completions.map((x) => [x.url, x.status]), [['/first' + (pipelined ? '?delay=30' : ''), 200], ['/ws', 101]]);
    });
  }

  it('relays the upstream\'s 100 to Expect: 100-continue (ENABLE_100_CONTINUE_HEADERS)', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write(GET('/first'));
    assert.equal((await c.response()).status, 200);
    c.write('POST /expect HTTP/1.1\r\nHost: app\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n');
    const cont = await c.response();
    assert.equal(cont.status, 100);
    c.write('body');
    const r = await c.response();
    assert.equal(echoed(r.body).body, 'body');
    assert.equal(p.stats.rqBodyBytes, 4, 'a body after a 100 is counted like any other');
    assert.equal(p.stats.rqTotal, 2);
  });

  it('counts a WebSocket upgrade as a request: one more, completed with its 101 when the tunnel ends', async () => {
    const rec = new Recorder(toDestination);
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write('GET /ws HTTP/1.1\r\nHost: app\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    assert.equal((await c.response()).status, 101);
    assert.equal(p.stats.rqTotal, 1);
    assert.equal(p.stats.rqActive, 1, 'the tunnel is the request, under way');
    c.destroy();
    await rec.waitFor(1);
    assert.deepEqual(rec.completions.map((x) => [x.url, x.status]), [['/ws', 101]]);
    await eventually(() => p.stats.rqActive === 0);
    assert.equal(p.stats.rqByCode.get(101), 1);
    assert.equal(p.stats.rqTunnels, 1);
  });

  it('answers 100 itself when 100-continue is not passed on, once the request is allowed', async () => {
    const rec = new Recorder((req, dst) => (req.url === '/no' ? { kind: 'reply', status: 403, body: 'no' } : toDestination(req, dst)));
    const p = await proxy({ decider: rec, forward100Continue: false });
    const c = await client(p);
    c.write('POST /expect HTTP/1.1\r\nHost: app\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n');
    assert.equal((await c.response()).status, 100);
    c.write('body');
    const r = await c.response();
    const seen = echoed(r.body);
    assert.equal(seen.body, 'body');
    assert.equal(headerNames(seen).includes('expect'), false, 'the upstream is not asked to continue');
    const denied = await client(p);
    denied.write('POST /no HTTP/1.1\r\nHost: app\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n');
    const d = await denied.response();
    assert.equal(d.status, 403, 'no 100 before a refusal: the body is never sent');
    const weird = await client(p);
    weird.write('POST /x HTTP/1.1\r\nHost: app\r\nExpect: something\r\nContent-Length: 0\r\n\r\n');
    assert.equal((await weird.response()).status, 417);
  });

  it('HTTP/1.0: 426 unless allowed, served when allowed (and the connection closes after)', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write(GET('/first'));
    assert.equal((await c.response()).status, 200);
    c.write('GET /old HTTP/1.0\r\nHost: app\r\n\r\n');
    assert.equal((await c.response()).status, 426);
    await c.end();
    const allowed = await proxy({ allowHttp10: true });
    const c2 = await client(allowed);
    c2.write('GET /old HTTP/1.0\r\nHost: app\r\n\r\n');
    const r = await c2.response();
    assert.equal(r.status, 200);
    assert.equal(echoed(r.body).url, '/old');
    assert.equal(r.headers['connection'], 'close');
    await c2.end();
  });

  it('drains: an idle connection closes at once, a busy one after its response, which says close', async () => {
    const p = await proxy();
    const idle = await client(p);
    idle.write(GET('/idle'));
    await idle.response();
    const busy = await client(p);
    busy.write(GET('/busy?delay=80'));
    await sleep(20);
    p.handler.drain();
    await idle.end();
    const r = await busy.response();
    assert.equal(r.status, 200);
    assert.equal(r.headers['connection'], 'close');
    await busy.end();
  });

  it('closes a connection whose client left mid-response: the upstream connection too, completed once', async () => {
    const rec = new Recorder(toDestination);
    const p = await proxy({ decider: rec });
    const upBefore = upstream.connections;
    const c = await client(p);
    c.write(GET('/drip'));
    await eventually(() => c.buf.length > 0);
    c.destroy();
    await rec.waitFor(1);
    assert.deepEqual(rec.completions.map((x) => x.status), [200], 'the head was sent: its status');
    await eventually(() => p.stats.rqActive === 0);
    assert.equal(p.stats.rqActive, 0);
    // The upstream connection was not pooled (its response was cut): the next request opens another.
    const c2 = await client(p);
    c2.write(GET('/next'));
    assert.equal((await c2.response()).status, 200);
    assert.equal(upstream.connections - upBefore, 2);
    assert.equal(rec.duplicates, 0);
  });

  it('reports a request abandoned before its answer with no status', async () => {
    const rec = new Recorder(toDestination);
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write(GET('/hang'));
    await sleep(30);
    c.socket.resetAndDestroy(); // gone
    await rec.waitFor(1);
    assert.deepEqual(rec.completions.map((x) => x.status), [undefined]);
    assert.equal(p.stats.rqByCode.size, 0);
  });

  it('takes sockets without sniffed bytes (the gateway\'s way)', async () => {
    const p = await proxy({ sniff: false });
    const c = await client(p);
    c.write(GET('/nosniff'));
    assert.equal(echoed((await c.response()).body).url, '/nosniff');
  });

  it('sends an idempotent request again when a pooled connection turns out closed', async () => {
    // An upstream that answers the first request of each connection and drops the connection at the second.
    const flaky = await raw((s) => {
      let n = 0;
      s.on('data', () => {
        n++;
        if (n === 1) s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        else s.destroy();
      });
    });
    const p = await startProxy({ destination: flaky.endpoint });
    proxies.push(p);
    const c = await client(p);
    c.write(GET('/one'));
    assert.equal((await c.response()).status, 200);
    c.write(GET('/two'));
    assert.equal((await c.response()).status, 200);
    assert.equal(flaky.connections, 2);
    c.write('POST /three HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx');
    assert.equal((await c.response()).status, 503, 'a request with a body is not sent twice');
  });

  it('passes 1xx informational responses and answers HEAD without a body', async () => {
    const up = await raw((s) => {
      s.on('data', (d: Buffer) => {
        if (d.toString().startsWith('HEAD')) s.write('HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n');
        else s.write('HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      });
    });
    const p = await startProxy({ destination: up.endpoint });
    proxies.push(p);
    const c = await client(p);
    c.write('HEAD / HTTP/1.1\r\nHost: a\r\n\r\n');
    const h = await c.response({ head: true });
    assert.equal(h.headers['content-length'], '50');
    c.write(GET('/hints'));
    const hint = await c.response();
    assert.equal(hint.status, 103);
    assert.equal(hint.headers['link'], '</a.css>');
    assert.equal((await c.response()).body.toString(), 'ok');
  });

  it('turns a response delimited by the upstream\'s close into a chunked one, keeping the client\'s connection', async () => {
    const up = await raw((s) => {
      s.once('data', () => s.end('HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end'));
    });
    const p = await startProxy({ destination: up.endpoint });
    proxies.push(p);
    const c = await client(p);
    c.write(GET('/eof'));
    const r = await c.response();
    assert.equal(r.chunked, true);
    assert.equal(r.body.toString(), 'until the end');
    c.write(GET('/again'));
    assert.equal((await c.response()).body.toString(), 'until the end');
  });

  it('ends after a request that says Connection: close, ignoring what follows it', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write(GET('/last', 'Connection: close\r\n') + GET('/ignored'));
    const r = await c.response();
    assert.equal(r.headers['connection'], 'close');
    assert.equal(echoed(r.body).url, '/last');
    await c.end();
    assert.equal(c.buf.length, 0);
  });

  it('takes a client\'s FIN as its leaving (as Envoy and nginx do): what it had in flight ends unanswered, nothing is held for it', async () => {
    const rec = new Recorder(toDestination);
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write(GET('/half?delay=300') + GET('/second'));
    await eventually(() => p.stats.upstreamCxActive === 1);
    c.socket.end();
    await c.end();
    assert.equal(c.buf.length, 0, 'no answer after the FIN');
    await rec.waitFor(2); // the one in flight and the one behind it
    assert.deepEqual(rec.completions.map((x) => x.status), [undefined, undefined]);
    await eventually(() => p.stats.upstreamCxActive === 0 && p.stats.rqActive === 0);
  });

  it('answers what the client asked before its FIN when the answer is already complete, then ends', async () => {
    const p = await proxy();
    const c = await client(p);
    c.write(GET('/first'));
    assert.equal(echoed((await c.response()).body).url, '/first');
    c.socket.end();
    await c.end();
    assert.equal(c.buf.length, 0);
  });

  it('abandons a request whose body the client never finished before its half-close', async () => {
    const rec = new Recorder(toDestination);
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write('POST /cut HTTP/1.1\r\nHost: app\r\nContent-Length: 10\r\n\r\nabc');
    await eventually(() => p.stats.rqTotal === 1);
    c.socket.end();
    await c.end();
    assert.equal(c.buf.length, 0);
  });

  it('answers 503 without an original destination (default decider)', async () => {
    const p = await startProxy({ destination: undefined as never });
    proxies.push(p);
    const c = await client(p);
    c.write(GET('/nowhere'));
    const r = await c.response();
    assert.equal(r.status, 503);
    assert.match(r.body.toString(), /no original destination/);
  });

  it('counts every verdict kind once in completed()', async () => {
    const verdicts: Record<string, (dst: { address: string; port: number }) => Verdict> = {
      '/f': (dst) => ({ kind: 'forward', address: dst.address, port: dst.port }),
      '/r': () => ({ kind: 'reply', status: 403, body: 'RBAC: access denied' }),
    };
    const rec = new Recorder((req, dst) => verdicts[req.url ?? '']!(dst!));
    const p = await proxy({ decider: rec });
    const c = await client(p);
    c.write(GET('/f') + GET('/r') + GET('/f') + GET('/r'));
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await c.response()).status);
    assert.deepEqual(statuses, [200, 403, 200, 403]);
    await rec.waitFor(4);
    assert.deepEqual(rec.completions.map((x) => [x.url, x.status, x.verdict?.kind]),
      [['/f', 200, 'forward'], ['/r', 403, 'reply'], ['/f', 200, 'forward'], ['/r', 403, 'reply']]);
    assert.equal(rec.duplicates, 0);
  });
});
