// A capture listener (15001 outbound, 15006 inbound): finds where each accepted connection was
// going, refuses loops, and decides from the first bytes whether it is HTTP/1.x or HTTP/2 (the
// client preface: L7, every request or stream judged) or anything else (opaque bytes, judged once as
// a TCP connection: Istio's TCP semantics).
// A server that speaks first (SMTP, MySQL) must not wait for the client, so an upstream connection
// is opened at accept time, but only for a connection policy would let through as TCP, and only
// while the client says nothing: the moment its bytes may be an HTTP request, that connection is
// closed (HTTP requests go through the keep-alive pool, each after its own decision), so a client
// that sends half a head holds nothing at the application.
// An outbound connection to a ServiceEntry port that declares its protocol is not sniffed: TCP (TLS,
// MONGO...) is relayed from the first byte, whoever speaks first; HTTP (HTTP2, GRPC...) is awaited as
// HTTP, and bytes that are not HTTP pass through to the original destination (Istio's filter chains).
import type { PeerExchange } from './peer-exchange.js';
import { resetSocket } from '../net/reset.js';
import { isLocalAddress } from '../net/local-addresses.js';
import { Server, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls'; // a type only: the module loads on first use
import {
  connectionRecord, FLAG, hostPort, liveLog, type AccessLogSink, type DecisionNote, type ListenerRole,
} from '../log/access-record.js';
import { scope } from '../log/logger.js';
import type { ConnectionBudget } from './connection-budget.js';
import { AWAIT_SERVER_NAME, BLACK_HOLE_CLUSTER, type ClusterTarget, type ConnectionFacts, type ConnectionVerdict, type RequestDecider } from './decider.js';
import { isPickFailure, type Endpoint as TrafficEndpoint } from '../traffic/cluster.js';
import { Http1Handler, KEEP_ALIVE_TIMEOUT_MS, DEFAULT_HEAD_TIMEOUT_MS, type HttpHandlerOptions } from './http1/handler.js';
import { Http2Handler } from './http2/handler.js';
import { http2Settings } from './http2/preface.js';
import type { Http1Settings } from './http1/connection.js';
import { originalDestination, type Endpoint } from './socket-options.js';
import { listenOnce } from '../net/listen.js';
import type { Direction, DirectionStats, ProxyStats } from './stats.js';
import { adoptAccepted, attachReader, detachReader, owned } from './read-buffers.js';
import { relay } from './tcp/relay.js';
import { connectionToCluster } from './tcp/cluster-connection.js';
import { TcpLog } from './tcp/tcp-log.js';
import { sniff, type Protocol } from './tcp/sniff.js';
import { MAX_HELLO_CHUNKS, readClientHello } from './tls/client-hello.js';
import { acceptMeshTls, type InboundMeshTls } from './tls/inbound-mtls.js';
import { MESH_ALPN_SERVER, MESH_ALPN_SERVER_NO_EXCHANGE, MESH_ALPN_TCP, MESH_ALPN_TCP_NO_EXCHANGE, offersMeshAlpn } from './tls/mesh-alpn.js';
import { EXCHANGE_TIMEOUT_MS, PEER_EXCHANGE_ALPN, readPeerFrame, upstreamExchangeGate } from './tcp/metadata-exchange.js';
import type { RelayGate } from './tcp/relay.js';
import { connectTls, type TlsHandshakeError, type UpstreamTls } from './tls/origination.js';
import { peerOf, type PeerIdentity } from './tls/peer-identity.js';
import { requestedServerName } from './tls/requested-server-name.js';
import { connectUpstream, sourceFor, trackUpstream, type UpstreamMode } from './upstream.js';

const log = scope('default');

/** Raw TCP connections idle this long are closed (Envoy's TCP proxy default). */
export const TCP_IDLE_TIMEOUT_MS = 3_600_000;
/**
 * Outbound to a destination reached over TLS: the proxy speaks first (its ClientHello), so a server
 * that speaks first cannot show itself; a client silent this long is taken as such a protocol's and
 * its connection opened as TCP.
 */
export const SILENT_CLIENT_MS = 1_000;
/** An upstream's first bytes that could begin an HTTP/2 SETTINGS frame but stop short: how long more is awaited. */
const GREETING_WAIT_MS = 200;

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
  /** How HTTP/1 requests are read (100-continue, HTTP/1.0, path normalization, limits, head time-out). */
  readonly http?: Partial<Http1Settings>;
  /** Where HTTP requests go, and which opaque connections pass; default: the original destination, all. */
  readonly decider?: RequestDecider;
  /** The process's downstream connections (every listener, every worker): over its maximum, refused. */
  readonly connections: ConnectionBudget;
  /** Every HTTP request and every connection carried as TCP is logged here; absent: none is. */
  readonly accessLog?: AccessLogSink | undefined;
  /** Inbound: mutual TLS from other sidecars (PeerAuthentication); absent: every connection as it comes. */
  readonly meshTls?: InboundMeshTls | undefined;
  /** Istio's metadata exchange with mesh peers (this pod's lines); absent: none spoken. */
  readonly peerExchange?: PeerExchange | undefined;
}

