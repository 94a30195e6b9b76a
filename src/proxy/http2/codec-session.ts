// An upstream HTTP/2 session on the frame layer of our own (codec/connection.ts) instead of
// node:http2's ClientHttp2Session: the few calls and events the upstream pool uses (request, close,
// destroy; 'remoteSettings', 'goaway', 'error', 'close'), and streams that tell the exchange's attempt
// their response head, trailers, body and close (a StreamSink) and take write/end/pause/resume.
// Why: node:http2's client side is most of an HTTP/2 request's cost through the sidecar
// (docs/PERFORMANCE.md, "HTTP/2 on a frame layer of our own"), and the codec refuses malformed
// responses (RFC 9113) where nghttp2 drops fields silently.
import type { Socket } from 'node:net';
import type { H2ConnectionError, H2Settings, H2Stream } from './codec/connection.js';
import { ErrorCode } from './codec/frames.js';
import type { BlockFacts } from './codec/message-rules.js';
import { CodecSocketSession, CodecStream, END_STREAM_FLAG, NO_DATA, type StreamSink } from './codec-stream.js';

export interface CodecRequestOptions {
  readonly endStream?: boolean;
  readonly waitForTrailers?: boolean;
}

/** A StreamSink that takes an upstream stream's response head, its trailers and the ask for the request's trailers too. */
export interface ClientStreamSink extends StreamSink {
  /** The response's head: its field list as decoded (:status first), END_STREAM_FLAG when it ended the stream. */
  response(fields: string[], flags: number): void;
  /** The response's trailers: their field list as decoded (regular fields only: the frame layer refuses a pseudo-header in them). */
  trailers(fields: string[]): void;
  /** The request's body is written: its trailers are asked for (waitForTrailers). */
  wantTrailers(): void;
}

/**
 * One request's stream: its response head, trailers and the ask for the request's trailers go to its
 * `sink` (the exchange's attempt); its body, end and close too, or as events when it has none.
 */
export class CodecClientStream extends CodecStream {
  declare sink: ClientStreamSink | undefined;

  constructor(session: CodecClientSession, h2: H2Stream | undefined, waitForTrailers: boolean) {
    super(session, h2);
    this.trailersWanted = waitForTrailers;
  }

  protected override askTrailers(): void {
    this.sink?.wantTrailers();
  }
}

/** An upstream HTTP/2 session on the codec, as the pool uses a ClientHttp2Session. */
export class CodecClientSession extends CodecSocketSession {
  constructor(socket: Socket, settings: H2Settings) {
    super(socket, false, settings);
    socket.on('data', this.received);
    socket.on('error', (err) => { if (!this.closed) this.conn.end(Object.assign(err, { code: (err as NodeJS.ErrnoException).code }) as unknown as H2ConnectionError); });
    socket.on('close', () => { this.conn.end(); this.onClosed(undefined); });
  }

  protected onHeaders(s: H2Stream, fields: string[], facts: BlockFacts, end: boolean): void {
    const cs = s.ctx as CodecClientStream | undefined;
    if (cs === undefined) return;
    if (facts.status !== 0 || facts.informational) {
      if (facts.informational) return; // 1xx: node keeps them from 'response' too
      cs.sink?.response(fields, end ? END_STREAM_FLAG : 0); // the field list as decoded (:status first): no object made
      if (end) cs.onData(NO_DATA, true);
      return;
    }
    cs.sink?.trailers(fields);
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
   * A request on a new stream (its END_STREAM with the headers when `endStream`): its field list in
   * order (the pseudo-headers first, :method the first of them; names lower-case).
   */
  request(fields: string[], options: CodecRequestOptions = {}): CodecClientStream {
    const endStream = options.endStream === true;
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
