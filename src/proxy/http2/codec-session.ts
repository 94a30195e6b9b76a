// An upstream HTTP/2 session on the frame layer of our own (codec/connection.ts) instead of
// node:http2's ClientHttp2Session: the same few calls and events the upstream pool and the exchange
// use (request, close, destroy; 'remoteSettings', 'goaway', 'error', 'close'; a stream's 'response',
// 'data', 'end', 'trailers', 'wantTrailers', 'drain', 'close', write/end/pause/resume), so that the
// pool and the exchange keep their logic. Why: node:http2's client side is most of an HTTP/2
// request's cost through the sidecar (docs/PERFORMANCE.md, "HTTP/2 on a frame layer of our own"),
// and the codec refuses malformed responses (RFC 9113) where nghttp2 drops fields silently.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import type { H2ConnectionError, H2Settings, H2Stream } from './codec/connection.js';
import { ErrorCode } from './codec/frames.js';
import type { BlockFacts } from './codec/message-rules.js';
import { CodecSocketSession, CodecStream, END_STREAM_FLAG, NO_DATA, pushRegularFields, type StreamSink } from './codec-stream.js';

/** A field list of a node header object: pseudo-headers first (node's defaults for those missing), repeated values kept. */
function fieldsOf(h: OutgoingHttpHeaders, defaults: { scheme: string; authority: string }): string[] {
  return pushRegularFields([':method', String(h[':method'] ?? 'GET'), ':scheme', String(h[':scheme'] ?? defaults.scheme),
    ':authority', String(h[':authority'] ?? defaults.authority), ':path', String(h[':path'] ?? '/')], h);
}

/** A node header object of a field list (repeated names as arrays; :status a number, as node gives it). */
export function headersOf(fields: readonly string[]): IncomingHttpHeaders {
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

/** A StreamSink that takes an upstream stream's response head, its trailers and the ask for the request's trailers too. */
export interface ClientStreamSink extends StreamSink {
  /** The response's head: its field list as decoded (:status first), END_STREAM_FLAG when it ended the stream. */
  response(fields: string[], flags: number): void;
  trailers(trailers: IncomingHttpHeaders): void;
  /** The request's body is written: its trailers are asked for (waitForTrailers). */
  wantTrailers(): void;
}

/**
 * One request's stream, as the exchange uses a ClientHttp2Stream: 'response' (with the field list,
 * not a header object), then the body, 'trailers'; or the same as calls to its `sink`.
 */
export class CodecClientStream extends CodecStream {
  declare sink: ClientStreamSink | undefined;

  constructor(session: CodecClientSession, h2: H2Stream | undefined, waitForTrailers: boolean) {
    super(session, h2);
    this.trailersWanted = waitForTrailers;
  }

  protected override askTrailers(): void {
    if (this.sink !== undefined) this.sink.wantTrailers();
    else this.emit('wantTrailers');
  }
}

/** An upstream HTTP/2 session on the codec, as the pool uses a ClientHttp2Session. */
export class CodecClientSession extends CodecSocketSession {
  private readonly defaults: { scheme: string; authority: string };

  constructor(socket: Socket, authority: string, tls: boolean, settings: H2Settings) {
    super(socket, false, settings);
    this.defaults = { scheme: tls ? 'https' : 'http', authority };
    socket.on('data', this.received);
    socket.on('error', (err) => { if (!this.closed) this.conn.end(Object.assign(err, { code: (err as NodeJS.ErrnoException).code }) as unknown as H2ConnectionError); });
    socket.on('close', () => { this.conn.end(); this.onClosed(undefined); });
  }

  protected onHeaders(s: H2Stream, fields: string[], facts: BlockFacts, end: boolean): void {
    const cs = s.ctx as CodecClientStream | undefined;
    if (cs === undefined) return;
    if (facts.status !== 0 || facts.informational) {
      if (facts.informational) return; // 1xx: node keeps them from 'response' too
      // The field list as decoded (:status first): no object made.
      if (cs.sink !== undefined) cs.sink.response(fields, end ? END_STREAM_FLAG : 0);
      else cs.emit('response', fields, end ? END_STREAM_FLAG : 0);
      if (end) cs.onData(NO_DATA, true);
      return;
    }
    if (cs.sink !== undefined) cs.sink.trailers(headersOf(fields));
    else cs.emit('trailers', headersOf(fields), END_STREAM_FLAG);
    // The end waits behind any DATA still held for a paused reader (else that body would be lost).
    cs.onData(NO_DATA, true);
  }

  protected override onSettings(maxConcurrentStreams: number | undefined): void {
    this.emit('remoteSettings', { maxConcurrentStreams });
  }

  protected override onGoaway(): void {
    this.emit('goaway');
  }

  /**
   * A request on a new stream (its END_STREAM with the headers when `endStream`): a header object, or
   * a field list already in order (pseudo-headers first, :method the first of them, names lower-case).
   */
  request(headers: OutgoingHttpHeaders | string[], options: CodecRequestOptions = {}): CodecClientStream {
    const endStream = options.endStream === true;
    const fields = Array.isArray(headers) ? headers : fieldsOf(headers, this.defaults);
    const h2 = this.closed ? undefined : this.conn.request(fields, endStream, fields[1] === 'HEAD');
    const cs = new CodecClientStream(this, h2, options.waitForTrailers === true && !endStream);
    if (h2 === undefined) {
      queueMicrotask(() => cs.closeWith(ErrorCode.REFUSED_STREAM));
      return cs;
    }
    h2.ctx = cs;
    return cs;
  }

  /**
   * Not HTTP/2 at all (an HTTP/1.1 server's answer to the preface reads as a broken frame): the
   * pool's h1 probe knows nghttp2's code for it.
   */
  protected override errorOf(error: H2ConnectionError | NodeJS.ErrnoException): Error {
    const code = 'code' in error && typeof error.code === 'number' ? 'ERR_HTTP2_ERROR' : (error as NodeJS.ErrnoException).code;
    return Object.assign(new Error(error.message), { code });
  }
}
