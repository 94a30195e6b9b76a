// One HTTP/2 stream, from its header block to its end: read as a request (request-headers.ts),
// judged by the same decider as an HTTP/1.1 request (a RequestView of what will be forwarded),
// answered locally or forwarded over a shared upstream session (or an HTTP/1.1 leg), its body and
// the response's piped with back-pressure per stream (a slow reader stalls only its own stream:
// nothing is consumed, so no WINDOW_UPDATE goes out for it), trailers carried both ways. A failure
// always ends the stream with an answer or a reset, never a hang: before the response began, 503
// (a gRPC call: UNAVAILABLE), 504 on the route's time-out; after, the client's stream is reset.
// An end is passed on only when it is one: a request or response cut short (a reset, a closed
// connection) is never ended on the other side as if whole: that side is reset instead
// (close(code): RST_STREAM at once, never an END_STREAM before it). When the client
// goes away, whatever the upstream request is doing is cancelled at once.
// Counted, told to the decider and logged once, when the stream closes.
import type { OutgoingHttpHeaders } from 'node:http2';
import type { ClientStreamSink, CodecClientStream } from './codec-session.js';
import type { CodecServerStream, ServerStreamWatcher } from './codec-server.js';
import { endedWhole, type EndedStream, H2 } from './node-http2.js';
import { HeldStreamBody } from './held-stream-body.js';
import type { BodySource, HeldBody } from '../held-body.js';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { FLAG, hostPort, httpExchangeRecord, withNoteFlag, type AccessLogSink, type DecisionNote } from '../../log/access-record.js';
import { scope } from '../../log/logger.js';
import { Attempts, type AttemptSender } from '../attempts.js';
import type { ForwardTarget, LocalReply, Verdict } from '../decider.js';
import type { Endpoint as TrafficEndpoint } from '../../traffic/cluster.js';
import type { UpstreamTls } from '../tls/origination.js';
import { OUTCOME, REPLAYABLE_BODY_LIMIT } from '../../traffic/retry.js';
import { invalidEdit, validHeaderValue, wireText } from '../http1/headers.js';
import { decisionFailed, isConnectFailure, refusal, upstreamFailureBody, upstreamFailureDetails } from '../http1/replies.js';
import { RequestView } from '../request-view.js';
import { sourceFor } from '../upstream.js';
import { grpcMessage, grpcStatusForHttp, grpcStatusOf } from './grpc.js';
import { logNow, type Http2ConnectionFacts, type Http2Owner } from './owner.js';
import {
  downstreamHttp2ResponseFields, downstreamResponseFields, editedLines, http2Request, isHttp2RequestError, upstreamHttp1Headers, upstreamHttp2Fields, type Http2Request,
} from './request-headers.js';
import type { LegConnectError } from './http1-upstream.js';
import { http1HeadText, MirrorCopy, mirrorSenderOf } from '../http1/mirror.js';
import { resetCodeFor, type UpstreamRoute, type UpstreamTarget } from './upstream-sessions.js';
import { peerOf } from '../tls/peer-identity.js';
import { PEER_METADATA_HEADER, PEER_METADATA_ID_HEADER } from '../../metrics/peer-metadata.js';
import { fieldValue, joinedValue, removeFields, trailerList } from './field-list.js';
import { NO_FIELDS } from './codec-stream.js';
import { withExchangePairs } from '../peer-exchange.js';
import { packRequest } from '../standard-series.js';
import { GrpcMessageCounter } from './grpc-messages.js';

/** Istio's metadata exchange headers, taken out of a mesh peer's response. */
const PEER_METADATA_FIELDS = [PEER_METADATA_HEADER, PEER_METADATA_ID_HEADER];
const log = scope('default');
const END_STREAM = H2.FLAG_END_STREAM;
/** How long a pending stream waits for a released connection before it looks again for a session with room. */
const PENDING_POLL_MS = 100;

/**
 * Moves a body from `from` to `to` with back-pressure (`from` paused while `to` is full), counting
 * its bytes, and calls `ended` when `from` ends: what pipe() does, with two listeners instead of
 * seven. The caller decides what that end means (node ends an HTTP/2 stream's readable side on a
 * reset too).
 */
/** What a body is read from: a node stream, or an upstream stream of our frame layer. */
type BodyReader = { pause(): unknown; resume(): unknown; readonly readableEnded: boolean; on(event: 'data', fn: (chunk: Buffer) => void): unknown; on(event: 'end', fn: () => void): unknown };
/** The client's request body: the stream, or what a decider's wait held of it and the rest after. */
type RequestBody = CodecServerStream | Readable;
/** What a body is written to: a node stream, an HTTP/1.1 leg, or an upstream stream of our frame layer. */
type BodyWriter = { write(chunk: Buffer): boolean; once(event: 'drain', fn: () => void): unknown; end(): unknown };

/** Writes `chunk` to `to`; when `to` is full, `from` is paused until it drains. */
function passOn(from: Pick<BodyReader, 'pause' | 'resume'>, to: BodyWriter, chunk: Buffer): void {
  if (to.write(chunk)) return;
  from.pause();
  to.once('drain', () => { from.resume(); });
}

