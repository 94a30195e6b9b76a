// The HTTP/1.1 path (sidecar capture listeners, gateway ports): takes accepted connections, keeps
// the upstream pool and the connections' keep-alive time-out, drains. Each connection is a
// Connection (connection.ts): our strict parser, the decider, the pool, the tunnel after a
// confirmed protocol switch. How the pieces fit: README.md beside this file.
import type { Socket } from 'node:net';
import type { AccessLogSink, ListenerRole } from '../../log/access-record.js';
import { DEFAULT_PATH_NORMALIZATION } from '../path-normalization.js';
import type { RequestDecider } from '../decider.js';
import { ORIGINAL_DESTINATION } from '../decider.js';
import type { Endpoint } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import type { UpstreamMode } from '../upstream.js';
import type { PeerExchange } from '../peer-exchange.js';
import { Connection, type ConnectionOwner, type Http1Settings } from './connection.js';
import { DEFAULT_REQUEST_LIMITS } from './request-parser.js';
import { UpstreamPool } from './upstream-pool.js';
import type { StandardSeries } from '../standard-series.js';

/** What listeners need of an L7 handler: take a connection (its first bytes already read), drain. */
export interface HttpConnectionHandler {
  /** Takes over an accepted connection (paused or not) whose first bytes (`head`, maybe none) were read. */
  accept(socket: Socket, head: Buffer): void;
  /** Idle keep-alive connections close now, busy ones after their current response. */
  drain(): void;
}

/** A keep-alive connection idle this long is closed. */
export const KEEP_ALIVE_TIMEOUT_MS = 300_000;
/** A request head that has begun must be complete within this (Envoy has none by default; nginx 60 s). */
export const DEFAULT_HEAD_TIMEOUT_MS = 10_000;
const SWEEP_EVERY_MS = 10_000;
const NO_BYTES = Buffer.alloc(0);

export const DEFAULT_HTTP1_SETTINGS: Http1Settings = {
  forward100Continue: true, allowHttp10: false, normalization: DEFAULT_PATH_NORMALIZATION,
  limits: DEFAULT_REQUEST_LIMITS, headTimeoutMs: DEFAULT_HEAD_TIMEOUT_MS,
};

/** What the HTTP/1.1 and the HTTP/2 handlers of a listener are made with (the same for both). */
export interface HttpHandlerOptions {
  readonly stats: DirectionStats;
  readonly upstream: UpstreamMode;
  /** Where each accepted connection was going; set by the listener before handing it over. */
  readonly destinationOf: (socket: Socket) => Endpoint | undefined;
  /** Default ORIGINAL_DESTINATION. */
  readonly decider?: RequestDecider | undefined;
  /** Default DEFAULT_HTTP1_SETTINGS; the fields given replace those (HTTP/2 shares path normalization and the header limits). */
  readonly settings?: Partial<Http1Settings> | undefined;
  /** Every request is logged here once complete; absent: none is (and nothing is measured for it). */
  readonly accessLog?: AccessLogSink | undefined;
  /** Which listener this is, for the log (default outbound). */
  readonly role?: ListenerRole;
  /** The metadata-exchange lines for mesh peers; absent: none spoken. */
  readonly peerExchange?: PeerExchange | undefined;
  /** Where Istio's standard metrics are counted (the reporter); default `stats.standard`. */
  readonly standard?: StandardSeries | undefined;
}

export class Http1Handler implements HttpConnectionHandler, ConnectionOwner {
  readonly pool: UpstreamPool;
  readonly stats: DirectionStats;
  readonly upstreamMode: UpstreamMode;
  readonly decider: RequestDecider | undefined;
  readonly settings: Http1Settings;
  readonly accessLog: AccessLogSink | undefined;
  readonly role: ListenerRole;
  readonly peerExchange: PeerExchange | undefined;
  readonly standard: StandardSeries;
  draining = false;
  private readonly conns = new Set<Connection>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly o: HttpHandlerOptions) {
    this.stats = o.stats;
    this.upstreamMode = o.upstream;
    // The default decider is applied without a call (no verdict object per request).
    this.decider = o.decider === ORIGINAL_DESTINATION ? undefined : o.decider;
    this.settings = { ...DEFAULT_HTTP1_SETTINGS, ...o.settings };
    this.accessLog = o.accessLog;
    this.role = o.role ?? 'outbound';
    this.peerExchange = o.peerExchange;
    this.standard = o.standard ?? o.stats.standard;
    this.pool = new UpstreamPool(o.upstream, o.stats, this.settings.limits.maxHeadBytes);
  }

  accept(socket: Socket, head: Buffer): void {
    const c = new Connection(this, socket, this.o.destinationOf(socket));
    this.conns.add(c);
    this.sweeper ??= setInterval(() => this.sweep(), SWEEP_EVERY_MS).unref();
    c.begin(head);
  }

  /** For sockets that come without sniffed bytes (the gateway's, TLS ones included). */
  acceptSocket(socket: Socket): void {
    this.accept(socket, NO_BYTES);
  }

  drain(): void {
    this.draining = true;
    for (const c of [...this.conns]) c.drain();
    this.pool.closeIdle();
  }

  /** Connections open on this path (tunnels not counted). */
  get connections(): number {
    return this.conns.size;
  }

  forget(c: Connection): void {
    this.conns.delete(c);
    if (this.conns.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  private sweep(): void {
    const now = performance.now();
    for (const c of [...this.conns]) c.sweep(now, KEEP_ALIVE_TIMEOUT_MS);
  }
}
