// src/proxy/http2/codec/connection.ts, pure: frames written by hand (their header blocks by our
// HPACK encoder, which writes whatever bytes it is given, malformed ones included) fed to one side
// of a connection, its output parsed back. Each malformed class of RFC 9113 (8.1.1, 8.2.1, 8.2.2,
// 8.3) must reset its stream with PROTOCOL_ERROR and never reach the owner; framing errors end the
// connection with GOAWAY and the right code; the defences (CONTINUATION and HPACK bombs, PING,
// SETTINGS and empty-DATA floods, rapid reset and "made you reset", the concurrency cap) close it
// with ENHANCE_YOUR_CALM; flow control holds both ways. The differential against nghttp2 (node:http2
// as the peer, over real sockets) is codec-differential.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { H2Connection, type H2ConnectionError, type H2Events, type H2Stream } from '../../../src/proxy/http2/codec/connection.js';
import { HpackDecoder } from '../../../src/proxy/http2/hpack/decoder.js';
import { HpackEncoder } from '../../../src/proxy/http2/hpack/encoder.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { frame, splitFrames, type Frame } from '../../helpers/h2-frame.js';

const DATA = 0, HEADERS = 1, RST = 3, SETTINGS = 4, PING = 6, GOAWAY = 7, WINDOW_UPDATE = 8, CONTINUATION = 9, PRIORITY = 2;
const END_STREAM = 1, END_HEADERS = 4, PADDED = 8, ACK = 1;
const PROTOCOL_ERROR = 1, FLOW_CONTROL_ERROR = 3, FRAME_SIZE_ERROR = 6, REFUSED_STREAM = 7, COMPRESSION_ERROR = 9, ENHANCE_YOUR_CALM = 11;

const parseFrames = (bytes: Buffer): Frame[] => splitFrames(bytes).frames;

interface Seen {
  requests: Array<{ stream: H2Stream; fields: string[]; end: boolean }>;
  data: Array<{ id: number; bytes: string; end: boolean }>;
  resets: Array<{ id: number; code: number; byPeer: boolean; why: string }>;
  closed: Array<H2ConnectionError | undefined>;
}

/** A side of a connection, what it told its owner, and every byte it wrote (parsed on demand). */
class Side {
  readonly seen: Seen = { requests: [], data: [], resets: [], closed: [] };
  readonly written: Buffer[] = [];
  readonly conn: H2Connection;
  /** The peer's encoder and decoder: the tests write as the peer would. */
  readonly enc = new HpackEncoder();
  readonly dec: HpackDecoder;
  private read = 0;

  constructor(private readonly server: boolean, events: Partial<H2Events> = {}) {
    this.dec = new HpackDecoder(!server);
    const seen = this.seen;
    this.conn = new H2Connection(server, (chunks) => this.written.push(...chunks), {
      headers: (stream, fields, _facts, end) => seen.requests.push({ stream, fields, end }),
      data: (stream, data, end) => seen.data.push({ id: stream.id, bytes: data.toString('latin1'), end }),
      reset: (stream, code, byPeer, why) => seen.resets.push({ id: stream.id, code, byPeer, why }),
      closed: (error) => seen.closed.push(error),
      ...events,
    });
    this.conn.flush();
  }

  /** Frames written since the last call. */
  frames(): Frame[] {
    this.conn.flush();
    const all = Buffer.concat(this.written);
    // A client's output begins with the preface, not a frame.
    const fresh = all.subarray(this.read === 0 && !this.server ? CLIENT_PREFACE.length : this.read);
    this.read = all.length;
    return parseFrames(fresh);
  }

  feed(...bytes: Buffer[]): void {
    this.conn.receive(Buffer.concat(bytes));
  }

  block(fields: string[]): Buffer {
    return Buffer.from(this.enc.encode(fields));
  }
}

const REQUEST = [':method', 'GET', ':scheme', 'http', ':path', '/x', ':authority', 'example.com'];

/** A server side past the preface and SETTINGS exchange. */
function openServer(events?: Partial<H2Events>): Side {
  const s = new Side(true, events);
  s.feed(CLIENT_PREFACE, frame(SETTINGS, 0, 0));
  s.frames();
  return s;
}

function headersFrame(s: Side, id: number, fields: string[], flags = END_HEADERS | END_STREAM): Buffer {
  return frame(HEADERS, flags, id, s.block(fields));
}

