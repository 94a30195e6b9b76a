// A rapid-reset flood from a client that keeps sending and reads late: what it finally reads says
// whether the server's GOAWAY reached it, or whether a TCP reset (the server closing while the
// client still sent) took the GOAWAY with it.
import { connect } from 'node:net';
import { HpackEncoder } from '../../src/proxy/http2/hpack/encoder.js';
import { CLIENT_PREFACE } from '../../src/proxy/http2/preface.js';
import { frame, splitFrames } from './h2-frame.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface LateReader {
  /** The socket's error code (EPIPE, ECONNRESET: the server reset the connection), if any. */
  readonly error: string | undefined;
  /** The error code of the GOAWAY read, if one was. */
  readonly goaway: number | undefined;
}

/**
 * Opens a connection to 127.0.0.1:`port` and, without reading, writes 3000 streams each opened and
 * cancelled at once, then a PING each 100 ms twice; then reads until the server closes.
 */
export async function rapidResetReadingLate(port: number): Promise<LateReader> {
  const enc = new HpackEncoder();
  const block = enc.encode([':method', 'GET', ':scheme', 'http', ':authority', 'a', ':path', '/x']);
  const cancel = Buffer.from([0, 0, 0, 8]);
  const flood: Buffer[] = [CLIENT_PREFACE, frame(0x4, 0, 0)];
  for (let i = 0; i < 3000; i++) flood.push(frame(0x1, 0x4, 1 + 2 * i, block), frame(0x3, 0, 1 + 2 * i, cancel));
  const sock = connect(port, '127.0.0.1');
  sock.pause();
  let error: string | undefined;
  sock.on('error', (e: NodeJS.ErrnoException) => { error = e.code; });
  const closed = new Promise((resolve) => sock.once('close', resolve));
  await new Promise((resolve) => sock.once('connect', resolve));
  sock.write(Buffer.concat(flood));
  for (let i = 0; i < 2; i++) {
    await sleep(100);
    if (!sock.destroyed) sock.write(frame(0x6, 0, 0, Buffer.alloc(8)));
  }
  await sleep(100);
  let got = Buffer.alloc(0);
  sock.on('data', (d: Buffer) => { got = Buffer.concat([got, d]); });
  sock.resume();
  await closed;
  const goaway = splitFrames(got).frames.find((f) => f.type === 0x7);
  return { error, goaway: goaway?.payload.readUInt32BE(4) };
}
