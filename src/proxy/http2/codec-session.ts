// An upstream HTTP/2 session on the frame layer of our own (codec/connection.ts) instead of
// node:http2's ClientHttp2Session: the same few calls and events the upstream pool and the exchange
// use (request, close, destroy; 'remoteSettings', 'goaway', 'error', 'close'; a stream's 'response',
// 'data', 'end', 'trailers', 'wantTrailers', 'drain', 'close', write/end/pause/resume), so that the
// pool and the exchange keep their logic. Why: node:http2's client side is most of an HTTP/2
// request's cost through the sidecar (docs/PERFORMANCE.md, "HTTP/2 on a frame layer of our own"),
// and the codec refuses malformed responses (RFC 9113) where nghttp2 drops fields silently.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import { H2Connection, type H2ConnectionError, type H2Settings, type H2Stream } from './codec/connection.js';
import { ErrorCode } from './codec/frames.js';

const END_STREAM = 0x1;
const NO_DATA = Buffer.alloc(0);

/** Appends the regular fields of a node header object (names lower-cased, repeated values kept) to `out`. */
function pushRegularFields(out: string[], h: OutgoingHttpHeaders): string[] {
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

/** A field list of a node header object: pseudo-headers first (node's defaults for those missing), repeated values kept. */
function fieldsOf(h: OutgoingHttpHeaders, defaults: { scheme: string; authority: string }): string[] {
  return pushRegularFields([':method', String(h[':method'] ?? 'GET'), ':scheme', String(h[':scheme'] ?? defaults.scheme),
    ':authority', String(h[':authority'] ?? defaults.authority), ':path', String(h[':path'] ?? '/')], h);
}

/** A node header object of a field list (repeated names as arrays; :status a number, as node gives it). */
function headersOf(fields: readonly string[]): IncomingHttpHeaders {
  const h: Record<string, string | string[] | number> = Object.create(null) as Record<string, string>;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const had = h[name];
    if (had === undefined) h[name] = name === ':status' ? Number(value) : value;
    else if (Array.isArray(had)) had.push(value);
    else h[name] = [String(had), value];
  }
  return h as unknown as IncomingHttpHeaders;
}

export interface CodecRequestOptions {
  readonly endStream?: boolean;
  readonly waitForTrailers?: boolean;
}

/** One request's stream, as the exchange uses a ClientHttp2Stream. */
export class CodecClientStream extends EventEmitter {
  rstCode: number | undefined = undefined;
  destroyed = false;
  closed = false;
  aborted = false;
  readableEnded = false;
  /** The request's side ended (END_STREAM or trailers sent). */
  private ended = false;
  private paused = false;
  private held: Buffer[] | undefined;
  private heldEnd = false;

  constructor(private readonly session: CodecClientSession, readonly h2: H2Stream | undefined, private readonly waitForTrailers: boolean) {
    super();
  }

  /** Request body: false when it waits for the upstream's window (a 'drain' follows). */
  write(chunk: Buffer): boolean {
    if (this.h2 === undefined || this.ended || this.closed) return true;
    return this.session.conn.data(this.h2, chunk, false) === 0;
  }

  /** The request's end: END_STREAM, or trailers when asked for ('wantTrailers', then sendTrailers). */
  end(chunk?: Buffer): this {
    if (chunk !== undefined && chunk.length > 0) this.write(chunk);
    if (this.h2 === undefined || this.ended || this.closed) return this;
    if (this.waitForTrailers) {
      this.emit('wantTrailers');
      if (!this.ended) this.sendTrailers({});
      return this;
    }
    this.ended = true;
    this.session.conn.data(this.h2, Buffer.alloc(0), true);
    return this;
  }

  sendTrailers(trailers: OutgoingHttpHeaders): void {
    if (this.h2 === undefined || this.ended || this.closed) return;
    this.ended = true;
    const fields = pushRegularFields([], trailers);
    if (fields.length === 0) this.session.conn.data(this.h2, Buffer.alloc(0), true);
    else this.session.conn.headers(this.h2, fields, true);
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  /** Reading again: what arrived while paused is delivered, and its window given back. */
  resume(): this {
    if (!this.paused) return this;
    this.paused = false;
    const held = this.held;
    if (held !== undefined) {
      // Delivered in order until the reader pauses again; the rest stays held.
      while (held.length > 0 && !this.paused) this.deliver(held.shift()!);
      if (held.length > 0) return this;
      this.held = undefined;
    }
    if (this.heldEnd && !this.paused) this.finish();
    return this;
  }

  /** Resets the stream (CANCEL by default); it closes. */
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

  /** DATA for the response (views of the socket's reads, which node never reuses). */
  onData(data: Buffer, end: boolean): void {
    if (data.length > 0) {
      if (this.paused || this.held !== undefined) (this.held ??= []).push(data);
      else this.deliver(data);
    }
    if (!end) return;
    if (this.paused || this.held !== undefined) this.heldEnd = true;
    else this.finish();
  }

  private deliver(data: Buffer): void {
    this.emit('data', data);
    if (this.h2 !== undefined) this.session.conn.consumed(this.h2, data.length);
  }

  /** The response's END_STREAM, after every byte was delivered: 'end', then 'close' once the request's side is over too. */
  private finish(): void {
    if (this.readableEnded) return;
    this.heldEnd = false;
    this.readableEnded = true;
    this.emit('end');
    if (this.h2 === undefined || this.h2.closed) this.closeWith(ErrorCode.NO_ERROR);
  }

  /** The stream is over: `code` (a reset's, or NO_ERROR). */
  closeWith(code: number): void {
    if (this.closed) return;
    this.closed = true;
    this.destroyed = true;
    this.rstCode = code;
    // A reset before the response's end: the readable side ends as node ends it (aborted when ours was open).
    if (!this.readableEnded) {
      if (code === ErrorCode.NO_ERROR && !this.ended) this.aborted = true;
      this.readableEnded = true;
      this.held = undefined;
      this.emit('end');
    }
    this.emit('close');
  }
}

/** An upstream HTTP/2 session on the codec, as the pool uses a ClientHttp2Session. */
export class CodecClientSession extends EventEmitter {
  readonly conn: H2Connection;
  closed = false;
  destroyed = false;
  private readonly defaults: { scheme: string; authority: string };
  private closing = false;

