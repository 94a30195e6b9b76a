// src/proxy/http2/codec/ where outside bytes meet it, fuzzed (seeded; CODEC_FUZZ_CASES cases, 2,000
// by default, 200,000 in `make differential`; CODEC_FUZZ_SEED replays one run): a client's frames
// (preface, SETTINGS, requests with bodies and trailers, PING, WINDOW_UPDATE, RST_STREAM, PRIORITY),
// then mutated (bytes flipped, frames cut, repeated, dropped, random bytes spliced in) and fed to
// a server side in random cuts. What must hold for every case:
//  - receive() never throws: bad input ends a stream or the connection, never the process;
//  - every request handed on is well-formed (judged again here), and no stream is handed more
//    DATA than its content-length;
//  - nothing is handed on after the connection ended, and what the codec wrote is valid framing
//    (frame sizes, no frame on a stream the peer never opened but RST_STREAM/WINDOW_UPDATE/HEADERS
//    of a response to a stream it did open).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { H2Connection, type H2Stream } from '../../../src/proxy/http2/codec/connection.js';
import { judgeBlock, type BlockFacts } from '../../../src/proxy/http2/codec/message-rules.js';
import { HpackEncoder } from '../../../src/proxy/http2/hpack/encoder.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { frame } from '../../helpers/h2-frame.js';

const CASES = Number(process.env.CODEC_FUZZ_CASES ?? 2000);
const SEED = Number(process.env.CODEC_FUZZ_SEED ?? 0xf022);

function prng(seed: number): (n: number) => number {
  let state = seed >>> 0;
  return (n) => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0;
    return state % n;
  };
}

const NAMES = ['x-a', 'user-agent', 'accept', 'content-type', 'cookie', 'authorization', 'te', 'x-long', 'Upper', 'bad name', 'host'];
const VALUES = ['1', 'text/plain', 'trailers', 'a=b', 'v'.repeat(300), ' lead', 'cr\rlf', 'ok', 'example.com', ''];

/** A client's conversation: frames of requests, bodies, control frames. */
function conversation(rand: (n: number) => number): Buffer[] {
  const enc = new HpackEncoder();
  const out: Buffer[] = [CLIENT_PREFACE, frame(4, 0, 0, rand(4) === 0 ? Buffer.from([0, 4, 0, 0, 0x10, 0]) : Buffer.alloc(0))];
  const streams = 1 + rand(6);
  for (let k = 0; k < streams; k++) {
    const id = 2 * k + 1;
    const body = rand(3) === 0 ? 0 : rand(40_000);
    const fields = [':method', body > 0 ? 'POST' : 'GET', ':scheme', 'http', ':path', `/f${k}`, ':authority', 'example.com'];
    for (let n = rand(4); n > 0; n--) fields.push(NAMES[rand(NAMES.length)]!, VALUES[rand(VALUES.length)]!);
    if (body > 0 && rand(2) === 0) fields.push('content-length', String(body + (rand(4) === 0 ? 1 : 0)));
    const block = Buffer.from(enc.encode(fields));
    const trailers = rand(4) === 0;
    if (block.length > 20 && rand(3) === 0) { // split into HEADERS + CONTINUATION
      const cut = 1 + rand(block.length - 1);
      out.push(frame(1, body > 0 || trailers ? 0 : 1, id, block.subarray(0, cut)), frame(9, 4, id, block.subarray(cut)));
    } else {
      out.push(frame(1, 4 | (body > 0 || trailers ? 0 : 1), id, block));
    }
    for (let left = body; left > 0;) {
      const take = Math.min(left, 1 + rand(16_384));
      left -= take;
      out.push(frame(0, left === 0 && !trailers ? 1 : 0, id, Buffer.alloc(take, 0x61)));
    }
    if (trailers) out.push(frame(1, 5, id, Buffer.from(enc.encode(['x-trailer', VALUES[rand(VALUES.length)]!]))));
    if (rand(5) === 0) out.push(frame(6, 0, 0, Buffer.alloc(8)));
    if (rand(5) === 0) out.push(frame(8, 0, rand(2) === 0 ? 0 : id, Buffer.from([0, 0, 1, 0])));
    if (rand(6) === 0) out.push(frame(3, 0, id, Buffer.from([0, 0, 0, 8])));
    if (rand(8) === 0) out.push(frame(2, 0, id, Buffer.from([0, 0, 0, 0, 16])));
  }
  return out;
}