function relayBody(from: BodyReader, to: BodyWriter, count: (bytes: number, chunk: Buffer) => void, ended: () => void): void {
  from.on('data', (chunk: Buffer) => {
    count(chunk.length, chunk);
    passOn(from, to, chunk);
  });
  // An empty body's end may have come already (node reads END_STREAM on a DATA frame at once).
  if (from.readableEnded) ended();
  else from.on('end', ended); // 'end' comes once: `on` spares the wrapper `once` makes
}

/** An upstream stream's options: the request ends with its headers, or trailers are asked for after its body. */
const ENDED_REQUEST = { endStream: true } as const;
const OPEN_REQUEST = { endStream: false, waitForTrailers: true } as const;
/**
 * The client's request body for a request sent to a cluster: relayed to the attempt in flight with
 * back-pressure, and kept (up to REPLAYABLE_BODY_LIMIT) so a retry can send it again. Between
 * attempts the client is not read.
 */
class BodyPipe {
  private up: BodyWriter | undefined;
  private replay: Buffer[] | undefined = [];
  private kept = 0;
  /** The client's body ended whole (END_STREAM). */
  private ended = false;

  /** Answered locally: the rest of the body is read and dropped. */
  private dropping = false;

  constructor(private readonly from: RequestBody, count: (n: number, chunk: Buffer) => void) {
    from.pause();
    from.on('data', (chunk: Buffer) => {
      if (this.dropping) return;
      count(chunk.length, chunk);
      this.keep(chunk);
      const up = this.up;
      if (up === undefined) {
        from.pause();
      } else if (!up.write(chunk)) {
        from.pause();
        up.once('drain', () => { if (this.up === up) from.resume(); });
      }
    });
    const end = (): void => {
      if (!endedWhole(from as EndedStream)) return; // a reset or a closed connection: the attempt is cancelled, never ended
      this.ended = true;
      this.up?.end();
    };
    if (from.readableEnded) end();
    else from.once('end', end);
  }

  /** The body so far is held whole: it may go again. */
  get replayable(): boolean {
    return this.replay !== undefined;
  }

  /** An attempt's upstream: what was kept goes first, then the rest as it comes. */
  attach(up: BodyWriter): void {
    this.up = up;
    for (const b of this.replay ?? []) up.write(b);
    if (this.ended) up.end();
    else this.from.resume();
  }

  detach(): void {
    this.up = undefined;
  }

  /** The request is answered locally: what is left of the body is read (so the stream can end) and dropped. */
  discard(): void {
    this.dropping = true;
    this.up = undefined;
    this.replay = undefined;
    this.from.resume();
  }

  /** The response began: nothing goes again, so nothing more is kept. */
  settle(): void {
    this.replay = undefined;
  }

  private keep(chunk: Buffer): void {
    if (this.replay === undefined) return;
    this.kept += chunk.length;
    if (this.kept > REPLAYABLE_BODY_LIMIT) this.replay = undefined;
    else this.replay.push(chunk);
  }
}

type H2Route = Extract<UpstreamRoute, { kind: 'h2' }>;

/**
 * One HTTP/2 attempt, as its upstream stream's sink: what the stream says goes to the exchange with
 * the attempt, so that a retried attempt's late events are told apart (`gen`), with one object per
 * attempt instead of a listener and a closure per event.
 */
class Http2Leg implements ClientStreamSink {
  /** The response's head went on to the client: its body follows. */
  relaying = false;

  constructor(private readonly ex: Http2Exchange, readonly up: CodecClientStream, readonly route: H2Route, readonly gen: number) {}

  response(fields: string[], flags: number): void { this.ex.legResponse(this, fields, flags); }
  trailers(fields: string[]): void { this.ex.legTrailers(this, fields); }
  wantTrailers(): void { this.ex.legWantTrailers(this); }
  data(chunk: Buffer): void { this.ex.legData(this, chunk); }
  end(): void { this.ex.legEnd(this); }
  close(): void { this.ex.legClosed(this); }
}

