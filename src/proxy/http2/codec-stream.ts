// What the upstream sessions (codec-session.ts) and the client's sessions (codec-server.ts) share on
// our frame layer: a stream as the exchange uses node's Http2Stream (its body read with pause and
// resume and the flow-control window given back only as the reader takes the bytes, its own body
// written with back-pressure, its end and trailers, its reset), and a session that feeds its socket
// to the connection, writes what the connection makes, and tells its streams when the socket can
// take more. node's stream classes cost most of an HTTP/2 request through the proxy
// (docs/PERFORMANCE.md); these do only what the exchange asks of them.
import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import { H2Connection, type H2ConnectionError, type H2Events, type H2Settings, type H2Stream } from './codec/connection.js';
import type { BlockFacts } from './codec/message-rules.js';
import { ErrorCode } from './codec/frames.js';
import { isShared } from '../read-buffers.js';
import { scope } from '../../log/logger.js';

const log = scope('default');

export const END_STREAM_FLAG = 0x1;
export const NO_DATA = Buffer.alloc(0);
/** No trailer fields: the stream ends with an empty DATA frame instead. */
export const NO_FIELDS: readonly string[] = Object.freeze([]);
/** Bytes waiting in a socket's write buffer past which its streams' writes say "wait for drain". */
const STREAM_WRITE_LIMIT = 64 * 1024;
/** Past this the socket is not read either (a peer that never reads cannot make control answers pile up). */
const READ_STOP_LIMIT = 1024 * 1024;
/**
 * Once our end of a connection is written, how long a peer that still sends is read (its bytes
 * dropped) waiting for its FIN before the socket is closed anyway.
 */
const LINGER_MS = 2_000;

/** Appends the regular fields of a node header object (names lower-cased, repeated values kept) to `out`. */
export function pushRegularFields(out: string[], h: OutgoingHttpHeaders): string[] {
  for (const name of Object.keys(h)) {
    if (name.charCodeAt(0) === 0x3a) continue;
    const v = h[name];
    if (v === undefined) continue;
    const lower = name.toLowerCase();
    if (Array.isArray(v)) for (const x of v) out.push(lower, String(x));
    else out.push(lower, String(v));
  }
  return out;
}

/**
 * Who takes a stream's readable side by direct calls rather than events: one object (the exchange's
 * upstream leg) instead of a listener and a closure for each event of each stream. A stream with a
 * sink emits no 'data', 'end' nor 'close'.
 */
export interface StreamSink {
  /** A chunk of the peer's body, once the stream flows (resume()); the sink may pause() it. */
  data(chunk: Buffer): void;
  /** The readable side ended: END_STREAM, or cut by a reset (`aborted`). */
  end(): void;
  /** The stream is over (`rstCode`). */
  close(): void;
}

type Listener = (arg?: any) => void;
/** A once() listener: the listener it wraps, so that it can be removed by it. */
type OnceListener = Listener & { listener?: Listener };

/**
 * A stream's events (on, once, off, emit), as node's EventEmitter keeps them, without its state per
 * object: EventEmitter makes every stream a listener table in dictionary mode (the largest part of a
 * stream object), while most of our streams get no listener at all (an upstream stream talks to its
 * sink, a client's stream to its watcher) and the others one or two. Listeners are called in the
 * order they were added, those added during an emit not in it; removing one takes the last added
 * of that function (EventEmitter's rules). A stream emits no 'error'.
 */
export class StreamEvents {
  private listeners: Map<string | symbol, Listener[]> | undefined = undefined;

  on(event: string | symbol, fn: Listener): this {
    const map = (this.listeners ??= new Map());
    const list = map.get(event);
    if (list === undefined) map.set(event, [fn]);
    else list.push(fn);
    return this;
  }

  once(event: string | symbol, fn: Listener): this {
    const wrapper: OnceListener = (arg?: unknown) => {
      this.removeListener(event, wrapper);
      fn.call(this, arg);
    };
    wrapper.listener = fn;
    return this.on(event, wrapper);
  }

  removeListener(event: string | symbol, fn: Listener): this {
    const list = this.listeners?.get(event);
    if (list === undefined) return this;
    for (let i = list.length - 1; i >= 0; i--) {
      const l = list[i] as OnceListener;
      if (l === fn || l.listener === fn) {
        if (list.length === 1) this.listeners!.delete(event);
        else list.splice(i, 1);
        break;
      }
    }
    return this;
  }

