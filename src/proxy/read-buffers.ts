// Accepted connections that read into reused memory instead of a new Buffer and a 'data' event per
// read (net.Socket's `onread`): every read of this thread lands in one shared buffer and goes
// straight to whoever reads the socket now (the sniffer, an HTTP/1 connection, a TCP relay). Node's
// net.Server has no `onread` option, so the accepted handle is moved into a new net.Socket made with
// one; the wrapper Node made is dropped before it ever read (the listener accepts paused).
// A reader keeps nothing of a shared view past its call: it copies (`owned`), or writes it with
// `writeCopy`, which copies into a pooled buffer that comes back once written: a burst of uploads then
// reuses a few buffers instead of leaving a Buffer per read for the garbage collector (measured: their
// memory piled up to ~40 MiB before V8 collected them). A bulk direction (a read that filled the shared
// buffer) may take a larger buffer of its own (`takeOwnBuffer`): fewer reads and no copy, as long as
// its reader stops reading until what it wrote from that buffer is out.
import { Socket, type OnReadOpts } from 'node:net';

const SHARED_SIZE = 64 * 1024;
/** Measured on the raw TCP bench: 256 KiB reads need about a third of the CPU of 64 KiB ones. */
const OWN_SIZE = 256 * 1024;
/** Own buffers alive at once per thread (each relay direction in bulk holds one until it closes). */
const MAX_OWN = 32;

/**
 * Read into by every adopted socket of this thread and by the HTTP/1 upstream connections
 * (upstream-pool.ts); never referenced past a reader's call.
 */
export const sharedReadBuffer = Buffer.allocUnsafeSlow(SHARED_SIZE);
let ownAlive = 0;
/** Copies of shared views on their way out, given back by their write's callback. */
const copies: Buffer[] = [];
/** Pooled copies kept at most (each SHARED_SIZE); beyond, a written copy is left to the collector. */
const MAX_POOLED_COPIES = 64;

/** Takes every read of an adopted socket: a view valid only during the call. */
export type Reader = (bytes: Buffer) => void;

interface Slot {
  reader: Reader | undefined;
  own: Buffer | undefined;
  /** A TLS socket's reads nobody could take yet, oldest first (adoptTlsReads). */
  held?: Buffer[] | undefined;
  /** The TLS socket's end, kept until what is held is taken. */
  endHeld?: (() => void) | undefined;
  /** A TLS socket: it reads into the shared buffer only (TLS hands on at most 16 KiB a read anyway). */
  readonly tls?: true;
}

const slots = new WeakMap<Socket, Slot>();

/** What Node's net.Socket keeps of an accepted connection: its handle, and the server that counts it. */
interface Accepted {
  _handle: unknown;
  _server: unknown;
}

/** The accepted socket's connection in a socket that reads into reused memory (or `socket` itself, if it cannot be). */
export function adoptAccepted(socket: Socket): Socket {
  const old = socket as unknown as Accepted;
  const handle = old._handle;
  if (!handle || socket.destroyed || socket.readableFlowing) return socket;
  const slot: Slot = { reader: undefined, own: undefined };
  const onread: OnReadOpts = {
    buffer: () => slot.own ?? sharedReadBuffer,
    callback: (n: number, buf: Uint8Array): boolean => {
      slot.reader?.((buf as Buffer).subarray(0, n));
      return true;
    },
  };
  // Destroying the old wrapper must neither close the connection nor count it out of its server:
  // server.close() waits for the new one (Node counts a connection out when its socket closes).
  const server = old._server;
  old._handle = null;
  old._server = null;
  socket.destroy();
  // `handle`, `pauseOnCreate` and `onread` are net.Socket constructor options @types/node does not list.
  const options = { handle, allowHalfOpen: true, pauseOnCreate: true, readable: true, writable: true, onread };
  const adopted = new Socket(options as ConstructorParameters<typeof Socket>[0]);
  (adopted as unknown as Accepted)._server = server;
  slots.set(adopted, slot);
  adopted.once('close', () => {
    if (slot.own) ownAlive--;
    slot.own = undefined;
  });
  return adopted;
}

/** Where net.Socket keeps an `onread` buffer and callback: under symbols of Node's own, found once on a probe. */
interface OnreadKeys {
  readonly buffer: symbol;
  readonly callback: symbol;
}
let onreadKeys: OnreadKeys | null | undefined;

function findOnreadKeys(): OnreadKeys | null {
  if (onreadKeys !== undefined) return onreadKeys;
  const probe = new Socket({ onread: { buffer: Buffer.alloc(1), callback: () => true } } as ConstructorParameters<typeof Socket>[0]);
  const named = new Map(Object.getOwnPropertySymbols(probe).map((s) => [s.description, s]));
  probe.destroy();
  const buffer = named.get('kBuffer');
  const callback = named.get('kBufferCb');
  onreadKeys = buffer && callback ? { buffer, callback } : null;
  return onreadKeys;
}

/** The stream handle under a socket, as far as reading into reused memory goes. */
interface UserBufferHandle {
  useUserBuffer?: (buffer: Uint8Array) => void;
}

/**
 * Makes a TLS socket that wraps an accepted connection (made by us, so Node gave it no `onread`)
 * read its plaintext into the shared buffer, as adopted sockets do: no Buffer, no 'data' event and
 * no stream bookkeeping per read. False when this Node does not allow it: the socket then reads with
 * 'data' events, as before. Unlike a TCP socket, a TLS socket hands on everything it decrypted
 * from one read of the network even after a pause: what comes while it is paused (or while nobody
 * reads it) is copied and held, and given to its reader, in order and before its end, once it flows.
 */
