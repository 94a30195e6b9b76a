// Writes on a plain TCP socket straight to its handle, past node's Writable stream. Each
// `socket.write` builds a native write request object and runs the stream's bookkeeping (state,
// buffering, a callback turn): ~0.2–0.4 µs of user time per write, two writes per proxied HTTP/1.1
// request. When the kernel takes the bytes at once (nearly always), none of that is needed: one
// request object serves every such write, and only a write the kernel cannot take whole keeps one
// of its own until libuv has written the rest.
//
// Order: a direct write goes only when nothing waits in the stream (`writableLength` 0, not
// connecting); what the stream writes later queues behind it in libuv, in order. Anything else
// (TLS, a socket still connecting, bytes already queued in the stream) is written by `socket.write`,
// as before. The handle counts what it writes, so `socket.bytesWritten` includes these bytes.
//
// The request object comes from node's own stream binding (`process.binding('stream_wrap')`,
// deprecated in documentation only); if a node version ever lacks it, every write goes through
// `socket.write`.
import type { Socket } from 'node:net';
import { getSystemErrorName } from 'node:util';

/** What the handle keeps of a write: node's WriteWrap (only its JS side is touched here). */
interface WriteRequest {
  handle: StreamHandle;
  oncomplete: (status: number) => void;
  /** A buffer written asynchronously stays referenced until libuv is done with it. */
  buffer: Buffer | null;
}

/** The part of a TCP handle used here. */
interface StreamHandle {
  writeLatin1String(req: WriteRequest, data: string): number;
  writeBuffer(req: WriteRequest, data: Uint8Array): number;
}

interface StreamWrapBinding {
  readonly WriteWrap: new () => WriteRequest;
  readonly streamBaseState: Int32Array;
  readonly kLastWriteWasAsync: number;
}

const binding = loadBinding();

function loadBinding(): StreamWrapBinding | undefined {
  try {
    const b = (process as unknown as { binding(name: string): Partial<StreamWrapBinding> }).binding('stream_wrap');
    if (typeof b.WriteWrap !== 'function' || !(b.streamBaseState instanceof Int32Array) || typeof b.kLastWriteWasAsync !== 'number') return undefined;
    return b as StreamWrapBinding;
  } catch {
    return undefined;
  }
}

/** Whether direct writes are available in this node (false: DirectWriter always uses socket.write). */
export const directWritesAvailable = binding !== undefined;

const ignoreCompletion = (): void => {};

/** One socket's direct writes: a reusable request and the count of writes libuv still holds. */
export class DirectWriter {
  private req: WriteRequest | undefined;
  /** Writes the kernel did not take whole, still queued in libuv. */
  private queued = 0;
  /**
   * The socket's handle once it was seen to be a TCP one (node's `TCP` wrap). A TLS socket's handle
   * encrypts, and a socket over another stream (a Duplex, a pipe) has a handle of another kind:
   * their writes stay with the stream.
   */
  private tcp: StreamHandle | null = null;

  /** `drained`: called once the writes that made write() answer false are all out (as 'drain' for the stream's). */
  constructor(private readonly socket: Socket, private readonly drained: () => void = ignoreCompletion) {}

  /**
   * Writes `data` (a string as latin-1). True when it is all with the kernel, or queued below the
   * stream's limit; false when the caller should wait: for the stream's 'drain', or for `drained`.
   * `written` is called once the bytes are out of this process's hands (at once, or at completion).
   */
  write(data: string | Buffer, written?: () => void): boolean {
    const s = this.socket;
    const handle = (s as unknown as { _handle: StreamHandle | null })._handle;
    if (handle !== this.tcp && handle !== null && isTcpHandle(s, handle)) this.tcp = handle;
    if (handle !== this.tcp || handle === null || s.writableLength !== 0 || s.connecting || !s.writable) {
      const ok = written === undefined ? (typeof data === 'string' ? s.write(data, 'latin1') : s.write(data)) : s.write(data, 'latin1', written);
      // The stream does not count what libuv holds of the direct writes: those still make the caller wait.
      return ok && this.queued === 0;
    }
    const b = binding!;
    const req = this.req ?? newRequest(b, handle);
    const err = typeof data === 'string' ? handle.writeLatin1String(req, data) : handle.writeBuffer(req, data);
    if (err !== 0) {
      // As the stream does with a write that failed at once: the socket ends with the error on the
      // next tick ('error', then 'close'), not under the caller's feet.
      this.req = req;
      process.nextTick(destroyWith, s, writeError(err));
      return false;
    }
    if (b.streamBaseState[b.kLastWriteWasAsync] === 0) {
      this.req = req;
      written?.();
      return this.queued === 0;
    }
    // libuv holds the rest: this request is that write's until it completes.
    this.req = undefined;
    this.queued++;
    if (typeof data !== 'string') req.buffer = data;
    req.oncomplete = (status: number): void => {
      req.buffer = null;
      this.queued--;
      if (status < 0 && !s.destroyed) s.destroy(writeError(status));
      written?.();
      if (this.queued === 0 && !s.destroyed) this.drained();
    };
    return false;
  }
}

function isTcpHandle(s: Socket, handle: StreamHandle): boolean {
  return binding !== undefined && (s as { encrypted?: boolean }).encrypted !== true && (handle as { constructor?: { name?: string } }).constructor?.name === 'TCP';
}

function destroyWith(s: Socket, err: Error): void {
  if (!s.destroyed) s.destroy(err);
}

function newRequest(b: StreamWrapBinding, handle: StreamHandle): WriteRequest {
  const req = new b.WriteWrap();
  req.handle = handle;
  req.oncomplete = ignoreCompletion;
  req.buffer = null;
  return req;
}

/** The error a failed write ends the socket with, named as node names it (`write EPIPE`). */
function writeError(status: number): NodeJS.ErrnoException {
  let code: string;
  try {
    code = getSystemErrorName(status);
  } catch {
    code = `errno ${status}`;
  }
  const e: NodeJS.ErrnoException = new Error(`write ${code}`);
  e.code = code;
  e.errno = status;
  e.syscall = 'write';
  return e;
}