  constructor(private readonly socket: Socket, authority: string, tls: boolean, settings: H2Settings) {
    super();
    this.defaults = { scheme: tls ? 'https' : 'http', authority };
    this.conn = new H2Connection(false, (chunks) => {
      if (socket.destroyed) return;
      if (chunks.length === 1) {
        socket.write(chunks[0]!);
        return;
      }
      socket.cork();
      for (const c of chunks) socket.write(c);
      socket.uncork();
    }, {
      headers: (s, fields, facts, end) => {
        const cs = s.ctx as CodecClientStream | undefined;
        if (cs === undefined) return;
        if (facts.status !== 0 || facts.informational) {
          if (facts.informational) return; // 1xx: node keeps them from 'response' too
          cs.emit('response', headersOf(fields), end ? END_STREAM : 0);
          if (end) cs.onData(NO_DATA, true);
          return;
        }
        cs.emit('trailers', headersOf(fields), END_STREAM);
        // The end waits behind any DATA still held for a paused reader (else that body would be lost).
        cs.onData(NO_DATA, true);
      },
      data: (s, data, end) => {
        const cs = s.ctx as CodecClientStream | undefined;
        if (cs !== undefined) cs.onData(data, end);
        else if (data.length > 0) this.conn.consumed(s, data.length);
      },
      reset: (s, code) => {
        (s.ctx as CodecClientStream | undefined)?.closeWith(code);
        this.maybeEnd();
      },
      writable: (s) => { (s.ctx as CodecClientStream | undefined)?.emit('drain'); },
      done: (s) => {
        const cs = s.ctx as CodecClientStream | undefined;
        if (cs !== undefined && cs.readableEnded) cs.closeWith(ErrorCode.NO_ERROR);
        this.maybeEnd();
      },
      settings: (maxConcurrentStreams) => { this.emit('remoteSettings', { maxConcurrentStreams }); },
      goaway: () => { this.emit('goaway'); },
      closed: (error) => { this.onClosed(error); },
    }, settings);
    socket.on('data', (d: Buffer) => {
      this.conn.receive(d);
      this.maybeEnd();
    });
    socket.on('error', (err) => { if (!this.closed) this.conn.end(Object.assign(err, { code: (err as NodeJS.ErrnoException).code }) as unknown as H2ConnectionError); });
    socket.on('close', () => { this.conn.end(); this.onClosed(undefined); });
  }

  /** A request on a new stream (its END_STREAM with the headers when `endStream`). */
  request(headers: OutgoingHttpHeaders, options: CodecRequestOptions = {}): CodecClientStream {
    const endStream = options.endStream === true;
    const fields = fieldsOf(headers, this.defaults);
    const h2 = this.closed ? undefined : this.conn.request(fields, endStream, fields[1] === 'HEAD');
    const cs = new CodecClientStream(this, h2, options.waitForTrailers === true && !endStream);
    if (h2 === undefined) {
      queueMicrotask(() => cs.closeWith(ErrorCode.REFUSED_STREAM));
      return cs;
    }
    h2.ctx = cs;
    return cs;
  }

  /** Graceful: no new stream; the socket ends when the last one is done. */
  close(): void {
    if (this.closed || this.closing) return;
    this.closing = true;
    this.conn.goaway(ErrorCode.NO_ERROR);
    this.maybeEnd();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.conn.end();
    this.socket.destroy();
  }

  private maybeEnd(): void {
    if (this.closing && !this.closed && this.conn.openStreams === 0) {
      this.conn.flush();
      this.socket.end();
      this.socket.destroySoon();
    }
  }

  private onClosed(error: H2ConnectionError | NodeJS.ErrnoException | undefined): void {
    if (this.closed) return;
    this.closed = true;
    this.destroyed = true;
    if (error !== undefined) {
      // Not HTTP/2 at all (an HTTP/1.1 server's answer to the preface reads as a broken frame): the
      // pool's h1 probe knows nghttp2's code for it.
      const code = 'code' in error && typeof error.code === 'number' ? 'ERR_HTTP2_ERROR' : (error as NodeJS.ErrnoException).code;
      this.emit('error', Object.assign(new Error(error.message), { code }));
    }
    if (!this.socket.destroyed) {
      this.socket.end();
      this.socket.destroySoon();
    }
    this.emit('close');
  }
}
