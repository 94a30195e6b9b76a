// One client connection on the HTTP/1.1 path: the request parser (ours: request-parser.ts), the
// requests in arrival order, and the bytes this turn produced for the client (written in one
// write). Requests are answered one at a time, in order: the next pipelined request is decided and
// sent upstream when the previous response is complete; meanwhile at most one more is parsed.
// Every request, whatever it carries (Upgrade, CONNECT, Expect, HTTP/1.0), is judged by the decider
// before anything goes upstream. A protocol switch happens only when the upstream confirms it (101
// to an Upgrade, 2xx to CONNECT): the connection then becomes a tunnel (tunnel.ts); any other
// answer keeps it HTTP and the next request is parsed and judged like the first.
import type { Socket } from 'node:net';
import { FLAG, hostPort, httpExchangeRecord, withNoteFlag, type AccessLogSink, type DecisionNote, type ListenerRole, type LoggedDownstream } from '../../log/access-record.js';
import { scope } from '../../log/logger.js';
import { Attempts, type AttemptSender } from '../attempts.js';
import { NO_DESTINATION, type ForwardTarget, type LocalReply, type RequestDecider, type Verdict } from '../decider.js';
import type { Endpoint as TrafficEndpoint } from '../../traffic/cluster.js';
import { REPLAYABLE_BODY_LIMIT, OUTCOME } from '../../traffic/retry.js';
import { RequestView } from '../request-view.js';
import type { Endpoint } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import { sourceFor, type UpstreamMode } from '../upstream.js';
import { invalidEdit, validHeaderValue, wireText } from './headers.js';
import { isMessageError, requestMessage, upstreamHead, type MessageOptions, type RequestMessage } from './message.js';
import { decisionFailed, httpDate, isConnectFailure, refusal, replyBytes, upstreamFailureBody, upstreamFailureDetails } from './replies.js';
import { RequestParseError, RequestParser, type RequestHead, type RequestLimits } from './request-parser.js';
import { ResponseError, withoutHeaderLines, type ResponseHead, type SwitchRequest } from './response-parser.js';
import { runTunnel } from './tunnel.js';
import { MirrorCopy, mirrorSender } from './mirror.js';
import { attachReader, detachReader, givePooled, owned, POOLED_SIZE, takePooled, writeCopy } from '../read-buffers.js';
import { hold as holdForBatch, released as releaseHeld, type BatchedWriter } from '../write-batch.js';
import type { TlsHandshakeError, UpstreamTls } from '../tls/origination.js';
import { peerOf, type PeerIdentity } from '../tls/peer-identity.js';
import { loggedDownstream } from '../logged-downstream.js';
import { takePeerMetadata, withExchangeLines, type PeerExchange } from '../peer-exchange.js';
import { clusterConnectionPolicy, poolKey, type ResponseSink, type UpstreamConnection, type UpstreamPool } from './upstream-pool.js';
import { packRequest, type StandardSeries } from '../standard-series.js';
import { heldBodyReady, type BodySource, type BodyWait, type HeldBody } from '../held-body.js';
import { DirectWriter } from '../direct-write.js';

const log = scope('default');

/** Request body held while its request waits for a verdict or an upstream; past this the client is not read. */
const MAX_HELD_BODY = 64 * 1024;
/** After an answer to a request whose body is still coming, the rest is read and dropped this long at most. */
export const LINGER_MS = 5_000;

const CRLF = '\r\n';
/** Writes this large or more go from a pooled buffer (smaller ones come from Node's Buffer pool). */
const POOL_FROM = 4 * 1024;
const LAST_CHUNK = '0\r\n\r\n';
const STATUS_PREFIX = 'HTTP/1.1 ';
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
/** Requests sent again on a new connection when a pooled one turns out closed before answering. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const TIMED_OUT: LocalReply = { kind: 'reply', status: 504, body: 'upstream request timeout\n', flag: 'UT', details: 'response_timeout' };
const HTTP10_REFUSED: LocalReply = { kind: 'reply', status: 426, body: '', flag: 'DPE', details: 'low_version' };
const HEAD_TIMED_OUT: LocalReply = { kind: 'reply', status: 408, body: 'request head not received in time\n', details: 'request_header_timeout' };

/** How requests are read and checked (the same for every connection of a handler). */
export interface Http1Settings extends MessageOptions {
  /** ENABLE_100_CONTINUE_HEADERS: pass `Expect: 100-continue` on and relay the upstream's 100 (else the proxy answers 100). */
  readonly forward100Continue: boolean;
  /** PILOT_HTTP10: accept HTTP/1.0 requests (else 426). */
  readonly allowHttp10: boolean;
  readonly limits: RequestLimits;
  /** A request head that has begun must be complete within this (408, and the connection closes). */
  readonly headTimeoutMs: number;
}

/** What a connection needs from the handler that owns it. */
export interface ConnectionOwner {
  readonly stats: DirectionStats;
  readonly upstreamMode: UpstreamMode;
  readonly pool: UpstreamPool;
  /** Undefined: every request to the connection's original destination, decided here without a call. */
  readonly decider: RequestDecider | undefined;
  readonly draining: boolean;
  readonly settings: Http1Settings;
  /**
   * Where each request is logged once complete, read when the request begins: undefined or not `on`,
   * nothing is measured or built for a log.
   */
  readonly accessLog: AccessLogSink | undefined;
  /** Names the upstream cluster and route in the log as Istio does. */
  readonly role: ListenerRole;
  /** The sidecar's metadata-exchange lines (src/proxy/peer-exchange.ts); undefined: none spoken (the gateway). */
  readonly peerExchange: PeerExchange | undefined;
  /** Where Istio's standard metrics are counted (the reporter's series). */
  readonly standard: StandardSeries;
  forget(c: Connection): void;
}

/** One request and its response. */
class Exchange implements ResponseSink, AttemptSender, BodySource {
  verdict: Verdict | undefined;
  /** Traffic management: the request's attempts on its cluster's endpoints. */
  attempts: Attempts | undefined = undefined;
  /** The route's mirrors: the copy being gathered (undefined: none, the common case). */
  mirror: MirrorCopy | undefined = undefined;
  /** The body sent so far, held while it fits REPLAYABLE_BODY_LIMIT (a retry sends it again); undefined past it. */
  replay: Buffer[] | undefined = undefined;
  replayBytes = 0;
  /** The attempt's upstream connection was taken from the pool (not made for it). */
  reusedUp = false;
  up: UpstreamConnection | undefined;
  target: ForwardTarget | undefined;
  /** The request head as sent upstream (kept to send it again). */
  upHead = '';
  /** Body bytes that arrived before an upstream took the request. */
  held: Buffer[] | undefined;
  heldBytes = 0;
  /** Past this many held bytes the client is not read (a decider waiting for the body raises it). */
  holdLimit = MAX_HELD_BODY;
  /** A decider waits for the body before it decides (undefined: none, the common case). */
  bodyWait: BodyWait | undefined = undefined;
  /** The proxy said 100 Continue itself (to read a body a decider waits for). */
  continued = false;
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
  /** The upstream confirmed the protocol switch: a tunnel starts once its head is written. */
  switched = false;
  timer: NodeJS.Timeout | undefined;
  /** Body bytes received and sent (a tunnel's bytes added when it ends): BYTES_RECEIVED, BYTES_SENT. */
  bytesIn = 0;
  bytesOut = 0;
  /** Envoy's response flags (FLAG bits) and RESPONSE_CODE_DETAILS, set where the request's fate is decided. */
  flags = 0;
  details: string | undefined = undefined;
  /** Why TLS to the upstream failed, for the log (`TLS_error:...`). */
  transportFailure: string | undefined = undefined;
  // Measured only for the access log (0 / undefined otherwise): when the request went upstream and
  // its response head came back, the upstream connection's addresses, the response headers asked for.
  sentAt = 0;
  respAt = 0;
  upHost: string | undefined = undefined;
  upLocal: string | undefined = undefined;
  respHeaders: string[] | undefined = undefined;
  /** The attempt in flight goes to a sidecar over mutual TLS (Istio's metadata exchange is spoken with it). */
  meshUp = false;