export class Http2Exchange implements AttemptSender, BodySource, ServerStreamWatcher {
  private readonly started = performance.now();
  /** Where this stream is logged, fixed when it begins (undefined: the log was off then): its line is whole whenever the log is switched. */
  private readonly log: AccessLogSink | undefined;
  private req: Http2Request | undefined;
  private view: RequestView | undefined;
  private verdict: Verdict | undefined;
  private target: ForwardTarget | undefined;
  /** The client's request ended (END_STREAM seen). */
  private reqEnded: boolean;
  private responded = false;
  /** The response's end went to the client: the upstream's part is over. */
  private respDone = false;
  /** The HTTP/1.1 leg's response was read to its end (its connection may be pooled again). */
  private h1Complete = false;
  private status: number | undefined;
  private grpcStatus: number | undefined;
  private flags = 0;
  private details: string | undefined;
  private transportFailure: string | undefined;
  private up: CodecClientStream | undefined;
  /** The HTTP/1.1 leg's request, when the destination does not speak HTTP/2. */
  private h1Up: ClientRequest | undefined;
  private route: UpstreamRoute | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sentAt = 0;
  private respAt = 0;
  private bytesIn = 0;
  private bytesOut = 0;
  /** The attempt in flight goes to a sidecar over mutual TLS (Istio's metadata exchange is spoken with it), and its principal. */
  private meshUp = false;
  private upPrincipal: string | undefined;
  private h1UpSocket: Socket | undefined;
  /** A gRPC call's messages each way (made for gRPC calls only). */
  private grpcIn: GrpcMessageCounter | undefined;
  private grpcOut: GrpcMessageCounter | undefined;
  private upLocal: string | undefined;
  private fixed = false;
  private done = false;
  /** The upstream's trailers as they go on to the client (trailerList). */
  private respTrailers: readonly string[] | undefined;
  /** The response headers the access log's format asks for. */
  private respHeaders: string[] | undefined;
  /** The request's HEADERS ended the stream: there is no body to send on. */
  private readonly bodyless: boolean;
  /** The route's mirrors: the copy, until the body's reader is in place (undefined: none, the common case). */
  private mirror: MirrorCopy | undefined = undefined;
  /** Traffic management: the request's attempts on its cluster's endpoints, and its body kept for them. */
  private attempts: Attempts | undefined;
  private body: BodyPipe | undefined;
  /** The attempt the upstream handlers belong to: a dropped attempt's late events are ignored. */
  private gen = 0;
  /** Sent again once already because an upstream refused its stream unprocessed (RFC 9113 §8.7). */
  private resent = false;
  /** The attempt in flight (traffic management), its endpoint and TLS: a stream that finds maxConnections reached waits, then tries it again. */
  private attemptTo: TrafficEndpoint | undefined;
  private attemptTls: UpstreamTls | undefined;
  private lines: readonly string[] = [];
  private path = '';
  /** A decider waits for (or waited for) the body: its consumers read what this holds (undefined: the stream, the common case). */
  private heldBody: HeldStreamBody | undefined = undefined;

  constructor(private readonly owner: Http2Owner, private readonly conn: Http2ConnectionFacts, private readonly stream: CodecServerStream,
    private readonly raw: string[], flags: number) {
    this.log = logNow(owner.accessLog, conn);
    this.reqEnded = (flags & END_STREAM) !== 0;
    this.bodyless = this.reqEnded;
  }

  /**
   * The route's mirrors get the body too, once the stream's reader is in place (a listener added
   * earlier would start the flow before the upstream takes it). A reset stream is not copied.
   */
  private tapMirror(): void {
    const copy = this.mirror!;
    this.mirror = undefined;
    const stream = this.bodyFrom;
    stream.on('data', (chunk: Buffer) => copy.body(chunk, false));
    const end = (): void => { if (endedWhole(stream as EndedStream)) copy.end(); };
    if (stream.readableEnded) end();
    else stream.once('end', end);
  }

  /** Where the request body is read from: the stream, or what a decider's wait held of it. */
  private get bodyFrom(): RequestBody {
    return this.heldBody?.source ?? this.stream;
  }

  /** A decider's wait (an external authorizer's check) ends when the stream closes. */
  whenGone(gone: () => void): () => void {
    const stream = this.stream;
    stream.once('close', gone);
    return () => { stream.removeListener('close', gone); };
  }

  /** A decider waits for the body (held-body.ts): read and held until more than `limit` bytes are known or END_STREAM. */
  awaitBody(limit: number, partial: boolean): Promise<HeldBody | undefined> {
    if (this.gone || this.heldBody !== undefined || this.target !== undefined) return Promise.resolve(undefined);
    if (this.bodyless) return Promise.resolve({ bytes: Buffer.alloc(0), over: false });
    const length = this.view?.value('content-length');
    const declared = length !== undefined && /^[0-9]{1,15}$/.test(length) ? Number(length) : -1;
    this.heldBody = new HeldStreamBody(this.stream, limit, partial, declared);
    return this.heldBody.held;
  }

  start(): void {
    const s = this.owner.stats;
    s.rqTotal++;
    s.rqHttp2++;
    s.rqActive++;
    const stream = this.stream;
    // The stream's end, close and trailer request come as calls (ServerStreamWatcher), not events.
    // The request may have ended already (its END_STREAM in the read that opened the stream).
    stream.watcher = this;
    if (stream.readableEnded) this.reqEnded = true;
    const settings = this.owner.settings;
    const req = http2Request(this.raw, settings.normalization, settings.limits.maxHeaders);
    if (isHttp2RequestError(req)) {
      if (req.status === 400) s.rqProtocolErrors++;
      this.fixed = true;
      this.reply(refusal(req.status, req.reason));
      return;
    }
    this.req = req;
    if (req.grpc) {
      this.grpcIn = new GrpcMessageCounter();
      this.grpcOut = new GrpcMessageCounter();
    }
    this.view = new RequestView(req.method, req.url, 2, 0, req.headers, this.conn.socket as Socket, req.authority);
    this.view.body = this;
    const decider = this.owner.decider;
    if (!decider) {
      this.apply(this.conn.defaultVerdict);
      return;
    }
    let v: Verdict | Promise<Verdict>;
    try {
      v = decider.decide(this.view.asIncomingMessage(), this.conn.dst);
    } catch (err) {
      v = decisionFailed(err as Error);
    }
    if (v instanceof Promise) v.then((x) => this.apply(x), (err: Error) => this.apply(decisionFailed(err)));
    else this.apply(v);
  }

