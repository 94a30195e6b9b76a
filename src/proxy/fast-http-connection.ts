// One client connection on the fast HTTP/1.1 path: its request parser (reading the socket's handle
// directly when it can), the requests in arrival order, and the bytes this turn produced for the
// client (written in one write). Requests are answered one at a time, in order: the next pipelined
// request is decided and sent upstream when the previous response is complete; meanwhile at most
// one more is read. A request this path does not take (Upgrade, CONNECT, Expect, not HTTP/1.1) is
// handed to the node:http path at that request's boundary, with the connection: earlier responses
// finish first, reading stops, and the head (written out again) plus the unread bytes go along.
import type { Socket } from 'node:net';
import { scope } from '../log/logger.js';
import type { ForwardTarget, LocalReply, RequestDecider, Verdict } from './http-handler.js';
import { forwardedHeaders, invalidEdit, requestHead, type ForwardedHeaders } from './http-headers.js';
import {
  closeParserLater, consumableHandle, createParser, HEAD_CONTINUE, HEAD_STOP,
  type ConsumableHandle, type NativeParser, type ParseError, type ParserCallbacks,
} from './http-parser.js';
import { BAD_REQUEST, decisionFailed, httpDate, isConnectFailure, replyBytes, upstreamFailureBody, UPSTREAM_FAILURE } from './http-replies.js';
import { RequestView } from './request-view.js';
import type { ResponseHead } from './response-parser.js';
import type { Endpoint } from './socket-options.js';
import type { DirectionStats } from './stats.js';
import { poolKey, type ResponseSink, type UpstreamConnection, type UpstreamPool } from './upstream-pool.js';
import { sourceFor, type UpstreamMode } from './upstream.js';

const log = scope('default');

/** Request body held while its request waits for a verdict or an upstream; past this the client is not read. */
const MAX_HELD_BODY = 64 * 1024;
/** After an answer to a request whose body is still coming, the rest is read and dropped this long at most. */
export const LINGER_MS = 5_000;

const CRLF = '\r\n';
const LAST_CHUNK = '0\r\n\r\n';
const STATUS_PREFIX = 'HTTP/1.1 ';
/** Requests sent again on a new connection when a pooled one turns out closed before answering. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const NO_DESTINATION: LocalReply = { kind: 'reply', status: 503, body: `${UPSTREAM_FAILURE}no original destination\n` };
const TIMED_OUT: LocalReply = { kind: 'reply', status: 504, body: 'upstream request timeout\n' };

/** What a connection needs from the handler that owns it. */
export interface ConnectionOwner {
  readonly stats: DirectionStats;
  readonly upstreamMode: UpstreamMode;
  readonly pool: UpstreamPool;
  /** Undefined: every request to the connection's original destination, decided here without a call. */
  readonly decider: RequestDecider | undefined;
  readonly draining: boolean;
  /** Read the socket's handle directly (false: 'data' events, for tests of that path). */
  readonly consume: boolean;
  /** The node:http path takes the connection, `bytes` first. */
  handOver(socket: Socket, bytes: Buffer): void;
  forget(c: Connection): void;
}

/** One request and its response. */
class Exchange implements ResponseSink {
  verdict: Verdict | undefined;
  up: UpstreamConnection | undefined;
  target: ForwardTarget | undefined;
  /** The request head as sent upstream (kept to send it again). */
  upHead = '';
  /** Body bytes that arrived before an upstream took the request. */
  held: Buffer[] | undefined;
  heldBytes = 0;
  hasBody = false;
  /** Decided (or being decided). */
  begun = false;
  status = 0;
  headSent = false;
  /** The upstream's body ends with its close: it goes to the client in chunks of our own. */
  wrapChunks = false;
  /** The connection ends after this response (the client asked, a drain, an error...). */
  closeAfter: boolean;
  done = false;
  retried = false;
  timer: NodeJS.Timeout | undefined;

  constructor(readonly conn: Connection, readonly view: RequestView, readonly fwd: ForwardedHeaders,
    keepAlive: boolean, readonly started: number) {
    this.closeAfter = !keepAlive;
  }

  get reqComplete(): boolean {
    return this.view.complete;
  }

  get headRequest(): boolean {
    return this.view.method === 'HEAD';
  }

  onResponseHead(head: ResponseHead): void {
    this.conn.responseHead(this, head);
  }

  onResponseBody(bytes: Buffer, payload: number): void {
    this.conn.responseBody(this, bytes, payload);
  }

