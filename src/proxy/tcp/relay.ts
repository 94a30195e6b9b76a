// Raw TCP between two sockets, both ways, with back-pressure and half-close: a FIN from one side is
// passed on as a FIN and the other direction keeps flowing until it ends too. An error or reset on
// either side resets the other (so a client sees a refused upstream as a reset).
import { resetSocket } from '../../net/reset.js';
import type { Socket } from 'node:net';
import { filledShared, isShared, setReader, takeOwnBuffer, writeCopy } from '../read-buffers.js';

export interface RelayEnd {
  /** Called once when both sides are closed; `error` is the first error seen, if any, and `fromB` whether `b` had it. */
  (error: Error | undefined, fromB: boolean): void;
}

/**
 * `from`'s bytes to `to`, with back-pressure, and its FIN after them. An adopted socket
 * (read-buffers.ts) is read without 'data' events: a bulk direction reads into a buffer of its own
 * and writes views of it, so it reads again only once they are out.
 */
export function forwardReads(from: Socket, to: Socket): void {
  let waiting = false;
  /** `to` is gone: its 'drain' never comes, so `from` must not wait for it (else its FIN is never read). */
  let toClosed = false;
  const resume = (): void => {
    if (!waiting) return;
    waiting = false;
    from.resume();
  };
  const wait = (): void => {
    if (toClosed) return;
    waiting = true;
    from.pause();
  };
  // A TLS client's last bytes (an alert) after the server has closed: written to nowhere; `from` reads
  // on to its own end, and closes after what it still has to send is out.
  to.once('close', () => {
    toClosed = true;
    resume();
  });
  const adopted = setReader(from, (bytes) => {
    if (isShared(bytes)) {
      const ok = writeCopy(to, bytes);
      if (filledShared(bytes)) takeOwnBuffer(from);
      if (!ok) wait(); // 'drain' resumes
      return;
    }
    to.write(bytes, resume);
    if (to.writableLength > 0) wait(); // that buffer is read into again only once this write is out
  });
  if (!adopted) {
    from.on('data', (chunk: Buffer) => {
      if (!to.write(chunk)) wait();
    });
  }
  to.on('drain', resume);
  // The end may have been seen already (a FIN before any byte, while the protocol was sniffed).
  if (from.readableEnded) to.end();
  else from.on('end', () => to.end());
}

/**
 * Holds a relay's two directions until something is done first on the connection (the TCP metadata
 * exchange): `startOut` lets `a`'s bytes (and `head`) go to `b`; `startIn` lets `b`'s go to `a`,
 * `readAhead` (bytes of `b`'s read meanwhile) first. Each is called at most once, in either order.
 */
export type RelayGate = (startOut: () => void, startIn: (readAhead: Buffer | undefined) => void) => void;

/**
 * Relays `a` ⇄ `b`; `head` (bytes already read from `a`) is sent to `b` first. With a `gate`, each
 * direction starts when the gate says (errors and closes are handled from the start all the same).
 */
export function relay(a: Socket, b: Socket, head: Buffer | undefined, done: RelayEnd, gate?: RelayGate): void {
  let error: Error | undefined;
  let fromB = false;
  let closed = 0;
  const onClose = (): void => {
    if (++closed === 2) done(error, fromB);
  };
  const onError = (other: Socket) => (err: Error): void => {
    if (error === undefined) {
      error = err;
      fromB = other === a;
    }
    if (!other.destroyed) resetSocket(other);
  };
  a.on('error', onError(b));
  b.on('error', onError(a));
  a.on('close', onClose);
  b.on('close', onClose);
  if (gate === undefined) {
    if (head && head.length > 0) b.write(head);
    forwardReads(a, b);
    forwardReads(b, a);
    a.resume();
    b.resume();
    return;
  }
  let outStarted = false;
  let inStarted = false;
  gate(() => {
    if (outStarted || a.destroyed) return;
    outStarted = true;
    if (head && head.length > 0) b.write(head);
    forwardReads(a, b);
    a.resume();
  }, (readAhead) => {
    if (inStarted || b.destroyed) return;
    inStarted = true;
    if (readAhead) a.write(readAhead);
    forwardReads(b, a);
    b.resume();
  });
  // A side gone while a direction is still held: nobody would read the other's end, so it goes too.
  a.once('close', () => { if (!(outStarted && inStarted) && !b.destroyed) b.destroy(); });
  b.once('close', () => { if (!(outStarted && inStarted) && !a.destroyed) a.destroy(); });
}
