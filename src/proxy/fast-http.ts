// The fast L7 path for HTTP/1.1 (sidecar capture listeners, gateway ports): the same contract as
// HttpHandler (options, RequestDecider, stats, drain) without node:http's per-request objects and
// streams. Node's llhttp parser reads client sockets directly, upstream connections come from a
// keep-alive pool and are read into one shared buffer, and a response goes out in one write.
// What this path does not take (Upgrade, CONNECT, `Expect`, HTTP/1.0) goes, at a request
// boundary and with the rest of its connection, to an HttpHandler: the complete reference path.
import type { Socket } from 'node:net';
import { HttpHandler, ORIGINAL_DESTINATION, type HttpHandlerOptions, type RequestDecider } from './http-handler.js';
import { Connection, type ConnectionOwner } from './fast-http-connection.js';
import type { DirectionStats } from './stats.js';
import { UpstreamPool } from './upstream-pool.js';
import type { UpstreamMode } from './upstream.js';

/** What listeners need of an L7 handler: take a connection (its first bytes already read), drain. */
export interface HttpConnectionHandler {
  /** Takes over an accepted connection (paused or not) whose first bytes (`head`, maybe none) were read. */
  accept(socket: Socket, head: Buffer): void;
  /** Idle keep-alive connections close now, busy ones after their current response. */
  drain(): void;
}

export type HttpPath = 'fast' | 'node';

/**
 * The L7 path listeners use. 'node' puts every request on node:http (HttpHandler), as before the
 * fast path: change it here (or pass `httpPath` to CaptureListener) to measure one against the other.
 */
export const HTTP_PATH: HttpPath = 'fast';

/** A keep-alive connection idle this long is closed (the node:http path's keepAliveTimeout). */
export const KEEP_ALIVE_TIMEOUT_MS = 300_000;
const SWEEP_EVERY_MS = 10_000;
const NO_BYTES = Buffer.alloc(0);

export interface FastHttpHandlerOptions extends HttpHandlerOptions {
  /** Takes the connections handed over; by default an HttpHandler made from the same options. */
  readonly fallback?: HttpHandler;
  /** Let the parser read client sockets' handles directly (default true; false: 'data' events). */
  readonly consume?: boolean;
}

export class FastHttpHandler implements HttpConnectionHandler, ConnectionOwner {
  readonly fallback: HttpHandler;
  readonly pool: UpstreamPool;
  readonly stats: DirectionStats;
  readonly upstreamMode: UpstreamMode;
  readonly decider: RequestDecider | undefined;
  readonly consume: boolean;
  draining = false;
  private readonly conns = new Set<Connection>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly o: FastHttpHandlerOptions) {
    this.fallback = o.fallback ?? new HttpHandler(o);
    this.stats = o.stats;
    this.upstreamMode = o.upstream;
    this.pool = new UpstreamPool(o.upstream, o.stats);
    // The default decider is applied without a call (no verdict object per request).
    this.decider = o.decider === ORIGINAL_DESTINATION ? undefined : o.decider;
    this.consume = o.consume ?? true;
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
    this.fallback.drain();
  }

  /** Connections open on this path (not counting those handed over). */
  get connections(): number {
    return this.conns.size;
  }

  handOver(socket: Socket, bytes: Buffer): void {
    this.stats.cxHandedOver++;
    this.fallback.accept(socket, bytes);
    socket.resume();
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

/** The handler `path` names, with the fallback wiring listeners expect (sockets resumed after accept). */
export function createHttpHandler(o: HttpHandlerOptions, path: HttpPath = HTTP_PATH): HttpConnectionHandler {
  if (path === 'fast') return new FastHttpHandler(o);
  const handler = new HttpHandler(o);
  return {
    accept: (socket, head) => {
      handler.accept(socket, head);
      socket.resume();
    },
    drain: () => handler.drain(),
  };
}