function rstCodes(frames: Frame[]): Array<[number, number]> {
  return frames.filter((f) => f.type === RST).map((f) => [f.stream, f.payload.readUInt32BE(0)]);
}

function goaway(frames: Frame[]): number | undefined {
  const g = frames.find((f) => f.type === GOAWAY);
  return g?.payload.readUInt32BE(4);
}

describe('HTTP/2 codec: the connection', () => {
  it('answers the preface with SETTINGS, acknowledges the peer\'s, opens its connection window, answers PING', () => {
    const s = new Side(true);
    const first = s.frames();
    assert.equal(first[0]!.type, SETTINGS);
    assert.ok(first.some((f) => f.type === WINDOW_UPDATE && f.stream === 0));
    s.feed(CLIENT_PREFACE, frame(SETTINGS, 0, 0), frame(PING, 0, 0, Buffer.from('12345678')));
    const next = s.frames();
    assert.ok(next.some((f) => f.type === SETTINGS && f.flags === ACK));
    const pong = next.find((f) => f.type === PING)!;
    assert.equal(pong.flags, ACK);
    assert.equal(pong.payload.toString(), '12345678');
  });

  it('hands a request on, fields in order, and sends the response back encoded', () => {
    const s = openServer();
    s.feed(headersFrame(s, 1, [...REQUEST, 'x-a', 'b']));
    assert.equal(s.seen.requests.length, 1);
    const r = s.seen.requests[0]!;
    assert.deepEqual(r.fields, [...REQUEST, 'x-a', 'b']);
    assert.equal(r.end, true);
    s.conn.headers(r.stream, [':status', '200', 'content-length', '2'], false);
    s.conn.data(r.stream, Buffer.from('ok'), true);
    const out = s.frames();
    const h = out.find((f) => f.type === HEADERS)!;
    const fields: string[] = [];
    s.dec.decode(h.payload, (n, v) => fields.push(n, v));
    assert.deepEqual(fields, [':status', '200', 'content-length', '2']);
    const d = out.find((f) => f.type === DATA)!;
    assert.equal(d.payload.toString(), 'ok');
    assert.equal(d.flags & END_STREAM, END_STREAM);
    assert.equal(s.conn.openStreams, 0);
  });

  it('takes bytes in any cut: one byte at a time gives the same request and body', () => {
    const s = new Side(true);
    const enc = s.block([...REQUEST.slice(0, 1), 'POST', ...REQUEST.slice(2), 'content-length', '5']);
    const bytes = Buffer.concat([CLIENT_PREFACE, frame(SETTINGS, 0, 0), frame(HEADERS, END_HEADERS, 1, enc), frame(DATA, END_STREAM, 1, Buffer.from('hello'))]);
    for (let i = 0; i < bytes.length; i++) s.feed(bytes.subarray(i, i + 1));
    assert.equal(s.seen.requests.length, 1);
    assert.equal(s.seen.data.map((d) => d.bytes).join(''), 'hello');
    assert.equal(s.seen.data.at(-1)!.end, true);
  });

  describe('malformed requests are reset with PROTOCOL_ERROR and never handed on', () => {
    const cases: Array<[string, string[], Buffer[]?]> = [
      ['a value holding CR', [...REQUEST, 'x-a', 'b\rc']],
      ['a value holding LF', [...REQUEST, 'x-a', 'b\nc']],
      ['a value holding NUL', [...REQUEST, 'x-a', 'b\0c']],
      ['a value with a leading space', [...REQUEST, 'x-a', ' b']],
      ['a value with a trailing tab', [...REQUEST, 'x-a', 'b\t']],
      ['a name with a space', [...REQUEST, 'x a', 'b']],
      ['a name with a colon inside', [...REQUEST, 'x:a', 'b']],
      ['a name with upper case', [...REQUEST, 'X-A', 'b']],
      ['an empty name', [...REQUEST, '', 'b']],
      ['a name with a control byte', [...REQUEST, 'x\x01a', 'b']],
      ['connection', [...REQUEST, 'connection', 'close']],
      ['keep-alive', [...REQUEST, 'keep-alive', '5']],
      ['proxy-connection', [...REQUEST, 'proxy-connection', 'x']],
      ['transfer-encoding', [...REQUEST, 'transfer-encoding', 'chunked']],
      ['upgrade', [...REQUEST, 'upgrade', 'websocket']],
      ['te other than trailers', [...REQUEST, 'te', 'gzip']],
      ['a pseudo-header after a regular field', [':method', 'GET', ':scheme', 'http', 'x-a', 'b', ':path', '/']],
      ['two :path', [...REQUEST, ':path', '/y']],
      ['no :method', REQUEST.slice(2)],
      ['no :scheme', [':method', 'GET', ':path', '/', ':authority', 'a']],
      ['no :path', [':method', 'GET', ':scheme', 'http', ':authority', 'a']],
      ['an empty :path', [':method', 'GET', ':scheme', 'http', ':path', '', ':authority', 'a']],
      ['a relative :path', [':method', 'GET', ':scheme', 'http', ':path', 'x', ':authority', 'a']],
      ['a :path with a space', [':method', 'GET', ':scheme', 'http', ':path', '/a b', ':authority', 'a']],
      ['an unknown pseudo-header', [...REQUEST, ':foo', 'x']],
      ['a response pseudo-header', [':status', '200', ...REQUEST]],
      ['a :protocol (extended CONNECT not offered)', [...REQUEST, ':protocol', 'websocket']],
      ['CONNECT with :path', [':method', 'CONNECT', ':authority', 'a:1', ':path', '/']],
      ['CONNECT without :authority', [':method', 'CONNECT']],
      ['a method with a space', [':method', 'G T', ':scheme', 'http', ':path', '/', ':authority', 'a']],
      ['a host unlike :authority', [...REQUEST, 'host', 'other.example']],
      ['a host with a bad character', [...REQUEST.slice(0, 6), 'host', 'a b']],
      ['an :authority with userinfo', [':method', 'GET', ':scheme', 'https', ':path', '/', ':authority', 'internal.svc@evil.example']],
      ['a host with userinfo', [...REQUEST.slice(0, 6), 'host', 'internal.svc@evil.example']],
      ['content-length not a number', [...REQUEST, 'content-length', '1x']],
      ['two content-length values', [...REQUEST, 'content-length', '1', 'content-length', '2']],
      ['content-length with END_STREAM and no DATA', [...REQUEST, 'content-length', '3']],
    ];
    for (const [name, fields] of cases) {
      it(name, () => {
        const s = openServer();
        s.feed(headersFrame(s, 1, fields));
        assert.equal(s.seen.requests.length, 0, 'handed on');
        assert.deepEqual(rstCodes(s.frames()), [[1, PROTOCOL_ERROR]]);
        assert.match(s.seen.resets[0]!.why, /^malformed: /);
        // The connection goes on (a stream error): the next request is taken.
        s.feed(headersFrame(s, 3, REQUEST));
        assert.equal(s.seen.requests.length, 1);
        assert.equal(s.seen.closed.length, 0);
      });
    }

    it('more DATA than content-length', () => {
      const s = openServer();
      s.feed(headersFrame(s, 1, [...REQUEST, 'content-length', '3'], END_HEADERS), frame(DATA, 0, 1, Buffer.from('abcd')));
      assert.equal(s.seen.data.length, 0);
      assert.deepEqual(rstCodes(s.frames()), [[1, PROTOCOL_ERROR]]);
    });

    it('less DATA than content-length at END_STREAM', () => {
      const s = openServer();
      s.feed(headersFrame(s, 1, [...REQUEST, 'content-length', '3'], END_HEADERS), frame(DATA, 0, 1, Buffer.from('ab')), frame(DATA, END_STREAM, 1, Buffer.alloc(0)));
      assert.deepEqual(s.seen.data.map((d) => d.bytes), ['ab']);
      assert.deepEqual(rstCodes(s.frames()), [[1, PROTOCOL_ERROR]]);
    });

    it('trailers with a pseudo-header, and trailers without END_STREAM', () => {
      for (const [fields, flags] of [[[':path', '/'], END_HEADERS | END_STREAM], [['x-t', '1'], END_HEADERS]] as const) {
        const s = openServer();
        s.feed(headersFrame(s, 1, REQUEST, END_HEADERS), frame(HEADERS, flags, 1, s.block([...fields])));
        assert.equal(s.seen.requests.length, 1, 'the request itself was fine');
        assert.deepEqual(rstCodes(s.frames()), [[1, PROTOCOL_ERROR]]);
      }
    });

    it('a header list over the limit (an HPACK bomb: one large entry referenced many times) refuses the stream, the table kept', () => {
      const s = openServer();
      const big = 'v'.repeat(250); // short enough for the encoder to index it
      s.feed(headersFrame(s, 1, [...REQUEST, 'x-big', big]));
      assert.equal(s.seen.requests.length, 1);
      const fields = [...REQUEST];
      for (let i = 0; i < 300; i++) fields.push('x-big', big); // ~84 KB decoded from a block of ~300 bytes
      const block = s.block(fields);
      assert.ok(block.length < 400, `the bomb is small (${block.length} bytes)`);
      s.feed(frame(HEADERS, END_HEADERS | END_STREAM, 3, block));
      assert.equal(s.seen.requests.length, 1);
      assert.deepEqual(rstCodes(s.frames()), [[3, PROTOCOL_ERROR]]);
      s.feed(headersFrame(s, 5, [...REQUEST, 'x-big', big]));
      assert.deepEqual(s.seen.requests[1]!.fields.at(-1), big, 'the HPACK table still follows the peer');
    });
  });

  describe('framing errors end the connection with GOAWAY', () => {
    const cases: Array<[string, (s: Side) => Buffer, number]> = [
      ['a frame above 16 KiB', () => frame(DATA, 0, 1, Buffer.alloc(16_385)), FRAME_SIZE_ERROR],
      ['DATA on stream 0', () => frame(DATA, 0, 0, Buffer.from('x')), PROTOCOL_ERROR],
      ['HEADERS on an even stream', (s) => headersFrame(s, 2, REQUEST), PROTOCOL_ERROR],
      ['a frame between HEADERS and its CONTINUATION', (s) => Buffer.concat([frame(HEADERS, 0, 1, s.block(REQUEST)), frame(PING, 0, 0, Buffer.alloc(8))]), PROTOCOL_ERROR],
      ['CONTINUATION without HEADERS', () => frame(CONTINUATION, END_HEADERS, 1, Buffer.alloc(1)), PROTOCOL_ERROR],
      ['not valid HPACK (index 0)', () => frame(HEADERS, END_HEADERS | END_STREAM, 1, Buffer.from([0x80])), COMPRESSION_ERROR],
      ['a SETTINGS frame of 5 bytes', () => frame(SETTINGS, 0, 0, Buffer.alloc(5)), FRAME_SIZE_ERROR],
      ['SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1', () => frame(SETTINGS, 0, 0, Buffer.from([0, 4, 0x80, 0, 0, 0])), FLOW_CONTROL_ERROR],
      ['a PING of 7 bytes', () => frame(PING, 0, 0, Buffer.alloc(7)), FRAME_SIZE_ERROR],
      ['a connection WINDOW_UPDATE of 0', () => frame(WINDOW_UPDATE, 0, 0, Buffer.alloc(4)), PROTOCOL_ERROR],
      ['DATA on an idle stream', () => frame(DATA, 0, 7, Buffer.from('x')), PROTOCOL_ERROR],
      ['PUSH_PROMISE from a client', () => frame(5, END_HEADERS, 1, Buffer.alloc(4)), PROTOCOL_ERROR],
      ['an HPACK integer of too many bytes (zero continuation bytes would make it NaN)', () =>
        frame(HEADERS, END_HEADERS | END_STREAM, 1, Buffer.concat([Buffer.from([0xff]), Buffer.alloc(160, 0x80), Buffer.from([0x01])])), COMPRESSION_ERROR],
      ['a PRIORITY frame of 4 bytes on an idle stream (no RST_STREAM on an idle stream)', () => frame(PRIORITY, 0, 7, Buffer.alloc(4)), PROTOCOL_ERROR],
      ['a SETTINGS frame of 33 settings', () => frame(SETTINGS, 0, 0, Buffer.alloc(33 * 6)), ENHANCE_YOUR_CALM],
      // A block is decoded where it lies in the read: a string may not run past its frame into the next one's bytes...
      ['an HPACK string longer than its HEADERS frame, another frame after it in the same read', () => Buffer.concat([
        frame(HEADERS, END_HEADERS | END_STREAM, 1, Buffer.from([0x04, 20, 0x61, 0x62])), frame(PING, 0, 0, Buffer.alloc(8, 0x61)), frame(PING, 0, 0, Buffer.alloc(8, 0x61)),
      ]), COMPRESSION_ERROR],
      // ...nor into the frame's padding.
      ['an HPACK string running into the HEADERS frame\'s padding', () =>
        frame(HEADERS, PADDED | END_HEADERS | END_STREAM, 1, Buffer.concat([Buffer.from([20, 0x04, 20, 0x61, 0x62]), Buffer.alloc(20, 0x61)])), COMPRESSION_ERROR],
    ];
    for (const [name, bytes, code] of cases) {
      it(name, () => {
        const s = openServer({ data: (st) => s.conn.consumed(st, 0) });
        s.feed(bytes(s));
        assert.equal(goaway(s.frames()), code);
        assert.equal(s.seen.closed.length, 1);
        assert.equal(s.seen.closed[0]!.code, code);
      });
    }

    it('a connection that does not begin with the preface', () => {
      const s = new Side(true);
      s.feed(Buffer.from('GET / HTTP/1.1\r\nhost: a\r\n\r\n'));
      assert.equal(goaway(s.frames()), PROTOCOL_ERROR);
    });
  });

  describe('what a review found (each failed before its fix)', () => {
    it('a stream reset while its DATA waits for window is forgotten: a later WINDOW_UPDATE sends nothing of it, and does not throw', () => {
      for (const how of ['peer', 'owner', 'malformed'] as const) {
        const s = openServer();
        s.feed(headersFrame(s, 1, [...REQUEST.slice(0, 1), 'POST', ...REQUEST.slice(2)], END_HEADERS));
        const st = s.seen.requests[0]!.stream;
        s.conn.headers(st, [':status', '200'], false);
        assert.ok(s.conn.data(st, Buffer.alloc(70_000, 1), true) > 0);
        assert.equal(s.conn.waitingStreams, 1);
        s.frames();
        if (how === 'peer') s.feed(frame(RST, 0, 1, Buffer.from([0, 0, 0, 8])));
        else if (how === 'owner') s.conn.reset(st, 8);
        else s.feed(frame(DATA, 0, 1, Buffer.alloc(16_000)), frame(HEADERS, END_HEADERS, 1, s.block(['x-t', '1']))); // trailers without END_STREAM
        s.frames();
        assert.equal(s.conn.waitingStreams, 0, `${how}: a reset stream no longer waits`);
        s.feed(frame(WINDOW_UPDATE, 0, 0, Buffer.from([0, 1, 0, 0])), frame(SETTINGS, 0, 0, Buffer.from([0, 4, 0, 2, 0, 0])));
        assert.deepEqual(s.frames().filter((f) => f.type === DATA), [], how);
        assert.equal(s.seen.closed.length, 0, how);
      }
    });

    it('HEADERS whose priority names the stream itself: refused, never handed on, the HPACK table kept', () => {
      const s = openServer();
      const block = s.block([...REQUEST, 'x-new', 'indexed']);
      s.feed(frame(HEADERS, END_HEADERS | END_STREAM | 0x20, 1, Buffer.concat([Buffer.from([0, 0, 0, 1, 16]), block])));
      assert.equal(s.seen.requests.length, 0);
      assert.deepEqual(rstCodes(s.frames()), [[1, PROTOCOL_ERROR]]);
      assert.equal(s.conn.openStreams, 0);
      s.feed(headersFrame(s, 3, [...REQUEST, 'x-new', 'indexed']));
      assert.deepEqual(s.seen.requests[0]!.fields.slice(-2), ['x-new', 'indexed']);
    });

    it('a client that resets answered streams as fast as it opens them is cut off past nghttp2\'s rate (a burst of 1000)', () => {
      const s = openServer();
      for (let id = 1; id < 2 * 1100 && s.seen.closed.length === 0; id += 2) {
        s.feed(headersFrame(s, id, REQUEST));
        s.conn.headers(s.seen.requests.at(-1)!.stream, [':status', '200'], false);
        s.feed(frame(RST, 0, id, Buffer.from([0, 0, 0, 8])));
      }
      assert.equal(goaway(s.frames()), ENHANCE_YOUR_CALM);
    });

    it('a GOAWAY flood is a flood; what a read made is written before the owner hears the connection closed, nothing after', () => {
      const s = openServer();
      const g = Buffer.alloc(8);
      s.feed(Buffer.concat(Array.from({ length: 1010 }, () => frame(GOAWAY, 0, 0, g))));
      assert.equal(s.seen.closed.length, 1);
      const order: string[] = [];
      const t = new Side(true, { closed: () => order.push('closed') });
      const written = t.written.length;
      t.feed(CLIENT_PREFACE, frame(SETTINGS, 0, 0), frame(PING, 0, 0, Buffer.alloc(8)), frame(GOAWAY, 0, 0, Buffer.from([0, 0, 0, 0, 0, 0, 0, 2])));
      const pong = parseFrames(Buffer.concat(t.written.slice(written))).find((f) => f.type === PING);
      assert.ok(pong, 'the PING was answered before the close');
      assert.deepEqual(order, ['closed']);
      const after = t.written.length;
      t.conn.flush();
      assert.equal(t.written.length, after, 'nothing written after closed');
    });
  });

  describe('defences', () => {
    it('a CONTINUATION flood (a header block of more than 8 CONTINUATION frames)', () => {
      const s = openServer();
      const frames = [frame(HEADERS, 0, 1, s.block(REQUEST))];
      for (let i = 0; i < 9; i++) frames.push(frame(CONTINUATION, 0, 1, Buffer.alloc(10)));
      s.feed(...frames);
      assert.equal(goaway(s.frames()), ENHANCE_YOUR_CALM);
    });

    it('a PING flood, a SETTINGS flood, a PRIORITY flood, an empty DATA flood', () => {
      const floods: Array<(s: Side) => Buffer> = [
        () => frame(PING, 0, 0, Buffer.alloc(8)),
        () => frame(SETTINGS, 0, 0),
        () => frame(PRIORITY, 0, 1, Buffer.alloc(5)),
        () => frame(DATA, 0, 1, Buffer.alloc(0)),
      ];
      for (const one of floods) {
        const s = openServer();
        s.feed(headersFrame(s, 1, REQUEST, END_HEADERS));
        const f = one(s);
        s.feed(Buffer.concat(Array.from({ length: 999 }, () => f)));
        assert.equal(s.seen.closed.length, 0, 'within the allowance');
        s.feed(Buffer.concat(Array.from({ length: 10 }, () => f)));
        assert.equal(goaway(s.frames()), ENHANCE_YOUR_CALM);
      }
    });

    it('rapid reset: a client that resets most of its streams before an answer is cut off', () => {
      const s = openServer();
      for (let id = 1; id < 2 * 120; id += 2) s.feed(headersFrame(s, id, REQUEST), frame(RST, 0, id, Buffer.from([0, 0, 0, 8])));
      assert.equal(goaway(s.frames()), ENHANCE_YOUR_CALM);
      assert.equal(s.seen.closed.length, 1);
    });

    it('answered streams reset by the client are not early resets', () => {
      const s = openServer();
      for (let id = 1; id < 2 * 150; id += 2) {
        s.feed(headersFrame(s, id, REQUEST));
        s.conn.headers(s.seen.requests.at(-1)!.stream, [':status', '200'], false);
        s.feed(frame(RST, 0, id, Buffer.from([0, 0, 0, 8])));
      }
      assert.equal(s.seen.closed.length, 0);
    });

    it('"made you reset": a client whose streams are mostly malformed is cut off too', () => {
      const s = openServer();
      for (let id = 1; id < 2 * 120; id += 2) s.feed(headersFrame(s, id, [...REQUEST, 'x-a', 'b\nc']));
      assert.equal(goaway(s.frames()), ENHANCE_YOUR_CALM);
    });

    it('the concurrency cap: REFUSED_STREAM past it, the connection closed after too many', () => {
      const s = openServer();
      for (let id = 1; id <= 2 * 256; id += 2) s.feed(headersFrame(s, id, REQUEST, END_HEADERS));
      assert.equal(s.seen.requests.length, 256);
      s.feed(headersFrame(s, 513, REQUEST, END_HEADERS));
      assert.deepEqual(rstCodes(s.frames()), [[513, REFUSED_STREAM]]);
      for (let id = 515; id < 515 + 2 * 100; id += 2) s.feed(headersFrame(s, id, REQUEST, END_HEADERS));
      assert.equal(goaway(s.frames()), ENHANCE_YOUR_CALM);
    });
  });

  describe('flow control', () => {
    it('sends no more DATA than the peer\'s windows allow, the rest after WINDOW_UPDATE, END_STREAM last', () => {
      let writable = 0;
      const s = openServer({ writable: () => writable++ });
      s.feed(headersFrame(s, 1, REQUEST));
      const st = s.seen.requests[0]!.stream;
      s.conn.headers(st, [':status', '200'], false);
      const waiting = s.conn.data(st, Buffer.alloc(100_000, 1), true);
      assert.equal(waiting, 100_000 - 65_535);
      let sent = s.frames().filter((f) => f.type === DATA);
      assert.equal(sent.reduce((n, f) => n + f.payload.length, 0), 65_535);
      assert.ok(sent.every((f) => (f.flags & END_STREAM) === 0 && f.payload.length <= 16_384));
      s.feed(frame(WINDOW_UPDATE, 0, 1, Buffer.from([0, 1, 0, 0]))); // the stream's window only: the connection's is spent
      assert.equal(s.frames().filter((f) => f.type === DATA).length, 0);
      s.feed(frame(WINDOW_UPDATE, 0, 0, Buffer.from([0, 1, 0, 0])));
      sent = s.frames().filter((f) => f.type === DATA);
      assert.equal(sent.reduce((n, f) => n + f.payload.length, 0), 100_000 - 65_535);
      assert.equal(sent.at(-1)!.flags & END_STREAM, END_STREAM);
      assert.equal(s.conn.openStreams, 0);
      assert.equal(writable, 0, 'an ended stream is not offered more');
    });

    it('a larger initial window from the peer\'s SETTINGS applies to open streams', () => {
      const s = openServer();
      s.feed(headersFrame(s, 1, REQUEST));
      const st = s.seen.requests[0]!.stream;
      s.conn.headers(st, [':status', '200'], false);
      s.conn.data(st, Buffer.alloc(40_000), false);
      s.frames();
      s.feed(frame(SETTINGS, 0, 0, Buffer.from([0, 4, 0, 2, 0, 0])), frame(WINDOW_UPDATE, 0, 0, Buffer.from([0, 1, 0, 0])));
      // The stream's window: 65,535 - 40,000 + (131,072 - 65,535) = 91,072; the connection's 25,535 + 65,536.
      assert.equal(s.conn.data(st, Buffer.alloc(40_000), true), 0);
    });

    it('gives a stream\'s window back as its DATA is consumed, and refuses DATA beyond it', () => {
      const s = openServer();
      s.feed(headersFrame(s, 1, [...REQUEST.slice(0, 1), 'POST', ...REQUEST.slice(2)], END_HEADERS));
      const st = s.seen.requests[0]!.stream;
      s.feed(frame(DATA, 0, 1, Buffer.alloc(12_000)), frame(DATA, 0, 1, Buffer.alloc(12_000)), frame(DATA, 0, 1, Buffer.alloc(12_000)));
      s.frames();
      s.conn.consumed(st, 20_000);
      assert.equal(s.frames().length, 0, 'less than half the window back: no WINDOW_UPDATE yet');
      s.conn.consumed(st, 16_000);
      const updates = s.frames().filter((f) => f.type === WINDOW_UPDATE && f.stream === 1);
      assert.equal(updates.length, 1);
      assert.equal(updates[0]!.payload.readUInt32BE(0), 36_000);
      // Nothing more consumed: the whole window again, 65,535, is all it may send.
      for (let i = 0; i < 4; i++) s.feed(frame(DATA, 0, 1, Buffer.alloc(16_000)));
      assert.deepEqual(rstCodes(s.frames()), []);
      s.feed(frame(DATA, 0, 1, Buffer.alloc(16_000)));
      assert.deepEqual(rstCodes(s.frames()), [[1, FLOW_CONTROL_ERROR]]);
    });
  });

  describe('the client side', () => {
    function openClient(): Side {
      const c = new Side(false);
      c.feed(frame(SETTINGS, 0, 0));
      c.frames();
      return c;
    }

    it('writes the preface and SETTINGS first, then requests on odd streams', () => {
      const c = new Side(false);
      c.conn.flush();
      const all = Buffer.concat(c.written);
      assert.equal(all.subarray(0, CLIENT_PREFACE.length).toString('latin1'), CLIENT_PREFACE.toString('latin1'));
      assert.equal(all[CLIENT_PREFACE.length + 3], SETTINGS);
      c.feed(frame(SETTINGS, 0, 0));
      const a = c.conn.request(REQUEST, true)!;
      const b = c.conn.request(REQUEST, true)!;
      assert.deepEqual([a.id, b.id], [1, 3]);
    });

    const responses: Array<[string, string[], number]> = [
      ['no :status', ['x-a', 'b'], PROTOCOL_ERROR],
      ['a :status of two digits', [':status', '20'], PROTOCOL_ERROR],
      ['101', [':status', '101'], PROTOCOL_ERROR],
      ['a request pseudo-header', [':status', '200', ':path', '/'], PROTOCOL_ERROR],
      ['a value holding LF', [':status', '200', 'x-a', 'b\nc'], PROTOCOL_ERROR],
      ['transfer-encoding', [':status', '200', 'transfer-encoding', 'chunked'], PROTOCOL_ERROR],
      ['content-length with END_STREAM and no DATA', [':status', '200', 'content-length', '4'], PROTOCOL_ERROR],
    ];
    for (const [name, fields, code] of responses) {
      it(`a malformed response: ${name}`, () => {
        const c = openClient();
        const st = c.conn.request(REQUEST, true)!;
        c.feed(frame(HEADERS, END_HEADERS | END_STREAM, st.id, c.block(fields)));
        assert.equal(c.seen.requests.length, 0);
        assert.deepEqual(rstCodes(c.frames()), [[st.id, code]]);
      });
    }

    it('a response to HEAD, a 204 or a 304 with DATA is refused (its bytes would be a next response on HTTP/1.1)', () => {
      for (const [status, head] of [['200', true], ['204', false], ['304', false]] as const) {
        const c = openClient();
        const st = c.conn.request(REQUEST, true, head)!;
        c.feed(frame(HEADERS, END_HEADERS, st.id, c.block([':status', status, 'content-length', '5'])), frame(DATA, END_STREAM, st.id, Buffer.from('HTTP/1.1 200 OK\r\n\r\n')));
        assert.equal(c.seen.data.length, 0, status);
        assert.deepEqual(rstCodes(c.frames()), [[st.id, PROTOCOL_ERROR]]);
      }
    });

    it('HEADERS on a stream this client never opened (even: push is off; odd: idle) ends the connection', () => {
      for (const id of [2, 3]) {
        const c = openClient();
        c.conn.request(REQUEST, true);
        c.feed(frame(HEADERS, END_HEADERS | END_STREAM, id, c.block([':status', '200'])));
        assert.equal(c.seen.requests.length, 0);
        assert.equal(goaway(c.frames()), PROTOCOL_ERROR);
      }
    });

    it('a response to HEAD, and a 204 or 304, may say content-length without DATA', () => {
      for (const [status, head] of [['200', true], ['204', false], ['304', false]] as const) {
        const c = openClient();
        const st = c.conn.request(REQUEST, true, head)!;
        c.feed(frame(HEADERS, END_HEADERS | END_STREAM, st.id, c.block([':status', status, 'content-length', '10'])));
        assert.equal(c.seen.requests.length, 1, status);
      }
    });

    it('a 1xx response, then the final one; GOAWAY resets the streams above its last', () => {
      const c = openClient();
      const a = c.conn.request(REQUEST, true)!;
      const b = c.conn.request(REQUEST, true)!;
      c.feed(frame(HEADERS, END_HEADERS, a.id, c.block([':status', '103', 'link', '</a>'])), frame(HEADERS, END_HEADERS | END_STREAM, a.id, c.block([':status', '200'])));
      assert.deepEqual(c.seen.requests.map((r) => r.fields[1]), ['103', '200']);
      const g = Buffer.alloc(8);
      g.writeUInt32BE(a.id, 0);
      c.feed(frame(GOAWAY, 0, 0, g));
      assert.deepEqual(c.seen.resets.map((r) => [r.id, r.code]), [[b.id, REFUSED_STREAM]]);
      assert.equal(c.conn.canOpen, false);
    });
  });
});