  onResponseEnd(): void {
    this.conn.responseEnd(this);
  }

  onUpstreamError(err: NodeJS.ErrnoException, retryable: boolean): void {
    this.conn.upstreamError(this, err, retryable);
  }

  onReadDone(): boolean {
    return this.conn.readDone();
  }
}

export class Connection {
  idleSince = performance.now();
  private readonly parser: NativeParser;
  /** Set while the parser reads the socket's handle itself. */
  private handle: ConsumableHandle | undefined;
  private readonly queue: Exchange[] = [];
  /** The request whose body is being parsed. */
  private receiving: Exchange | undefined;
  private out: (string | Buffer)[] = [];
  private outBytes = 0;
  /** `out` holds views of the upstream read buffer: they are copied before the read is done. */
  private outBorrowed = false;
  /** No further request is taken; the connection ends once the queue is done. */
  private last = false;
  /** The parser met a head it does not take, or an error: what follows is not parsed. */
  private stopped = false;
  /** Set by the parser callback that stops at a head to hand over; resolved once the read is parsed. */
  private handOverHead: string | undefined;
  private handOverBytes: Buffer | undefined;
  private badRequest = false;
  private closed = false;
  private handedOver = false;
  private ending = false;
  private lingerTimer: NodeJS.Timeout | undefined;
  private writeBlocked = false;
  private upBlocked = false;
  private readonly remote: string | undefined;
  private readonly defaultVerdict: Verdict;
  private lastAddress = '';
  private lastPort = -1;
  private lastSource: string | undefined;
  private lastKey = '';

  constructor(private readonly owner: ConnectionOwner, readonly socket: Socket, private readonly dst: Endpoint | undefined) {
    this.remote = socket.remoteAddress;
    this.defaultVerdict = dst ? { kind: 'forward', address: dst.address, port: dst.port } : NO_DESTINATION;
    const callbacks: ParserCallbacks = {
      onHead: (major, minor, raw, method, url, _status, _message, upgrade, keepAlive) =>
        this.requestHead(major, minor, raw, method ?? 'GET', url, upgrade, keepAlive),
      onBody: (chunk) => this.requestBody(chunk),
      onMessageComplete: () => this.requestEnd(),
      onExecute: (ret) => this.afterExecute(ret, undefined),
    };
    this.parser = createParser('request', callbacks);
  }

  /** Starts with the bytes already read (`head`), then reads the socket. */
  begin(head: Buffer): void {
    const socket = this.socket;
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('drain', this.onDrain);
    socket.on('error', ignore);
    if (head.length > 0) this.feed(head);
    if (this.closed || this.handedOver || this.ending) return;
    const handle = this.owner.consume ? consumableHandle(socket) : undefined;
    if (handle) {
      handle._consumed = true;
      this.parser.consume(handle);
      this.handle = handle;
      // Bytes the stream read before (TLS records, what a sniffer did not take) come first.
      while (socket.readableLength > 0 && !this.stopped && !this.closed) {
        const chunk = socket.read() as Buffer | null;
        if (chunk === null) break;
        this.feed(chunk);
      }
    } else {
      socket.on('data', this.onData);
    }
    this.settle();
  }

  /** Drain: an idle connection ends now; a busy one after its current response (which says close). */
  drain(): void {
    if (this.queue.length === 0 && this.receiving === undefined) {
      this.last = true;
      this.settle();
    }
  }

  /** Keep-alive time-out: a connection idle this long is closed. */
  sweep(now: number, idleMs: number): void {
    if (this.queue.length === 0 && this.receiving === undefined && now - this.idleSince > idleMs) this.socket.destroy();
  }

  // ---- the request side (parser callbacks)

  private requestHead(major: number, minor: number, raw: string[], method: string, url: string,
    upgrade: boolean, keepAlive: boolean): number {
    if (this.stopped || this.ending || this.last) {
      this.stopped = true;
      return HEAD_STOP;
    }
    const fwd = forwardedHeaders(raw);
    if (upgrade || method === 'CONNECT' || major !== 1 || minor !== 1 || fwd.expect) {
      // Not this path's: llhttp stops after this head; the node:http path gets it, at this boundary.
      this.handOverHead = requestHead(method, url, major, minor, raw);
      this.stopped = true;
      return HEAD_STOP;
    }
    const s = this.owner.stats;
    s.rqTotal++;
    s.rqActive++;
    const view = new RequestView(method, url, major, minor, raw, this.socket);
    const ex = new Exchange(this, view, fwd, keepAlive && !this.owner.draining, performance.now());
    if (ex.closeAfter) this.last = true;
    this.receiving = ex;
    this.queue.push(ex);
    return HEAD_CONTINUE;
  }