const destinations = new WeakMap<Socket, Endpoint>();

/** A plan of mutual TLS to another sidecar (not a DestinationRule's TLS, not a reason for none). */
function isMeshTls(t: UpstreamTls | string | undefined): boolean {
  return typeof t === 'object' && t.mesh;
}

/**
 * Admits an accepted connection into the process's budget, counts it in `stats` and keeps it in
 * `open` until it closes; over the budget it is reset at once (nothing read, nothing opened for it)
 * and counted as an overflow, `refused` told first (the access log). False: refused.
 */
export function admitDownstream(downstream: Socket, stats: DirectionStats, open: Set<Socket>, budget: ConnectionBudget,
  refused?: (downstream: Socket) => void): boolean {
  if (!budget.tryAcquire()) {
    stats.cxOverflow++;
    refused?.(downstream);
    resetSocket(downstream);
    return false;
  }
  stats.cxTotal++;
  stats.cxActive++;
  open.add(downstream);
  downstream.on('close', (hadError) => {
    budget.release();
    stats.cxActive--;
    stats.rxBytes += downstream.bytesRead;
    stats.txBytes += downstream.bytesWritten;
    if (hadError) stats.cxErrors++;
    open.delete(downstream);
  });
  downstream.on('error', () => { /* counted on close; never fatal */ });
  return true;
}

/**
 * The access log line of a connection refused over MESH_MAX_DOWNSTREAM_CONNECTIONS (UO): Envoy's
 * overload manager refuses it without a line; one here says why a client was reset.
 */
export function logOverflow(log: AccessLogSink, role: ListenerRole, downstream: Socket, local: string | undefined): void {
  log.write(connectionRecord({
    role, startMs: Date.now(), durationMs: 0, flags: FLAG.UO, terminationDetails: 'downstream_global_cx_overflow',
    bytesReceived: 0, bytesSent: 0, downstreamLocal: local, downstreamRemote: hostPort(downstream.remoteAddress, downstream.remotePort),
  }));
}

export class CaptureListener {
  private readonly server: Server;
  private readonly http: Http1Handler;
  private readonly h2: Http2Handler;
  private readonly open = new Set<Socket>();
  /** Connections whose client has sent nothing yet (an idle one is closed first when draining). */
  private readonly silent = new Set<Socket>();
  private readonly headTimeoutMs: number;
  /** Told of a connection the budget refused (set only with an access log). */
  private readonly overflow: ((downstream: Socket) => void) | undefined;

  constructor(private readonly o: CaptureListenerOptions) {
    const http: HttpHandlerOptions = {
      stats: o.stats.of(o.direction), upstream: o.upstream, destinationOf: (socket) => destinations.get(socket),
      decider: o.decider, settings: o.http, accessLog: o.accessLog, role: o.direction, peerExchange: o.peerExchange,
    };
    this.http = new Http1Handler(http);
    this.h2 = new Http2Handler(http);
    const accessLog = o.accessLog;
    this.overflow = accessLog ? (downstream) => {
      if (!accessLog.on) return;
      let local: string | undefined;
      try { // where it was going (its own address is the listener's)
        const dst = o.transparent ? { address: downstream.localAddress ?? '', port: downstream.localPort ?? 0 } : originalDestination(downstream);
        local = dst ? hostPort(dst.address, dst.port) : undefined;
      } catch { /* not known */ }
      logOverflow(accessLog, o.direction, downstream, local);
    } : undefined;
    this.headTimeoutMs = o.http?.headTimeoutMs ?? DEFAULT_HEAD_TIMEOUT_MS;
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
    return listenOnce(this.server, this.o.port, this.o.host, { transparent: this.o.transparent, reusePort: this.o.reusePort ?? false });
  }

