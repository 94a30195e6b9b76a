// The HTTP/2 path (sidecar capture listeners after the client preface or ALPN h2/istio-h2, gateway
// ports): each connection becomes a node:http2 server session (nghttp2 does the framing, HPACK and
// flow control), each stream an Http2Exchange through the same decider as HTTP/1.1. The limits that
// keep one connection from hurting the others are set here (docs/HTTP2.md): concurrent streams,
// header list size and count, session memory, refused and invalid frames; nghttp2 also caps
// CONTINUATION frames per header block; a connection whose streams are mostly reset by the client
// before an answer is closed (rapid reset). A drain sends GOAWAY: streams
// already open finish, new ones go to another connection.
import type { ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import { H2, http2 } from './node-http2.js';
import type { Socket } from 'node:net';
import type { AccessLogSink, ListenerRole } from '../../log/access-record.js';
import { scope } from '../../log/logger.js';
import { peerReset } from '../../net/reset.js';
import { NO_DESTINATION, ORIGINAL_DESTINATION, type RequestDecider } from '../decider.js';
import type { Http1Settings } from '../http1/connection.js';
import { DEFAULT_HTTP1_SETTINGS, KEEP_ALIVE_TIMEOUT_MS, type HttpConnectionHandler, type HttpHandlerOptions } from '../http1/handler.js';
import type { DirectionStats } from '../stats.js';
import { peerOf } from '../tls/peer-identity.js';
import type { UpstreamMode } from '../upstream.js';
import { returnHeld } from '../read-buffers.js';
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
/** Memory nghttp2 may hold for one connection (buffered frames, header blocks) before it refuses more. */
const MAX_SESSION_MEMORY_MB = 10;
/** Streams refused (over the concurrency cap) and invalid frames before the whole connection is closed: a flood. */
const MAX_REJECTED_STREAMS = 100;
const MAX_INVALID_FRAMES = 100;

/** Streams a connection opens before its share of streams reset by the client is judged. */
const MIN_STREAMS_FOR_RESET_CHECK = 100;

interface SessionStreams {
  open: number;
  total: number;
  /** Reset by the client before the answer began. */
  premature: number;
  /** When `open` last went to 0 (performance.now()). */
  idleSince: number;
}


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
  /** Open sessions and their streams: open now, since the start, reset by the client before an answer. */
  private readonly sessions = new Map<ServerHttp2Session, SessionStreams>();

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
  }

  /** Takes over a connection whose first bytes (`head`: the preface, perhaps more) were read. */
  accept(socket: Socket, head: Buffer): void {
    returnHeld(socket); // what came after the head, if any, goes behind it
    if (head.length > 0) socket.unshift(head);
    // A server-side TLSSocket made outside a tls.Server (mesh mTLS, the gateway's per-SNI contexts)
    // keeps `secureConnecting` true after its handshake; node:http2 would wait for a 'secureConnect'
    // that never comes. Every socket handed here has completed its handshake.
    const tls = socket as Socket & { secureConnecting?: boolean };
    if (tls.secureConnecting === true) tls.secureConnecting = false;
    const limits = this.settings.limits;
    let session: ServerHttp2Session;
    try {
      session = http2().performServerHandshake(socket, {
        settings: { maxConcurrentStreams: HTTP2_MAX_CONCURRENT_STREAMS, maxHeaderListSize: limits.maxHeadBytes, enablePush: false },
        maxHeaderListPairs: limits.maxHeaders + 4, // the pseudo-headers besides the regular lines
        maxSessionMemory: MAX_SESSION_MEMORY_MB,
        maxSessionRejectedStreams: MAX_REJECTED_STREAMS,
        maxSessionInvalidFrames: MAX_INVALID_FRAMES,
      });
    } catch (err) {
      log.debug(`HTTP/2 session could not start: ${(err as Error).message}`);
      socket.destroy();
      return;
    }
    // The session reads the socket's handle itself, from the bytes the socket buffered (the sniffed
    // head) on. The socket is resumed only after that hand-over (a resume before it would race the
    // session for them): from then on its end of stream is seen. HTTP/2 has no half-close: a
    // client's FIN (the listener allows half-open connections) means it is gone, as Envoy reads it,
    // so the session and its streams end now (each stream's upstream request cancelled), not when
    // their upstreams answer or at the idle time-out.
    setImmediate(() => {
      // node's TLS layer writes its session tickets just after the handshake: when that write fails at
      // once (the client reset the connection meanwhile), it waits for it for ever, and so does every
      // write of the session's after it; the session reads nothing while a write of its is pending,
      // so the reset would never be seen. A connection reset by now is gone: it ends here.
      if (peerReset(socket)) {
        session.destroy();
        socket.destroy();
        return;
      }
      socket.resume();
    });
    socket.once('end', () => {
      session.destroy();
      // The socket too: a TLS socket reset under a session can end without the session ever
      // closing it (its 'close' never comes), which would hold the connection and its count.
      socket.destroy();
    });
    socket.once('close', () => {
      if (!session.destroyed) session.destroy();
      this.sessions.delete(session);
    });
    this.stats.cxHttp2++;
    const facts = this.factsOf(socket);
    const counts: SessionStreams = { open: 0, total: 0, premature: 0, idleSince: performance.now() };
    this.sessions.set(session, counts);
    session.on('stream', (stream: ServerHttp2Stream, _headers: unknown, flags: number, raw: string[]) => {
      counts.open++;
      counts.total++;
      stream.on('close', () => { // once per stream (`on`: no wrapper per request)
        if (--counts.open === 0) counts.idleSince = performance.now();
        if (!stream.headersSent && stream.rstCode !== H2.NO_ERROR) this.prematureReset(session, counts);
      });
      new Http2Exchange(this, facts, stream, raw, flags).start();
    });
    session.on('error', (err: NodeJS.ErrnoException) => {
      this.stats.cxHttp2ProtocolErrors++;
      this.stats.cxErrors++;
      log.debug(`HTTP/2 connection from ${socket.remoteAddress ?? '?'} closed: ${err.message}`);
    });
    session.once('close', () => {
      this.sessions.delete(session);
      socket.destroy();
    });
    // Idle (no stream open for the keep-alive time): closed with GOAWAY.
    closeWhenIdle(session, KEEP_ALIVE_TIMEOUT_MS, () => (counts.open === 0 ? performance.now() - counts.idleSince : 0), () => session.close());
    if (this.draining) session.close();
  }

  /**
   * A stream the client reset before its answer. Many of them ("rapid reset", CVE-2023-44487) make
   * the proxy do the work of streams nobody waits for: past MIN_STREAMS_FOR_RESET_CHECK streams, a
   * connection whose streams are mostly such resets is closed (Envoy's premature-reset rule).
   */
  private prematureReset(session: ServerHttp2Session, counts: SessionStreams): void {
    counts.premature++;
    if (counts.total < MIN_STREAMS_FOR_RESET_CHECK || counts.premature * 2 <= counts.total || session.destroyed) return;
    // GOAWAY with this code, then closed; the session's 'error' handler counts it and logs the reason.
    session.destroy(new Error(`${counts.premature} of its ${counts.total} streams reset before an answer (rapid reset)`), H2.ENHANCE_YOUR_CALM);
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
    for (const session of this.sessions.keys()) session.close();
    this.pool.closeIdle();
    this.http1.closeIdle();
  }

  /** Connections open on this path. */
  get connections(): number {
    return this.sessions.size;
  }
}