  private requestBody(chunk: Buffer): void {
    const ex = this.receiving;
    if (!ex) return;
    this.owner.stats.rqBodyBytes += chunk.length;
    ex.hasBody = true;
    if (ex.done) return; // answered already: the rest is dropped
    if (ex.up) {
      this.bodyToUpstream(ex, chunk);
    } else {
      (ex.held ??= []).push(chunk);
      ex.heldBytes += chunk.length;
    }
  }

  private requestEnd(): void {
    const ex = this.receiving;
    if (!ex) return;
    this.receiving = undefined;
    ex.view.complete = true;
    if (ex.up && !ex.done && ex.fwd.chunked) this.toUpstream(ex, LAST_CHUNK);
  }

  private readonly onData = (chunk: Buffer): void => {
    this.feed(chunk);
  };

  private feed(chunk: Buffer): void {
    if (this.stopped || this.closed || this.handedOver) return;
    this.afterExecute(this.parser.execute(chunk), chunk);
  }

  /** After a read is parsed: hand-over bytes, a parse error, then whatever can move. */
  private afterExecute(ret: number | ParseError, chunk: Buffer | undefined): void {
    if (this.closed || this.handedOver || this.ending) return;
    if (typeof ret !== 'number') {
      this.parseError(ret);
      return;
    }
    if (this.handOverHead !== undefined) {
      const rest = (chunk ?? this.parser.getCurrentBuffer()).subarray(ret);
      this.handOverBytes = Buffer.concat([Buffer.from(this.handOverHead, 'latin1'), rest]);
      this.handOverHead = undefined;
    }
    this.settle();
  }

  private parseError(err: ParseError): void {
    this.stopped = true;
    this.handOverHead = undefined;
    if (this.last && this.receiving === undefined) { // bytes after `Connection: close` (llhttp refuses them): ignored
      this.settle();
      return;
    }
    this.owner.stats.rqProtocolErrors++;
    log.debug('malformed HTTP request', { code: err.code, reason: (err as { reason?: string }).reason });
    const cut = this.receiving;
    this.receiving = undefined;
    if (cut?.headSent) { // its response is on the way: nothing can be said cleanly any more
      this.socket.destroy();
      return;
    }
    if (cut) this.abandon(cut);
    this.badRequest = true; // a 400 once the earlier responses are out
    this.settle();
  }

  // ---- deciding and forwarding

  private start(ex: Exchange): void {
    ex.begun = true;
    const decider = this.owner.decider;
    if (!decider) {
      this.apply(ex, this.defaultVerdict);
      return;
    }
    let v: Verdict | Promise<Verdict>;
    try {
      v = decider.decide(ex.view.asIncomingMessage(), this.dst);
    } catch (err) {
      v = decisionFailed(err as Error);
    }
    if (v instanceof Promise) {
      v.then((x) => this.decided(ex, x), (err: Error) => this.decided(ex, decisionFailed(err)));
    } else {
      this.apply(ex, v);
    }
  }

  private decided(ex: Exchange, v: Verdict): void {
    if (ex.done || this.closed) return;
    this.apply(ex, v);
    this.settle();
  }

  private apply(ex: Exchange, v: Verdict): void {
    ex.verdict = v;
    if (v.kind === 'reply') this.reply(ex, v);
    else this.forward(ex, v);
  }

  private reply(ex: Exchange, reply: LocalReply): void {
    // The body was not read: the connection cannot carry another request after it.
    if (!ex.reqComplete || this.owner.draining) ex.closeAfter = true;
    this.push(replyBytes(reply, ex.closeAfter, ex.view.method === 'HEAD'));
    ex.status = reply.status;
    ex.headSent = true;
    this.finish(ex, false);
  }

  private forward(ex: Exchange, t: ForwardTarget): void {
    const edited = (t.removeHeaders !== undefined && t.removeHeaders.length > 0) || (t.setHeaders !== undefined && t.setHeaders.length > 0);
    if (edited || t.path !== undefined) {
      const bad = invalidEdit(t);
      if (bad) {
        this.reply(ex, decisionFailed(new Error(`the forward target has an invalid ${bad}`)));
        return;
      }
    }
    const text = edited ? forwardedHeaders(ex.view.rawHeaders, t).text : ex.fwd.text;
    ex.upHead = `${ex.view.method} ${t.path ?? ex.view.url} HTTP/1.1\r\n${text}${ex.fwd.chunked ? 'transfer-encoding: chunked\r\n' : ''}\r\n`;
    ex.target = t;
    if (t.timeoutMs) ex.timer = setTimeout(() => this.timedOut(ex), t.timeoutMs);
    this.send(ex, false);
  }

