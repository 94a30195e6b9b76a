// Whether a connection speaks HTTP/2 with prior knowledge, from its first bytes: the 24-byte client
// preface, or anything else (HTTP/1.x). For ports that serve both (the gateway's plaintext ports,
// as Envoy's AUTO codec does); the sidecar's listeners sniff every protocol at once (tcp/sniff.ts).
import type { Socket } from 'node:net';

export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** 'h2': the whole preface; 'http1': bytes that cannot begin it; undefined: a prefix of it so far. */
export function prefaceKind(head: Buffer): 'h2' | 'http1' | undefined {
  const n = Math.min(head.length, CLIENT_PREFACE.length);
  if (head.compare(CLIENT_PREFACE, 0, n, 0, n) !== 0) return 'http1';
  return n === CLIENT_PREFACE.length ? 'h2' : undefined;
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
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.pause();
  };
  const onData = (chunk: Buffer): void => {
    head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
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
  socket.on('data', onData);
  socket.on('end', onEnd);
  socket.resume();
}
