// src/proxy/http2/hpack/encoder.ts:
//  - round trips through our HpackDecoder: seeded random header lists (static-table names and
//    pairs, recurring and fresh values of every length class, bytes 0x00-0xff, values over 256 bytes
//    and over the table's size, peer table size changes between blocks) on one encoder and one
//    decoder, so the two dynamic tables must stay in step block after block;
//  - differential against node:http2 (nghttp2's decoder): the blocks of one encoder sent as raw
//    HEADERS frames to a node server on loopback must reach it as the very fields encoded, also
//    across table size updates (down to 0 and back, a server advertising 2048, an encoder capped);
//  - exact bytes: RFC 7541 C.3 and C.5 reproduced, one byte for a static pair, 0xbe for the newest
//    dynamic entry, never-indexed fields, the 256-byte value rule, a name taken by index from the
//    entry its own insertion evicts, size updates (once, min then final), integer boundaries.
// Seeded randomness: a failure names its seed and block and repeats.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import { describe, it } from 'node:test';
import { HpackDecoder } from '../../../src/proxy/http2/hpack/decoder.js';
import { HpackEncoder } from '../../../src/proxy/http2/hpack/encoder.js';
import { fieldFault } from '../../../src/proxy/http2/field-validity.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { frame, splitFrames as frames } from '../../helpers/h2-frame.js';
import { seeded } from '../../helpers/seeded.js';

const hex = (b: Buffer): string => b.toString('hex');

function decodeAll(d: HpackDecoder, block: Buffer): string[] {
  const out: string[] = [];
  d.decode(block, (n, v) => out.push(n, v));
  return out;
}

/** A random source of integers in [0, n). */
function ints(seed: number): (n: number) => number {
  const next = seeded(seed);
  return (n) => Math.floor(next() * n);
}