  /** Sends the request on a pooled connection (`fresh`: a new one) with the body held so far. */
  private send(ex: Exchange, fresh: boolean): void {
    const t = ex.target!;
    if (t.address !== this.lastAddress || t.port !== this.lastPort) { // the pool key, once per destination
      this.lastAddress = t.address;
      this.lastPort = t.port;
      this.lastSource = sourceFor(this.owner.upstreamMode, t, this.remote);
      this.lastKey = poolKey(t, this.lastSource);
    }
    let up: UpstreamConnection;
    try {
      up = this.owner.pool.acquire(this.lastKey, t, this.lastSource, fresh);
    } catch (err) { // a socket libc would not make (TPROXY without the capabilities...)
      this.upstreamError(ex, err as NodeJS.ErrnoException, false);
      return;
    }
    ex.up = up;
    up.attach(ex);
    const held = ex.held;
    const end = ex.reqComplete && ex.fwd.chunked;
    if (!held) {
      up.socket.write(end ? ex.upHead + LAST_CHUNK : ex.upHead, 'latin1');
      return;
    }
    ex.held = undefined;
    ex.heldBytes = 0;
    up.socket.cork();
    up.socket.write(ex.upHead, 'latin1');
    for (const b of held) this.bodyToUpstream(ex, b);
    if (end) up.socket.write(LAST_CHUNK, 'latin1');
    up.socket.uncork();
  }

  private bodyToUpstream(ex: Exchange, b: Buffer): void {
    if (ex.fwd.chunked) {
      const s = ex.up!.socket;
      s.cork();
      s.write(`${b.length.toString(16)}\r\n`, 'latin1');
      s.write(b);
      this.toUpstream(ex, CRLF);
      s.uncork();
    } else {
      this.toUpstream(ex, b);
    }
  }

  /** A write upstream; when the upstream is not keeping up, the client is not read until it drains. */
  private toUpstream(ex: Exchange, data: string | Buffer): void {
    const s = ex.up!.socket;
    const ok = typeof data === 'string' ? s.write(data, 'latin1') : s.write(data);
    if (!ok && !this.upBlocked) {
      this.upBlocked = true;
      s.once('drain', () => {
        this.upBlocked = false;
        this.settle();
      });
    }
  }

  private timedOut(ex: Exchange): void {
    ex.timer = undefined;
    if (ex.done || ex.headSent) return;
    this.owner.stats.upstreamRqTimeouts++;
    ex.closeAfter = true;
    this.push(replyBytes(TIMED_OUT, true, ex.view.method === 'HEAD'));
    ex.status = 504;
    ex.headSent = true;
    this.finish(ex, false);
    this.settle();
  }

  // ---- the response side (called by the upstream connection)

  responseHead(ex: Exchange, head: ResponseHead): void {
    if (ex.done) return;
    this.outBorrowed = true;
    this.push(STATUS_PREFIX);
    for (const part of head.parts) this.push(part);
    if (head.status < 200) { // 103 and friends go on; the final response follows
      this.push(CRLF);
      return;
    }
    if (ex.timer) {
      clearTimeout(ex.timer);
      ex.timer = undefined;
    }
    // A body delimited by the upstream's close goes in chunks: the client keeps its connection.
    ex.wrapChunks = head.framing === 'close';
    if (this.owner.draining) ex.closeAfter = true;
    this.push(`${head.hasDate ? '' : `date: ${httpDate()}\r\n`}${head.framing === 'chunked' || ex.wrapChunks ? 'transfer-encoding: chunked\r\n' : ''}`
      + `${ex.closeAfter ? 'connection: close\r\n' : ''}\r\n`);
    ex.status = head.status;
    ex.headSent = true;
  }

  responseBody(ex: Exchange, bytes: Buffer, payload: number): void {
    if (ex.done) return;
    this.owner.stats.rsBodyBytes += payload;
    this.outBorrowed = true;
    if (ex.wrapChunks) {
      this.push(`${bytes.length.toString(16)}\r\n`);
      this.push(bytes);
      this.push(CRLF);
    } else {
      this.push(bytes);
    }
  }