  /** Stops accepting; established connections go on. */
  stopAccepting(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Connections still open (raw TCP and HTTP). */
  get activeConnections(): number {
    return this.open.size;
  }

  /** Closes idle HTTP keep-alive connections; busy ones close after their response (drain); HTTP/2 ones are told GOAWAY. */
  drainHttp(): void {
    this.http.drain();
    this.h2.drain();
  }

  /**
   * Closes what is idle now: HTTP connections between requests (busy ones after their response) and
   * connections whose client has not sent a byte yet (EXIT_ON_ZERO_ACTIVE_CONNECTIONS).
   */
  closeIdle(): void {
    this.http.drain();
    this.h2.closeIdle();
    for (const socket of this.silent) socket.destroy();
  }

  /** Shutdown: every connection of this listener ends now. */
  closeAll(): void {
    for (const socket of this.open) socket.destroy();
  }

  private onConnection(accepted: Socket): void {
    const downstream = adoptAccepted(accepted);
    if (!admitDownstream(downstream, this.o.stats.of(this.o.direction), this.open, this.o.connections, this.overflow)) return;

    const dst = this.o.transparent
      ? { address: downstream.localAddress ?? '', port: downstream.localPort ?? 0 }
      : originalDestination(downstream);
    if (!dst || (this.o.ownPorts.has(dst.port) && isLocalAddress(dst.address, this.o.localAddresses()))) {
      // Not captured traffic (a direct connection to the listener) or a loop back into the proxy.
      this.o.stats.loopsRefused++;
      resetSocket(downstream);
      return;
    }
    destinations.set(downstream, dst);
    this.dispatch(downstream, dst);
  }

  /**
   * What policy says of this connection as opaque TCP (asked before anything is opened for it, and
   * again once a ClientHello carried as bytes names a server); undefined when no policy is in force.
   * `sni`: by default the one of the mutual TLS terminated here (none for a plaintext socket).
   */
  private tcpVerdict(downstream: Socket, dst: Endpoint, peer: PeerIdentity | undefined, sni?: string): ConnectionVerdict | undefined {
    const d = this.o.decider;
    if (!d?.policesConnections || !d.admitConnection) return undefined;
    try {
      return d.admitConnection({ source: downstream.remoteAddress, destination: dst, kind: 'tcp', peer, sni: sni ?? requestedServerName(downstream) });
    } catch (err) { // a bug must not let a connection through
      log.error(`connection policy check failed: ${(err as Error).message}`);
      return { allowed: false, reason: 'policy check failed' };
    }
  }

  /**
   * How the client's mutual TLS goes: terminated here (its ClientHello offers a mesh ALPN), then the
   * plaintext inside is dispatched as any connection, with the peer's identity.
   */
  private terminateMeshTls(downstream: Socket, head: Buffer, dst: Endpoint, meshTls: InboundMeshTls): void {
    const stats = this.o.stats.of(this.o.direction);
    const contexts = meshTls.contexts();
    if (!contexts) { // a peer sidecar expects mTLS this workload cannot answer
      stats.mtlsNoIdentity++;
      log.warn(`inbound mutual TLS from ${downstream.remoteAddress ?? '?'} refused: this workload holds no certificate`);
      resetSocket(downstream);
      return;
    }
    const exchange = this.o.peerExchange?.frame;
    acceptMeshTls(downstream, head, {
      contexts, stats, handshakeTimeoutMs: meshTls.handshakeTimeoutMs, alpn: exchange ? MESH_ALPN_SERVER : MESH_ALPN_SERVER_NO_EXCHANGE,
      onSecure: (tls, peer) => {
        log.debug(`inbound mutual TLS from ${downstream.remoteAddress ?? '?'}: ${peer.spiffeId}`);
        destinations.set(tls, dst);
        if (exchange === undefined || tls.alpnProtocol !== PEER_EXCHANGE_ALPN) {
          this.dispatch(tls, dst, peer);
          return;
        }
        // Istio's TCP metadata exchange: this side's frame first, the client's read before anything
        // of the connection is judged or sniffed (what follows it may be any protocol, HTTP too).
        tls.write(exchange);
        readPeerFrame(tls, EXCHANGE_TIMEOUT_MS, (peerKey, readAhead) => {
          if (!tls.destroyed) this.dispatch(tls, dst, peer, { peerKey, readAhead });
        });
      },
      onFailed: (reason) => log.debug(`inbound mutual TLS from ${downstream.remoteAddress ?? '?'} failed: ${reason}`),
    });
  }

  /** STRICT: a connection that is not mutual TLS is reset (Istio's inbound listener has no plaintext chain then). */
  private refusePlaintext(downstream: Socket, dst: Endpoint, what: string): void {
    this.o.stats.of(this.o.direction).mtlsPlaintextRefused++;
    log.debug(`inbound ${what} from ${downstream.remoteAddress ?? '?'} to port ${dst.port} refused: PeerAuthentication STRICT`);
    resetSocket(downstream);
  }

  /**
   * Traffic management: the endpoint of the cluster that serves this connection's destination, with
   * the TLS to reach it; `failed`: why none (UH, UO; NR, NC from the routes); `awaitServerName`: the
   * routes need the ClientHello's server name (ask again with `hello`); undefined: no cluster serves it.
   */
  private routeConnection(downstream: Socket, dst: Endpoint, hello?: { readonly sni: string | undefined }): ConnectionRoute | undefined {
    const d = this.o.decider;
    if (!d?.connectionCluster) return undefined;
    let target: ReturnType<NonNullable<RequestDecider['connectionCluster']>>;
    try {
      target = d.connectionCluster(hello === undefined
        ? { source: downstream.remoteAddress, destination: dst, kind: 'tcp' }
        : { source: downstream.remoteAddress, destination: dst, kind: 'tls', sni: hello.sni, helloRead: true });
    } catch (err) {
      log.error(`connection routing failed: ${(err as Error).message}`);
      return { failed: 'UH', reason: 'connection routing failed', cluster: undefined };
    }
    if (target === undefined) return undefined;
    if ('kind' in target) {
      if (target.kind === AWAIT_SERVER_NAME.kind) return AWAITING_SERVER_NAME;
      return { failed: target.flag === 'NC' ? 'NC' : 'NR', reason: target.body.trim(), cluster: undefined };
    }
    const picked = target.cluster.pickConnection(target.hash === undefined ? undefined : { hash: target.hash });
    if (isPickFailure(picked)) return { failed: picked.flag, reason: picked.body, cluster: target.cluster.name };
    const tls = target.tlsFor(picked.spec);
    return { target, endpoint: picked, dst: { address: picked.address, port: picked.port }, tls: tls?.kind === 'reply' ? tls.body.trim() : tls };
  }

  /** The TLS an outbound connection carried as TCP needs (undefined: plaintext), or why it cannot go at all. */
  private upstreamTls(downstream: Socket, dst: Endpoint): UpstreamTls | string | undefined {
    const d = this.o.decider;
    if (!d?.connectionUpstream) return undefined;
    try {
      const t = d.connectionUpstream({ source: downstream.remoteAddress, destination: dst, kind: 'tcp' });
      return t?.kind === 'reply' ? t.body.trim() : t;
    } catch (err) { // a bug must not send plaintext where TLS was asked for
      log.error(`upstream TLS plan failed: ${(err as Error).message}`);
      return 'upstream TLS plan failed';
    }
  }

  /** What the ServiceEntry port of this destination declares (outbound): TCP, HTTP, or undefined (sniffed). */
  private declaredProtocol(dst: Endpoint): 'tcp' | 'http' | undefined {
    const d = this.o.decider;
    if (!d?.connectionProtocol) return undefined;
    try {
      return d.connectionProtocol(dst);
    } catch (err) { // sniffed, as before
      log.error(`connection protocol lookup failed: ${(err as Error).message}`);
      return undefined;
    }
  }

  /** `exchanged`: what the client's TCP metadata exchange said, and the bytes it sent after its frame. */
  private dispatch(downstream: Socket, dst: Endpoint, peer?: PeerIdentity, exchanged?: { readonly peerKey: string; readonly readAhead: Buffer | undefined }): void {
    const stats = this.o.stats.of(this.o.direction);
    // The plaintext inside a terminated mTLS connection is not checked for mTLS again.
    const meshTls = peer ? undefined : this.o.meshTls;
    const mode = meshTls ? meshTls.modeFor(dst.port) : 'DISABLE';
    // The protocol the destination's ServiceEntry port declares: TCP is relayed from the first byte (no
    // sniffing, no HTTP); HTTP is HTTP, and what is not HTTP passes through to the original destination
    // (Istio's HTTP filter chain and its fall-through chain: no cluster, no upstream opened before the
    // client speaks). Undefined: sniffed.
    const declared = mode === 'DISABLE' ? this.declaredProtocol(dst) : undefined;
    // A cluster's endpoint (traffic management), or the original destination.
    let routed = declared === 'http' ? undefined : this.routeConnection(downstream, dst);
    // TLS routes: nothing is opened nor planned until the ClientHello names a server (awaitHello below).
    const awaitsHello = routed === AWAITING_SERVER_NAME;
    let upDst = routed && 'target' in routed ? routed.dst : dst;
    // Declared HTTP: planned only if the connection turns out not to be HTTP (asTcp).
    let upTls = declared === 'http' || awaitsHello ? undefined
      : routed ? ('failed' in routed ? routed.reason : 'target' in routed ? routed.tls : undefined) : this.upstreamTls(downstream, dst);
    let verdict = this.tcpVerdict(downstream, dst, peer);
    // The log as it is when the connection begins: its line is whole whenever a Telemetry switches it.
    const sink = liveLog(this.o.accessLog);
    const started = sink ? performance.now() : 0;
    const readAhead = exchanged?.readAhead;
    let upstream: Socket | undefined;
    let connectFailed = false;
    /** Why, for the log (ECONNREFUSED, or the socket libc would not make). */
    let connectError: string | undefined;
    /** Envoy's flag when no connection could be made: UF, or the cluster's UH / UO, the routes' NR / NC. */
    let failFlag: number = routed && 'failed' in routed ? FLAG[routed.failed] : FLAG.UF;
    /** The cluster's maxConnections slot of the upstream opened ahead, given back at once when it is dropped. */
    let releaseSlot: (() => void) | undefined;
    const openUpstream = (): Socket | undefined => {
      if (typeof upTls === 'string') {
        connectFailed = true;
        connectError = upTls;
        return undefined;
      }
      const cluster = routed && 'target' in routed ? routed : undefined;
      if (cluster && !cluster.target.cluster.tryAcquireConnection(cluster.endpoint)) {
        connectFailed = true;
        connectError = 'overflow';
        failFlag = FLAG.UO;
        return undefined;
      }
      try {
        // Without metadata of its own to send, this side must not let a server select the exchange.
        const tls = upTls !== undefined && this.o.peerExchange?.frame === undefined && upTls.alpn === MESH_ALPN_TCP ? { ...upTls, alpn: MESH_ALPN_TCP_NO_EXCHANGE } : upTls;
        const s = tls ? connectTls(upDst, tls, stats)
          : connectUpstream(this.o.upstream, upDst, sourceFor(this.o.upstream, upDst, downstream.remoteAddress));
        if (cluster) releaseSlot = connectionToCluster(s, cluster, upTls !== undefined);
        s.on('error', (err: TlsHandshakeError) => {
          if (!decided && (err.code === 'ECONNREFUSED' || err.code === 'ETIMEDOUT')) {
            connectFailed = true;
            connectError = err.code;
          }
          if (err.tlsHandshake) log.debug(`outbound TLS to ${upDst.address}:${upDst.port} failed (${upTls ? (upTls as UpstreamTls).describe : ''}): ${err.message}`);
        });
        s.pause();
        return s;
      } catch (err) { // a socket libc would not make (TPROXY without the capabilities...)
        if (cluster) cluster.target.cluster.releaseConnection(cluster.endpoint);
        log.debug('upstream connection failed', { error: (err as Error).message });
        connectFailed = true;
        connectError = (err as Error).message;
        return undefined;
      }
    };
    const dropUpstream = (): void => {
      if (upstream) {
        upstream.off('readable', onUpstreamFirst);
        // Its slot goes back now, not when the socket is gone: the HTTP/2 streams about to be sent on
        // (which do not wait for a slot) and the HTTP/1.1 requests find it free.
        releaseSlot?.();
        releaseSlot = undefined;
        upstream.destroy();
        upstream = undefined;
      }
    };
    let decided = false;
    let head: Buffer = Buffer.alloc(0);
    let timer: NodeJS.Timeout | undefined;

    const asTcp = (kind: Protocol): void => {
      decided = true;
      if (declared === 'http') upTls = this.upstreamTls(downstream, dst); // passed through: the original destination's plan
      let note: DecisionNote | undefined | void;
      if (verdict) {
        const facts: ConnectionFacts = { source: downstream.remoteAddress, destination: dst, kind: kind === 'http1' ? 'tcp' : kind, peer };
        note = this.o.decider?.connectionDecided?.(facts, verdict);
      }
      const tcpLog = sink
        ? new TcpLog(sink, this.o.direction, downstream, dst, started, kind === 'tls' ? head : undefined, note || undefined, peer,
          this.o.meshTls?.contexts()?.certificate.spiffeId, routed && routed !== AWAITING_SERVER_NAME
            ? { host: upDst, cluster: 'failed' in routed ? routed.cluster : 'target' in routed ? routed.target.cluster.name : undefined } : undefined)
        : undefined;
      if (verdict && !verdict.allowed) {
        dropUpstream();
        stats.tcpCxDenied++;
        log.debug('connection refused by policy', { source: downstream.remoteAddress, destination: `${dst.address}:${dst.port}`, peer: peer?.principal, reason: verdict.reason });
        tcpLog?.write(FLAG.RBAC, verdict.details);
        downstream.destroy();
        return;
      }
      stats.tcpCxTotal++;
      // Istio's TCP metrics: opened now, the rest as the connection closes (bytes each way of the client's side).
      const service = routed && routed !== AWAITING_SERVER_NAME ? ('failed' in routed ? routed.cluster ?? '' : 'target' in routed ? routed.target.cluster.name : '') : '';
      const countTcp = (principal: string, peerKey: string): void => {
        const series = stats.standard.tcpSeries(service, principal, peerKey);
        series.opened++;
        const closed = (): void => {
          series.closed++;
          series.receivedBytes += downstream.bytesRead;
          series.sentBytes += downstream.bytesWritten;
        };
        if (downstream.destroyed) closed();
        else downstream.once('close', closed);
      };
      const pool = routed && 'target' in routed ? routed.target.cluster.spec.policy.connectionPool.tcp : undefined;
      downstream.setTimeout(pool?.idleTimeoutMs ?? TCP_IDLE_TIMEOUT_MS, () => downstream.destroy());
      upstream ??= openUpstream();
      // Outbound to a sidecar over mutual TLS: the series is the upstream's verified principal, known once its handshake is done,
      // and the workload it says it is when it speaks the TCP metadata exchange (known once its frame is read).
      const up = upstream;
      let gate: RelayGate | undefined;
      if (this.o.direction === 'outbound' && up !== undefined && !up.destroyed && isMeshTls(upTls) && peerOf(up) === undefined) {
        const frame = this.o.peerExchange?.frame;
        if (frame !== undefined && (upTls as UpstreamTls).alpn === MESH_ALPN_TCP) {
          gate = upstreamExchangeGate(up as TLSSocket, frame, EXCHANGE_TIMEOUT_MS, (peerKey) => countTcp(peerOf(up)?.principal ?? '', peerKey));
        } else {
          let counted = false;
          const count = (): void => {
            if (counted) return;
            counted = true;
            countTcp(peerOf(up)?.principal ?? '', '');
          };
          up.once('secureConnect', count);
          up.once('close', count);
        }
      } else {
        countTcp(peer?.principal ?? (up !== undefined ? peerOf(up)?.principal : undefined) ?? '', exchanged?.peerKey ?? '');
      }
      if (connectFailed || !upstream || upstream.destroyed) {
        upstream?.destroy();
        if (connectError?.startsWith(BLACK_HOLE_CLUSTER) === true) { // REGISTRY_ONLY: no service covers it; nothing was dialled
          stats.blackHoleCx++;
          log.debug(`outbound connection to ${dst.address}:${dst.port} closed: ${connectError}`);
          tcpLog?.write(FLAG.UH, BLACK_HOLE_CLUSTER);
          downstream.destroy();
          return;
        }
        // No route (NR, NC) is not an upstream attempt.
        if ((failFlag & (FLAG.NR | FLAG.NC)) === 0) stats.upstreamCxConnectFail++;
        if (pool !== undefined) stats.routedCxConnectFail++;
        tcpLog?.write(failFlag, connectError);
        resetSocket(downstream);
        return;
      }
      if (pool?.maxConnectionDurationMs !== undefined) {
        const opened = upstream;
        const limit = setTimeout(() => { downstream.destroy(); opened.destroy(); }, pool.maxConnectionDurationMs).unref();
        downstream.once('close', () => clearTimeout(limit));
      }
      upstream.off('readable', onUpstreamFirst);
      trackUpstream(upstream, stats, pool !== undefined);
      relay(downstream, upstream, head, tcpLog ? tcpLog.relayed(upstream) : relayEnded, gate);
    };
    const asHttp = (): void => {
      decided = true;
      // Not needed: requests go through the keep-alive pool, each after its decision.
      dropUpstream();
      this.http.accept(downstream, head); // it reads the socket from here
    };
    const asHttp2 = (): void => {
      decided = true;
      dropUpstream();
      this.h2.accept(downstream, head);
    };
    const onData = (chunk: Buffer): void => {
      this.silent.delete(downstream);
      head = head.length === 0 ? owned(chunk) : Buffer.concat([head, chunk]);
      const protocol = sniff(head);
      if (protocol === undefined) {
        // Perhaps an HTTP request, not complete: nothing is held at the application meanwhile.
        dropUpstream();
        restartTimer(this.headTimeoutMs);
        return;
      }
      // Mesh TLS is looked for only when it can be answered (a certificate is held); without one a
      // ClientHello is carried (or refused) as TCP at once, as before. A policy on `connection.sni`
      // has the whole ClientHello of TLS carried as bytes read too, for its server name (as Envoy's
      // TLS inspector gives it); TLS inside mutual TLS is not looked into (the outer SNI counts).
      const meshCapable = mode !== 'DISABLE' && meshTls!.contexts() !== undefined;
      const wantsSni = verdict !== undefined && peer === undefined && this.o.decider?.readsSni === true;
      if (protocol === 'tls' && (meshCapable || wantsSni)) {
        const hello = readClientHello(head);
        if (hello.kind === 'incomplete') { // the ALPN says whether it is a sidecar's; the SNI, what policy sees
          restartTimer(this.headTimeoutMs);
          return;
        }
        if (meshCapable && hello.kind === 'hello' && offersMeshAlpn(hello.alpn)) {
          cleanup();
          dropUpstream();
          this.terminateMeshTls(downstream, head, dst, meshTls!);
          return;
        }
        if (wantsSni && hello.kind === 'hello' && hello.serverName !== undefined) {
          verdict = this.tcpVerdict(downstream, dst, peer, hello.serverName);
        }
      }
      cleanup();
      if (mode === 'STRICT') {
        dropUpstream();
        this.refusePlaintext(downstream, dst, protocol === 'tls' ? 'TLS without a mesh ALPN' : `${protocol} connection`);
      } else if (protocol === 'http1') asHttp();
      else if (protocol === 'h2') asHttp2();
      else asTcp(protocol);
    };
    const onEarlyEnd = (): void => {
      cleanup();
      if (mode === 'STRICT') this.refusePlaintext(downstream, dst, 'connection');
      else asTcp('tcp');
    };
    const onUpstreamFirst = (): void => {
      // An HTTP/2 server sends its SETTINGS at once: not a server that speaks first, but one whose
      // client's preface is on its way. That connection is not the one HTTP/2 streams would use
      // (they go through the proxy's own sessions, each judged): it is dropped, and the client awaited.
      const first = upstream?.read() as Buffer | null | undefined;
      if (first) upstream!.unshift(first);
      const h2 = first ? http2Settings(first) : false;
      if (h2 === 'maybe' && maybeTimer === undefined) {
        // Fewer bytes than a frame header that could start one: the rest of a SETTINGS frame comes at
        // once, a short greeting (`b3\n`) never does. Look again in a moment (a 'readable' listener
        // would fire again at once for the bytes put back: a loop that starves the process).
        maybeTimer = setTimeout(onUpstreamFirst, GREETING_WAIT_MS).unref();
        return;
      }
      if (h2 === true) {
        if (maybeTimer) clearTimeout(maybeTimer);
        dropUpstream();
        restartTimer(KEEP_ALIVE_TIMEOUT_MS);
        return;
      }
      cleanup();
      asTcp('tcp');
    };
    let maybeTimer: NodeJS.Timeout | undefined;
    const restartTimer = (ms: number): void => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        cleanup();
        dropUpstream();
        downstream.destroy();
      }, ms).unref();
    };
    /** The sniffer is done with the connection (decided, or handed on). */
    let settled = false;
    const cleanup = (): void => {
      settled = true;
      this.silent.delete(downstream);
      if (timer) clearTimeout(timer);
      if (maybeTimer) clearTimeout(maybeTimer);
      detachReader(downstream, onData);
      downstream.off('end', onEarlyEnd);
      upstream?.off('readable', onUpstreamFirst);
      downstream.pause();
    };
    if (awaitsHello) {
      // TLS routes: the ClientHello chooses the route, then the connection is relayed whole from its first byte.
      let helloReads = 0;
      const onHello = (chunk: Buffer): void => {
        head = head.length === 0 ? owned(chunk) : Buffer.concat([head, chunk]);
        const hello = readClientHello(head);
        // Each read re-copies what came before: a hello in too many pieces is taken as none (no route).
        if (hello.kind === 'incomplete' && ++helloReads < MAX_HELLO_CHUNKS) return;
        routeByHello(hello.kind === 'hello' ? hello.serverName : undefined);
      };
      const routeByHello = (sni: string | undefined): void => {
        settled = true;
        this.silent.delete(downstream);
        if (timer) clearTimeout(timer);
        detachReader(downstream, onHello);
        downstream.off('end', onHelloEnd);
        downstream.pause();
        routed = this.routeConnection(downstream, dst, { sni });
        if (routed === AWAITING_SERVER_NAME) routed = { failed: 'NR', reason: 'no route for the server name', cluster: undefined };
        upDst = routed && 'target' in routed ? routed.dst : dst;
        upTls = routed ? ('failed' in routed ? routed.reason : 'target' in routed ? routed.tls : undefined) : this.upstreamTls(downstream, dst);
        failFlag = routed && 'failed' in routed ? FLAG[routed.failed] : FLAG.UF;
        asTcp(sni === undefined ? 'tcp' : 'tls');
      };
      const onHelloEnd = (): void => routeByHello(undefined);
      // Nothing is open for it yet: a drain that closes idle connections may close it.
      this.silent.add(downstream);
      downstream.once('close', () => this.silent.delete(downstream));
      attachReader(downstream, onHello);
      downstream.on('end', onHelloEnd);
      timer = setTimeout(() => {
        detachReader(downstream, onHello);
        downstream.destroy();
      }, this.headTimeoutMs).unref();
      if (readAhead !== undefined) onHello(readAhead);
      if (!settled) downstream.resume();
      return;
    }
    if (declared === 'tcp') {
      // Relayed from the first byte, whoever speaks first: nothing is read before the upstream is asked for.
      if (readAhead !== undefined) head = readAhead;
      asTcp('tcp');
      return;
    }
    if (readAhead !== undefined) {
      // The client spoke already (after its exchange frame): judged as if it had just been read.
      this.silent.add(downstream);
      downstream.once('close', () => this.silent.delete(downstream));
      attachReader(downstream, onData);
      downstream.on('end', onEarlyEnd);
      onData(readAhead);
      if (!settled) downstream.resume();
      return;
    }
    this.silent.add(downstream);
    downstream.once('close', () => this.silent.delete(downstream));
    attachReader(downstream, onData);
    downstream.on('end', onEarlyEnd);
    if (declared === 'http') {
      // HTTP waits for the client (a server that speaks first gets nothing, as behind Istio's HTTP
      // inspector); an idle one goes after the keep-alive time.
      restartTimer(KEEP_ALIVE_TIMEOUT_MS);
    } else if (upTls !== undefined) {
      // TLS to the upstream: the proxy speaks first, so a client silent for a while is taken as TCP.
      timer = setTimeout(() => { cleanup(); asTcp('tcp'); }, SILENT_CLIENT_MS).unref();
    } else if (verdict?.allowed !== false && mode !== 'STRICT') {
      // A server that speaks first makes this a TCP connection.
      upstream = openUpstream();
      upstream?.once('readable', onUpstreamFirst);
    } else {
      // Nothing opened for a client that says nothing; an idle one goes after the keep-alive time.
      restartTimer(KEEP_ALIVE_TIMEOUT_MS);
    }
    downstream.resume();
  }
}

function relayEnded(): void { /* nothing to log */ }

/** Where a connection carried as TCP goes when a cluster serves its destination (routeConnection). */
type ConnectionRoute =
  | { readonly target: ClusterTarget; readonly endpoint: TrafficEndpoint; readonly dst: Endpoint; readonly tls: UpstreamTls | string | undefined }
  | { readonly failed: 'UH' | 'UO' | 'NR' | 'NC'; readonly reason: string; readonly cluster: string | undefined }
  | { readonly awaitServerName: true };

/** routeConnection's answer while TLS routes wait for the ClientHello. */
const AWAITING_SERVER_NAME: ConnectionRoute = Object.freeze({ awaitServerName: true });

