// The HTTP/2 path (sidecar capture listeners after the client preface or ALPN h2/istio-h2, gateway
// ports): each connection runs on our own frame layer (codec-server.ts over codec/connection.ts:
// framing, HPACK, flow control, RFC 9113's rules for a well-formed request), each stream an
// Http2Exchange through the same decider as HTTP/1.1. The limits that keep one connection from
// hurting the others are the frame layer's (docs/HTTP2.md): concurrent streams, header list size,
// CONTINUATION frames, control-frame floods, rapid reset; here, the idle time-out, and the drain: a
// GOAWAY, streams already open finish, new ones go to another connection.
import type { Socket } from 'node:net';
import type { AccessLogSink, ListenerRole } from '../../log/access-record.js';
import { scope } from '../../log/logger.js';
import { NO_DESTINATION, ORIGINAL_DESTINATION, type RequestDecider } from '../decider.js';
import type { Http1Settings } from '../http1/connection.js';
import { DEFAULT_HTTP1_SETTINGS, KEEP_ALIVE_TIMEOUT_MS, type HttpConnectionHandler, type HttpHandlerOptions } from '../http1/handler.js';
import type { DirectionStats } from '../stats.js';
import { peerOf } from '../tls/peer-identity.js';
import type { UpstreamMode } from '../upstream.js';
import { DEFAULT_SETTINGS, type H2Settings } from './codec/connection.js';
import { CodecServerSession, type CodecServerStream } from './codec-server.js';
import { Http2Exchange } from './exchange.js';
import { closeWhenIdle } from './idle-close.js';
import { Http1Upstream } from './http1-upstream.js';
import type { Http2ConnectionFacts, Http2Owner } from './owner.js';
import { Http2UpstreamPool } from './upstream-sessions.js';
import type { PeerExchange } from '../peer-exchange.js';
import type { StandardSeries } from '../standard-series.js';

const log = scope('default');

/** Streams one client connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS; nginx 128, Go 250). */
export const HTTP2_MAX_CONCURRENT_STREAMS = 256;


export class Http2Handler implements HttpConnectionHandler, Http2Owner {
  readonly stats: DirectionStats;
  readonly upstreamMode: UpstreamMode;
  readonly pool: Http2UpstreamPool;
  readonly http1: Http1Upstream;
  readonly decider: RequestDecider | undefined;
  readonly settings: Http1Settings;
  readonly accessLog: AccessLogSink | undefined;
  readonly role: ListenerRole;
  readonly peerExchange: PeerExchange | undefined;
  readonly standard: StandardSeries;
  private draining = false;
  /** Open sessions. */
  private readonly sessions = new Set<CodecServerSession>();
  private readonly h2Settings: H2Settings;

  constructor(private readonly o: HttpHandlerOptions) {
    this.stats = o.stats;
    this.upstreamMode = o.upstream;
    this.decider = o.decider === ORIGINAL_DESTINATION ? undefined : o.decider;
    this.settings = { ...DEFAULT_HTTP1_SETTINGS, ...o.settings };
    this.accessLog = o.accessLog;
    this.role = o.role ?? 'outbound';
    this.peerExchange = o.peerExchange;
    this.standard = o.standard ?? o.stats.standard;
    this.pool = new Http2UpstreamPool(o.upstream, o.stats, { maxHeaderListSize: this.settings.limits.maxHeadBytes });
    this.http1 = new Http1Upstream(o.upstream, o.stats);
    this.h2Settings = { ...DEFAULT_SETTINGS, maxConcurrentStreams: HTTP2_MAX_CONCURRENT_STREAMS, maxHeaderListSize: this.settings.limits.maxHeadBytes };
  }

  /** Takes over a connection whose first bytes (`head`: the preface, perhaps more) were read; the socket is paused. */
  accept(socket: Socket, head: Buffer): void {
    const session = new CodecServerSession(socket, this.h2Settings);
    // HTTP/2 has no half-close: a client's FIN (the listener allows half-open connections) means it
    // is gone, as Envoy reads it, so the session and its streams end now (each stream's upstream
    // request cancelled), not when their upstreams answer or at the idle time-out.
    socket.once('end', () => session.destroy());
    this.stats.cxHttp2++;
    const facts = this.factsOf(socket);
    this.sessions.add(session);
    session.on('stream', (stream: CodecServerStream, fields: string[], flags: number) => {
      new Http2Exchange(this, facts, stream, fields, flags).start();
    });
    session.on('error', (err: Error) => {
      this.stats.cxHttp2ProtocolErrors++;
      this.stats.cxErrors++;
      log.debug(`HTTP/2 connection from ${socket.remoteAddress ?? '?'} closed: ${err.message}`);
    });
    // The session ends its socket itself (reading a peer still sending until its FIN: see endSocket).
    session.once('close', () => this.sessions.delete(session));
    // Idle (no stream open for the keep-alive time): closed with GOAWAY.
    closeWhenIdle(session, KEEP_ALIVE_TIMEOUT_MS, () => session.idleFor, () => session.close());
    if (this.draining) session.close();
    session.start(head);
  }

  private factsOf(socket: Socket): Http2ConnectionFacts {
    const dst = this.o.destinationOf(socket);
    const peer = peerOf(socket);
    return {
      socket, dst, peer,
      defaultVerdict: dst ? { kind: 'forward', address: dst.address, port: dst.port } : NO_DESTINATION,
      logged: undefined,
    };
  }

  /** GOAWAY on every connection: open streams finish, then the connection closes. */
  drain(): void {
    this.draining = true;
    this.closeIdle();
  }

  /** Connections without a stream close now, busy ones after their streams (both told GOAWAY). */
  closeIdle(): void {
    for (const session of this.sessions) session.close();
    this.pool.closeIdle();
    this.http1.closeIdle();
  }

  /** Connections open on this path. */
  get connections(): number {
    return this.sessions.size;
  }
}
