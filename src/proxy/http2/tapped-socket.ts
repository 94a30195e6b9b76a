// A socket whose incoming bytes are shown to an inspector before node:http2 reads them. node:http2
// reads a net.Socket's (or TLSSocket's) native handle itself, so no code of ours sees what it
// receives; given a stream without a native handle, node wraps it in its JS stream adapter
// (JSStreamSocket) and reads what that stream emits. That costs CPU per read and per write
// (measured in docs/PERFORMANCE.md, "HTTP/2 strictness"), which is why the proxy does not use it
// yet. It is not a Duplex (a second readable and writable layer) but the few members the adapter
// calls, forwarded to the socket: 'data' is emitted straight from the socket's read (the adapter
// copies it into native memory at once), writes go to the socket as they come. Measured, that was
// no cheaper than a Duplex within the noise: the adapter itself is the cost. The underlying socket stays the connection's identity (addresses, TLS peer certificate,
// ALPN): callers keep reading those from it, not from this object.
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { attachReader, detachReader } from '../read-buffers.js';

/** Sees each chunk read from the peer, in order, before node:http2 does; keeps nothing of it past the call. */
export type Inspector = (bytes: Buffer) => void;

class TappedSocket extends EventEmitter {
  private readonly onRead: (bytes: Buffer) => void;

  constructor(private readonly socket: Socket, inspect: Inspector) {
    super();
    this.onRead = (bytes: Buffer): void => {
      inspect(bytes);
      this.emit('data', bytes);
    };
    socket.on('end', () => this.emit('end'));
    socket.on('close', () => {
      detachReader(socket, this.onRead);
      this.emit('close');
    });
    socket.on('error', (err) => this.emit('error', err));
  }

  /** Called by the adapter when it starts reading: what the socket holds already (a sniffed head unshifted) goes first. */
  resume(): this {
    if (!this.started) {
      this.started = true;
      if (this.socket.readableLength > 0) {
        const held = this.socket.read() as Buffer | null;
        if (held !== null) this.onRead(held);
      }
      attachReader(this.socket, this.onRead);
    }
    this.socket.resume();
    return this;
  }

  private started = false;

  pause(): this {
    this.socket.pause();
    return this;
  }

  get readable(): boolean {
    return this.socket.readable;
  }

  get writable(): boolean {
    return this.socket.writable;
  }

  cork(): void {
    this.socket.cork();
  }

  uncork(): void {
    this.socket.uncork();
  }

  write(chunk: Buffer, done?: (err?: Error | null) => void): boolean {
    return this.socket.write(chunk, done);
  }

  end(done?: () => void): this {
    this.socket.end(done);
    return this;
  }

  destroy(err?: Error): this {
    this.socket.destroy(err);
    return this;
  }
}

/**
 * `socket` (connected, paused) as the stream node:http2 is given, whose reads `inspect` sees first.
 * Bytes the socket already buffered (unshifted) come through first. Typed as the Duplex node's API
 * asks for; node reaches only the members above.
 */
export function tapped(socket: Socket, inspect: Inspector): Duplex {
  return new TappedSocket(socket, inspect) as unknown as Duplex;
}
