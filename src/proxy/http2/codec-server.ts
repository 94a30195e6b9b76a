// A client's HTTP/2 connection on the frame layer of our own (codec/connection.ts) instead of
// node:http2's ServerHttp2Session: the calls and events the handler and the exchange use ('stream'
// with the request's fields, 'error', 'close', close and destroy; a stream's respond, write, end,
// trailers, reset, and its request body read with back-pressure). Why: node:http2 costs most of an
// HTTP/2 request through the proxy (docs/PERFORMANCE.md), and nghttp2 drops malformed fields of a
// request silently where RFC 9113 says the request is refused: the codec refuses it before any of it
// is seen (docs/HTTP2.md).
import type { OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import type { H2Settings, H2Stream } from './codec/connection.js';
import type { BlockFacts } from './codec/message-rules.js';
import { CodecSocketSession, CodecStream, END_STREAM_FLAG, NO_DATA, pushRegularFields } from './codec-stream.js';
import { httpDate } from '../http1/replies.js';
import { attachReader } from '../read-buffers.js';
import { fieldValue } from './field-list.js';

export interface RespondOptions {
  readonly endStream?: boolean;
  readonly waitForTrailers?: boolean;
}

/** The request's :method (the codec has checked there is one, among the pseudo-headers that come first). */
function methodOf(fields: readonly string[]): string | undefined {
  for (let i = 0; i < fields.length && fields[i]!.charCodeAt(0) === 0x3a; i += 2) if (fields[i] === ':method') return fields[i + 1];
  return undefined;
}

/**
 * Who follows a request's stream by direct calls (the exchange): one object instead of a listener
 * and a closure per event per stream. Its body is still read by events ('data', 'end'), as a
 * decider's hold of it reads node streams too.
 */
export interface ServerStreamWatcher {
  /** The request ended: END_STREAM (before the stream's 'end' event), or cut by a reset (`aborted`). */
  requestEnded(): void;
  /** The response's body is written and trailers were asked for: the watcher answers with sendTrailers. */
  trailersWanted(): void;
  /** The stream is over (before its 'close' event). */
  streamClosed(): void;
}

/** One request's stream, as the exchange uses a ServerHttp2Stream. */
export class CodecServerStream extends CodecStream {
  headersSent = false;
  /** The request's trailers (their field list as decoded), once they came. */
  trailers: string[] | undefined = undefined;
  watcher: ServerStreamWatcher | undefined = undefined;

  /** `fields`: the request's header block; `endedWithHead`: it ended the stream (no body). */
  constructor(session: CodecServerSession, h2: H2Stream, private readonly head: boolean, readonly fields: string[], readonly endedWithHead: boolean) {
    super(session, h2);
  }

  /**
   * The response's head. A response to HEAD, and 204, 205 and 304, has no content: it ends with its
   * head whatever the caller says, as node's respond() does. A `date` is added when there is none.
   */
  respond(headers: OutgoingHttpHeaders, options: RespondOptions = {}): void {
    this.respondFields(pushRegularFields([':status', String(headers[':status'] ?? 200)], headers), options);
  }

  protected override askTrailers(): void {
    if (this.watcher !== undefined) this.watcher.trailersWanted();
    else super.askTrailers();
  }

  protected override endEvent(): void {
    this.watcher?.requestEnded();
    this.emit('end');
  }

  protected override closeEvent(): void {
    this.watcher?.streamClosed();
    this.emit('close');
  }

  /** respond() with the head as a field list, `:status` first (the list is the stream's from now on). */
  respondFields(fields: string[], options: RespondOptions = {}): void {
    if (this.headersSent || this.closed) return;
    this.headersSent = true;
    const status = Number(fields[1]);
    if (fieldValue(fields, 'date') === undefined) fields.push('date', httpDate());
    const end = options.endStream === true || this.head || status === 204 || status === 205 || status === 304;
    if (end) this.ended = true;
    else this.trailersWanted = options.waitForTrailers === true;
    this.session.conn.headers(this.h2!, fields, end);
  }
}

/** A client's connection, as the handler uses a ServerHttp2Session. */
export class CodecServerSession extends CodecSocketSession {
  /** Streams opened by the read being taken in, handed on at its end. */
  private opened: CodecServerStream[] | undefined;

  constructor(socket: Socket, settings: H2Settings) {
    super(socket, true, settings);
    socket.on('error', () => { this.conn.end(); });
    socket.on('close', () => { this.conn.end(); this.onClosed(undefined); });
  }

  /**
   * Reads the connection, once the owner listens to the session: `head` first (what the listener read
   * before: the preface, perhaps more), then the socket (paused until now).
   */
  start(head: Buffer): void {
    if (head.length > 0) this.received(head);
    attachReader(this.socket, this.received);
    this.socket.resume();
  }

  protected onHeaders(s: H2Stream, fields: string[], _facts: BlockFacts, end: boolean): void {
    const cs = s.ctx as CodecServerStream | undefined;
    if (cs === undefined) {
      const stream = new CodecServerStream(this, s, methodOf(fields) === 'HEAD', fields, end);
      s.ctx = stream;
      (this.opened ??= []).push(stream);
      if (end) stream.onData(NO_DATA, true);
      return;
    }
    cs.trailers = fields;
    cs.onData(NO_DATA, true);
  }

  /**
   * New streams are handed on once the whole read is taken in, not as their header block is: a
   * request whose DATA in the same read breaks a rule (more or less than its content-length) was
   * reset by then and is never seen, so none of it is forwarded.
   */
  protected override afterRead(): void {
    const opened = this.opened;
    if (opened === undefined) return;
    this.opened = undefined;
    for (const stream of opened) if (!stream.closed) this.emit('stream', stream, stream.fields, stream.endedWithHead ? END_STREAM_FLAG : 0);
  }
}
