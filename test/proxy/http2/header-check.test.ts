// src/proxy/http2/header-check.ts, pure: the frame walker finds each header block whatever the
// reads' boundaries (one byte at a time too), through padding, priority and CONTINUATION, marks the
// stream of a block holding a malformed field (requests and trailers alike), keeps the HPACK table
// in step across refused blocks, skips other frames, and gives up on what is not HTTP/2 framing.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HeaderCheck, MAX_MALFORMED_BLOCKS } from '../../../src/proxy/http2/header-check.js';
import { FAULT_VALUE_CHAR, FAULT_NAME } from '../../../src/proxy/http2/field-validity.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { frame } from '../../helpers/h2-frame.js';

const literal = (name: string, value: string, indexing = false): Buffer =>
  Buffer.concat([Buffer.from([indexing ? 0x40 : 0x00, name.length]), Buffer.from(name, 'latin1'), Buffer.from([value.length]), Buffer.from(value, 'latin1')]);
const GET = Buffer.from([0x82, 0x86, 0x84]); // :method GET, :scheme http, :path /
const HEADERS = 0x1;
const CONTINUATION = 0x9;
const END_STREAM = 0x1;
const END_HEADERS = 0x4;

function run(bytes: Buffer, chunk = bytes.length): { malformed: Array<[number, string]>; broken: string[] } {
  const out = { malformed: [] as Array<[number, string]>, broken: [] as string[] };
  const c = new HeaderCheck(true, { malformed: (s, why) => out.malformed.push([s, why]), broken: (why) => out.broken.push(why) });
  for (let i = 0; i < bytes.length; i += chunk) c.feed(bytes.subarray(i, i + chunk));
  return out;
}

describe('HeaderCheck', () => {
  const stream = Buffer.concat([
    CLIENT_PREFACE,
    frame(0x4, 0, 0, Buffer.from([0, 3, 0, 0, 0, 100])), // SETTINGS
    frame(HEADERS, END_STREAM | END_HEADERS, 1, Buffer.concat([GET, literal('x-ok', 'v')])),
    // padded, with priority, split over a CONTINUATION: the bad field in the second fragment
    frame(HEADERS, 0x8 | 0x20, 3, Buffer.concat([Buffer.from([4]), Buffer.from([0, 0, 0, 0, 15]), GET, Buffer.alloc(4)])),
    frame(CONTINUATION, END_HEADERS, 3, literal('x-bad', 'a\r\nb')),
    frame(0x0, END_STREAM, 3, Buffer.from('some body that is not looked at')),
    frame(0x8, 0, 0, Buffer.from([0, 0, 1, 0])), // WINDOW_UPDATE
    // trailers of stream 5 holding a bad name, and an indexed entry bad from the start
    frame(HEADERS, END_HEADERS, 5, GET),
    frame(HEADERS, END_STREAM | END_HEADERS, 5, literal('x y', 'v', true)),
    frame(HEADERS, END_STREAM | END_HEADERS, 7, Buffer.concat([GET, Buffer.from([0xbe])])), // index 62: "x y" again
  ]);
  const want: Array<[number, string]> = [[3, FAULT_VALUE_CHAR], [5, FAULT_NAME], [7, FAULT_NAME]];

  it('marks the streams of malformed blocks (requests, continuations, trailers, indexed), in one read', () => {
    assert.deepEqual(run(stream), { malformed: want, broken: [] });
  });

  it('the same when the bytes come one at a time, or in 7-byte reads', () => {
    assert.deepEqual(run(stream, 1), { malformed: want, broken: [] });
    assert.deepEqual(run(stream, 7), { malformed: want, broken: [] });
  });

  it('without a malformed field, nothing is marked', () => {
    const ok = Buffer.concat([CLIENT_PREFACE, frame(HEADERS, END_STREAM | END_HEADERS, 1, Buffer.concat([GET, literal('x-ok', 'v')]))]);
    assert.deepEqual(run(ok), { malformed: [], broken: [] });
  });

  it('a frame inside a header block, a CONTINUATION without one, PUSH_PROMISE, bad HPACK, a header block on stream 0: broken', () => {
    const cases: Array<[string, Buffer]> = [
      ['a frame inside a header block', Buffer.concat([frame(HEADERS, 0, 1, GET), frame(0x0, 0, 1, Buffer.from('x'))])],
      ['CONTINUATION without a header block', frame(CONTINUATION, END_HEADERS, 1, GET)],
      ['PUSH_PROMISE', frame(0x5, END_HEADERS, 1, Buffer.from([0, 0, 0, 2, 0x82]))],
      ['HPACK: index 0', frame(HEADERS, END_HEADERS, 1, Buffer.from([0x80]))],
      ['a header block on stream 0', frame(HEADERS, END_HEADERS, 0, GET)],
      ['HEADERS padding or priority beyond the frame', frame(HEADERS, END_HEADERS | 0x8, 1, Buffer.from([9, 0x82]))],
    ];
    for (const [why, bytes] of cases) {
      const r = run(Buffer.concat([CLIENT_PREFACE, bytes]));
      assert.equal(r.broken.length, 1, why);
      assert.match(r.broken[0]!, new RegExp(why.split(':')[0]!), why);
    }
  });

  it(`more than ${MAX_MALFORMED_BLOCKS} malformed blocks on a connection: broken`, () => {
    const bad = frame(HEADERS, END_STREAM | END_HEADERS, 1, Buffer.concat([GET, literal('x-bad', '\0')]));
    const r = run(Buffer.concat([CLIENT_PREFACE, ...Array.from({ length: MAX_MALFORMED_BLOCKS + 1 }, () => bad)]));
    assert.equal(r.malformed.length, MAX_MALFORMED_BLOCKS);
    assert.match(r.broken[0]!, /more than/);
  });

  it('a header block larger than nghttp2 takes: broken, nothing gathered beyond it', () => {
    const big = Buffer.alloc(16_384, 0x82);
    const parts = [frame(HEADERS, 0, 1, big), ...Array.from({ length: 9 }, () => frame(CONTINUATION, 0, 1, big))];
    const r = run(Buffer.concat([CLIENT_PREFACE, ...parts]));
    assert.deepEqual(r.broken, ['a header block too large']);
  });
});
