// A capture listener (15001 outbound, 15006 inbound): finds where each accepted connection was
// going, refuses loops, and decides from the first bytes whether it is HTTP/1.x (L7) or anything
// else (TCP relay). The upstream connection is opened at once, in parallel with that decision, so
// server-first protocols (the server speaks first: SMTP, MySQL) are not held up.
import { isLocalAddress } from '../net/local-addresses.js';
import { Server, type Socket } from 'node:net';
import { scope } from '../log/logger.js';
import { createHttpHandler, type HttpConnectionHandler, type HttpPath } from './fast-http.js';
import type { RequestDecider } from './http-handler.js';
import { listenerFd, originalDestination, type Endpoint } from './socket-options.js';
import { sniff } from './sniff.js';
import type { Direction, DirectionStats, ProxyStats } from './stats.js';
import { relay } from './tcp-relay.js';
import { connectUpstream, sourceFor, trackUpstream, type UpstreamMode } from './upstream.js';

const log = scope('default');

/** Raw TCP connections idle this long are closed (Envoy's TCP proxy default). */
const TCP_IDLE_TIMEOUT_MS = 3_600_000;

export interface CaptureListenerOptions {
  readonly direction: Direction;
  readonly port: number;
  /** `0.0.0.0` or `::`. */
  readonly host: string;
  /** TPROXY: an IP_TRANSPARENT listener; the destination is the socket's own local address. */
  readonly transparent: boolean;
  /** SO_REUSEPORT: several workers listen on this port (--concurrency > 1). */
  readonly reusePort?: boolean;
  readonly upstream: UpstreamMode;
  readonly stats: ProxyStats;
  /** Ports of the proxy itself: a connection whose destination is one of them, locally, is a loop. */
  readonly ownPorts: ReadonlySet<number>;
  /** Addresses of this pod (a destination on one of them is local). */
  readonly localAddresses: () => ReadonlySet<string>;
  readonly forward100Continue: boolean;
  readonly allowHttp10: boolean;
  /** Where HTTP requests go; default: the original destination (policy plugs in inbound). */
  readonly decider?: RequestDecider;
  /** The L7 path (default HTTP_PATH, fast-http.ts): 'node' carries every request on node:http. */
  readonly httpPath?: HttpPath;
}

const destinations = new WeakMap<Socket, Endpoint>();

/** Counts an accepted connection in `stats` (and keeps it in `open`) until it closes. */
export function trackDownstream(downstream: Socket, stats: DirectionStats, open: Set<Socket>): void {
  stats.cxTotal++;
  stats.cxActive++;
  open.add(downstream);
  downstream.on('close', (hadError) => {
    stats.cxActive--;
    stats.rxBytes += downstream.bytesRead;
    stats.txBytes += downstream.bytesWritten;
    if (hadError) stats.cxErrors++;
    open.delete(downstream);
  });
  downstream.on('error', () => { /* counted on close; never fatal */ });
}

export class CaptureListener {
  private readonly server: Server;
  private readonly http: HttpConnectionHandler;
  private readonly open = new Set<Socket>();

  constructor(private readonly o: CaptureListenerOptions) {
    this.http = createHttpHandler({
      stats: o.stats.of(o.direction),
      upstream: o.upstream,
      forward100Continue: o.forward100Continue,
      allowHttp10: o.allowHttp10,
      destinationOf: (socket) => destinations.get(socket),
      ...(o.decider ? { decider: o.decider } : {}),
    }, o.httpPath);
    this.server = new Server({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true }, (socket) => this.onConnection(socket));
    this.server.on('error', (err) => log.error(`${o.direction} listener error`, { error: err.message }));
  }

  get name(): string {
    return `${this.o.direction}_${this.o.port}`;
  }

  get address(): string {
    return this.o.host;
  }

  get port(): number {
    return this.o.port;
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      const done = (): void => {
        this.server.off('error', reject);
        resolve();
      };
      if (this.o.transparent || this.o.reusePort) {
        const fd = listenerFd({ address: this.o.host, port: this.o.port }, { transparent: this.o.transparent, reusePort: this.o.reusePort ?? false });
        this.server.listen({ fd, backlog: 1024 }, done);
      } else {
        this.server.listen({ host: this.o.host, port: this.o.port, backlog: 1024, ipv6Only: false }, done);
      }
    });
  }

  /** Stops accepting; established connections go on. */
  stopAccepting(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Connections still open (raw TCP and HTTP). */
  get activeConnections(): number {
    return this.open.size;
  }

  /** Closes idle HTTP keep-alive connections; busy ones close after their response (drain). */
  drainHttp(): void {
    this.http.drain();
  }

  private onConnection(downstream: Socket): void {
    trackDownstream(downstream, this.o.stats.of(this.o.direction), this.open);

    const dst = this.o.transparent
      ? { address: downstream.localAddress ?? '', port: downstream.localPort ?? 0 }
      : originalDestination(downstream);
    if (!dst || (this.o.ownPorts.has(dst.port) && isLocalAddress(dst.address, this.o.localAddresses()))) {
      // Not captured traffic (a direct connection to the listener) or a loop back into the proxy.
      this.o.stats.loopsRefused++;
      downstream.resetAndDestroy();
      return;
    }
    destinations.set(downstream, dst);
    this.dispatch(downstream, dst);
  }

  private dispatch(downstream: Socket, dst: Endpoint): void {
    const stats = this.o.stats.of(this.o.direction);
    const upstream = connectUpstream(this.o.upstream, dst, sourceFor(this.o.upstream, dst, downstream.remoteAddress));
    let connectFailed = false;
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (!decided && err.code === 'ECONNREFUSED') connectFailed = true;
    });
    upstream.pause();
    let decided = false;
    let head: Buffer = Buffer.alloc(0);

    const asTcp = (): void => {
      decided = true;
      stats.tcpCxTotal++;
      downstream.setTimeout(TCP_IDLE_TIMEOUT_MS, () => downstream.destroy());
      if (connectFailed || upstream.destroyed) {
        stats.upstreamCxConnectFail++;
        downstream.resetAndDestroy();
        return;
      }
      trackUpstream(upstream, stats);
      relay(downstream, upstream, head, () => undefined);
    };
    const asHttp = (): void => {
      decided = true;
      // The parallel connection is not needed: requests go through the keep-alive pool.
      upstream.destroy();
      this.http.accept(downstream, head); // it reads the socket from here (resumes it as it sees fit)
    };
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const protocol = sniff(head);
      if (protocol === undefined) return;
      cleanup();
      if (protocol === 'http1') asHttp();
      else asTcp();
    };
    const onEarlyEnd = (): void => { cleanup(); asTcp(); };
    const onUpstreamFirst = (): void => { cleanup(); asTcp(); };
    const cleanup = (): void => {
      downstream.off('data', onData);
      downstream.off('end', onEarlyEnd);
      upstream.off('readable', onUpstreamFirst);
      downstream.pause();
    };
    downstream.on('data', onData);
    downstream.on('end', onEarlyEnd);
    // A server that speaks first makes this a TCP connection.
    upstream.once('readable', onUpstreamFirst);
    downstream.resume();
  }
}