  /** Drain: the client is told nothing more; the stream finishes. A stream still waiting for a decision or a session is not held. */
  private get gone(): boolean {
    return this.done || this.stream.destroyed || this.stream.closed;
  }

  private apply(v: Verdict): void {
    if (this.gone) return;
    this.verdict = v;
    try {
      if (v.kind === 'reply') this.reply(v);
      else this.forward(v);
    } catch (err) {
      if (this.responded) {
        log.error(`HTTP/2 request failed after its answer began: ${(err as Error).message}`);
        this.stream.close(H2.INTERNAL_ERROR);
      } else {
        this.reply(decisionFailed(err as Error));
      }
    }
  }

  /** A local answer: as gRPC does it for a gRPC call (`:status 200`, trailers-only with grpc-status), else as HTTP. */
  private reply(r: LocalReply): void {
    if (this.gone || this.responded) return;
    this.responded = true;
    this.respDone = true; // a local answer is whole once written: the stream's close is its end, not a client leaving
    if (r.flag) this.flags |= FLAG[r.flag];
    if (r.details) this.details = r.details;
    const stream = this.stream;
    this.heldBody?.drop();
    // The body is not wanted: read and dropped (a body pipe would hold it, paused, for an attempt).
    this.body?.discard();
    if (!this.reqEnded) stream.resume();
    // A client sidecar learns who answered even when this one answers itself (a policy's 403).
    const exchange = this.conn.peer !== undefined ? this.owner.peerExchange : undefined;
    if (this.req?.grpc) {
      this.status = 200;
      this.grpcStatus = r.grpcStatus ?? grpcStatusForHttp(r.status);
      const g: OutgoingHttpHeaders = {
        ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(this.grpcStatus), 'grpc-message': grpcMessage(r.body),
      };
      if (exchange) for (const [name, value] of exchange.pairs) g[name] = value;
      stream.respond(g, { endStream: true });
      return;
    }
    this.status = r.status;
    const h: OutgoingHttpHeaders = Object.create(null) as OutgoingHttpHeaders;
    h[':status'] = r.status;
    if (exchange) for (const [name, value] of exchange.pairs) h[name] = value;
    let typed = false;
    for (const [name, value] of Object.entries(r.headers ?? {})) {
      const l = name.toLowerCase();
      if (l === 'content-length' || l === 'connection' || l === 'transfer-encoding' || !validHeaderValue(value)) continue;
      if (l === 'content-type') typed = true;
      h[l] = wireText(value);
    }
    if (!typed) h['content-type'] = 'text/plain';
    const body = this.req?.method === 'HEAD' ? '' : r.body;
    this.bytesOut = Buffer.byteLength(body);
    this.owner.stats.rsBodyBytes += this.bytesOut;
    h['content-length'] = Buffer.byteLength(r.body);
    stream.respond(h, { endStream: body === '' });
    if (body !== '') stream.end(body);
  }

  private forward(t: ForwardTarget): void {
    const req = this.req!;
    if (t.path !== undefined || (t.setHeaders?.length ?? 0) > 0 || (t.addHeaders?.length ?? 0) > 0) {
      const bad = invalidEdit(t);
      if (bad) {
        this.reply(decisionFailed(new Error(`the forward target has an invalid ${bad}`)));
        return;
      }
    }
    this.target = t;
    if (t.timeoutMs) this.timer = setTimeout(() => this.timedOut(), t.timeoutMs);
    this.lines = editedLines(req, t);
    this.path = t.path ?? req.url;
    if (t.mirrors !== undefined) this.startMirror(t);
    // The body is kept while it fits, for a retry or the re-send of a refused stream.
    const s = this.owner.stats;
    if (!this.bodyless) this.body = new BodyPipe(this.bodyFrom, (n, chunk) => { this.bytesIn += n; s.rqBodyBytes += n; this.grpcIn?.feed(chunk); });
    if (this.mirror !== undefined) this.tapMirror();
    if (t.cluster) {
      // Traffic management: the attempts choose endpoints.
      this.attempts = new Attempts(t.cluster, this, s, this.owner.decider?.completed !== undefined);
      this.attempts.start();
      return;
    }
    this.sendTo(t.address, t.port, t.tls);
  }

  /** The route's mirrors: a copy as HTTP/1.1 (the head as forwarded on an HTTP/1.1 leg), sent once the body is whole. */
  private startMirror(t: ForwardTarget): void {
    const req = this.req!;
    const o = this.owner;
    const head = http1HeadText(req.method, this.path, upstreamHttp1Headers(req, this.lines, !this.bodyless) as Record<string, string | number | string[]>);
    const copy = new MirrorCopy(mirrorSenderOf(o, o.upstreamMode, o.stats), t.mirrors!, head);
    if (this.bodyless) copy.end();
    else this.mirror = copy;
  }