  off(event: string | symbol, fn: Listener): this {
    return this.removeListener(event, fn);
  }

  listenerCount(event: string | symbol): number {
    return this.listeners?.get(event)?.length ?? 0;
  }

  /** Calls the listeners of `event` with `arg`: whether there were any. */
  emit(event: string | symbol, arg?: unknown): boolean {
    const list = this.listeners?.get(event);
    if (list === undefined) return false;
    if (list.length === 1) list[0]!.call(this, arg);
    else for (const fn of list.slice()) fn.call(this, arg);
    return true;
  }
}

/**
 * One stream, as the exchange uses node's: its peer's body read ('data', 'end', pause, resume; not
 * flowing until a 'data' listener or resume(), as node's Readable), its own written (write, end,
 * trailers when asked for), 'close' once both are over or it was reset (`rstCode`).
 */
export class CodecStream extends StreamEvents {
  rstCode: number | undefined = undefined;
  destroyed = false;
  closed = false;
  /** The peer's message was cut short (reset or the connection gone before its END_STREAM). */
  aborted = false;
  readableEnded = false;
  /** This side's message ended (END_STREAM or trailers sent). */
  protected ended = false;
  /** Trailers are asked for ('wantTrailers') at this side's end. */
  protected trailersWanted = false;
  /** null: nobody reads yet (held); false: paused; true: flowing. */
  private flowing: boolean | null = null;
  private held: Buffer[] | undefined;
  private heldEnd = false;
  /** Set: the readable side and the close go to it, not to listeners. */
  sink: StreamSink | undefined = undefined;

  constructor(protected readonly session: CodecSocketSession, readonly h2: H2Stream | undefined) {
    super();
  }

  override on(event: string | symbol, fn: Listener): this {
    super.on(event, fn);
    if (event === 'data' && this.flowing === null) this.resume();
    return this;
  }

  /** This side's body: false when it must wait for a 'drain' (the peer's window, or the socket's buffer). */
  write(chunk: Buffer): boolean {
    if (this.h2 === undefined || this.ended || this.closed) return true;
    const waiting = this.session.conn.data(this.h2, chunk, false);
    return this.session.roomFor(this) && waiting === 0;
  }

