// Istio's TCP metadata exchange on a socket: once per connection, before the application's bytes.
// Each side writes its frame (src/metrics/tcp-exchange-frame.ts) as soon as the handshake selected
// `istio-peer-exchange`, then the peer's frame is taken off the front of what it sends. Envoy's
// filter does the same, whichever side speaks first; what it does with a peer that does not send a
// frame is followed: bytes that do not start with the magic are the application's and go on as they
// came. Bounded where Envoy is not: the frame's size (larger: skipped unread) and the time to read it.
// Only on a mutual TLS connection whose peer's certificate verified (the callers' condition): a
// plaintext client or another TLS client never gets here, so it cannot speak for a workload.
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { readExchangeFrame } from '../../metrics/tcp-exchange-frame.js';
import { attachReader, detachReader, owned } from '../read-buffers.js';
import type { RelayGate } from './relay.js';

/** The ALPN value that selects the exchange. */
export const PEER_EXCHANGE_ALPN = 'istio-peer-exchange';

/** How long the peer's frame may take once the exchange began (Envoy waits without a limit). */
export const EXCHANGE_TIMEOUT_MS = 5_000;

/** What the exchange learnt: the peer's metadata key ('' none), and what the peer sent past its frame. */
export type ExchangeDone = (peerKey: string, readAhead: Buffer | undefined) => void;

/**
 * Reads the peer's frame off `socket` (paused when `done` is called; it reads on for whoever takes it
 * next). Nothing read by the deadline: the connection goes on without metadata. Part of a frame by
 * then: the connection is closed (a stalled exchange; the application must not get half a frame).
 * The peer's end before a whole frame: what came goes on as the application's (Envoy's choice).
 */
export function readPeerFrame(socket: Socket, timeoutMs: number, done: ExchangeDone): void {
  let got: Buffer | undefined;
  /** Bytes of an oversized frame still to be skipped. */
  let skipping = 0;
  let finished = false;
  const finish = (peerKey: string, readAhead: Buffer | undefined): void => {
    if (finished) return;
    finished = true;
    socket.pause();
    detachReader(socket, onRead);
    socket.off('end', onEnd);
    socket.off('close', onClose);
    clearTimeout(timer);
    done(peerKey, readAhead !== undefined && readAhead.length > 0 ? readAhead : undefined);
  };
  const onRead = (bytes: Buffer): void => {
    if (finished) return;
    if (skipping > 0) {
      if (bytes.length <= skipping) {
        skipping -= bytes.length;
        if (skipping === 0) finish('', undefined);
        return;
      }
      const rest = owned(bytes.subarray(skipping));
      skipping = 0;
      finish('', rest);
      return;
    }
    got = got === undefined ? owned(bytes) : Buffer.concat([got, bytes]);
    const read = readExchangeFrame(got);
    switch (read.kind) {
      case 'incomplete':
        return;
      case 'not-exchange':
        finish('', got);
        return;
      case 'oversized':
        if (got.length >= read.frameBytes) {
          finish('', got.subarray(read.frameBytes));
        } else {
          skipping = read.frameBytes - got.length;
          got = undefined;
        }
        return;
      case 'frame':
        finish(read.peerKey ?? '', got.subarray(read.frameBytes));
    }
  };
  const onEnd = (): void => finish('', got);
  const onClose = (): void => {
    finished = true;
    clearTimeout(timer);
  };
  const timer = setTimeout(() => {
    if (got === undefined && skipping === 0) finish('', undefined);
    else socket.destroy();
  }, timeoutMs).unref();
  socket.on('end', onEnd);
  socket.once('close', onClose);
  attachReader(socket, onRead);
  socket.resume();
}

/**
 * The relay gate of an outbound connection to a sidecar that offered the exchange: once the
 * handshake is done, this side's frame goes first if the peer selected it (then the client's bytes
 * flow), and the peer's frame is read before its bytes reach the client. `learnt` hears the peer's
 * metadata key ('' none: not selected, no frame, the connection ended first, or the relay never
 * started) once.
 */
export function upstreamExchangeGate(upstream: TLSSocket, frame: Buffer, timeoutMs: number, learnt: (peerKey: string) => void): RelayGate {
  let told = false;
  const tell = (peerKey: string): void => {
    if (told) return;
    told = true;
    learnt(peerKey);
  };
  // From now, not from the relay's start: a connection that fails first is counted all the same.
  upstream.once('close', () => tell(''));
  return (startOut, startIn) => {
    const secured = (): void => {
      if (upstream.alpnProtocol !== PEER_EXCHANGE_ALPN) {
        tell('');
        startOut();
        startIn(undefined);
        return;
      }
      upstream.write(frame);
      startOut();
      readPeerFrame(upstream, timeoutMs, (peerKey, readAhead) => {
        tell(peerKey);
        startIn(readAhead);
      });
    };
    upstream.once('secureConnect', secured);
    upstream.once('close', () => upstream.off('secureConnect', secured));
  };
}