  responseEnd(ex: Exchange): void {
    if (ex.done) return;
    if (ex.wrapChunks) this.push(LAST_CHUNK);
    this.finish(ex, true);
  }

  upstreamError(ex: Exchange, err: NodeJS.ErrnoException, retryable: boolean): void {
    if (ex.done) return;
    ex.up = undefined;
    this.upBlocked = false;
    if (retryable && !ex.retried && !ex.hasBody && ex.reqComplete && IDEMPOTENT.has(ex.view.method)) {
      // A pooled connection the upstream had closed while idle: the request never reached it.
      ex.retried = true;
      this.send(ex, true);
      return;
    }
    const s = this.owner.stats;
    s.upstreamRqErrors++;
    if (isConnectFailure(err.code)) s.upstreamCxConnectFail++;
    log.debug('upstream request failed', { error: err.message, code: err.code });
    if (ex.headSent) { // cut mid-response: the client sees the connection end early
      this.finish(ex, false);
      this.socket.destroy();
      return;
    }
    ex.closeAfter = true;
    this.push(replyBytes({ kind: 'reply', status: 503, body: upstreamFailureBody(err) }, true, ex.view.method === 'HEAD'));
    ex.status = 503;
    ex.headSent = true;
    this.finish(ex, false);
    this.settle();
  }

  /** An upstream read is parsed: what it produced goes out; false while the client is not keeping up. */
  readDone(): boolean {
    this.settle();
    return !this.writeBlocked;
  }

  // ---- bookkeeping

  /** The response is complete (or answered locally): counts, the decider told, the upstream reused or closed. */
  private finish(ex: Exchange, upstreamDone: boolean): void {
    ex.done = true;
    if (ex.timer) {
      clearTimeout(ex.timer);
      ex.timer = undefined;
    }
    const up = ex.up;
    if (up) {
      ex.up = undefined;
      // Reusable only when both messages ended where HTTP says they end.
      if (upstreamDone && ex.reqComplete) this.owner.pool.release(up);
      else up.destroy();
    }
    this.upBlocked = false;
    const i = this.queue.indexOf(ex);
    if (i >= 0) this.queue.splice(i, 1);
    const now = this.completed(ex, ex.headSent ? ex.status : undefined);
    if (ex.closeAfter) {
      this.last = true;
      for (const rest of this.queue.splice(0)) this.completedUnanswered(rest);
    }
    if (this.queue.length === 0) this.idleSince = now;
  }

  /** A request dropped before its answer (cut by a parse error). */
  private abandon(ex: Exchange): void {
    const i = this.queue.indexOf(ex);
    if (i >= 0) this.queue.splice(i, 1);
    this.completedUnanswered(ex);
  }

  private completedUnanswered(ex: Exchange): void {
    ex.done = true;
    if (ex.timer) clearTimeout(ex.timer);
    ex.up?.destroy();
    ex.up = undefined;
    this.completed(ex, ex.headSent ? ex.status : undefined);
  }

  /** Counts the request's end and tells the decider; answers the time it read (one clock read per request end). */
  private completed(ex: Exchange, status: number | undefined): number {
    const s = this.owner.stats;
    s.rqActive--;
    const now = performance.now();
    const ms = now - ex.started;
    if (status !== undefined) s.recordResponse(status, ms);
    const decider = this.owner.decider;
    if (!decider?.completed) return now;
    try {
      decider.completed(ex.view.asIncomingMessage(), ex.verdict, status, ms);
    } catch (err) {
      log.error(`request completion hook failed: ${(err as Error).message}`);
    }
    return now;
  }

  /**
   * Moves the connection on after any event: starts the next request, hands over or ends once the
   * queue is done, writes out this turn's bytes, reads or not.
   */
  private settle(): void {
    if (this.closed || this.handedOver) return;
    let head = this.queue[0];
    while (head && !head.begun) { // a local reply finishes its request at once: go on with the next
      this.start(head);
      head = this.queue[0];
    }
    if (this.queue.length === 0 && !this.ending) {
      if (this.badRequest) {
        this.push(BAD_REQUEST);
        this.end();
        return;
      }
      if (this.last) { // (an earlier response said close: a pending hand-over is dropped with the connection)
        this.end();
        return;
      }
      if (this.handOverBytes) {
        this.handOver(this.handOverBytes);
        return;
      }
    }
    this.flush();
    this.setReading(this.wantRead());
  }