  /** This side's end: END_STREAM, or trailers when asked for ('wantTrailers', then sendTrailers). */
  end(chunk?: Buffer | string): this {
    if (chunk !== undefined && chunk.length > 0) this.write(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    if (this.h2 === undefined || this.ended || this.closed) return this;
    if (this.trailersWanted) {
      this.askTrailers();
      if (!this.ended) this.sendTrailers(NO_FIELDS);
      return this;
    }
    this.ended = true;
    this.session.conn.data(this.h2, NO_DATA, true);
    return this;
  }

  /** The body is written and trailers were asked for: 'wantTrailers' (the owner answers with sendTrailers). */
  protected askTrailers(): void {
    this.emit('wantTrailers');
  }

  /** The readable side ended, for a stream without a sink. */
  protected endEvent(): void {
    this.emit('end');
  }

  /** The stream is over, for a stream without a sink. */
  protected closeEvent(): void {
    this.emit('close');
  }

  /** This side's trailers (regular fields, names in lower case), or END_STREAM when there are none. */
  sendTrailers(fields: readonly string[]): void {
    if (this.h2 === undefined || this.ended || this.closed) return;
    this.ended = true;
    if (fields.length === 0) this.session.conn.data(this.h2, NO_DATA, true);
    else this.session.conn.headers(this.h2, fields, true);
  }

  pause(): this {
    this.flowing = false;
    return this;
  }

  /** Reading again: what arrived meanwhile is delivered (its window given back) until the reader pauses. */
  resume(): this {
    if (this.flowing === true) return this;
    this.flowing = true;
    const held = this.held;
    if (held !== undefined) {
      while (held.length > 0 && this.flowing) this.deliver(held.shift()!);
      if (held.length > 0) return this;
      this.held = undefined;
    }
    if (this.heldEnd && this.flowing) this.finish();
    return this;
  }

  /** Resets the stream (CANCEL by default): RST_STREAM at once, never an END_STREAM before it; it closes. */
  close(code: number = ErrorCode.CANCEL): void {
    if (this.closed) return;
    // A stream the frame layer is done with (both ways ended, its last DATA held here for a reader
    // that paused) has nothing to reset: it closes here.
    if (this.h2 !== undefined && !this.h2.closed) this.session.conn.reset(this.h2, code, 'cancelled by the proxy');
    this.closeWith(code);
  }

  destroy(): this {
    if (!this.closed) this.close(ErrorCode.CANCEL);
    this.destroyed = true;
    return this;
  }

  // ---- from the session

  /** The peer's DATA (a view of a read: kept only as a copy when the read's memory is reused). */
  onData(data: Buffer, end: boolean): void {
    if (data.length > 0) {
      if (this.flowing !== true || this.held !== undefined) (this.held ??= []).push(isShared(data) ? Buffer.from(data) : data);
      else this.deliver(data);
    }
    if (!end) return;
    // An end with nothing held ends the readable side now, read or not (as there is nothing to lose).
    if (this.held !== undefined) this.heldEnd = true;
    else this.finish();
  }

  private deliver(data: Buffer): void {
    const chunk = isShared(data) ? Buffer.from(data) : data;
    if (this.sink !== undefined) this.sink.data(chunk);
    else this.emit('data', chunk);
    if (this.h2 !== undefined) this.session.conn.consumed(this.h2, data.length);
  }

  /** The peer's END_STREAM, after every byte was delivered: 'end', then 'close' once this side is over too. */
  private finish(): void {
    if (this.readableEnded) return;
    this.heldEnd = false;
    this.readableEnded = true;
    if (this.sink !== undefined) this.sink.end();
    else this.endEvent();
    if (this.h2 === undefined || this.h2.closed) this.closeWith(ErrorCode.NO_ERROR);
  }

  /** The stream is over: `code` (a reset's, or NO_ERROR). */
  closeWith(code: number): void {
    if (this.closed) return;
    this.closed = true;
    this.destroyed = true;
    this.rstCode = code;
    // A reset before the peer's end: the readable side ends, marked as cut short whatever the code
    // (node marks it only while our side was open: a RST_STREAM NO_ERROR after our end looked whole).
    if (!this.readableEnded) {
      this.aborted = true;
      this.readableEnded = true;
      this.held = undefined;
      if (this.sink !== undefined) this.sink.end();
      else this.endEvent();
    }
    if (this.sink !== undefined) this.sink.close();
    else this.closeEvent();
  }
}

/**
 * A connection of our frame layer on a socket: what is read goes to the connection, what it makes is
 * written (one write, or a corked batch), its streams told when the socket can take more. The
 * subclass says what a header block means on its side.
 */
export abstract class CodecSocketSession extends EventEmitter {
  readonly conn: H2Connection;
  closed = false;
  destroyed = false;
  protected closing = false;
  /** Streams told to wait for the socket's buffer to drain. */
  private waiting: Set<CodecStream> | undefined;
  private readStopped = false;
  /** Our end of the socket is written or being written: what the peer still sends is dropped. */
  private socketEnding = false;
  /** When the last stream ended (performance.now()). */
  private idleSince = performance.now();

  constructor(protected readonly socket: Socket, server: boolean, settings: H2Settings) {
    super();
    const events: H2Events = {
      headers: (s, fields, facts, end) => this.onHeaders(s, fields, facts, end),
      data: (s, data, end) => {
        const cs = s.ctx as CodecStream | undefined;
        if (cs !== undefined) cs.onData(data, end);
        else if (data.length > 0) this.conn.consumed(s, data.length);
      },
      reset: (s, code) => {
        (s.ctx as CodecStream | undefined)?.closeWith(code);
        this.streamGone();
      },
      writable: (s) => {
        const cs = s.ctx as CodecStream | undefined;
        if (cs !== undefined && this.roomFor(cs)) cs.emit('drain');
      },
      done: (s) => {
        const cs = s.ctx as CodecStream | undefined;
        if (cs !== undefined && cs.readableEnded) cs.closeWith(ErrorCode.NO_ERROR);
        this.streamGone();
      },
      settings: (max) => this.onSettings(max),
      goaway: () => this.onGoaway(),
      closed: (error) => this.onClosed(error),
    };
    this.conn = new H2Connection(server, (chunks) => this.out(chunks), events, settings);
    socket.on('drain', () => this.drained());
  }

  /** A header block: a new stream's request or response, or trailers. */
  protected abstract onHeaders(s: H2Stream, fields: string[], facts: BlockFacts, endStream: boolean): void;
  protected onSettings(_maxConcurrentStreams: number | undefined): void { /* a server has nothing to do with them */ }
  protected onGoaway(): void { /* idem */ }