  /** Sends the request to `address:port` over a shared HTTP/2 session, or an HTTP/1.1 leg when it speaks only that. */
  private sendTo(address: string, port: number, tls: ForwardTarget['tls'], to?: TrafficEndpoint): void {
    const gen = ++this.gen;
    const req = this.req!;
    const target: UpstreamTarget = {
      address, port, tls, source: sourceFor(this.owner.upstreamMode, { address, port }, this.conn.socket.remoteAddress),
      ...(to ? { cluster: { runtime: this.target!.cluster!.cluster, endpoint: to } } : {}),
    };
    this.sentAt = performance.now();
    this.meshUp = tls?.mesh === true;
    const exchange = this.meshUp ? this.owner.peerExchange : undefined;
    const lines = exchange ? withExchangePairs(this.lines, exchange.pairs) : this.lines;
    this.owner.pool.acquire(target, (route) => {
      if (gen !== this.gen || this.gone) {
        if (route.kind === 'h2') route.release();
        return;
      }
      this.route = route;
      try {
        if (route.kind === 'h2') {
          this.upPrincipal = route.principal;
          this.sendHttp2(route, upstreamHttp2Fields(req, lines, this.path, tls ? 'https' : 'http'), gen);
        } else if (route.kind === 'http1') {
          this.sendHttp1(target, this.path, lines, gen);
        }
        else this.upstreamFailed(route.error, route.transportFailure);
      } catch (err) {
        this.upstreamFailed(err as NodeJS.ErrnoException);
      }
    });
  }

  // ---- AttemptSender: the attempts of a request sent to a cluster

  get replayable(): boolean {
    return this.body === undefined || this.body.replayable;
  }

  send(to: TrafficEndpoint, tls: UpstreamTls | undefined): void {
    if (this.gone) return;
    this.attemptTo = to;
    this.attemptTls = tls;
    this.sendTo(to.address, to.port, tls, to);
  }

  drop(): void {
    this.gen++;
    this.body?.detach();
    this.cancelUpstream();
    this.up = undefined;
    this.h1Up = undefined;
    this.h1Complete = false;
  }

  answer(reply: LocalReply): void {
    if (this.timer) clearTimeout(this.timer);
    this.reply(reply);
  }

  private sendHttp2(route: H2Route, fields: string[], gen: number): void {
    this.upLocal = route.local;
    const up = route.session.request(fields, this.bodyless ? ENDED_REQUEST : OPEN_REQUEST);
    this.up = up;
    this.owner.stats.upstreamRqActive++;
    up.sink = new Http2Leg(this, up, route, gen);
    this.body?.attach(up);
  }

  // ---- an HTTP/2 attempt's stream, through its Http2Leg (`leg.gen`: whether it is still the exchange's)

  /** The attempt's stream is over: counted, its session's slot given back; a failure or a cut if it was the current one. */
  legClosed(leg: Http2Leg): void {
    this.owner.stats.upstreamRqActive--;
    leg.route.release();
    if (this.done || leg.gen !== this.gen) return;
    const code = leg.up.rstCode;
    if (!this.responded) {
      this.upstreamFailed(Object.assign(new Error(`upstream reset the stream (code ${code ?? '?'})`), { code: 'ECONNRESET' }), undefined, code);
    } else if (!this.respDone) {
      // Closed before its end reached the client: a reset, or a connection gone (a stream with data
      // still unread closes only after its end, so this is never a whole answer).
      this.responseCut(resetCodeFor(code));
    }
  }

  /** The request's body went up whole: its trailers, if the client sent some. */
  legWantTrailers(leg: Http2Leg): void {
    if (leg.gen !== this.gen) return;
    const t = this.stream.trailers;
    leg.up.sendTrailers(t ? trailerList(t) : NO_FIELDS);
  }

  legResponse(leg: Http2Leg, fields: string[], flags: number): void {
    if (leg.gen !== this.gen) return;
    // The frame layer judged the block: its one pseudo-header, :status, comes first.
    const status = Number(fields[1]);
    if (this.attempts) {
      // A response the route's retry policy retries is dropped here (the stream is cancelled).
      const grpc = fieldValue(fields, 'grpc-status');
      if (!this.attempts.head(status, grpc !== undefined ? grpcStatusOf(grpc) : undefined)) return;
    }
    if (!this.responseHead(status, downstreamHttp2ResponseFields(fields), (flags & END_STREAM) !== 0)) return;
    // Its body follows, as the client takes it.
    leg.relaying = true;
    if (leg.up.readableEnded) this.legEnd(leg);
    else leg.up.resume();
  }

  legData(leg: Http2Leg, chunk: Buffer): void {
    if (!leg.relaying) return;
    this.countOut(chunk.length, chunk);
    passOn(leg.up, this.stream, chunk);
  }

  legEnd(leg: Http2Leg): void {
    if (!leg.relaying) return;
    leg.relaying = false;
    if (endedWhole(leg.up)) this.responseEnded();
    else this.responseCut(resetCodeFor(leg.up.rstCode));
  }

