// src/proxy/http2/codec/ against nghttp2 (node:http2) over real loopback sockets, seeded:
//  - node's client against our server side, and our client side against node's server: many
//    concurrent streams with bodies larger than the windows both ways, trailers, HEAD, 204; what
//    each side read must be what the other sent;
//  - the same random header lists, valid and not (bytes RFC 9113 8.2.1 forbids in names and
//    values, connection-specific fields, pseudo-header order), sent raw to node's server and to
//    ours: where nghttp2 hands the request on with every field, ours hands on the same fields;
//    where nghttp2 drops a field or refuses the stream, ours refuses the stream (PROTOCOL_ERROR):
//    stricter, never looser.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { H2Connection, type H2Events, type H2Stream } from '../../../src/proxy/http2/codec/connection.js';
import { HpackEncoder } from '../../../src/proxy/http2/hpack/encoder.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { frame } from '../../helpers/h2-frame.js';

const closers: Array<() => void> = [];
after(() => { for (const c of closers.reverse()) c(); });

function prng(seed: number): (n: number) => number {
  let state = seed >>> 0;
  return (n) => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0;
    return state % n;
  };
}

/** Our codec on a socket: reads into it, writes its batches. */
function attach(socket: net.Socket, server: boolean, events: H2Events): H2Connection {
  const conn = new H2Connection(server, (chunks) => { if (!socket.destroyed) for (const c of chunks) socket.write(c); }, events);
  socket.on('data', (d: Buffer) => conn.receive(d));
  socket.on('close', () => conn.end());
  socket.on('error', () => {});
  return conn;
}

async function listen(server: net.Server | http2.Http2Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => server.close());
  return (server.address() as net.AddressInfo).port;
}

/** A body of `n` bytes that says where each byte came from. */
const body = (seed: number, n: number): Buffer => {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (seed * 31 + i * 7) & 0xff;
  return b;
};

