// src/proxy/http2/hpack/ and field-validity.ts against node:http2 itself (nghttp2) over loopback:
//  - HPACK: random header lists sent by node's client (its encoder chooses indexing, Huffman,
//    evictions) are decoded by ours from the captured bytes and must equal what node's server read;
//  - fields: for every byte value in a name, inside a value, at either end of a value and in a
//    host, whether nghttp2 drops the field silently must be exactly whether fieldFault finds a fault
//    (requests to a node server; responses to a node client).
// Seeded randomness: a failure names its seed and repeats.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { HpackDecoder } from '../../../src/proxy/http2/hpack/decoder.js';
import { fieldFault } from '../../../src/proxy/http2/field-validity.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { frame, splitFrames as frames } from '../../helpers/h2-frame.js';



/** A literal field without indexing, new name, no Huffman (names and values under 127 bytes). */
const literal = (name: string, value: string): Buffer =>
  Buffer.concat([Buffer.from([0x00, name.length]), Buffer.from(name, 'latin1'), Buffer.from([value.length]), Buffer.from(value, 'latin1')]);

const closers: Array<() => void> = [];
after(() => { for (const c of closers) c(); });

describe('HpackDecoder against node:http2 (random header lists, seeded)', () => {
  it('every block node\'s client encodes decodes to what node\'s server read', async () => {
    const seed = 0x5eed1234;
    let state = seed;
    const rand = (n: number): number => {
      state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0;
      return state % n;
    };
    const nameChars = 'abcdefghijklmnopqrstuvwxyz0123456789-_';
    const valueChars = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:;/?=&%+!*()[]{}<>@#$^~|\'" ,';
    const word = (chars: string, min: number, max: number): string =>
      Array.from({ length: min + rand(max - min + 1) }, () => chars[rand(chars.length)]).join('');

    const served: string[][] = [];
    const server = http2.createServer();
    server.on('stream', (stream: http2.ServerHttp2Stream, _h: unknown, _f: number, raw: string[]) => {
      served.push(raw);
      stream.respond({ ':status': 200 }, { endStream: true });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => server.close());
    // A relay that keeps the client's bytes.
    const captured: Buffer[] = [];
    const relay = net.createServer((c) => {
      const s = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      c.on('data', (d: Buffer) => { captured.push(Buffer.from(d)); s.write(d); });
      s.pipe(c);
      c.on('close', () => s.destroy());
      s.on('close', () => c.destroy());
    });
    relay.listen(0, '127.0.0.1');
    await once(relay, 'listening');
    closers.push(() => relay.close());

    const session = http2.connect(`http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`);
    closers.push(() => session.destroy());
    const reused: Array<[string, string]> = [];
    const requests = 300;
    for (let i = 0; i < requests; i++) {
      const headers: Record<string | symbol, string | string[]> = { ':path': `/${word(nameChars, 0, 30)}`, ':method': i % 3 === 0 ? 'POST' : 'GET' };
      const sensitive: string[] = [];
      for (let k = rand(12); k > 0; k--) {
        // Some fields come back (indexed by the encoder), some are new, some long (evictions).
        const pick = rand(3) === 0 && reused.length > 0 ? reused[rand(reused.length)]! : [`x-${word(nameChars, 1, 20)}`, word(valueChars, 0, rand(8) === 0 ? 400 : 40)] as [string, string];
        if (pick[1].startsWith(' ') || pick[1].endsWith(' ')) pick[1] = `v${pick[1]}v`;
        if (headers[pick[0]] !== undefined) continue;
        headers[pick[0]] = pick[1];
        if (reused.length < 50) reused.push(pick);
        if (rand(10) === 0) sensitive.push(pick[0]);
      }
      if (sensitive.length > 0) headers[http2.sensitiveHeaders] = sensitive;
      const req = session.request(headers, { endStream: true });
      req.resume();
      await once(req, 'close');
    }
    session.close();

    // Our decoder over the client's bytes: the header blocks of its HEADERS frames, in order.
    const bytes = Buffer.concat(captured).subarray(CLIENT_PREFACE.length);
    const decoder = new HpackDecoder(true);
    const decoded: string[][] = [];
    let pending: Buffer[] = [];
    for (const f of frames(bytes).frames) {
      if (f.type !== 0x1 && f.type !== 0x9) continue;
      let p = f.payload;
      if (f.type === 0x1) {
        const pad = f.flags & 0x8 ? p[0]! : 0;
        p = p.subarray((f.flags & 0x8 ? 1 : 0) + (f.flags & 0x20 ? 5 : 0), p.length - pad);
      }
      pending.push(p);
      if ((f.flags & 0x4) === 0) continue;
      const list: string[] = [];
      decoder.decode(Buffer.concat(pending), (n, v) => list.push(n, v));
      pending = [];
      decoded.push(list);
    }
    assert.equal(served.length, requests, `seed ${seed}`);
    assert.equal(decoded.length, requests, `seed ${seed}`);
    for (let i = 0; i < requests; i++) assert.deepEqual(decoded[i], served[i], `request ${i}, seed ${seed}`);
    assert.ok(bytes.length > 0);
  });
});

type Outcome = 'kept' | 'dropped' | 'reset';

/** Each case's outcome at a node:http2 server: the field arrived, the request arrived without it, or the stream was reset. */
async function requestOutcomes(cases: Array<[string, string]>): Promise<Outcome[]> {
  const seen = new Map<number, string[]>();
  const server = net.createServer((socket) => {
    const s = http2.performServerHandshake(socket, { peerMaxConcurrentStreams: 1000, settings: { maxConcurrentStreams: 1000 } });
    s.on('stream', (stream: http2.ServerHttp2Stream, _h: unknown, _f: number, raw: string[]) => {
      seen.set(stream.id!, raw);
      stream.respond({ ':status': 200 }, { endStream: true });
    });
    s.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const outcomes: Outcome[] = [];
  try {
    const c = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await once(c, 'connect');
    const resets = new Set<number>();
    const answered = new Set<number>();
    let buf: Buffer = Buffer.alloc(0);
    c.on('data', (d: Buffer) => {
      const r = frames(Buffer.concat([buf, d]));
      buf = r.rest;
      for (const f of r.frames) {
        if (f.type === 0x3) resets.add(f.stream);
        if (f.type === 0x1) answered.add(f.stream);
        if (f.type === 0x4 && (f.flags & 1) === 0) c.write(frame(0x4, 0x1, 0));
      }
    });
    c.write(Buffer.concat([CLIENT_PREFACE, frame(0x4, 0, 0)]));
    const base = Buffer.concat([literal(':method', 'GET'), literal(':scheme', 'http'), literal(':path', '/'), literal(':authority', 'a')]);
    for (let from = 0; from < cases.length; from += 50) {
      const batch = cases.slice(from, from + 50);
      c.write(Buffer.concat(batch.map(([n, v], i) => frame(0x1, 0x5, 1 + 2 * (from + i), Buffer.concat([base, literal(n, v)])))));
      const last = 1 + 2 * (from + batch.length - 1);
      for (let t = 0; t < 200 && !(answered.has(last) || resets.has(last)); t++) await new Promise((r) => setTimeout(r, 10));
    }
    for (let i = 0; i < cases.length; i++) {
      const id = 1 + 2 * i;
      const raw = seen.get(id);
      if (resets.has(id) || raw === undefined) outcomes.push('reset');
      else outcomes.push(raw.includes(cases[i]![0]) ? 'kept' : 'dropped');
    }
    c.destroy();
  } finally {
    server.close();
  }
  return outcomes;
}

/** Each case's outcome at a node:http2 client reading a response that carries the field. */
async function responseOutcomes(cases: Array<[string, string]>): Promise<Outcome[]> {
  const server = net.createServer((c) => {
    let buf: Buffer = Buffer.alloc(0);
    let prefaced = false;
    c.write(frame(0x4, 0, 0));
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!prefaced) {
        if (buf.length < CLIENT_PREFACE.length) return;
        buf = buf.subarray(CLIENT_PREFACE.length);
        prefaced = true;
      }
      const r = frames(buf);
      buf = r.rest;
      for (const f of r.frames) {
        if (f.type === 0x4 && (f.flags & 1) === 0) c.write(frame(0x4, 0x1, 0));
        if (f.type !== 0x1) continue;
        const [n, v] = cases[(f.stream - 1) / 2]!;
        c.write(frame(0x1, 0x5, f.stream, Buffer.concat([literal(':status', '200'), literal(n, v)])));
      }
    });
    c.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const session = http2.connect(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, { peerMaxConcurrentStreams: 1000 });
  session.on('error', () => {});
  try {
    const outcomes: Outcome[] = [];
    for (let from = 0; from < cases.length; from += 50) {
      const batch = cases.slice(from, from + 50).map(([n]) => new Promise<Outcome>((resolve) => {
        const req = session.request({ ':path': '/' }, { endStream: true });
        req.on('response', (h) => resolve(h[n] !== undefined ? 'kept' : 'dropped'));
        req.on('error', () => resolve('reset'));
        req.on('close', () => resolve('reset'));
        req.resume();
      }));
      outcomes.push(...await Promise.all(batch));
    }
    return outcomes;
  } finally {
    session.destroy();
    server.close();
  }
}

/** The cases: every byte in a name, inside a value, first and last in a value, in a host. */
function byteCases(withHost: boolean): Array<[string, string]> {
  const cases: Array<[string, string]> = [];
  for (let b = 0; b < 256; b++) {
    const c = String.fromCharCode(b);
    cases.push([`x${c}y`, 'v'], ['x-v', `a${c}b`], ['x-v', `${c}a`], ['x-v', `a${c}`]);
    if (withHost) cases.push(['host', `a${c}b`]);
  }
  cases.push(['', 'v'], ['x-v', ''], ['x-v', ' '], ['x-v', '\t']);
  return cases;
}

describe('fieldFault against node:http2 (every byte value)', () => {
  it('requests: a field nghttp2 drops is exactly a field with a fault', async () => {
    const cases = byteCases(true);
    const outcomes = await requestOutcomes(cases);
    cases.forEach(([n, v], i) => {
      const fault = fieldFault(n, v, true);
      const what = `${JSON.stringify(n)}: ${JSON.stringify(v)} ${outcomes[i]}, fault ${String(fault)}`;
      assert.equal(outcomes[i] === 'dropped', fault !== undefined, what);
    });
    assert.ok(outcomes.includes('kept') && outcomes.includes('dropped') && outcomes.includes('reset'));
  });

  it('responses: the same, host judged as any value', async () => {
    const cases = byteCases(false).concat([['host', 'a b'], ['host', 'a/b']]);
    const outcomes = await responseOutcomes(cases);
    cases.forEach(([n, v], i) => {
      const fault = fieldFault(n, v, false);
      const what = `${JSON.stringify(n)}: ${JSON.stringify(v)} ${outcomes[i]}, fault ${String(fault)}`;
      assert.equal(outcomes[i] === 'dropped', fault !== undefined, what);
    });
  });
});