  legTrailers(leg: Http2Leg, fields: string[]): void {
    if (leg.gen !== this.gen) return;
    this.respTrailers = trailerList(fields);
    if (this.req!.grpc) this.grpcStatus = grpcStatusOf(fieldValue(fields, 'grpc-status'));
  }

  private sendHttp1(target: UpstreamTarget, path: string, lines: readonly string[], gen: number): void {
    const req = this.req!;
    const up = this.owner.http1.request(target, req.method, path, upstreamHttp1Headers(req, lines, !this.bodyless));
    this.h1Up = up;
    const stats = this.owner.stats;
    stats.upstreamRqActive++;
    up.once('close', () => { stats.upstreamRqActive--; });
    up.on('error', (err: LegConnectError) => {
      if (this.done || gen !== this.gen) return;
      // Before its connection was made: a connect failure (a TLS handshake's: its transport failure), as on the HTTP/2 path.
      if (!this.responded) this.upstreamFailed(err, err.tlsHandshake ? err.message : undefined, undefined, err.connecting === true);
      else if (!this.respDone) this.responseCut(H2.INTERNAL_ERROR);
    });
    up.once('socket', (s: Socket) => {
      this.h1UpSocket = s;
      const note = (): void => { this.upLocal = hostPort(s.localAddress, s.localPort); };
      if (s.connecting) s.once('connect', note);
      else note();
    });
    up.once('response', (res: IncomingMessage) => {
      if (gen !== this.gen) {
        res.resume();
        return;
      }
      if (this.attempts && !this.attempts.head(res.statusCode ?? 502)) return;
      const bodyless = req.method === 'HEAD' || res.statusCode === 204 || res.statusCode === 304;
      res.on('error', () => { /* the request's error handler answers */ });
      res.once('end', () => {
        this.h1Complete = res.complete;
        this.respTrailers = trailerList(res.rawTrailers);
        if (req.grpc) this.grpcStatus ??= grpcStatusOf(res.trailers['grpc-status']);
      });
      // The connection closed before the response's end (node:http's 'aborted'): the client's stream is reset, never ended.
      res.once('close', () => {
        if (!res.complete && !this.done && this.responded && !this.respDone) this.responseCut(H2.INTERNAL_ERROR);
      });
      const status = res.statusCode ?? 502;
      if (this.responseHead(status, downstreamResponseFields(status, res.rawHeaders), bodyless)) {
        relayBody(res, this.stream, (n, chunk) => this.countOut(n, chunk), () => {
          if (res.complete) this.responseEnded();
          else this.responseCut(H2.INTERNAL_ERROR);
        });
      } else {
        this.h1Complete = true;
        res.resume();
      }
    });
    if (this.body) this.body.attach(up);
    else up.end();
  }

  /** The upstream's response reached its end: the client's stream ends (its trailers follow when it takes them). */
  private responseEnded(): void {
    if (this.done || this.respDone) return;
    this.respDone = true;
    this.attempts?.ended(false);
    this.stream.end();
  }

  /** The upstream's response was cut short after its head went out: the client's stream is reset, not ended. */
  private responseCut(code: number): void {
    if (this.done || this.respDone) return;
    this.attempts?.ended(true);
    this.flags |= FLAG.UC;
    this.details = upstreamFailureDetails('connection_termination', undefined, true);
    this.stream.close(code);
  }

  /** A chunk of the response's body went on to the client. */
  private countOut(n: number, chunk: Buffer): void {
    this.bytesOut += n;
    this.owner.stats.rsBodyBytes += n;
    this.grpcOut?.feed(chunk);
  }

  /**
   * Sends the response head on (`fields`: `:status`, then name, value... as they go to the client,
   * edited here); true when a body follows (to be piped).
   */
  private responseHead(status: number, fields: string[], ended: boolean): boolean {
    if (this.gone) return false;
    // No content whatever follows (the stream's respond ends these with their head).
    if (this.req!.method === 'HEAD' || status === 204 || status === 205 || status === 304) ended = true;
    if (this.timer) clearTimeout(this.timer);
    this.respAt = performance.now();
    this.responded = true;
    this.body?.settle();
    this.status = status;
    this.details ??= 'via_upstream';
    const removed = this.target?.removeResponseHeaders;
    if (removed) removeFields(fields, removed, 2);
    // Istio's metadata exchange, with mesh peers only: an upstream sidecar's headers are read and taken
    // out, a client sidecar gets this one's; no application ever sees such headers from a mesh peer.
    const exchange = this.owner.peerExchange;
    if (exchange !== undefined && (this.meshUp || this.conn.peer !== undefined)) {
      const value = fieldValue(fields, PEER_METADATA_HEADER);
      if (value !== undefined || fieldValue(fields, PEER_METADATA_ID_HEADER) !== undefined) removeFields(fields, PEER_METADATA_FIELDS, 2);
      if (this.meshUp && this.view) {
        this.upPrincipal ??= this.h1UpSocket ? peerOf(this.h1UpSocket)?.principal : undefined;
        this.view.upstreamPrincipal = this.upPrincipal;
        this.view.peerMetadata = value;
      }
      if (this.conn.peer !== undefined) for (const [name, v] of exchange.pairs) fields.push(name, v);
    }
    const added = this.target?.addResponseHeaders;
    if (added) for (const [name, value] of added) if (validHeaderValue(value)) fields.push(name.toLowerCase(), wireText(value));
    if (this.req!.grpc) {
      const grpc = fieldValue(fields, 'grpc-status');
      if (grpc !== undefined) this.grpcStatus = grpcStatusOf(grpc);
    }
    if (this.log) this.keepResponseHeaders(fields);
    // Trailers go on to a client that said it takes them (`te: trailers`, as every gRPC client does):
    // waiting for them costs a frame per response, which a plain HTTP/2 client does not pay.
    const trailers = !ended && this.req!.teTrailers;
    // Before the head goes: a stream whose request had ended closes with it, at once.
    if (ended) {
      this.respDone = true;
      this.attempts?.ended(false);
    }
    this.stream.respondFields(fields, { endStream: ended, waitForTrailers: trailers });
    return !ended;
  }