export function adoptTlsReads(socket: Socket): boolean {
  const keys = findOnreadKeys();
  const handle = (socket as unknown as { _handle?: UserBufferHandle | null })._handle;
  if (!keys || typeof handle?.useUserBuffer !== 'function' || slots.has(socket) || socket.destroyed) return false;
  const slot: Slot = { reader: undefined, own: undefined, tls: true };
  const fields = socket as unknown as Record<symbol, unknown>;
  fields[keys.buffer] = sharedReadBuffer;
  fields[keys.callback] = (n: number): boolean => {
    const view = sharedReadBuffer.subarray(0, n);
    if (slot.held === undefined && slot.reader !== undefined && !socket.isPaused()) {
      slot.reader(view);
      return true;
    }
    (slot.held ??= []).push(Buffer.from(view));
    return false; // Node stops reading the network until the socket is resumed
  };
  // Node ends the stream with push(null): held back while reads are held, or the end would come first.
  const push = socket.push;
  socket.push = function (chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk !== null || slot.held === undefined) return push.call(this, chunk, encoding);
    slot.endHeld = () => {
      push.call(this, null);
      socket.read(0);
    };
    return false;
  };
  handle.useUserBuffer(sharedReadBuffer);
  slots.set(socket, slot);
  socket.on('resume', () => giveHeld(socket, slot));
  return true;
}

/** What a TLS socket held, to its reader while it flows; then its end, if that came meanwhile, or more reads. */
function giveHeld(socket: Socket, slot: Slot): void {
  if (slot.held === undefined) return;
  while (slot.held !== undefined && slot.reader !== undefined && !socket.isPaused() && !socket.destroyed) {
    const next = slot.held.shift()!;
    if (slot.held.length === 0) slot.held = undefined;
    slot.reader(next);
  }
  if (slot.held !== undefined || socket.isPaused() || socket.destroyed) return;
  const end = slot.endHeld;
  slot.endHeld = undefined;
  if (end) end();
  else socket.resume(); // reading stopped when the first of them was held
}

/**
 * `socket` goes to a reader of its own handle (node:http2's session), which reads what the socket's
 * stream buffered first: what a TLS socket held goes there, in order (the socket paused, or a
 * flowing stream would hand it to nobody), and its reader is let go.
 */
export function returnHeld(socket: Socket): void {
  const slot = slots.get(socket);
  if (!slot) return;
  slot.reader = undefined;
  const held = slot.held;
  if (held === undefined) return;
  slot.held = undefined;
  socket.pause();
  for (const bytes of held) socket.push(bytes);
  const end = slot.endHeld;
  slot.endHeld = undefined;
  end?.();
}

/**
 * Whoever reads `socket` from now on (undefined: nobody; keep it paused). False when the socket
 * was not adopted: the caller reads it with 'data' events.
 */
export function setReader(socket: Socket, reader: Reader | undefined): boolean {
  const slot = slots.get(socket);
  if (!slot) return false;
  slot.reader = reader;
  if (reader !== undefined && slot.held !== undefined) process.nextTick(giveHeld, socket, slot);
  return true;
}

/** `reader` takes `socket`'s reads from now on: views of the shared buffer if adopted, else 'data' events. */
export function attachReader(socket: Socket, reader: Reader): void {
  if (!setReader(socket, reader)) socket.on('data', reader);
}

/** `reader` (given to attachReader) takes no more of `socket`'s reads. */
export function detachReader(socket: Socket, reader: Reader): void {
  if (!setReader(socket, undefined)) socket.off('data', reader);
}

/** Whether `bytes` is a view of the shared read buffer (to copy before keeping it). */
export function isShared(bytes: Buffer): boolean {
  return bytes.buffer === sharedReadBuffer.buffer;
}

/** `bytes`, copied if it is a view of the shared read buffer. */
export function owned(bytes: Buffer): Buffer {
  return isShared(bytes) ? Buffer.from(bytes) : bytes;
}

/**
 * Writes `bytes` to `to`; a view of the shared read buffer goes as a pooled copy, back in the pool
 * once written. Answers what `write` answers (false: wait for 'drain').
 */
export function writeCopy(to: Socket, bytes: Buffer, done?: () => void): boolean {
  if (!isShared(bytes)) return done ? to.write(bytes, done) : to.write(bytes);
  const copy = takePooled();
  bytes.copy(copy);
  return to.write(copy.subarray(0, bytes.length), () => {
    givePooled(copy);
    done?.();
  });
}

/** The largest write that fits a pooled buffer (`takePooled`). */
export const POOLED_SIZE = SHARED_SIZE;

/** A pooled buffer of POOLED_SIZE bytes to write from; `givePooled` once the write is done. */
export function takePooled(): Buffer {
  return copies.pop() ?? Buffer.allocUnsafeSlow(SHARED_SIZE);
}

export function givePooled(buf: Buffer): void {
  if (copies.length < MAX_POOLED_COPIES) copies.push(buf);
}

/** Lets the pooled buffers go (the process is quiet: the next burst makes new ones). */
export function releasePooled(): void {
  copies.length = 0;
}

/** Whether a read of `n` bytes filled the shared buffer (the direction is in bulk). */
export function filledShared(bytes: Buffer): boolean {
  return bytes.length === SHARED_SIZE && isShared(bytes);
}

/**
 * From its next read on, `socket` reads into a buffer of its own, kept until it closes; false when
 * none is to be had. Its reader must not read again while a write of a view of it is pending.
 */
export function takeOwnBuffer(socket: Socket): boolean {
  const slot = slots.get(socket);
  if (!slot || slot.tls || slot.own || ownAlive >= MAX_OWN || socket.destroyed) return slot?.own !== undefined;
  slot.own = Buffer.allocUnsafeSlow(OWN_SIZE);
  ownAlive++;
  return true;
}