const STATIC_PAIRS: Array<[string, string]> = [
  [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'], [':scheme', 'http'],
  [':scheme', 'https'], [':status', '200'], [':status', '404'], ['accept-encoding', 'gzip, deflate'], ['accept', ''],
];
const NAMES = [
  ':authority', ':path', ':status', 'accept', 'accept-encoding', 'user-agent', 'cookie', 'authorization',
  'proxy-authorization', 'content-length', 'date', 'etag', 'set-cookie', 'cache-control', 'www-authenticate',
  'x-request-id', 'x-b3-traceid', 'custom-key', 'grpc-timeout', `x-${'n'.repeat(40)}`, '', 'x-\u00e9\u00ff',
];

/** Random lists for the round trip: any byte anywhere, lengths around every boundary that matters. */
function roundTripLists(rand: (n: number) => number): () => string[] {
  const recurring: string[] = [];
  const value = (): string => {
    const r = rand(100);
    if (r < 30 && recurring.length > 0) return recurring[rand(recurring.length)]!;
    const len = r < 40 ? 0 : r < 70 ? 1 + rand(31) : r < 82 ? 30 + rand(200) : r < 92 ? 200 + rand(120) : r < 97 ? 1000 + rand(3000) : 4000 + rand(3000);
    let s = '';
    for (let i = 0; i < len; i++) s += String.fromCharCode(rand(4) === 0 ? rand(256) : 0x20 + rand(95));
    if (len <= 64 && recurring.length < 40) recurring.push(s);
    return s;
  };
  return () => {
    const list: string[] = [];
    for (let k = rand(21); k > 0; k--) {
      if (rand(6) === 0) list.push(...STATIC_PAIRS[rand(STATIC_PAIRS.length)]!);
      else list.push(rand(8) === 0 ? `x-${rand(1000)}` : NAMES[rand(NAMES.length)]!, value());
    }
    return list;
  };
}

describe('HpackEncoder: round trip through HpackDecoder (seeded)', () => {
  const configs = [
    { name: 'default table (4096)', seed: 0x1234abcd, cap: undefined, decoderLimit: 4096, initialPeer: undefined },
    { name: 'an encoder capped at 1024 (first block signals it)', seed: 0x0badf00d, cap: 1024, decoderLimit: 4096, initialPeer: undefined },
    { name: 'an encoder capped at 0 (nothing indexed)', seed: 0x5eed0000, cap: 0, decoderLimit: 4096, initialPeer: undefined },
    { name: 'a peer advertising 8192', seed: 0x00c0ffee, cap: 8192, decoderLimit: 8192, initialPeer: 8192 },
  ];
  for (const c of configs) {
    it(c.name, () => {
      const rand = ints(c.seed);
      const next = roundTripLists(rand);
      const enc = new HpackEncoder(c.cap);
      const dec = new HpackDecoder(true, c.decoderLimit);
      if (c.initialPeer !== undefined) enc.setPeerTableSize(c.initialPeer);
      const sizes = [0, 1, 40, 100, 256, 1024, 4096, 8192].filter((s) => s <= c.decoderLimit);
      let smallerThanInput = 0;
      let largest = 0;
      let updates = 0;
      for (let b = 0; b < 3000; b++) {
        if (rand(40) === 0) {
          enc.setPeerTableSize(sizes[rand(sizes.length)]!);
          if (rand(3) === 0) enc.setPeerTableSize(sizes[rand(sizes.length)]!);
        }
        const list = next();
        const block = enc.encode(list);
        const what = `seed ${c.seed}, block ${b}`;
        if (block.length > 0 && block[0]! >= 0x20 && block[0]! < 0x40) updates++;
        assert.deepEqual(decodeAll(dec, block), list, what);
        assert.equal(dec.tableSize, enc.tableSize, what);
        if (block.length < list.reduce((n, s) => n + s.length, 0)) smallerThanInput++;
        largest = Math.max(largest, enc.tableSize);
      }
      // The run did exercise the table: blocks shrank by indexing, the table filled, sizes changed.
      if (c.cap !== 0) {
        assert.ok(smallerThanInput > 1000, `${smallerThanInput} blocks smaller than their strings`);
        assert.ok(largest > Math.min(c.cap ?? 4096, 4096) * 0.75, `the table reached ${largest}`);
        assert.ok(updates > 20, `${updates} blocks began with a size update`);
      } else {
        assert.equal(largest, 0);
        assert.equal(updates, 1); // the cap, once: every later size is min(size, 0)
      }
    });
  }

  it('the output buffer grows for a large block and is reused after it', () => {
    const enc = new HpackEncoder();
    const dec = new HpackDecoder(true);
    const big = ['x-a', 'a'.repeat(10_000), 'x-b', 'b'.repeat(70_000), ':path', '/big'];
    assert.deepEqual(decodeAll(dec, Buffer.from(enc.encode(big))), big);
    const small = ['x-c', 'c', ':path', '/big'];
    const block = enc.encode(small);
    assert.deepEqual(decodeAll(dec, block), small);
    assert.equal(dec.tableSize, enc.tableSize);
  });
});


/** HEADERS (END_STREAM) and CONTINUATION frames for one block, 16384 bytes a frame at most. */
function headerFrames(stream: number, block: Buffer): Buffer {
  const max = 16_384;
  const parts: Buffer[] = [];
  for (let at = 0; at === 0 || at < block.length; at += max) {
    const last = at + max >= block.length;
    parts.push(frame(at === 0 ? 0x1 : 0x9, (at === 0 ? 0x1 : 0) | (last ? 0x4 : 0), stream, block.subarray(at, at + max)));
  }
  return Buffer.concat(parts);
}

/** Valid random requests: the four pseudo-headers first, then regular fields nghttp2 keeps. */
function requestLists(rand: (n: number) => number): () => string[] {
  const recurring: Array<[string, string]> = [];
  const text = (min: number, max: number, obsText: boolean): string => {
    let s = '';
    for (let i = min + rand(max - min + 1); i > 0; i--) s += String.fromCharCode(obsText && rand(6) === 0 ? 0x80 + rand(128) : rand(20) === 0 ? 0x09 : 0x20 + rand(95));
    return s;
  };
  const regular = ['accept', 'accept-encoding', 'accept-language', 'user-agent', 'cookie', 'authorization', 'proxy-authorization', 'cache-control', 'if-none-match', 'date', 'etag', 'x-request-id', 'x-b3-traceid', 'custom-key', 'x-envoy-attempt-count'];
  const field = (): [string, string] => {
    const r = rand(100);
    if (r < 35 && recurring.length > 0) return recurring[rand(recurring.length)]!;
    if (r < 40) return ['accept-encoding', 'gzip, deflate'];
    const name = rand(6) === 0 ? `x-${text(1, 12, false).replace(/[^a-z0-9-]/g, 'q').toLowerCase()}` : regular[rand(regular.length)]!;
    const len = rand(20);
    const value = len < 2 ? '' : len < 14 ? text(1, 40, true) : len < 18 ? text(100, 300, true) : text(4000, 6000, false);
    const f: [string, string] = [name, value];
    if (value.length < 300 && recurring.length < 60) recurring.push(f);
    return f;
  };
  const methods = ['GET', 'GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD'];
  const hosts = ['example.com', 'api.example.com:8443', 'reviews.default.svc.cluster.local', '10.0.0.1:9080'];
  return () => {
    const path = rand(4) === 0 ? '/' : rand(8) === 0 ? '/index.html' : `/${text(0, 60, false).replace(/[^A-Za-z0-9\-._~/?=&%]/g, '')}`;
    const list = [':method', methods[rand(methods.length)]!, ':scheme', rand(2) === 0 ? 'http' : 'https', ':path', path, ':authority', hosts[rand(hosts.length)]!];
    for (let k = rand(16); k > 0; k--) {
      const [n, v] = field();
      if (fieldFault(n, v, true) === undefined) list.push(n, v);
    }
    return list;
  };
}

interface Run {
  /** The fields each stream's block carried, by stream id. */
  sent: Map<number, string[]>;
  /** What node's server read, by stream id (rawHeaders). */
  served: Map<number, string[]>;
  /** Blocks that began with a dynamic table size update. */
  updates: number;
}

/**
 * One connection to a node:http2 server: `batches` batches of up to 50 requests (stream ids 1, 3,
 * ...), each awaited before the next; `beforeBatch` may change the encoder's table size.
 */
async function runConnection(opts: {
  seed: number; batches: number; encoder: HpackEncoder; serverSettings?: http2.Settings;
  beforeBatch?: (batch: number, enc: HpackEncoder) => void;
}): Promise<Run> {
  const rand = ints(opts.seed);
  const next = requestLists(rand);
  const served = new Map<number, string[]>();
  const sent = new Map<number, string[]>();
  const server = http2.createServer(opts.serverSettings ? { settings: opts.serverSettings } : {});
  const sessionErrors: unknown[] = [];
  server.on('sessionError', (err) => sessionErrors.push(err));
  server.on('stream', (stream: http2.ServerHttp2Stream, _h: unknown, _f: number, raw: string[]) => {
    served.set(stream.id!, raw);
    stream.respond({ ':status': 200 }, { endStream: true });
  });
  server.listen(0, '127.0.0.1');
  let socket: net.Socket | undefined;
  try {
    await once(server, 'listening');
    socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await once(socket, 'connect');
    const answered = new Set<number>();
    const resets = new Map<number, number>();
    let goaway: number | undefined;
    let peerTableSize: number | undefined;
    let settingsSeen = false;
    let buf: Buffer = Buffer.alloc(0);
    socket.on('data', (d: Buffer) => {
      const r = frames(Buffer.concat([buf, d]));
      buf = r.rest;
      for (const f of r.frames) {
        if (f.type === 0x1) answered.add(f.stream);
        if (f.type === 0x3) resets.set(f.stream, f.payload.readUInt32BE(0));
        if (f.type === 0x7) goaway = f.payload.readUInt32BE(4);
        if (f.type === 0x4 && (f.flags & 1) === 0) {
          for (let at = 0; at + 6 <= f.payload.length; at += 6) if (f.payload.readUInt16BE(at) === 0x1) peerTableSize = f.payload.readUInt32BE(at + 2);
          settingsSeen = true;
        }
      }
    });
    socket.on('error', () => {});
    const waitFor = async (done: () => boolean, what: string): Promise<void> => {
      for (let t = 0; !done(); t++) {
        if (goaway !== undefined) assert.fail(`GOAWAY (error ${goaway}) while waiting for ${what}, seed ${opts.seed}; session errors: ${sessionErrors.map(String).join('; ')}`);
        if (t > 1000) assert.fail(`timed out waiting for ${what}, seed ${opts.seed}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    socket.write(Buffer.concat([CLIENT_PREFACE, frame(0x4, 0, 0)]));
    // As a frame layer does: the server's SETTINGS taken (its table size given to the encoder), then acknowledged.
    await waitFor(() => settingsSeen, 'the server\'s SETTINGS');
    if (peerTableSize !== undefined) opts.encoder.setPeerTableSize(peerTableSize);
    socket.write(frame(0x4, 0x1, 0));
    let id = 1;
    let updates = 0;
    for (let b = 0; b < opts.batches; b++) {
      opts.beforeBatch?.(b, opts.encoder);
      const out: Buffer[] = [];
      const first = id;
      for (let k = 0; k < 50; k++, id += 2) {
        const list = next();
        const block = opts.encoder.encode(list);
        if (block[0]! >= 0x20 && block[0]! < 0x40) updates++;
        sent.set(id, list);
        out.push(headerFrames(id, block));
      }
      socket.write(Buffer.concat(out));
      const last = id - 2;
      await waitFor(() => {
        for (let s = first; s <= last; s += 2) if (!answered.has(s) && !resets.has(s)) return false;
        return true;
      }, `streams ${first}-${last}`);
      for (let s = first; s <= last; s += 2) assert.ok(!resets.has(s), `stream ${s} reset (error ${resets.get(s)}), seed ${opts.seed}`);
    }
    return { sent, served, updates };
  } finally {
    socket?.destroy();
    server.close();
  }
}

function assertServed(run: Run, seed: number): void {
  assert.equal(run.served.size, run.sent.size, `seed ${seed}`);
  for (const [id, list] of run.sent) assert.deepEqual(run.served.get(id), list, `stream ${id}, seed ${seed}`);
}

describe('HpackEncoder against node:http2 (nghttp2 decodes our blocks; seeded)', () => {
  it('random requests on one connection, the table shrunk to 0 and 256 and grown back mid-connection', async () => {
    const seed = 0x7e57c0de;
    const run = await runConnection({
      seed, batches: 12, encoder: new HpackEncoder(),
      beforeBatch: (b, enc) => {
        if (b === 3) enc.setPeerTableSize(0);
        if (b === 4) enc.setPeerTableSize(4096);
        if (b === 6) enc.setPeerTableSize(256);
        if (b === 8) enc.setPeerTableSize(4096);
        if (b === 10) { enc.setPeerTableSize(0); enc.setPeerTableSize(4096); } // down and up between two blocks: both signaled
      },
    });
    assertServed(run, seed);
    assert.equal(run.updates, 5);
  });

  it('a server advertising a 2048-byte table: the first block signals it (nghttp2 insists)', async () => {
    const seed = 0x20480001;
    const encoder = new HpackEncoder();
    const run = await runConnection({ seed, batches: 4, encoder, serverSettings: { headerTableSize: 2048 } });
    assertServed(run, seed);
    assert.equal(run.updates, 1);
    assert.ok(encoder.tableSize <= 2048);
  });

  it('an encoder capped at 512 under the default 4096', async () => {
    const seed = 0x05120512;
    const run = await runConnection({ seed, batches: 4, encoder: new HpackEncoder(512) });
    assertServed(run, seed);
    assert.equal(run.updates, 1);
  });
});

describe('HpackEncoder: exact bytes', () => {
  it('RFC 7541 C.3: the three requests without Huffman, byte for byte', () => {
    const enc = new HpackEncoder();
    const req1 = [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com'];
    assert.equal(hex(enc.encode(req1)), '828684410f7777772e6578616d706c652e636f6d');
    assert.equal(enc.tableSize, 57);
    assert.equal(hex(enc.encode([...req1, 'cache-control', 'no-cache'])), '828684be58086e6f2d6361636865');
    assert.equal(enc.tableSize, 110);
    const req3 = [':method', 'GET', ':scheme', 'https', ':path', '/index.html', ':authority', 'www.example.com', 'custom-key', 'custom-value'];
    assert.equal(hex(enc.encode(req3)), '828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565');
    assert.equal(enc.tableSize, 164);
  });

  it('RFC 7541 C.5: the three responses on a 256-byte table (evictions), after the size update', () => {
    const enc = new HpackEncoder(256);
    const date1 = 'Mon, 21 Oct 2013 20:13:21 GMT';
    const loc = 'https://www.example.com';
    const cookie = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
    assert.equal(hex(enc.encode([':status', '302', 'cache-control', 'private', 'date', date1, 'location', loc])),
      '3fe101' + // the update to 256 (31 + 225: 0xe1 0x01)
      '4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d');
    assert.equal(enc.tableSize, 222);
    assert.equal(hex(enc.encode([':status', '307', 'cache-control', 'private', 'date', date1, 'location', loc])), '4803333037c1c0bf');
    assert.equal(enc.tableSize, 222);
    assert.equal(hex(enc.encode([':status', '200', 'cache-control', 'private', 'date', 'Mon, 21 Oct 2013 20:13:22 GMT', 'location', loc, 'content-encoding', 'gzip', 'set-cookie', cookie])),
      '88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31');
    assert.equal(enc.tableSize, 215);
  });

  it('a static pair is one byte; a name in the static table is taken by its lowest index', () => {
    const enc = new HpackEncoder();
    assert.equal(hex(enc.encode([':method', 'GET'])), '82');
    assert.equal(hex(enc.encode([':method', 'POST', ':status', '404', 'accept-encoding', 'gzip, deflate', 'accept', ''])), '838d9093');
    assert.equal(enc.tableSize, 0);
    assert.equal(hex(enc.encode([':status', '302'])), '4803333032'); // :status is 8 to 14: 8
    assert.equal(hex(enc.encode([':method', 'PUT'])), '4203505554'); // :method is 2 and 3: 2
  });

  it('a pair inserted once is one indexed byte (0xbe) in the next block', () => {
    const enc = new HpackEncoder();
    assert.equal(hex(enc.encode(['custom-key', 'custom-value'])), '400a637573746f6d2d6b65790c637573746f6d2d76616c7565');
    assert.equal(hex(enc.encode(['custom-key', 'custom-value'])), 'be');
    assert.equal(hex(enc.encode(['custom-key', 'other'])), '7e056f74686572'); // name by dynamic index 62
    assert.equal(hex(enc.encode(['custom-key', 'custom-value', 'custom-key', 'other'])), 'bfbe');
  });

  it('authorization, proxy-authorization and cookies under 20 bytes are never indexed (0x1_)', () => {
    const enc = new HpackEncoder();
    for (let round = 0; round < 2; round++) {
      assert.equal(hex(enc.encode(['authorization', 'Bearer abc'])), '1f08' + '0a' + hex(Buffer.from('Bearer abc')));
      assert.equal(hex(enc.encode(['proxy-authorization', 'Basic eA=='])), '1f22' + '0a' + hex(Buffer.from('Basic eA==')));
      assert.equal(hex(enc.encode(['cookie', 'a=1234567890123456'])), '1f11' + '12' + hex(Buffer.from('a=1234567890123456'))); // 18 bytes
      assert.equal(enc.tableSize, 0);
    }
    const long = 'session=0123456789ab'; // 20 bytes: indexed as any field
    assert.equal(hex(enc.encode(['cookie', long])), '6014' + hex(Buffer.from(long)));
    assert.equal(hex(enc.encode(['cookie', long])), 'be');
    assert.equal(hex(enc.encode(['set-cookie', 'a=b'])), '7703613d62'); // not one of the three
  });

  it('values over 256 bytes and entries larger than the table are literals without indexing', () => {
    const enc = new HpackEncoder();
    const v256 = 'v'.repeat(256);
    assert.equal(hex(enc.encode(['x-a', v256]).subarray(0, 8)), '4003782d617f8101'); // 256 = 127 + 129
    assert.equal(enc.tableSize, 3 + 256 + 32);
    const v257 = 'v'.repeat(257);
    assert.equal(hex(enc.encode(['x-b', v257]).subarray(0, 8)), '0003782d627f8201');
    assert.equal(hex(enc.encode(['etag', v257]).subarray(0, 4)), '0f137f82'); // etag (34) by a 4-bit prefix: 15 + 19
    const name = 'n'.repeat(4000);
    const block = enc.encode([name, 'v'.repeat(100)]); // 4000 + 100 + 32 > 4096
    assert.equal(block[0], 0x00);
    assert.equal(enc.tableSize, 3 + 256 + 32);
  });

  it('a literal may take its name from the entry its own insertion evicts (RFC 7541 4.4)', () => {
    const enc = new HpackEncoder();
    const dec = new HpackDecoder(true);
    enc.setPeerTableSize(100);
    const steps: Array<[string[], string, number]> = [
      [['x-a', '1'], '3f45' + '4003782d6101' + '31', 36], // the update to 100 (31 + 69)
      [['x-a', '2'], '7e0132', 72],
      [['x-b', '3'], '4003782d620133', 72], // evicts x-a: 1
      // x-a: 1 is gone: a literal, its name from x-a: 2 (index 63), the very entry this insertion evicts.
      [['x-a', '1'], '7f000131', 72],
      [['x-a', '2'], '7e0132', 72], // x-a: 2 was evicted: not indexed by a stale map; name from x-a: 1 (62)
      [['x-b', '3'], '4003782d620133', 72], // the x-b name left the table with x-b: 3
    ];
    for (const [list, bytes, size] of steps) {
      const block = enc.encode(list);
      assert.equal(hex(block), bytes, list.join(': '));
      assert.deepEqual(decodeAll(dec, block), list);
      assert.equal(enc.tableSize, size);
      assert.equal(dec.tableSize, size);
    }
  });

  it('a size update opens the block after setPeerTableSize, once; the minimum first when the size came back up', () => {
    const enc = new HpackEncoder();
    enc.setPeerTableSize(8192); // the encoder's own cap (4096) holds: no change, no update
    assert.equal(hex(enc.encode([':method', 'GET'])), '82');
    enc.encode(['custom-key', 'custom-value']);
    enc.setPeerTableSize(100);
    assert.equal(hex(enc.encode([':method', 'GET'])), '3f4582');
    assert.equal(hex(enc.encode([':method', 'GET'])), '82');
    enc.setPeerTableSize(0);
    assert.equal(enc.tableSize, 0); // trimmed at once
    enc.setPeerTableSize(4096);
    assert.equal(hex(enc.encode([':method', 'GET'])), '203fe11f82'); // 0, then 4096 (31 + 4065: 0xe1 0x1f)
    enc.setPeerTableSize(2048);
    enc.setPeerTableSize(1024);
    enc.setPeerTableSize(3000);
    assert.equal(hex(enc.encode([])), '3fe1073f9917'); // 1024, then 3000
    enc.setPeerTableSize(1000);
    enc.setPeerTableSize(3000); // back where the peer already is, by way of 1000: both
    assert.equal(hex(enc.encode([])), '3fc9073f9917');
    assert.equal(hex(new HpackEncoder(1024).encode([':method', 'GET'])), '3fe10782'); // a cap under 4096, signaled at once
    assert.equal(hex(new HpackEncoder(4096).encode([':method', 'GET'])), '82');
    assert.throws(() => enc.setPeerTableSize(-1), RangeError);
    assert.throws(() => enc.setPeerTableSize(2 ** 32), RangeError);
    assert.throws(() => new HpackEncoder(1.5), RangeError);
    assert.throws(() => enc.encode(['x-odd']), TypeError);
  });

  it('integers at their prefix boundaries (RFC 7541 5.1)', () => {
    // 5-bit prefix: size updates of 30, 31, 32.
    const sizes: Array<[number, string]> = [[30, '3e'], [31, '3f00'], [32, '3f01'], [158, '3f7f'], [159, '3f8001']];
    for (const [size, bytes] of sizes) {
      const enc = new HpackEncoder();
      enc.setPeerTableSize(size);
      assert.equal(hex(enc.encode([])), bytes, `size ${size}`);
    }
    // 7-bit prefix: string lengths 126, 127, 128, 1000, 100000 (H 0).
    const lengths: Array<[number, string]> = [[126, '7e'], [127, '7f00'], [128, '7f01'], [1000, '7fe906'], [100_000, '7fa18c06']];
    for (const [len, bytes] of lengths) {
      const enc = new HpackEncoder();
      const block = enc.encode(['x-l', 'z'.repeat(len)]);
      const head = block.subarray(5, 5 + bytes.length / 2); // after 0x40|0x00, 3, 'x-l'
      assert.equal(hex(head), bytes, `length ${len}`);
      assert.equal(block.length, 5 + bytes.length / 2 + len, `length ${len}`);
      assert.deepEqual(decodeAll(new HpackDecoder(true), block), ['x-l', 'z'.repeat(len)]);
    }
    // 7-bit prefix, indexed: dynamic indexes 126, 127, 128 with 70 small entries (36 bytes each).
    const enc = new HpackEncoder();
    const dec = new HpackDecoder(true);
    const names = Array.from({ length: 70 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    decodeAll(dec, enc.encode(names.flatMap((n) => [n, 'v'])));
    // Entry i (0 oldest) has index 70 - i + 61.
    const steps: Array<[string, string, string]> = [
      ['k05', 'v', 'fe'], ['k04', 'v', 'ff00'], ['k03', 'v', 'ff01'],
      // 6-bit prefix, a name by index: 62 fits, 63 and 64 do not.
      ['k69', 'w', '7e0177'], // k69 (seq 69): 62; k69: w becomes entry 70
      ['k68', 'y', '7f010179'], // k68 (seq 68), 71 entries: 64
      ['k69', 'u', '7f000175'], // k69's newest (seq 70), 72 entries: 63
    ];
    for (const [n, v, bytes] of steps) {
      const block = enc.encode([n, v]);
      assert.equal(hex(block), bytes, `${n}: ${v}`);
      assert.deepEqual(decodeAll(dec, block), [n, v]);
    }
    assert.equal(dec.tableSize, enc.tableSize);
    // 4-bit prefix: static names 14, 15 and 16 without indexing (values over 256 bytes).
    const long = 'q'.repeat(300);
    assert.equal(hex(enc.encode([':status', long]).subarray(0, 1)), '08');
    assert.equal(hex(enc.encode(['accept-charset', long]).subarray(0, 2)), '0f00');
    assert.equal(hex(enc.encode(['accept-encoding', long]).subarray(0, 2)), '0f01');
  });

  it('chars above 0xff: their low byte, by the short and the long string paths', () => {
    const enc = new HpackEncoder();
    assert.equal(hex(enc.encode(['x-u', '\u0141\u00e9'])), '4003782d750241e9');
    const long = '\u0141'.repeat(40);
    assert.equal(hex(enc.encode(['x-v', long]).subarray(6)), '41'.repeat(40));
  });
});
