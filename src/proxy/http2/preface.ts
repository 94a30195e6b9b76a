// Whether a connection speaks HTTP/2 with prior knowledge, from its first bytes: the 24-byte client
// preface, or anything else (HTTP/1.x). For ports that serve both (the gateway's plaintext ports,
// as Envoy's AUTO codec does); the sidecar's listeners sniff every protocol at once (tcp/sniff.ts).
// And the server's side: an HTTP/2 server's first bytes (its SETTINGS) are not a protocol where the
// server speaks first. Pure, but for byPreface.
import type { Socket } from 'node:net';
import { attachReader, detachReader, owned } from '../read-buffers.js';

export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** 'h2': the whole preface; 'http1': bytes that cannot begin it; undefined: a prefix of it so far. */
export function prefaceKind(head: Buffer): 'h2' | 'http1' | undefined {
  const n = Math.min(head.length, CLIENT_PREFACE.length);
  if (head.compare(CLIENT_PREFACE, 0, n, 0, n) !== 0) return 'http1';
  return n === CLIENT_PREFACE.length ? 'h2' : undefined;
}

/**
 * Whether a server's first bytes are an HTTP/2 SETTINGS frame (stream 0, no ACK flag, a whole number
 * of 6-byte settings): true, false, or 'maybe' (fewer than the 9 bytes of a frame header so far).
 */
export function http2Settings(b: Buffer): boolean | 'maybe' {
  if (b.length >= 3 && b.readUIntBE(0, 3) % 6 !== 0) return false;
  if (b.length >= 4 && b[3] !== 0x04) return false;
  if (b.length >= 5 && b[4] !== 0x00) return false;
  if (b.length < 9) return 'maybe';
  return b.readUInt32BE(5) === 0;
}

/**
 * Reads until the first bytes tell, then hands the socket on (paused) with what was read. A client
 * that closes first, or says nothing for `idleMs`, is closed.
 */
export function byPreface(socket: Socket, idleMs: number, then: (kind: 'h2' | 'http1', head: Buffer) => void): void {
  let head: Buffer = Buffer.alloc(0);
  const timer = setTimeout(() => socket.destroy(), idleMs).unref();
  const stop = (): void => {
    clearTimeout(timer);
    detachReader(socket, onData);
    socket.off('end', onEnd);
    socket.pause();
  };
  const onData = (chunk: Buffer): void => {
    head = head.length === 0 ? owned(chunk) : Buffer.concat([head, chunk]);
    const kind = prefaceKind(head);
    if (kind === undefined) return;
    stop();
    then(kind, head);
  };
  const onEnd = (): void => {
    stop();
    if (head.length > 0) then('http1', head); // the HTTP/1 path answers what it can of it
    else socket.destroy();
  };
  attachReader(socket, onData);
  socket.on('end', onEnd);
  socket.resume();
}