  /**
   * `msg` undefined: a request refused before any decision, answered `fixed`. `log`: where this
   * request is logged, fixed when it begins (undefined: the log was off then, and nothing is
   * measured for it), so that its line is whole whenever a Telemetry switches the log.
   */
  constructor(readonly conn: Connection, readonly msg: RequestMessage | undefined, readonly view: RequestView,
    readonly fixed: LocalReply | undefined, keepAlive: boolean, readonly started: number, readonly log: AccessLogSink | undefined) {
    this.closeAfter = !keepAlive;
  }

  get reqComplete(): boolean {
    return this.view.complete;
  }

  awaitBody(limit: number, partial: boolean): Promise<HeldBody | undefined> {
    return this.conn.awaitBody(this, limit, partial);
  }

  get headRequest(): boolean {
    return this.view.method === 'HEAD';
  }

  get switching(): SwitchRequest {
    return this.msg?.tunnel?.kind;
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

  // ---- AttemptSender: the attempts of a request sent to a cluster

  get replayable(): boolean {
    return !this.hasBody || this.replay !== undefined;
  }

  send(to: TrafficEndpoint, tls: UpstreamTls | undefined, fresh: boolean): void {
    this.conn.sendAttempt(this, to, tls, fresh);
  }

  drop(): void {
    this.conn.dropAttempt(this);
  }

  answer(reply: LocalReply): void {
    this.conn.answerAttempts(this, reply);
  }
}

export class Connection implements BatchedWriter {
  idleSince = performance.now();
  private readonly parser: RequestParser;
  private readonly queue: Exchange[] = [];
  /** The request whose body is being parsed. */
  private receiving: Exchange | undefined;
  /** Bytes read and not parsed yet (the parser stopped at a message's end). */
  private input: Buffer | undefined;
  /** The parser stopped at a message's end: it goes on once the requests ahead allow (`mayParse`). */
  private holdParse = false;
  /** Nothing more is parsed: an error, or what follows the connection's last request. */
  private halted = false;
  /** A request the parser refused: answered once the earlier responses are out, then the connection ends. */
  private refused: LocalReply | undefined;
  private out: (string | Buffer)[] = [];
  private outBytes = 0;
  /** `out` holds views of the upstream read buffer: they are copied before the read is done. */
  private outBorrowed = false;
  /** No further request is taken; the connection ends once the queue is done. */
  private last = false;
  private closed = false;
  private ending = false;
  private tunneling = false;
  private lingerTimer: NodeJS.Timeout | undefined;
  private headTimer: NodeJS.Timeout | undefined;
  private writeBlocked = false;
  private upBlocked = false;
  /** The client's writes (straight to the socket's handle when it can: direct-write.ts). */
  private readonly writer: DirectWriter;
  private readonly remote: string | undefined;
  private readonly defaultVerdict: Verdict;
  private lastAddress = '';
  private lastPort = -1;
  private lastTls: UpstreamTls | undefined;
  private lastSource: string | undefined;
  private lastKey = '';
  /** For the access log only: read from the socket once, when the first request to be logged begins. */
  private logged: LoggedDownstream | undefined = undefined;
  /** The client's identity when it came over mutual TLS (the peer of an inbound mesh connection). */
  private readonly peer: PeerIdentity | undefined;
  /** A request cut by a parse error: logged with the refusal that answers it, once that is sent. */
  private refusedCut: { ex: Exchange; note: DecisionNote | undefined } | undefined;
  /** When the parser refused what had no request yet (for the log of the refusal). */
  private refusedAt = 0;
  /** Where the refusal that ends the connection is logged (undefined: the log was off when it came). */
  private refusalLog: AccessLogSink | undefined = undefined;

  constructor(private readonly owner: ConnectionOwner, readonly socket: Socket, private readonly dst: Endpoint | undefined) {
    this.remote = socket.remoteAddress;
    this.peer = peerOf(socket);
    this.writer = new DirectWriter(socket, this.onDrain);
    this.defaultVerdict = dst ? { kind: 'forward', address: dst.address, port: dst.port } : NO_DESTINATION;
    this.parser = new RequestParser({
      onHead: (head) => this.requestHead(head),
      onBody: (chunk) => this.requestBody(chunk),
      onEnd: () => this.requestEnd(),
    }, owner.settings.limits);
  }

  /** The access log if it is on now (the connection's addresses read for it the first time); undefined: off. */
  private logNow(): AccessLogSink | undefined {
    const log = this.owner.accessLog;
    if (log === undefined || !log.on) return undefined;
    this.logged ??= loggedDownstream(this.socket, this.dst, this.peer);
    return log;
  }

