// The clients' side of our frame layer on real sockets (codec-server.ts, codec-stream.ts): what the
// handler and the exchange rely on besides the frame rules (codec-connection.test.ts): a stream is
// handed on only after the read that opened it (a request its own DATA makes malformed is never
// seen), a body not read holds the peer to its window and all of it comes once read, a stream's
// writes wait for the socket's buffer to drain, a connection ended for an error is read until the
// client's FIN (no TCP reset to take the GOAWAY with it), and a fault in a stream's handling ends
// its own connection only.
import assert from 'node:assert/strict';
import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { connect as connectTcp, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { DEFAULT_SETTINGS } from '../../../src/proxy/http2/codec/connection.js';
import { CodecServerSession, type CodecServerStream } from '../../../src/proxy/http2/codec-server.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { HpackEncoder } from '../../../src/proxy/http2/hpack/encoder.js';
import { frame, splitFrames } from '../../helpers/h2-frame.js';
import { rapidResetReadingLate } from '../../helpers/h2-flood.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('the clients\' side of our frame layer, on sockets', () => {
  let server: Server;
  let port: number;
  /** What each test does with the streams of the connections it makes. */
  let onStream: (stream: CodecServerStream, fields: string[]) => void = () => {};
  const sockets = new Set<Socket>();

  before(async () => {
    server = createServer({ allowHalfOpen: true }, (socket) => { // as the listener's
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      const session = new CodecServerSession(socket, DEFAULT_SETTINGS);
      session.on('stream', (stream: CodecServerStream, fields: string[]) => onStream(stream, fields));
      session.on('error', () => { /* the tests look at what the client got */ });
      session.start(Buffer.alloc(0));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });

  const client = (options: Parameters<typeof connect>[1] = {}): ClientHttp2Session => {
    const c = connect(`http://127.0.0.1:${port}`, options);
    c.on('error', () => { /* per test */ });
    return c;
  };

  it('a request whose DATA in the same read contradicts its content-length is reset and never handed on; the control is', async () => {
    const seen: string[] = [];
    onStream = (stream, fields) => {
      seen.push(fields[fields.indexOf(':path') + 1]!);
      stream.respond({ ':status': 200 }, { endStream: true });
      stream.resume();
    };
    const enc = new HpackEncoder();
    const head = (path: string, length: string): Buffer => enc.encode([':method', 'POST', ':scheme', 'http', ':authority', 'a', ':path', path, 'content-length', length]);
    const sock = connectTcp(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    sock.on('data', (d: Buffer) => { got = Buffer.concat([got, d]); });
    await new Promise((resolve) => sock.once('connect', resolve));
    const body = Buffer.from('abcde');
    sock.write(Buffer.concat([
      CLIENT_PREFACE, frame(0x4, 0, 0),
      frame(0x1, 0x4, 1, head('/short', '10')), frame(0x0, 0x1, 1, body),
      frame(0x1, 0x4, 3, head('/long', '1')), frame(0x0, 0x1, 3, body),
      frame(0x1, 0x4, 5, head('/right', '5')), frame(0x0, 0x1, 5, body),
    ]));
    await sleep(200);
    sock.destroy();
    assert.deepEqual(seen, ['/right'], 'only the well-formed request was handed on');
    const resets = splitFrames(got).frames.filter((f) => f.type === 0x3).map((f) => [f.stream, f.payload.readUInt32BE(0)]);
    assert.deepEqual(resets, [[1, constants.NGHTTP2_PROTOCOL_ERROR], [3, constants.NGHTTP2_PROTOCOL_ERROR]]);
  });

  it('a body nobody reads holds the client to the stream window; once read, every byte comes, in order', async () => {
    let server: CodecServerStream | undefined;
    onStream = (stream) => { server = stream; };
    const c = client();
    const sent = Buffer.alloc(300_000);
    for (let i = 0; i < sent.length; i++) sent[i] = (i * 7) & 0xff;
    const req = c.request({ ':method': 'POST', ':path': '/up' });
    req.on('response', () => {});
    req.end(sent);
    await sleep(300);
    assert.ok(server !== undefined);
    const h2 = server.h2!;
    assert.ok(h2.received <= 65_535, `the client sent ${h2.received} bytes to a stream nobody read (window 65,535)`);
    const chunks: Buffer[] = [];
    const ended = new Promise((resolve) => server!.once('end', resolve));
    server.on('data', (d: Buffer) => chunks.push(d));
    await ended;
    assert.ok(Buffer.concat(chunks).equals(sent), 'the body arrived whole and in order');
    server.respond({ ':status': 204 });
    c.close();
  });

  it('a stream\'s writes wait while the socket\'s buffer is full (a client that does not read), and go on after drain', async () => {
    let server: CodecServerStream | undefined;
    onStream = (stream) => {
      server = stream;
      stream.respond({ ':status': 200 });
    };
    // A raw client with the windows wide open (only the socket can hold the writes back), that stops reading.
    const sock = connectTcp(port, '127.0.0.1');
    await new Promise((resolve) => sock.once('connect', resolve));
    const settings = Buffer.alloc(6);
    settings.writeUInt16BE(0x4, 0); // SETTINGS_INITIAL_WINDOW_SIZE
    settings.writeUInt32BE(2 ** 31 - 1, 2);
    const update = Buffer.alloc(4);
    update.writeUInt32BE(2 ** 31 - 1 - 65_535, 0);
    const enc = new HpackEncoder();
    sock.write(Buffer.concat([CLIENT_PREFACE, frame(0x4, 0, 0, settings), frame(0x8, 0, 0, update),
      frame(0x1, 0x5, 1, enc.encode([':method', 'GET', ':scheme', 'http', ':authority', 'a', ':path', '/down']))]));
    for (let waited = 0; server === undefined && waited < 2000; waited += 10) await sleep(10);
    assert.ok(server !== undefined);
    sock.pause();
    const chunk = Buffer.alloc(64 * 1024, 1);
    let written = 0;
    let full = false;
    for (let i = 0; i < 2048 && !full; i++) {
      full = !server.write(chunk);
      written += chunk.length;
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.ok(full, `write() said to wait before ${written} bytes`);
    assert.ok(written < 64 * 1024 * 1024, `it said so within the socket buffers (${written} bytes written)`);
    const drained = new Promise((resolve) => server!.once('drain', resolve));
    // Read again, counting the DATA of stream 1 until its END_STREAM.
    let buf = Buffer.alloc(0);
    let received = 0;
    const ended = new Promise<void>((resolve) => {
      sock.on('data', (d: Buffer) => {
        const { frames, rest } = splitFrames(Buffer.concat([buf, d]));
        buf = Buffer.from(rest);
        for (const f of frames) {
          if (f.type !== 0x0 || f.stream !== 1) continue;
          received += f.payload.length;
          if ((f.flags & 0x1) !== 0) resolve();
        }
      });
    });
    sock.resume();
    await drained;
    server.end();
    await ended;
    assert.equal(received, written, 'every byte written reached the client');
    sock.destroy();
  });

  it('a connection ended for an error while the client still sends: read until the client\'s FIN, so the client reads its GOAWAY', async () => {
    onStream = () => { /* never answered: the resets come first */ };
    const seen = await rapidResetReadingLate(port);
    assert.equal(seen.error, undefined, 'the connection ended with a FIN, not a reset');
    assert.equal(seen.goaway, constants.NGHTTP2_ENHANCE_YOUR_CALM, 'the client read its GOAWAY');
  });

  it('a fault in a stream\'s handling ends its own connection (GOAWAY INTERNAL_ERROR), not the process nor the others', async () => {
    onStream = (stream, fields) => {
      if (fields.includes('/boom')) throw new Error('a fault for the test');
      stream.respond({ ':status': 200 }, { endStream: true });
    };
    const bad = client();
    const goaway = new Promise<number>((resolve) => bad.once('goaway', (code: number) => resolve(code)));
    bad.request({ ':path': '/boom' }, { endStream: true }).on('error', () => {});
    assert.equal(await goaway, constants.NGHTTP2_INTERNAL_ERROR);
    const good = client();
    const status = await new Promise((resolve) => good.request({ ':path': '/fine' }, { endStream: true }).once('response', (h) => resolve(h[':status'])));
    assert.equal(status, 200);
    good.close();
    bad.destroy();
  });
});