  private keepResponseHeaders(fields: readonly string[]): void {
    for (const name of this.log!.responseHeaders) {
      const v = joinedValue(fields, name);
      if (v !== undefined) (this.respHeaders ??= []).push(name, v);
    }
  }

  /** `connecting`: the HTTP/1.1 leg's connection failed before it was made (the HTTP/2 path says so by a failed route). */
  private upstreamFailed(err: NodeJS.ErrnoException, transport?: string, rstCode?: number, connecting = false): void {
    if (this.gone || this.responded) return;
    if (this.attempts) {
      this.attemptFailed(err, transport, rstCode, connecting);
      return;
    }
    if (this.resendRefused(rstCode)) {
      const t = this.target!;
      this.drop();
      this.sendTo(t.address, t.port, t.tls);
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.owner.stats.upstreamRqErrors++;
    this.transportFailure = transport;
    const connectFailed = (this.route?.kind === 'failed' || connecting) && (isConnectFailure(err.code) || transport !== undefined);
    const refused = rstCode === H2.REFUSED_STREAM;
    this.reply({
      kind: 'reply', status: 503, body: upstreamFailureBody(err, transport),
      flag: connectFailed ? 'UF' : 'UC',
      details: upstreamFailureDetails(connectFailed ? 'connection_failure' : refused ? 'protocol_error' : 'connection_termination', err.code, false),
    });
  }

  /**
   * Whether a stream the upstream refused goes again, whatever the retry policy: REFUSED_STREAM (or
   * above the last stream of its GOAWAY) says the upstream processed none of it (RFC 9113 §8.7), so,
   * as a keep-alive race on HTTP/1.1, it cannot be delivered twice. Once per request (an upstream
   * that refuses everything gets no loop), and only with the body sent so far held whole.
   */
  private resendRefused(rstCode: number | undefined): boolean {
    if (rstCode !== H2.REFUSED_STREAM || this.resent || !this.replayable) return false;
    this.resent = true;
    return true;
  }

  /** An attempt on a cluster's endpoint failed before its response head: the attempts decide what follows. */
  private attemptFailed(err: NodeJS.ErrnoException & { connectTimeout?: true }, transport: string | undefined, rstCode: number | undefined,
    connecting: boolean): void {
    if (err.code === 'EOVERFLOW') {
      this.waitForConnection(this.attemptTo!, this.attemptTls);
      return;
    }
    this.transportFailure = transport;
    const connectFailed = (this.route?.kind === 'failed' || connecting) && (isConnectFailure(err.code) || transport !== undefined);
    const refused = rstCode === H2.REFUSED_STREAM;
    const timedOut = err.connectTimeout === true;
    this.attempts!.failed({
      outcome: timedOut ? OUTCOME.connectTimeout : connectFailed ? OUTCOME.connectFailure : refused ? OUTCOME.refusedStream : OUTCOME.reset,
      reused: this.resendRefused(rstCode),
      flag: connectFailed ? 'UF' : 'UC',
      reason: timedOut ? 'connection timeout' : transport !== undefined ? `connection failure, transport failure reason: ${transport}`
        : connectFailed ? 'connection failure' : refused ? 'remote refused stream reset' : 'connection termination',
      details: upstreamFailureDetails(connectFailed ? 'connection_failure' : refused ? 'protocol_error' : 'connection_termination', err.code, false),
    });
  }

  /**
   * The cluster's maxConnections is reached (a new session or HTTP/1.1 leg was needed): the stream
   * waits as a pending request, as Envoy queues it (http1MaxPendingRequests, which is Envoy's
   * max_pending_requests for HTTP/2 too; over it, 503 UO), until a connection of the cluster is
   * released anywhere — or, every PENDING_POLL_MS, because a session of this worker may have room for
   * another stream without any connection closing — then tries again.
   */
  private waitForConnection(to: TrafficEndpoint, tls: UpstreamTls | undefined): void {
    const attempts = this.attempts!;
    const cluster = this.target!.cluster!.cluster;
    if (!cluster.tryAcquirePending()) {
      attempts.overflowed('pending requests (http1MaxPendingRequests)');
      return;
    }
    attempts.waiting('the cluster\'s connections (maxConnections) are all in use');
    const gen = this.gen;
    void cluster.waitForConnection(PENDING_POLL_MS).then(() => {
      cluster.releasePending();
      if (gen !== this.gen || this.gone || !attempts.waitingOn(to)) return;
      this.sendTo(to.address, to.port, tls, to);
    });
  }

  private timedOut(): void {
    if (this.gone) return;
    if (this.attempts && !this.responded) {
      this.attempts.timedOut();
      return;
    }
    this.owner.stats.upstreamRqTimeouts++;
    this.cancelUpstream();
    if (this.responded) {
      this.stream.close(H2.CANCEL);
      return;
    }
    this.reply({ kind: 'reply', status: 504, body: 'upstream request timeout\n', flag: 'UT', details: 'upstream_response_timeout' });
  }

  // ---- the client's stream (ServerStreamWatcher)

  requestEnded(): void {
    this.reqEnded = true;
  }

  /** The response's body went out whole to a client that takes trailers: the upstream's, or none. */
  trailersWanted(): void {
    this.stream.sendTrailers(this.respTrailers ?? NO_FIELDS);
  }

  /** The stream closed (answered, reset by either side, or the connection went): counted and logged once. */
  streamClosed(): void {
    if (this.done) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.heldBody?.cancel();
    const stream = this.stream;
    const finished = this.respDone && endedWhole(stream);
    this.attempts?.abandoned();
    if (this.attempts) this.flags |= this.attempts.flags;
    if (!finished) {
      // Whatever the upstream request is still doing (its body on the way, its response unread or
      // paused by flow control) ends now: nothing stays open for a client that is gone.
      this.cancelUpstream();
      if ((this.flags & (FLAG.UC | FLAG.UT)) === 0) {
        this.flags |= FLAG.DC;
        this.details ??= 'downstream_remote_disconnect';
      }
    }
    const status = this.responded ? this.status : undefined;
    const s = this.owner.stats;
    s.rqActive--;
    const ms = performance.now() - this.started;
    let note: DecisionNote | undefined | void;
    const decider = this.owner.decider;
    if (decider?.completed && !this.fixed && this.view) {
      if (this.attempts) {
        this.view.trail = this.attempts.trail;
        this.view.endpoint = this.attempts.endpoint?.hostPort;
      }
      try {
        note = decider.completed(this.view.asIncomingMessage(), this.verdict, status, ms, this.started);
      } catch (err) {
        log.error(`request completion hook failed: ${(err as Error).message}`);
      }
    }
    // After the decider: its note may add a flag (RBAC, UAEX) for the response_flags label.
    if (status !== undefined) {
      const grpc = this.req?.grpc ? this.grpcStatus ?? null : undefined;
      const flags = withNoteFlag(this.flags, note);
      s.recordResponse(status, ms, this.conn.peer?.principal, grpc, flags);
      const v = this.view;
      this.owner.standard.recordHttp(v?.routedCluster ?? this.target?.cluster?.cluster.name ?? '', this.conn.peer?.principal ?? v?.upstreamPrincipal ?? '', v?.peerMetadata ?? '',
        packRequest(status, grpc, flags), ms, this.bytesIn, this.bytesOut, this.grpcIn?.messages ?? 0, this.grpcOut?.messages ?? 0);
    }
    if (this.log) this.logStream(this.log, status, note || undefined, ms);
  }

  /**
   * Ends the upstream request unless it is over: an HTTP/2 stream is reset with CANCEL, or destroyed
   * when its upstream closed it already (node lets such a stream go only once the rest of its
   * answer, held for a client that stopped reading, is read); an HTTP/1.1 leg whose response was not
   * read to its end, or whose request body never ended, is closed (never back in the pool).
   */
  private cancelUpstream(): void {
    const up = this.up;
    if (up && !up.destroyed) {
      if (up.closed) up.destroy();
      else up.close(H2.CANCEL); // our frame layer sends the RST_STREAM at once, no END_STREAM before it
    }
    // node's client lets a connection go (and says 'close') only once both messages ended.
    const h1 = this.h1Up;
    if (h1 && !h1.destroyed && (!this.h1Complete || !h1.writableFinished)) h1.destroy();
  }

  private logStream(sink: AccessLogSink, status: number | undefined, note: DecisionNote | undefined, durationMs: number): void {
    sink.write(httpExchangeRecord({
      role: this.owner.role, started: this.started, sentAt: this.sentAt, respAt: this.respAt, durationMs,
      method: this.view?.method, url: this.view?.url, rawHeaders: this.view?.rawHeaders, protocol: 'HTTP/2',
      status, flags: this.flags, details: this.details, note, target: this.target, fixed: this.fixed, retried: this.resent,
      attempts: this.attempts ? this.attempts.retries + 1 : undefined, endpoint: this.attempts?.endpoint?.hostPort,
      bytesIn: this.bytesIn, bytesOut: this.bytesOut, respHeaders: this.respHeaders, upHost: undefined, upLocal: this.upLocal,
      transportFailure: this.transportFailure, grpcStatus: this.req?.grpc ? this.grpcStatus : undefined, downstream: this.conn.logged!,
    }));
  }
}