  private wantRead(): boolean {
    if (this.closed || this.handedOver) return false;
    if (this.ending) return this.lingerTimer !== undefined;
    if (this.stopped || this.upBlocked) return false;
    const r = this.receiving;
    if (r) return r.heldBytes < MAX_HELD_BODY; // its body is needed (or dropped as it comes)
    return !this.last && this.queue.length <= 1;
  }

  private setReading(on: boolean): void {
    const h = this.handle;
    if (h) {
      if (on === (h.reading === true)) return;
      h.reading = on;
      if (on) h.readStart();
      else h.readStop();
    } else if (on) {
      this.socket.resume();
    } else {
      this.socket.pause();
    }
  }

  private push(part: string | Buffer): void {
    this.out.push(part);
    this.outBytes += part.length; // strings here are latin1: one char, one byte
  }

  /**
   * Writes what this turn produced in one write: one copy into one buffer beats writev for small
   * parts, and views of the upstream read buffer must be copied out anyway.
   */
  private flush(): void {
    const out = this.out;
    const n = out.length;
    if (n === 0) return;
    const bytes = this.outBytes;
    const borrowed = this.outBorrowed;
    this.out = [];
    this.outBytes = 0;
    this.outBorrowed = false;
    const s = this.socket;
    if (s.destroyed) return;
    let ok: boolean;
    const only = out[0]!;
    if (n === 1 && typeof only === 'string') {
      ok = s.write(only, 'latin1');
    } else if (n === 1 && !borrowed) {
      ok = s.write(only);
    } else {
      const buf = Buffer.allocUnsafe(bytes);
      let at = 0;
      for (const part of out) at += typeof part === 'string' ? buf.write(part, at, 'latin1') : part.copy(buf, at);
      ok = s.write(buf);
    }
    if (!ok) this.writeBlocked = true;
  }

  /**
   * Ends the connection once what is written is out. A client still sending a body we did not read
   * is read (and ignored) a little longer: closing on unread bytes resets the connection, and the
   * client might lose the answer.
   */
  private end(): void {
    this.ending = true;
    this.flush();
    if (this.receiving && !this.receiving.reqComplete) {
      this.lingerTimer = setTimeout(() => this.socket.destroy(), LINGER_MS).unref();
      this.socket.end();
      this.setReading(true);
    } else {
      this.setReading(false);
      this.socket.destroySoon();
    }
  }

  private handOver(bytes: Buffer): void {
    this.handOverBytes = undefined;
    this.flush();
    this.handedOver = true;
    this.setReading(false);
    const socket = this.socket;
    const handle = this.handle;
    if (handle) this.parser.unconsume(); // the handle stays marked consumed: node:http reads it by 'data' events
    socket.off('data', this.onData);
    this.detach();
    socket.pause();
    this.owner.handOver(socket, bytes);
    // The stream still believes the read it asked for before the handle was consumed is under way,
    // so it would never ask again: start the handle here (node:http does the same on 'resume').
    if (handle && !socket.destroyed && !handle.reading) {
      handle.reading = true;
      handle.readStart();
    }
  }

  private detach(): void {
    const socket = this.socket;
    socket.off('end', this.onEnd);
    socket.off('close', this.onClose);
    socket.off('drain', this.onDrain);
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.owner.forget(this);
    closeParserLater(this.parser);
  }

  /**
   * The client closed its side. As node:http (without httpAllowHalfOpen) and Envoy do, that ends
   * the connection: requests not answered yet are abandoned, what is written goes out, then FIN.
   */
  private readonly onEnd = (): void => {
    if (this.closed || this.handedOver) return;
    if (this.ending) { // lingering is over; otherwise the socket closes once our end is written
      if (this.lingerTimer) this.socket.destroy();
      return;
    }
    this.ending = true;
    this.receiving = undefined;
    for (const ex of this.queue.splice(0)) this.completedUnanswered(ex);
    this.flush();
    this.setReading(false);
    this.socket.destroySoon();
  };

  private readonly onDrain = (): void => {
    this.writeBlocked = false;
    this.queue[0]?.up?.resume();
  };

  private readonly onClose = (): void => {
    if (this.closed) return;
    this.closed = true;
    for (const ex of this.queue.splice(0)) this.completedUnanswered(ex);
    this.receiving = undefined;
    this.detach();
  };
}

function ignore(): void { /* errors end in 'close', handled there */ }