  /** Starts with the bytes already read (`head`), then reads the socket. */
  begin(head: Buffer): void {
    const socket = this.socket;
    attachReader(socket, this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('drain', this.onDrain);
    socket.on('error', ignore);
    if (head.length > 0) this.onData(head);
    else this.settle();
  }

  /** Drain: an idle connection ends now; a busy one after its current response (which says close). */
  drain(): void {
    if (this.queue.length === 0 && this.receiving === undefined && !this.tunneling) {
      this.last = true;
      this.settle();
    }
  }

  /** Keep-alive time-out: a connection idle this long is closed. */
  sweep(now: number, idleMs: number): void {
    if (this.queue.length === 0 && this.receiving === undefined && !this.tunneling && now - this.idleSince > idleMs) this.socket.destroy();
  }

  // ---- the request side

  private readonly onData = (chunk: Buffer): void => {
    if (this.closed || this.tunneling || this.ending) return; // lingering: read and dropped
    this.input = this.input === undefined ? chunk : Buffer.concat([this.input, chunk]);
    this.pump();
    // A read into the shared buffer (read-buffers.ts): what waits for the next turn is copied out.
    if (this.input !== undefined) this.input = owned(this.input);
    this.settle();
  };

  /** Parses what was read, unless the parser must wait for the requests ahead. */
  private pump(): void {
    while (this.input !== undefined && !this.holdParse && !this.halted && !this.closed) {
      const input = this.input;
      this.input = undefined;
      const r = this.parser.execute(input);
      if (r instanceof RequestParseError) {
        this.parseError(r);
        break;
      }
      if (r < input.length) this.input = input.subarray(r);
    }
    this.armHeadTimer();
  }

  private requestHead(head: RequestHead): boolean {
    if (this.last || this.ending) { // what follows a `Connection: close` request is not read
      this.halted = true;
      return true;
    }
    const s = this.owner.stats;
    s.rqTotal++;
    s.rqActive++;
    const settings = this.owner.settings;
    const m = requestMessage(head, settings);
    let fixed: LocalReply | undefined;
    let msg: RequestMessage | undefined;
    if (isMessageError(m)) {
      if (m.status === 400) s.rqProtocolErrors++;
      log.debug('request refused', { status: m.status, reason: m.reason });
      fixed = refusal(m.status, m.reason);
    } else if (m.minor === 0 && !settings.allowHttp10) {
      fixed = HTTP10_REFUSED;
    } else {
      msg = m;
    }
    const view = new RequestView(head.method, msg ? msg.url : head.target, 1, head.minor, msg ? msg.headers : head.rawHeaders, this.socket, msg?.authority);
    const ex = new Exchange(this, msg, view, fixed, msg !== undefined && msg.keepAlive && !this.owner.draining, performance.now(), this.logNow());
    view.body = ex;
    if (ex.closeAfter) this.last = true;
    this.queue.push(ex);
    this.receiving = ex;
    if (fixed) { // its body is not read: the connection ends after the answer
      if (head.framing === 'none' || (head.framing === 'length' && head.contentLength === 0)) view.complete = true;
      this.halted = true;
      return true;
    }
    return false;
  }

  private requestBody(view: Buffer): void {
    const ex = this.receiving;
    if (!ex) return;
    this.owner.stats.rqBodyBytes += view.length;
    ex.hasBody = true;
    ex.bytesIn += view.length;
    if (ex.mirror !== undefined) ex.mirror.body(view, true);
    if (ex.done) return; // answered already: the rest is dropped
    if (ex.up) {
      this.bodyToUpstream(ex, view);
      if (ex.attempts) keepForReplay(ex, view, true);
    } else {
      const chunk = owned(view); // kept: never a view of the shared read buffer
      (ex.held ??= []).push(chunk);
      ex.heldBytes += chunk.length;
      if (ex.attempts) keepForReplay(ex, chunk, false);
      if (ex.bodyWait !== undefined) this.checkBodyWait(ex);
    }
  }

  /**
   * A decider waits for the request's body (held-body.ts): it is held, the client read up to the
   * wait's limit (told 100 Continue when it waits for one), and the decider answered once enough is here.
   */
  awaitBody(ex: Exchange, limit: number, partial: boolean): Promise<HeldBody | undefined> {
    return new Promise((resolve) => {
      if (ex.done || this.closed || ex.up) {
        resolve(undefined);
        return;
      }
      ex.bodyWait = { limit, partial, resolve };
      ex.holdLimit = Math.max(MAX_HELD_BODY, limit + 1);
      this.checkBodyWait(ex);
      if (ex.bodyWait !== undefined) {
        // (Unless partial bodies are judged, a declared length over the limit ended the wait above: 413, never a 100.)
        if (ex.msg?.expectContinue && !ex.continued) {
          ex.continued = true;
          this.push(CONTINUE);
        }
        // Asked from within decide (inside settle) or later: the reading and the 100 follow on the next turn.
        queueMicrotask(() => this.settle());
      }
    });
  }

  private checkBodyWait(ex: Exchange): void {
    const w = ex.bodyWait!;
    const msg = ex.msg!;
    const held = heldBodyReady(ex.held, ex.heldBytes, ex.reqComplete, w.limit, msg.framing === 'length' ? msg.contentLength : -1, w.partial);
    if (held === undefined) return;
    ex.bodyWait = undefined;
    w.resolve(held);
  }

  /** A request is complete. Parsing stops here when what follows must wait: see `mayParse`. */
  private requestEnd(): boolean {
    const ex = this.receiving;
    if (ex) {
      this.receiving = undefined;
      ex.view.complete = true;
      if (ex.bodyWait !== undefined) this.checkBodyWait(ex);
      if (ex.up && !ex.done && ex.msg?.framing === 'chunked') this.toUpstream(ex, LAST_CHUNK);
      if (ex.mirror !== undefined) ex.mirror.end();
    }
    this.holdParse = !this.mayParse();
    return this.holdParse;
  }

  /**
   * Whether the next request may be parsed now: not after the last one, not while a protocol
   * switch is pending (what follows it may be the tunnel's), and at most one waiting behind the
   * one being answered.
   */
  private mayParse(): boolean {
    if (this.last || this.ending || this.halted || this.queue.length >= 2) return false;
    for (const ex of this.queue) if (ex.switching !== undefined && !ex.done) return false;
    return true;
  }

  private parseError(err: RequestParseError): void {
    this.halted = true;
    // Malformed is a protocol error; a head over the limits (414, 431) or a coding or version not
    // served (501, 505) is an answer like any other, counted by its status.
    if (err.status === 400) this.owner.stats.rqProtocolErrors++;
    log.debug('malformed HTTP request', { status: err.status, reason: err.reason });
    const cut = this.receiving;
    this.receiving = undefined;
    const refused = refusal(err.status, err.reason);
    if (cut) {
      cut.flags |= FLAG.DPE;
      cut.details = refused.details;
    }
    if (cut?.headSent) { // its response is on the way: nothing can be said cleanly any more
      this.cut();
      return;
    }
    this.refusalLog = cut ? cut.log : this.logNow();
    if (this.refusalLog) {
      if (cut) this.refusedCut = { ex: cut, note: undefined };
      else this.refusedAt = performance.now();
    }
    if (cut) this.abandon(cut, false);
    this.refused = refused;
  }

  private armHeadTimer(): void {
    const waiting = this.parser.inHead && !this.halted && !this.closed;
    if (waiting && this.headTimer === undefined) {
      this.headTimer = setTimeout(this.onHeadTimeout, this.owner.settings.headTimeoutMs).unref();
    } else if (!waiting && this.headTimer !== undefined) {
      clearTimeout(this.headTimer);
      this.headTimer = undefined;
    }
  }

  private readonly onHeadTimeout = (): void => {
    this.headTimer = undefined;
    if (this.closed || this.halted || !this.parser.inHead) return;
    this.owner.stats.rqHeadTimeouts++;
    this.halted = true;
    this.refused = HEAD_TIMED_OUT;
    this.refusalLog = this.logNow();
    if (this.refusalLog) this.refusedAt = performance.now();
    this.settle();
  };

  // ---- deciding and forwarding

  private start(ex: Exchange): void {
    ex.begun = true;
    if (ex.fixed) {
      this.reply(ex, ex.fixed);
      return;
    }
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

  /** Carries out a verdict; whatever goes wrong on the way becomes an answer, never a request left hanging. */
  private apply(ex: Exchange, v: Verdict): void {
    ex.verdict = v;
    try {
      if (v.kind === 'reply') this.reply(ex, v);
      else this.forward(ex, v);
    } catch (err) {
      if (ex.done || ex.headSent) {
        log.error(`request failed after its answer began: ${(err as Error).message}`);
        this.cut();
      } else {
        this.reply(ex, decisionFailed(err as Error));
      }
    }
  }

  private reply(ex: Exchange, reply: LocalReply): void {
    if (ex.bodyWait !== undefined) { // answered while a decider waited for its body (a time-out): the wait ends
      ex.bodyWait.resolve(undefined);
      ex.bodyWait = undefined;
    }
    // The body was not read: the connection cannot carry another request after it.
    if (!ex.reqComplete || this.owner.draining) ex.closeAfter = true;
    const headOnly = ex.view.method === 'HEAD';
    // A client sidecar learns who answered even when this one answers itself (a policy's 403).
    const exchange = this.peer !== undefined ? this.owner.peerExchange : undefined;
    this.push(replyBytes(exchange ? { ...reply, headers: { ...reply.headers, ...exchange.headers } } : reply, ex.closeAfter, headOnly));
    ex.status = reply.status;
    ex.headSent = true;
    if (reply.flag) ex.flags |= FLAG[reply.flag];
    if (reply.details) ex.details = reply.details;
    if (ex.log) this.replyForLog(ex, reply, headOnly);
    this.finish(ex, false);
  }

  /** What the log shows of a local answer: its body's size, the headers the format asks for. */
  private replyForLog(ex: Exchange, reply: LocalReply, headOnly: boolean): void {
    ex.bytesOut = headOnly ? 0 : Buffer.byteLength(reply.body);
    const wanted = ex.log!.responseHeaders;
    if (wanted.length === 0 || !reply.headers) return;
    for (const [name, value] of Object.entries(reply.headers)) {
      const lower = name.toLowerCase();
      if (wanted.includes(lower)) (ex.respHeaders ??= []).push(lower, value);
    }
  }

  private forward(ex: Exchange, t: ForwardTarget): void {
    const msg = ex.msg!;
    const edited = (t.removeHeaders !== undefined && t.removeHeaders.length > 0) || (t.setHeaders !== undefined && t.setHeaders.length > 0)
      || (t.addHeaders !== undefined && t.addHeaders.length > 0);
    if (edited || t.path !== undefined) {
      const bad = invalidEdit(t);
      if (bad) {
        this.reply(ex, decisionFailed(new Error(`the forward target has an invalid ${bad}`)));
        return;
      }
    }
    const forwardExpect = this.owner.settings.forward100Continue;
    // Once the proxy said 100 Continue itself, the upstream is not asked for one (its 100 would be a second).
    ex.upHead = upstreamHead(msg, edited || t.path !== undefined ? t : undefined, forwardExpect && !ex.continued);
    ex.target = t;
    // A copy for each mirror drawn: the head as forwarded, the body as it comes (a protocol switch is not copied).
    if (t.mirrors !== undefined && msg.tunnel === undefined) this.startMirror(ex, t);
    // The client waits for a 100 before it sends the body: the proxy says it, now that the request goes on.
    if (msg.expectContinue && !forwardExpect && !ex.reqComplete && !ex.continued) this.push(CONTINUE);
    if (t.timeoutMs) ex.timer = setTimeout(() => this.timedOut(ex), t.timeoutMs);
    if (t.cluster) {
      // Traffic management: the attempts choose endpoints; the body is kept for a retry while it fits.
      ex.attempts = new Attempts(t.cluster, ex, this.owner.stats, this.owner.decider?.completed !== undefined);
      if (ex.held) for (const b of ex.held) keepForReplay(ex, b, false);
      ex.attempts.start();
      return;
    }
    this.send(ex, ex.switching !== undefined);
  }

  private startMirror(ex: Exchange, t: ForwardTarget): void {
    const msg = ex.msg!;
    const copy = new MirrorCopy(mirrorSender(this.owner.pool), t.mirrors!, { text: ex.upHead, chunked: msg.framing === 'chunked', headRequest: ex.headRequest });
    if (ex.held) for (const b of ex.held) copy.body(b, false);
    if (ex.reqComplete) copy.end();
    else ex.mirror = copy;
  }

  /** An attempt of a request sent to a cluster: a pooled connection to the endpoint, or a new one within the cluster's limit. */
  sendAttempt(ex: Exchange, to: TrafficEndpoint, tls: UpstreamTls | undefined, fresh: boolean): void {
    if (ex.done || this.closed) return;
    const source = sourceFor(this.owner.upstreamMode, to, this.remote);
    const pool = this.owner.pool;
    const key = source === undefined ? pool.endpointKey(to, tls) : poolKey(to, source, tls);
    ex.meshUp = tls?.mesh === true;
    // A first attempt takes its request's start time for the clock (a read per request costs ~60 ns):
    // late by what the request waited (behind a pipelined one, for a decider), which idle limits of
    // seconds do not notice; a connection gone stale meanwhile is the keep-alive race, sent again. A
    // retry, after its back-off, reads the clock.
    const up = pool.idle(key, fresh || ex.switching !== undefined, ex.attempts!.retries === 0 ? ex.started : 0);
    if (up) {
      ex.reusedUp = true;
      this.carry(ex, up);
      return;
    }
    ex.reusedUp = false;
    const cluster = ex.target!.cluster!.cluster;
    if (!cluster.tryAcquireConnection(to)) {
      this.waitForConnection(ex, to, tls, key, source);
      return;
    }
    let opened: UpstreamConnection;
    try {
      opened = pool.open(key, to, source, tls, clusterConnectionPolicy(cluster, to));
    } catch (err) { // a socket libc would not make (its slot is given back by the pool)
      this.upstreamError(ex, err as NodeJS.ErrnoException, false, true);
      return;
    }
    this.carry(ex, opened);
  }

  /**
   * The cluster's maxConnections is reached (by this worker or another): the request waits as a
   * pending one (http1MaxPendingRequests; over it, 503 UO) until a connection of the cluster is
   * released anywhere, then tries again.
   */
  private waitForConnection(ex: Exchange, to: TrafficEndpoint, tls: UpstreamTls | undefined, key: string, source: string | undefined): void {
    const cluster = ex.target!.cluster!.cluster;
    if (!cluster.tryAcquirePending()) {
      ex.attempts!.overflowed('pending requests (http1MaxPendingRequests)');
      this.settle();
      return;
    }
    ex.attempts!.waiting('the cluster\'s connections (maxConnections) are all in use');
    const wait = (): void => {
      void cluster.waitForConnection(PENDING_POLL_MS).then(() => {
        if (ex.done || this.closed || !ex.attempts!.waitingOn(to)) {
          cluster.releasePending();
          return;
        }
        const up = this.owner.pool.idle(key);
        if (up === undefined && !cluster.tryAcquireConnection(to)) {
          wait();
          return;
        }
        cluster.releasePending();
        ex.reusedUp = up !== undefined;
        let conn = up;
        if (conn === undefined) {
          try {
            conn = this.owner.pool.open(key, to, source, tls, clusterConnectionPolicy(cluster, to));
          } catch (err) {
            this.upstreamError(ex, err as NodeJS.ErrnoException, false, true);
            this.settle();
            return;
          }
        }
        this.carry(ex, conn);
        this.settle();
      });
    };
    wait();
  }

  /** The attempt in flight is given up (retried or timed out): its connection closes unread. */
  dropAttempt(ex: Exchange): void {
    const up = ex.up;
    if (up) {
      ex.up = undefined;
      up.destroy();
    }
    this.upBlocked = false;
  }

  /** The attempts' final local answer (no endpoint, a limit, retries spent, the route's time-out). */
  answerAttempts(ex: Exchange, reply: LocalReply): void {
    if (ex.done || this.closed) return;
    if (ex.timer) {
      clearTimeout(ex.timer);
      ex.timer = undefined;
    }
    this.reply(ex, reply);
    this.settle();
  }

  /** Sends the request on a pooled connection (`fresh`: a new one) with the body held so far. */
  private send(ex: Exchange, fresh: boolean): void {
    const t = ex.target!;
    ex.meshUp = t.tls?.mesh === true;
    if (t.address !== this.lastAddress || t.port !== this.lastPort || t.tls !== this.lastTls) { // the pool key, once per destination
      this.lastAddress = t.address;
      this.lastPort = t.port;
      this.lastTls = t.tls;
      this.lastSource = sourceFor(this.owner.upstreamMode, t, this.remote);
      this.lastKey = poolKey(t, this.lastSource, t.tls);
    }
    let up: UpstreamConnection;
    try {
      up = this.owner.pool.acquire(this.lastKey, t, this.lastSource, fresh, t.tls);
    } catch (err) { // a socket libc would not make (TPROXY without the capabilities...)
      this.upstreamError(ex, err as NodeJS.ErrnoException, false, true);
      return;
    }
    this.carry(ex, up);
  }

  /** Writes the request on `up`: its head and the body held so far (a retry: the whole body kept for it). */
  private carry(ex: Exchange, up: UpstreamConnection): void {
    if (ex.log) ex.sentAt = performance.now();
    ex.up = up;
    up.attach(ex);
    // A retry sends what the attempts kept (everything so far); a first attempt what was held.
    const body = ex.attempts && ex.replay ? ex.replay : ex.held;
    const end = ex.reqComplete && ex.msg!.framing === 'chunked';
    const exchange = ex.meshUp ? this.owner.peerExchange : undefined;
    const head = exchange ? withExchangeLines(ex.upHead, exchange.lines) : ex.upHead;
    if (!body) {
      up.writer.write(end ? head + LAST_CHUNK : head);
      return;
    }
    ex.held = undefined;
    ex.heldBytes = 0;
    up.socket.cork();
    up.socket.write(head, 'latin1');
    for (const b of body) this.bodyToUpstream(ex, b);
    if (end) up.socket.write(LAST_CHUNK, 'latin1');
    up.socket.uncork();
  }

  /** Body bytes as parsed (chunk framing removed): re-chunked by the proxy when the request is chunked. */
  private bodyToUpstream(ex: Exchange, b: Buffer): void {
    if (ex.msg!.framing === 'chunked') {
      const s = ex.up!.socket;
      s.cork();
      s.write(`${b.length.toString(16)}\r\n`, 'latin1');
      writeCopy(s, b);
      this.toUpstream(ex, CRLF);
      s.uncork();
    } else {
      this.toUpstream(ex, b);
    }
  }

  /** A write upstream; when the upstream is not keeping up, the client is not read until it drains. */
  private toUpstream(ex: Exchange, data: string | Buffer): void {
    const s = ex.up!.socket;
    const ok = typeof data === 'string' ? s.write(data, 'latin1') : writeCopy(s, data);
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
    // A local answer keeps the client's connection, as Envoy's do (reply() closes it only when the
    // request's body is still coming).
    if (ex.attempts) { // whatever attempt is in flight or waiting ends; 504 UT
      ex.attempts.timedOut();
      return;
    }
    this.owner.stats.upstreamRqTimeouts++;
    this.reply(ex, TIMED_OUT);
    this.settle();
  }

  // ---- the response side (called by the upstream connection)

  responseHead(ex: Exchange, head: ResponseHead): void {
    if (ex.done) return;
    const minor = ex.msg!.minor;
    if (head.status < 200 && head.framing !== 'tunnel') { // 103 and friends go on (not to HTTP/1.0 clients); the final response follows
      if (minor === 0) return;
      this.outBorrowed = true;
      this.push(STATUS_PREFIX);
      for (const part of head.parts) this.push(part);
      this.push(CRLF);
      return;
    }
    // A response the route's retry policy retries is dropped here, unread (its connection closed).
    if (ex.attempts && !ex.attempts.head(head.status)) return;
    if (ex.timer) {
      clearTimeout(ex.timer);
      ex.timer = undefined;
    }
    let parts = head.parts;
    // Istio's metadata exchange, with mesh peers only: an upstream sidecar's lines are read and taken
    // out, a client sidecar gets this one's; no application ever sees such lines from a mesh peer.
    const exchange = this.owner.peerExchange;
    if (exchange !== undefined && (ex.meshUp || this.peer !== undefined)) {
      const up = ex.meshUp ? ex.up : undefined;
      if (up !== undefined) ex.view.upstreamPrincipal = peerOf(up.socket)?.principal;
      const taken = takePeerMetadata(parts);
      if (taken !== undefined) {
        parts = taken.parts;
        if (up !== undefined) ex.view.peerMetadata = taken.value;
      }
    }
    this.outBorrowed = true;
    this.push(STATUS_PREFIX);
    // A route's response header edits: the lines it removes (or sets) left out, its own added below.
    const removed = ex.target?.removeResponseHeaders;
    if (removed !== undefined) parts = withoutHeaderLines(parts, removed);
    for (const part of parts) this.push(part);
    if (exchange !== undefined && this.peer !== undefined && head.framing !== 'tunnel') this.push(exchange.lines);
    ex.status = head.status;
    ex.headSent = true;
    if (ex.log) this.responseForLog(ex, parts);
    if (head.framing === 'tunnel') {
      // The switch is confirmed: the head goes out with the lines that say so, then raw bytes.
      ex.switched = true;
      this.push(head.upgrade !== undefined ? `connection: upgrade\r\nupgrade: ${head.upgrade}\r\n\r\n` : CRLF);
      return;
    }
    // A body delimited by the upstream's close goes in chunks: an HTTP/1.1 client keeps its connection.
    ex.wrapChunks = head.framing === 'close' && minor === 1;
    if (this.owner.draining) ex.closeAfter = true;
    const added = ex.target?.addResponseHeaders;
    if (added) for (const [name, value] of added) if (validHeaderValue(value)) this.push(`${name}: ${wireText(value)}\r\n`);
    this.push(`${head.hasDate ? '' : `date: ${httpDate()}\r\n`}${head.framing === 'chunked' || ex.wrapChunks ? 'transfer-encoding: chunked\r\n' : ''}`
      + `${ex.closeAfter ? 'connection: close\r\n' : ''}\r\n`);
  }

  /** What the log shows of a response from upstream: when its head came, from where, the headers asked for. */
  private responseForLog(ex: Exchange, parts: readonly Buffer[]): void {
    ex.respAt = performance.now();
    ex.details = 'via_upstream';
    const socket = ex.up?.socket;
    if (socket) {
      ex.upHost = hostPort(socket.remoteAddress, socket.remotePort);
      ex.upLocal = hostPort(socket.localAddress, socket.localPort);
    }
    const wanted = ex.log!.responseHeaders;
    if (wanted.length > 0) ex.respHeaders = headerValues(parts, wanted);
  }

  responseBody(ex: Exchange, bytes: Buffer, payload: number): void {
    if (ex.done) return;
    this.owner.stats.rsBodyBytes += payload;
    ex.bytesOut += payload;
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
    ex.attempts?.ended(false);
    if (ex.wrapChunks) this.push(LAST_CHUNK);
    // A switch the upstream ended at once: nothing to tunnel, and the client is past HTTP.
    if (ex.switched) ex.closeAfter = true;
    this.finish(ex, true);
  }

  /** `socketFailed`: the upstream socket could not even be made. */
  upstreamError(ex: Exchange, err: NodeJS.ErrnoException, retryable: boolean, socketFailed = false): void {
    if (ex.done) return;
    ex.up = undefined;
    this.upBlocked = false;
    if (ex.attempts) {
      if (!ex.headSent) {
        this.attemptFailed(ex, err, retryable, socketFailed);
        return;
      }
      ex.attempts.ended(true);
    }
    if (retryable && !ex.retried && !ex.hasBody && ex.reqComplete && ex.switching === undefined && IDEMPOTENT.has(ex.view.method)) {
      // A pooled connection the upstream had closed while idle: the request never reached it.
      ex.retried = true;
      this.send(ex, true);
      return;
    }
    const s = this.owner.stats;
    s.upstreamRqErrors++;
    // A TLS handshake that failed is a connection failure too (Envoy: "transport failure reason").
    const tlsFailed = (err as TlsHandshakeError).tlsHandshake === true;
    if (tlsFailed) ex.transportFailure = `TLS_error:${err.code ? `${err.code}:` : ''}${err.message}`;
    const connectFailed = socketFailed || tlsFailed || isConnectFailure(err.code);
    if (connectFailed) s.upstreamCxConnectFail++;
    log.debug('upstream request failed', { error: err.message, code: err.code });
    // Envoy's flags: never connected (UF), malformed response (UPE), or the connection ended under it (UC).
    const malformed = err instanceof ResponseError && !err.cut;
    ex.flags |= connectFailed ? FLAG.UF : malformed ? FLAG.UPE : FLAG.UC;
    ex.details = upstreamFailureDetails(connectFailed ? 'connection_failure' : malformed ? 'protocol_error' : 'connection_termination', err.code, ex.headSent);
    if (ex.headSent) { // cut mid-response: the client sees the connection end early
      this.finish(ex, false);
      this.cut();
      return;
    }
    this.reply(ex, { kind: 'reply', status: 503, body: upstreamFailureBody(err, ex.transportFailure) });
    this.settle();
  }

  /** An attempt on a cluster's endpoint failed before its response head: the attempts decide what follows. */
  private attemptFailed(ex: Exchange, err: NodeJS.ErrnoException & { connectTimeout?: true; closedByPeer?: true }, reused: boolean, socketFailed: boolean): void {
    const tlsFailed = (err as TlsHandshakeError).tlsHandshake === true;
    if (tlsFailed) ex.transportFailure = `TLS_error:${err.code ? `${err.code}:` : ''}${err.message}`;
    const timedOut = err.connectTimeout === true;
    const connectFailed = socketFailed || tlsFailed || timedOut || isConnectFailure(err.code);
    const malformed = err instanceof ResponseError && !err.cut;
    log.debug('upstream attempt failed', { error: err.message, code: err.code });
    ex.attempts!.failed({
      outcome: timedOut ? OUTCOME.connectTimeout : connectFailed ? OUTCOME.connectFailure : OUTCOME.reset,
      // The keep-alive race sends the request again: a reset proves the app never read it (the kernel
      // resets a connection closed with unread bytes); a bare FIN does not, so a non-idempotent
      // request is not delivered twice on it.
      reused: reused && (err.closedByPeer !== true || IDEMPOTENT.has(ex.view.method)),
      flag: connectFailed ? 'UF' : malformed ? 'UPE' : 'UC',
      reason: timedOut ? 'connection timeout' : tlsFailed ? `connection failure, transport failure reason: ${ex.transportFailure}`
        : connectFailed ? 'connection failure' : malformed ? 'protocol error' : 'connection termination',
      details: upstreamFailureDetails(connectFailed ? 'connection_failure' : malformed ? 'protocol_error' : 'connection_termination', err.code, false),
    });
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
    if (ex.done) return; // counted once, whichever end came first
    ex.done = true;
    if (ex.timer) {
      clearTimeout(ex.timer);
      ex.timer = undefined;
    }
    // One clock read for the pool and the request's duration (each read costs 50-80 ns, per request).
    const now = performance.now();
    const up = ex.up;
    if (up) {
      ex.up = undefined;
      // Reusable only when both messages ended where HTTP says they end (never after a switch was asked).
      if (upstreamDone && ex.reqComplete && ex.switching === undefined) this.owner.pool.release(up, now);
      else up.destroy();
    }
    this.upBlocked = false;
    const i = this.queue.indexOf(ex);
    if (i >= 0) this.queue.splice(i, 1);
    this.completed(ex, ex.headSent ? ex.status : undefined, now);
    if (ex.closeAfter) {
      this.last = true;
      for (const rest of this.queue.splice(0)) this.completedUnanswered(rest);
    }
    if (this.queue.length === 0) this.idleSince = now;
  }

  /** A request dropped before its answer (cut by a parse error, or by the client's end: `clientLeft`). */
  private abandon(ex: Exchange, clientLeft: boolean): void {
    const i = this.queue.indexOf(ex);
    if (i >= 0) this.queue.splice(i, 1);
    this.completedUnanswered(ex, clientLeft);
  }

  /**
   * `clientLeft`: the client ended or closed before its answer was complete (DC). A request answered
   * already (its answer went before its body had all come: the rest is read and dropped) was counted
   * when it was answered: the client's end or a malformed rest of its body must not count it again.
   */
  private completedUnanswered(ex: Exchange, clientLeft = false): void {
    if (ex.done) return;
    if (clientLeft) {
      ex.flags |= FLAG.DC;
      ex.details = 'downstream_remote_disconnect';
    }
    ex.done = true;
    if (ex.timer) clearTimeout(ex.timer);
    if (ex.bodyWait !== undefined) { // the decider waiting for its body is told now
      ex.bodyWait.resolve(undefined);
      ex.bodyWait = undefined;
    }
    ex.attempts?.abandoned();
    ex.up?.destroy();
    ex.up = undefined;
    this.completed(ex, ex.headSent ? ex.status : undefined);
  }

  /** Counts the request's end, tells the decider, logs it; `now`: the clock read for its end (finish() shares it with the pool). */
  private completed(ex: Exchange, status: number | undefined, now = performance.now()): void {
    if (ex.attempts) ex.flags |= ex.attempts.flags;
    const s = this.owner.stats;
    s.rqActive--;
    const ms = now - ex.started;
    const decider = this.owner.decider;
    let note: DecisionNote | undefined | void;
    if (decider?.completed && !ex.fixed) {
      if (ex.attempts) {
        ex.view.trail = ex.attempts.trail;
        ex.view.endpoint = ex.attempts.endpoint?.hostPort;
      }
      try {
        note = decider.completed(ex.view.asIncomingMessage(), ex.verdict, status, ms, ex.started);
      } catch (err) {
        log.error(`request completion hook failed: ${(err as Error).message}`);
      }
    }
    // After the decider: its note may add a flag (RBAC, UAEX) for the response_flags label.
    if (status !== undefined) {
      const flags = withNoteFlag(ex.flags, note);
      s.recordResponse(status, ms, this.peer?.principal, undefined, flags);
      const v = ex.view;
      this.owner.standard.recordHttp(v.routedCluster ?? ex.target?.cluster?.cluster.name ?? '', this.peer?.principal ?? v.upstreamPrincipal ?? '', v.peerMetadata ?? '',
        packRequest(status, undefined, flags), ms, ex.bytesIn, ex.bytesOut, 0, 0);
    }
    if (ex.log) {
      if (this.refusedCut?.ex === ex) this.refusedCut.note = note || undefined; // logged with its refusal
      else this.logExchange(ex, status, note || undefined, ms);
    }
  }

  /** One access log record for a request (only called with an access log). */
  private logExchange(ex: Exchange, status: number | undefined, note: DecisionNote | undefined, durationMs: number): void {
    const view = ex.view;
    ex.log!.write(httpExchangeRecord({
      role: this.owner.role, started: ex.started, sentAt: ex.sentAt, respAt: ex.respAt, durationMs,
      method: view.method, url: view.url, rawHeaders: view.rawHeaders, protocol: view.httpVersionMinor === 0 ? 'HTTP/1.0' : 'HTTP/1.1',
      status, flags: ex.flags, details: ex.details, note, target: ex.target, fixed: ex.fixed !== undefined, retried: ex.retried,
      attempts: ex.attempts ? ex.attempts.retries + 1 : undefined, endpoint: ex.attempts?.endpoint?.hostPort,
      bytesIn: ex.bytesIn, bytesOut: ex.bytesOut, respHeaders: ex.respHeaders, upHost: ex.upHost, upLocal: ex.upLocal,
      transportFailure: ex.transportFailure,
      downstream: this.logged!,
    }));
  }

  /**
   * The log of a refusal by the parser: the request it cut (with its decision), or a request that
   * never had a head (`- -`, as Envoy prints a codec error).
   */
  private logRefusal(refused: LocalReply, sink: AccessLogSink): void {
    const cut = this.refusedCut;
    this.refusedCut = undefined;
    const now = performance.now();
    if (cut) {
      this.logExchange(cut.ex, refused.status, cut.note, now - cut.ex.started);
      return;
    }
    const started = this.refusedAt || now;
    sink.write({
      kind: 'http', role: this.owner.role, startMs: performance.timeOrigin + started, durationMs: now - started,
      method: undefined, path: undefined, originalPath: undefined, protocol: 'HTTP/1.1', status: refused.status,
      flags: refused.flag ? FLAG[refused.flag] : 0, details: refused.details, terminationDetails: undefined,
      bytesReceived: 0, bytesSent: Buffer.byteLength(refused.body), upstreamServiceMs: undefined, responseMs: undefined,
      attempts: undefined, requestHeaders: undefined, responseHeaders: undefined, upstreamHost: undefined,
      upstreamCluster: undefined, upstreamLocal: undefined, downstreamLocal: this.logged?.localText, downstreamRemote: this.logged?.remoteText,
      serverName: this.logged?.serverName, routeName: undefined, decision: undefined,
    });
  }

  /**
   * Moves the connection on after any event: parses what waited, starts the next request, starts
   * a confirmed tunnel, ends once the queue is done, writes out this turn's bytes, reads or not.
   */
  private settle(): void {
    if (this.closed || this.tunneling) return;
    for (;;) {
      if (this.holdParse && this.mayParse()) {
        this.holdParse = false;
        this.pump();
      }
      const head = this.queue[0];
      if (!head || head.begun) break;
      this.start(head); // a local reply finishes its request at once: go on with the next
    }
    const head = this.queue[0];
    if (head?.switched && head.up) {
      this.startTunnel(head);
      return;
    }
    if (this.queue.length === 0 && !this.ending) {
      if (this.refused) {
        const s = this.owner.stats;
        s.rqTotal++;
        const flags = this.refused.flag ? FLAG[this.refused.flag] : 0;
        s.recordResponse(this.refused.status, 0, undefined, undefined, flags);
        this.owner.standard.recordHttp('', this.peer?.principal ?? '', '', packRequest(this.refused.status, undefined, flags), 0, 0, 0, 0, 0);
        if (this.refusalLog) this.logRefusal(this.refused, this.refusalLog);
        this.push(replyBytes(this.refused, true, false));
        this.refused = undefined;
        this.end();
        return;
      }
      if (this.last || (this.clientEnded && !this.holdParse)) {
        this.end();
        return;
      }
    }
    this.flushBatched();
    this.setReading(this.wantRead());
  }

  private wantRead(): boolean {
    if (this.closed || this.tunneling) return false;
    if (this.ending) return this.lingerTimer !== undefined;
    if (this.halted || this.holdParse || this.upBlocked || this.clientEnded) return false;
    const r = this.receiving;
    if (r) return r.heldBytes < r.holdLimit; // its body is needed (or dropped as it comes)
    return !this.last && this.queue.length <= 1;
  }

  /** Whether the socket is flowing (a listener hands it over paused). */
  private reading = false;

  private setReading(on: boolean): void {
    if (on === this.reading) return;
    this.reading = on;
    if (on) this.socket.resume();
    else this.socket.pause();
  }

  private push(part: string | Buffer): void {
    this.out.push(part);
    this.outBytes += part.length; // strings here are latin1: one char, one byte
  }

  /** Closes the connection at once, after what it holds for the batch (what was sent before a cut stays sent). */
  private cut(): void {
    this.writeHeld();
    this.socket.destroy();
  }

  /** Writes what this turn produced, and whatever was held for the batch before it, now. */
  private flush(): void {
    this.assemble();
    this.writeHeld();
  }

  /**
   * What this turn produced, written at the end of the I/O phase with every other connection's
   * (write-batch.ts says why); at once when that would hold too much.
   */
  private flushBatched(): void {
    const before = this.assembledBytes;
    this.assemble();
    if (this.assembled.length === 0) return;
    const added = this.assembledBytes - before;
    if (holdForBatch(this, added, this.assembledBytes)) this.heldForBatch += added;
    else this.writeHeld();
  }

  /**
   * Bytes assembled, not written yet, in order, and beside each what to call once it is written (a
   * pooled buffer given back) or undefined. Two arrays kept and emptied, not an object per turn.
   */
  private readonly assembled: (string | Buffer)[] = [];
  private readonly assembledDone: ((() => void) | undefined)[] = [];
  private assembledBytes = 0;
  /** Of those, what write-batch.ts counts as held. */
  private heldForBatch = 0;
  /** In write-batch.ts's batch (BatchedWriter). */
  inBatch = false;

  /**
   * This turn's bytes made one part the connection owns: one copy into one buffer beats writev for
   * small parts, and views of the upstream read buffer must be copied out before the next read.
   */
  private assemble(): void {
    const out = this.out;
    const n = out.length;
    if (n === 0) return;
    const bytes = this.outBytes;
    const borrowed = this.outBorrowed;
    this.out = [];
    this.outBytes = 0;
    this.outBorrowed = false;
    this.assembledBytes += bytes;
    const only = out[0]!;
    if (n === 1 && (typeof only === 'string' || !borrowed)) {
      this.assembled.push(only);
      this.assembledDone.push(undefined);
      return;
    }
    // Above Node's own pool's sizes, a buffer of ours that comes back once written (read-buffers.ts).
    const pooled = bytes > POOL_FROM && bytes <= POOLED_SIZE ? takePooled() : undefined;
    const buf = pooled ?? Buffer.allocUnsafe(bytes);
    let at = 0;
    for (const part of out) at += typeof part === 'string' ? buf.write(part, at, 'latin1') : part.copy(buf, at);
    this.assembled.push(pooled ? pooled.subarray(0, bytes) : buf);
    this.assembledDone.push(pooled ? () => givePooled(pooled) : undefined);
  }

  /** Writes what is assembled (BatchedWriter: the batch calls it too, when the connection may have written or closed since). */
  writeHeld(): void {
    const parts = this.assembled;
    const done = this.assembledDone;
    const n = parts.length;
    if (n === 0) return;
    this.assembledBytes = 0;
    releaseHeld(this.heldForBatch);
    this.heldForBatch = 0;
    const destroyed = this.socket.destroyed;
    let ok = true;
    try {
      for (let i = 0; i < n; i++) {
        const written = done[i];
        if (destroyed) written?.();
        else if (!(written ? this.writer.write(parts[i]!, written) : this.writer.write(parts[i]!))) ok = false;
      }
    } finally { // emptied after (the writer calls nothing of this connection back), whatever happened: nothing goes twice
      parts.length = 0;
      done.length = 0;
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
    this.clearHeadTimer();
    this.flush();
    const r = this.receiving;
    if (r && !r.reqComplete && !this.clientEnded) {
      this.lingerTimer = setTimeout(() => this.socket.destroy(), LINGER_MS).unref();
      this.socket.end();
      this.setReading(true);
    } else {
      this.setReading(false);
      this.socket.destroySoon();
    }
  }

  private clearHeadTimer(): void {
    if (this.headTimer !== undefined) {
      clearTimeout(this.headTimer);
      this.headTimer = undefined;
    }
  }

  /** The upstream confirmed a protocol switch: its head is out, the two sockets now carry raw bytes. */
  private startTunnel(ex: Exchange): void {
    const up = ex.up!;
    ex.up = undefined;
    this.flush();
    this.tunneling = true;
    this.queue.splice(0);
    const rest = this.input;
    this.input = undefined;
    this.detach();
    this.owner.stats.rqTunnels++;
    // The log counts the tunnel's bytes as the request's, as Envoy does for an upgrade.
    const socket = this.socket;
    const readBefore = socket.bytesRead;
    const writtenBefore = socket.bytesWritten;
    runTunnel(socket, up, rest, () => {
      ex.done = true;
      // The upgraded request was active at its endpoint until its tunnel closed (Envoy counts it so).
      ex.attempts?.ended(false);
      ex.bytesIn += socket.bytesRead - readBefore;
      ex.bytesOut += socket.bytesWritten - writtenBefore;
      this.completed(ex, ex.status);
    });
  }

  private detach(): void {
    const socket = this.socket;
    detachReader(socket, this.onData);
    socket.off('end', this.onEnd);
    socket.off('close', this.onClose);
    socket.off('drain', this.onDrain);
    this.clearHeadTimer();
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.owner.forget(this);
  }

  /** The client sent its FIN: nothing more comes. */
  private clientEnded = false;

  /**
   * The client sent its FIN. As Envoy and nginx read it, the client is gone: whatever it still had
   * in flight (a request going upstream, waiting for its answer, or answering) ends now, its
   * upstream connection closed, rather than holding the application's work for a client that
   * closed its socket (a FIN and nothing more costs a client nothing; every request it leaves
   * behind would cost the proxy and the app until answered). With nothing in flight, the
   * connection ends cleanly.
   */
  private readonly onEnd = (): void => {
    if (this.closed) return;
    this.clientEnded = true;
    if (this.ending) { // lingering is over; otherwise the socket closes once our end is written
      if (this.lingerTimer) this.socket.destroy();
      return;
    }
    this.clearHeadTimer();
    const cut = this.receiving;
    if (cut && !cut.reqComplete) {
      this.receiving = undefined;
      this.abandon(cut, true);
    }
    if (this.queue.some((ex) => ex.begun && !ex.done)) {
      this.cut(); // onClose: each one DC, its upstream connection closed
      return;
    }
    this.settle();
  };

  private readonly onDrain = (): void => {
    this.writeBlocked = false;
    this.queue[0]?.up?.resume();
  };

  private readonly onClose = (): void => {
    if (this.closed) return;
    this.closed = true;
    for (const ex of this.queue.splice(0)) this.completedUnanswered(ex, true);
    this.receiving = undefined;
    this.detach();
  };
}

function ignore(): void { /* errors end in 'close', handled there */ }

/** A request waiting for a cluster's connection slot looks again at least this often. */
const PENDING_POLL_MS = 1_000;

/**
 * Keeps a body chunk for a retry while the body fits REPLAYABLE_BODY_LIMIT; past it nothing more is
 * kept and the request is not retried once its first byte has left. `copy`: the chunk is a view of
 * a read buffer.
 */
function keepForReplay(ex: Exchange, b: Buffer, copy: boolean): void {
  if (ex.replayBytes > REPLAYABLE_BODY_LIMIT) return;
  ex.replayBytes += b.length;
  if (ex.replayBytes > REPLAYABLE_BODY_LIMIT) {
    ex.replay = undefined;
    return;
  }
  (ex.replay ??= []).push(copy ? Buffer.from(b) : b);
}

/** `[name, value, ...]` of the response head's lines named in `wanted` (lower-case), from the head as read. */
function headerValues(parts: readonly Buffer[], wanted: readonly string[]): string[] | undefined {
  let out: string[] | undefined;
  const lines = (parts.length === 1 ? parts[0]!.toString('latin1') : Buffer.concat(parts).toString('latin1')).split('\r\n');
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).toLowerCase();
    if (wanted.includes(name)) (out ??= []).push(name, line.slice(colon + 1).trim());
  }
  return out;
}