function mutate(frames: Buffer[], rand: (n: number) => number): Buffer {
  const list = [...frames];
  for (let m = rand(4); m > 0; m--) {
    const i = rand(list.length);
    const f = Buffer.from(list[i]!);
    switch (rand(6)) {
      case 0: if (f.length > 0) f[rand(f.length)] = rand(256); list[i] = f; break; // a byte flipped
      case 1: list[i] = f.subarray(0, rand(f.length + 1)); break; // a frame cut short
      case 2: list.splice(i, 0, f); break; // a frame repeated
      case 3: list.splice(i, 1); break; // a frame dropped
      case 4: list.splice(i, 0, Buffer.from(Array.from({ length: 1 + rand(24) }, () => rand(256)))); break; // noise
      default: if (f.length > 12) { f[9 + rand(f.length - 9)] = [0x00, 0x0a, 0x0d, 0x20, 0x3a, 0x7f, 0xff][rand(7)]!; list[i] = f; } break; // a payload byte
    }
  }
  return Buffer.concat(list);
}

describe(`HTTP/2 codec fuzzed (${CASES} cases, seed ${SEED})`, () => {
  it('never throws, never hands on a malformed request or more DATA than declared, writes valid frames', () => {
    const rand = prng(SEED);
    let handed = 0, ended = 0;
    for (let c = 0; c < CASES; c++) {
      const bytes = mutate(conversation(rand), rand);
      const written: Buffer[] = [];
      const expect = new Map<H2Stream, { cl: number; got: number }>();
      let closed = false;
      const facts: BlockFacts = { contentLength: -1, status: 0, connect: false, informational: false };
      const conn: H2Connection = new H2Connection(true, (chunks) => written.push(...chunks), {
        headers(s, fields, _f, end) {
          assert.equal(closed, false, `case ${c}: a request after the end`);
          const trailers = expect.has(s);
          assert.equal(judgeBlock(fields, trailers ? 'trailers' : 'request', facts), undefined, `case ${c}: ${JSON.stringify(fields)}`);
          if (!trailers) expect.set(s, { cl: facts.contentLength, got: 0 });
          handed++;
          if (end && !trailers) conn.headers(s, [':status', '200'], true);
        },
        data(s, data) {
          assert.equal(closed, false, `case ${c}: DATA after the end`);
          const e = expect.get(s)!;
          e.got += data.length;
          if (e.cl >= 0) assert.ok(e.got <= e.cl, `case ${c}: ${e.got} bytes against content-length ${e.cl}`);
          conn.consumed(s, data.length);
        },
        reset() {},
        closed() { closed = true; ended++; },
      });
      for (let at = 0; at < bytes.length;) {
        const take = 1 + rand(Math.min(bytes.length - at, rand(2) === 0 ? 64 : 20_000));
        conn.receive(bytes.subarray(at, at + take)); // throws: the test fails with the case number in the stack's message
        at += take;
      }
      conn.flush();
      const out = Buffer.concat(written);
      for (let at = 0; at < out.length;) {
        assert.ok(out.length - at >= 9, `case ${c}: a frame header cut in the output`);
        const length = out.readUIntBE(at, 3);
        assert.ok(length <= 16_384, `case ${c}: a frame of ${length} bytes written`);
        at += 9 + length;
        assert.ok(at <= out.length, `case ${c}: a frame cut in the output`);
      }
    }
    // The mutations must leave a mix: requests handed on, connections ended.
    assert.ok(handed > CASES && ended > CASES / 20, `${handed} requests handed on, ${ended} connections ended`);
  });
});