describe('HTTP/2 codec against node:http2', () => {
  it('node\'s client against our server side: bodies past the windows, trailers, HEAD, concurrent streams', async () => {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => {
      sockets.push(socket);
      const bodies = new Map<H2Stream, Buffer[]>();
      const reqs = new Map<H2Stream, string[]>();
      const conn: H2Connection = attach(socket, true, {
        headers(s, fields, _facts, end) {
          if (!reqs.has(s)) { reqs.set(s, fields); bodies.set(s, []); }
          if (end) answer(s);
        },
        data(s, data, end) {
          bodies.get(s)!.push(Buffer.from(data));
          conn.consumed(s, data.length);
          if (end) answer(s);
        },
        reset() {},
        closed() { socket.destroy(); },
      });
      function answer(s: H2Stream): void {
        const fields = reqs.get(s)!;
        const got = Buffer.concat(bodies.get(s)!);
        const method = fields[fields.indexOf(':method') + 1]!;
        const path = fields[fields.indexOf(':path') + 1]!;
        const size = Number(new URL(path, 'http://x').searchParams.get('size'));
        const reply = body(got.length, size);
        conn.headers(s, [':status', '200', 'x-got', String(got.length), 'x-sum', String(got.reduce((a, b) => (a + b) & 0xffff, 0)),
          'x-method', method, 'content-length', String(reply.length)], method === 'HEAD');
        if (method === 'HEAD') return;
        const trailers = path.includes('trailers');
        conn.data(s, reply, !trailers);
        if (trailers) conn.headers(s, ['x-trailer', 'yes'], true);
      }
    });
    closers.push(() => { for (const s of sockets) s.destroy(); });
    const port = await listen(server);
    const client = http2.connect(`http://127.0.0.1:${port}`);
    closers.push(() => client.destroy());
    const rand = prng(0xc0dec);
    const runs = Array.from({ length: 60 }, async (_, i) => {
      const up = [0, 10, 70_000, 200_000][rand(4)]!;
      const down = [0, 1, 16_385, 150_000][rand(4)]!;
      const head = rand(8) === 0;
      const trailers = !head && rand(3) === 0;
      const req = client.request({ ':method': head ? 'HEAD' : up > 0 ? 'POST' : 'GET', ':path': `/r${i}?size=${down}${trailers ? '&trailers' : ''}` }, { endStream: up === 0 || head });
      const sent = body(i, head ? 0 : up);
      if (!head && up > 0) req.end(sent);
      const [headers] = await once(req, 'response') as [http2.IncomingHttpHeaders];
      const chunks: Buffer[] = [];
      let trailerSeen: http2.IncomingHttpHeaders | undefined;
      req.on('trailers', (t) => { trailerSeen = t; });
      req.on('data', (d: Buffer) => chunks.push(d));
      await once(req, 'end');
      assert.equal(headers[':status'], 200);
      assert.equal(headers['x-got'], String(sent.length));
      assert.equal(headers['x-sum'], String(sent.reduce((a, b) => (a + b) & 0xffff, 0)));
      assert.deepEqual(Buffer.concat(chunks), head ? Buffer.alloc(0) : body(sent.length, down));
      if (trailers) assert.equal(trailerSeen?.['x-trailer'], 'yes');
    });
    await Promise.all(runs);
  });

  it('our client side against node\'s server: the same, the other way', async () => {
    const server = http2.createServer();
    server.on('stream', (stream, headers) => {
      const chunks: Buffer[] = [];
      stream.on('data', (d: Buffer) => chunks.push(d));
      stream.on('end', () => {
        const got = Buffer.concat(chunks);
        const size = Number(new URL(String(headers[':path']), 'http://x').searchParams.get('size'));
        const reply = body(got.length, size);
        const head = headers[':method'] === 'HEAD';
        stream.respond({ ':status': size === 0 && !head ? 204 : 200, 'x-got': String(got.length), 'x-sum': String(got.reduce((a, b) => (a + b) & 0xffff, 0)) },
          { endStream: head || size === 0, waitForTrailers: !head && size > 0 });
        if (!head && size > 0) {
          stream.on('wantTrailers', () => stream.sendTrailers({ 'x-trailer': 'yes' }));
          stream.end(reply);
        }
      });
    });
    const port = await listen(server);
    const socket = net.connect(port, '127.0.0.1');
    closers.push(() => socket.destroy());
    await once(socket, 'connect');
    interface Pending { fields?: string[]; chunks: Buffer[]; trailers?: string[]; done: (v: unknown) => void; fail: (e: Error) => void }
    const conn: H2Connection = attach(socket, false, {
      headers(s, fields, facts, end) {
        const p = s.ctx as Pending;
        if (p.fields === undefined && !facts.informational) p.fields = fields;
        else p.trailers = fields;
        if (end) p.done(undefined);
      },
      data(s, data, end) {
        const p = s.ctx as Pending;
        p.chunks.push(Buffer.from(data));
        conn.consumed(s, data.length);
        if (end) p.done(undefined);
      },
      reset(s, code, _byPeer, why) { (s.ctx as Pending).fail(new Error(`stream ${s.id} reset ${code}: ${why}`)); },
      writable() {},
      closed(e) { if (e) throw e; },
    });
    const rand = prng(0xc1e47);
    const runs = Array.from({ length: 60 }, async (_, i) => {
      const up = [0, 10, 70_000, 200_000][rand(4)]!;
      const down = [0, 1, 16_385, 150_000][rand(4)]!;
      const head = rand(8) === 0;
      const sent = body(i, head ? 0 : up);
      const p = { chunks: [] } as unknown as Pending;
      const finished = new Promise((resolve, reject) => { p.done = resolve; p.fail = reject; });
      const fields = [':method', head ? 'HEAD' : 'POST', ':scheme', 'http', ':path', `/r${i}?size=${down}`, ':authority', 'a.example'];
      const s = conn.request(fields, sent.length === 0, head)!;
      s.ctx = p;
      if (sent.length > 0) conn.data(s, sent, true);
      await finished;
      const f = p.fields!;
      const get = (n: string): string | undefined => { const k = f.indexOf(n); return k < 0 ? undefined : f[k + 1]; };
      assert.equal(get(':status'), down === 0 && !head ? '204' : '200');
      assert.equal(get('x-got'), String(sent.length));
      assert.equal(get('x-sum'), String(sent.reduce((a, b) => (a + b) & 0xffff, 0)));
      assert.deepEqual(Buffer.concat(p.chunks), head || down === 0 ? Buffer.alloc(0) : body(sent.length, down));
      if (!head && down > 0) assert.deepEqual(p.trailers, ['x-trailer', 'yes']);
    });
    await Promise.all(runs);
  });

  it('random header lists, valid and not: ours hands on what nghttp2 hands on whole, and refuses the rest', async () => {
    /** Each list's number is in its :path (the first, when a list has two). */
    const indexOf = (l: string[]): number => Number(/^\/p(\d+)$/.exec(l[l.indexOf(':path') + 1] ?? '')?.[1] ?? -1);
    // node's server: what it read for each stream (its raw list), or nothing (refused).
    const nodeSaw = new Map<number, string[]>();
    const nodeServer = http2.createServer();
    nodeServer.on('stream', (stream: http2.ServerHttp2Stream, _h: unknown, _f: number, raw: string[]) => {
      nodeSaw.set(indexOf(raw), raw);
      stream.respond({ ':status': 200 }, { endStream: true });
    });
    nodeServer.on('sessionError', () => {});
    const nodePort = await listen(nodeServer);
    // Ours: what it handed on, and what it reset.
    const oursSaw = new Map<number, string[]>();
    const sockets: net.Socket[] = [];
    const ours = net.createServer((socket) => {
      sockets.push(socket);
      const conn: H2Connection = attach(socket, true, {
        headers(s, fields) { oursSaw.set(indexOf(fields), fields); conn.headers(s, [':status', '200'], true); },
        data() {},
        reset() {},
        closed() { socket.destroy(); },
      });
    });
    closers.push(() => { for (const s of sockets) s.destroy(); });
    const oursPort = await listen(ours);

    const rand = prng(0xd1ff);
    const nameBytes = 'abcdefghijklmnopqrstuvwxyz-_';
    const odd = [' ', ':', '\t', 'A', 'Z', '\x00', '\x01', '\x7f', '"', '(', '@', '\x80', 'é'];
    const badValue = ['\r', '\n', '\0', '\x01', '\x7f'];
    const lists: string[][] = [];
    for (let i = 0; i < 400; i++) {
      const fields = [':method', 'GET', ':scheme', 'http', ':path', `/p${i}`, ':authority', 'a.example'];
      const n = 1 + rand(4);
      for (let k = 0; k < n; k++) {
        let name = Array.from({ length: 1 + rand(8) }, () => nameBytes[rand(nameBytes.length)]).join('');
        let value = Array.from({ length: rand(12) }, () => String.fromCharCode(0x21 + rand(94))).join('');
        switch (rand(10)) {
          case 0: name = name.slice(0, rand(name.length)) + odd[rand(odd.length)] + name.slice(rand(name.length)); break;
          case 1: value = value.slice(0, rand(value.length + 1)) + badValue[rand(badValue.length)] + value; break;
          case 2: value = rand(2) === 0 ? ` ${value}` : `${value}\t`; break;
          case 3: name = ['connection', 'te', 'transfer-encoding', 'keep-alive', 'upgrade', 'proxy-connection'][rand(6)]!; value = rand(2) === 0 ? 'trailers' : 'x'; break;
          case 4: value = `${value}\x80\xff`; break;
          default: break;
        }
        fields.push(name, value);
      }
      if (rand(20) === 0) fields.push(':path', '/late'); // a pseudo-header after regular fields
      lists.push(fields);
    }

    /**
     * Sends every list raw, each on a stream of its own, and waits until each was answered or reset.
     * A connection per 25 lists: so many malformed requests on one would be cut off as "made you
     * reset" (ours after 100 streams) before the comparison is done. Resets by list index.
     */
    async function sendAll(port: number): Promise<Map<number, number>> {
      const resets = new Map<number, number>();
      for (let from = 0; from < lists.length; from += 25) {
        const to = Math.min(lists.length, from + 25);
        const socket = net.connect(port, '127.0.0.1');
        closers.push(() => socket.destroy());
        await once(socket, 'connect');
        const enc = new HpackEncoder();
        const ended = new Set<number>();
        let goaway: string | undefined;
        let buf = Buffer.alloc(0);
        const done = new Promise<void>((resolve, reject) => {
          socket.on('data', (d: Buffer) => {
            buf = Buffer.concat([buf, d]);
            while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
              const len = buf.readUIntBE(0, 3);
              const type = buf[3]!;
              const index = from + (buf.readUInt32BE(5) - 1) / 2;
              if (type === 4 && (buf[4]! & 1) === 0) socket.write(frame(4, 1, 0));
              if (type === 3) { resets.set(index, buf.readUInt32BE(9)); ended.add(index); }
              if (type === 1) ended.add(index);
              if (type === 7) goaway = `GOAWAY ${buf.readUInt32BE(13)} ${buf.toString('latin1', 17, 9 + len)}`;
              buf = buf.subarray(9 + len);
            }
            if (goaway !== undefined) reject(new Error(`port ${port}: ${goaway}`));
            else if (ended.size >= to - from) resolve();
          });
        });
        const batch = [CLIENT_PREFACE, frame(4, 0, 0)];
        for (let i = from; i < to; i++) batch.push(frame(1, 5, 2 * (i - from) + 1, Buffer.from(enc.encode(lists[i]!))));
        socket.write(Buffer.concat(batch));
        await done;
        socket.destroy();
      }
      return resets;
    }
    const nodeResets = await sendAll(nodePort);
    const oursResets = await sendAll(oursPort);
    let refusedByNode = 0, droppedByNode = 0, whole = 0;
    for (let i = 0; i < lists.length; i++) {
      const sent = lists[i]!;
      const regular = (l: string[]): string[] => l.filter((_, k) => k % 2 === 0 ? !l[k]!.startsWith(':') : !l[k - 1]!.startsWith(':'));
      const theirs = nodeSaw.get(i);
      const mine = oursSaw.get(i);
      if (theirs === undefined) {
        refusedByNode++;
        assert.ok(nodeResets.has(i), `node neither answered nor reset list ${i}`);
        assert.equal(mine, undefined, `nghttp2 refused ${JSON.stringify(sent)}, ours handed it on`);
        continue;
      }
      if (regular(theirs).length !== regular(sent).length) {
        droppedByNode++;
        assert.equal(mine, undefined, `nghttp2 dropped a field of ${JSON.stringify(sent)}: ours must refuse it`);
        assert.equal(oursResets.get(i), 1);
        continue;
      }
      // nghttp2 took it whole: ours too, or it refused by a rule nghttp2 does not apply (8.2.2, 8.3: named in the docs).
      if (mine === undefined) {
        const why = sent.some((v, k) => k % 2 === 0 && /^(connection|te|transfer-encoding|keep-alive|upgrade|proxy-connection)$/.test(v));
        assert.ok(why, `ours refused ${JSON.stringify(sent)}, which nghttp2 took whole`);
        continue;
      }
      whole++;
      assert.deepEqual(mine, sent);
    }
    assert.ok(refusedByNode > 10 && droppedByNode > 10 && whole > 100, `a mix of cases: ${refusedByNode} refused, ${droppedByNode} dropped, ${whole} whole`);
  });
});