  /**
   * What the socket reads (a view, perhaps of reused memory: the connection keeps none of it). The
   * exchanges run inside this call (each frame's events): a fault of theirs that escapes would leave
   * the rest of the read unread and the connection out of step with its peer, so it ends this
   * connection (GOAWAY INTERNAL_ERROR, logged with its stack) and no other.
   */
  protected readonly received = (bytes: Buffer): void => {
    if (this.socketEnding) return;
    try {
      this.conn.receive(bytes);
      this.afterRead();
    } catch (err) {
      log.error(`HTTP/2 connection ended by a fault in its handling (the proxy goes on): ${(err as Error).message}`, { stack: (err as Error).stack });
      this.destroy(err as Error, ErrorCode.INTERNAL_ERROR);
      return;
    }
    this.maybeEnd();
  };

  /** A read was taken in whole. */
  protected afterRead(): void { /* a server hands on the streams it opened */ }

  /** How long no stream has been open (ms; 0 while one is): what the idle time-out reads. */
  get idleFor(): number {
    return this.conn.openStreams === 0 ? performance.now() - this.idleSince : 0;
  }

  private streamGone(): void {
    if (this.conn.openStreams === 0) this.idleSince = performance.now();
    this.maybeEnd();
  }

  /** Whether a stream may write more now; false: it is told 'drain' when the socket's buffer empties. */
  roomFor(stream: CodecStream): boolean {
    if (this.socket.writableLength < STREAM_WRITE_LIMIT) return true;
    (this.waiting ??= new Set()).add(stream);
    return false;
  }

  private out(chunks: Buffer[]): void {
    const socket = this.socket;
    if (socket.destroyed) return;
    if (chunks.length === 1) {
      socket.write(chunks[0]!);
    } else {
      socket.cork();
      for (const c of chunks) socket.write(c);
      socket.uncork();
    }
    if (!this.readStopped && socket.writableLength > READ_STOP_LIMIT) {
      this.readStopped = true;
      socket.pause();
    }
  }

  private drained(): void {
    if (this.readStopped) {
      this.readStopped = false;
      this.socket.resume();
    }
    const waiting = this.waiting;
    if (waiting === undefined) return;
    this.waiting = undefined;
    for (const s of waiting) if (!s.closed) s.emit('drain');
  }

  /** The connection is over (every stream was reset first): 'error' when it broke, then 'close'. */
  protected onClosed(error: H2ConnectionError | NodeJS.ErrnoException | undefined): void {
    if (this.closed) return;
    this.closed = true;
    this.destroyed = true;
    this.waiting = undefined;
    if (error !== undefined) this.emit('error', this.errorOf(error));
    if (!this.socket.destroyed) this.endSocket();
    this.emit('close');
  }

  /** The error a session says it closed with. */
  protected errorOf(error: H2ConnectionError | NodeJS.ErrnoException): Error {
    return error;
  }

  /** Graceful: GOAWAY, no new stream; the socket ends when the last one is done. */
  close(): void {
    if (this.closed || this.closing) return;
    this.closing = true;
    this.conn.goaway(ErrorCode.NO_ERROR);
    this.maybeEnd();
  }

  /** At once (`code` other than NO_ERROR: GOAWAY with it first); every stream is reset. */
  destroy(error?: Error, code: number = ErrorCode.NO_ERROR): void {
    if (this.destroyed) return;
    if (code !== ErrorCode.NO_ERROR) {
      this.conn.goaway(code, error?.message); // ends the connection: the socket ends once the GOAWAY is out
      return;
    }
    this.destroyed = true;
    this.conn.end();
    this.socket.destroy();
  }

  protected maybeEnd(): void {
    if (this.closing && !this.closed && this.conn.openStreams === 0) {
      this.conn.flush();
      this.endSocket();
    }
  }

  /**
   * Our end of the socket: its FIN once what is written is out. A peer still sending is read (its
   * bytes dropped) until its own FIN, LINGER_MS at most: a socket closed while its peer still sends
   * answers with a TCP reset, the peer's next write fails, and its socket is destroyed with our
   * GOAWAY unread in it (the reason the peer would otherwise never learn).
   */
  private endSocket(): void {
    if (this.socketEnding) return;
    this.socketEnding = true;
    const socket = this.socket;
    socket.end();
    if (socket.readableEnded) {
      socket.destroySoon();
      return;
    }
    if (this.readStopped) {
      this.readStopped = false;
      socket.resume();
    }
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
    socket.once('end', () => socket.destroySoon());
    socket.once('close', () => clearTimeout(timer));
  }
}
