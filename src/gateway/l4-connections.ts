// The connections of one gateway port that is TCP or TLS PASSTHROUGH: each is routed once, by the
// port's tcp route or by the tls route its ClientHello's server name picks (read without
// terminating TLS: client-hello.ts, as the sidecar reads it), judged by the gateway's authorization
// policies with Istio's TCP semantics (`connection.sni` from the ClientHello), then relayed whole to
// an endpoint of the destination's cluster (or to the destination as written, when no ServiceEntry
// declares it, as the HTTP routes do). Envoy's order: no chain for the connection (no route) closes
// it first (NR), then RBAC, then the TCP proxy. Every connection gets a decision (/debug/decisions)
// and, with an access log, one line when it ends.
import type { Socket } from 'node:net';
import type { HttpRouteDestination } from '../config/resources/types.js';
import { FLAG, liveLog, type AccessLogSink } from '../log/access-record.js';
import { scope } from '../log/logger.js';
import { resetSocket } from '../net/reset.js';
import type { ClusterTarget, LocalReply } from '../proxy/decider.js';
import { TCP_IDLE_TIMEOUT_MS } from '../proxy/listener.js';
import { attachReader, detachReader, owned } from '../proxy/read-buffers.js';
import type { Endpoint } from '../proxy/socket-options.js';
import type { DirectionStats } from '../proxy/stats.js';
import { connectionToCluster } from '../proxy/tcp/cluster-connection.js';
import { relay } from '../proxy/tcp/relay.js';
import { TcpLog } from '../proxy/tcp/tcp-log.js';
import { MAX_HELLO_CHUNKS, readClientHello } from '../proxy/tls/client-hello.js';
import { connectTls, type UpstreamTls } from '../proxy/tls/origination.js';
import { MESH_ALPN_TCP, MESH_ALPN_TCP_NO_EXCHANGE } from '../proxy/tls/mesh-alpn.js';
import { EXCHANGE_TIMEOUT_MS, upstreamExchangeGate } from '../proxy/tcp/metadata-exchange.js';
import type { PeerExchange } from '../proxy/peer-exchange.js';
import type { RelayGate } from '../proxy/tcp/relay.js';
import type { TLSSocket } from 'node:tls'; // a type only: the module loads on first use
import { connectUpstream, trackUpstream } from '../proxy/upstream.js';
import { pickDestination } from '../routing/destination.js';
import { tlsRouteFor, type GatewayL4Port, type GatewayL4Route } from '../routing/gateway-l4-table.js';
import { rbacDeniedDetails, type RequestSecurity } from '../security/request-security.js';
import type { UpstreamTlsFor } from '../security/mtls/outbound-decider.js';
import { isPickFailure } from '../traffic/cluster.js';
import { isoAt, type Decision, type DecisionLog } from './decisions.js';
import { plainAddress } from './forwarded-for.js';

const log = scope('default');
const DIRECT = { kind: 'direct' } as const;
const NO_BYTES = Buffer.alloc(0);

/** The cluster a route destination names, for a connection from `source`; a LocalReply: none serves it (NC); undefined: not a service. */
export type ConnectionClusterFor = (destination: HttpRouteDestination, port: number, vsNamespace: string, source: string | undefined) =>
  ClusterTarget | LocalReply | undefined;

export interface GatewayL4Options {
  readonly port: number;
  /** TCP: routed at accept; TLS: by the ClientHello's server name. */
  readonly passthrough: boolean;
  readonly stats: DirectionStats;
  /** The routes of this port in the configuration in force. */
  readonly routes: () => GatewayL4Port | undefined;
  readonly security: RequestSecurity;
  readonly decisions: DecisionLog;
  readonly accessLog?: AccessLogSink | undefined;
  /** How long a client may take to send its whole ClientHello (then it is closed); 0: no limit. */
  readonly helloTimeoutMs: number;
  readonly clusterFor?: ConnectionClusterFor | undefined;
  /** TLS to a destination that is not a service (a DestinationRule's, mTLS into the mesh). */
  readonly upstreamTls?: UpstreamTlsFor | undefined;
  /** The gateway's own metadata for the TCP metadata exchange with a mesh upstream; absent: the exchange is not offered. */
  readonly peerExchange?: PeerExchange | undefined;
}

/** Where a connection goes once routed and admitted. */
interface Upstream {
  readonly dst: Endpoint;
  readonly cluster: string;
  readonly tls: UpstreamTls | undefined;
  readonly target?: { readonly target: ClusterTarget; readonly endpoint: Parameters<typeof connectionToCluster>[1]['endpoint'] };
}

/** Why a connection goes nowhere: Envoy's flag and the details for the log. */
interface Refusal {
  readonly flag: 'NR' | 'NC' | 'UH' | 'UO' | 'RBAC';
  readonly details: string;
  readonly cluster?: string | undefined;
}

export class GatewayL4Connections {
  /** Connections whose ClientHello is awaited: nothing is open for them (a drain closes them). */
  readonly silent = new Set<Socket>();
  private readonly listener: string;

  constructor(private readonly o: GatewayL4Options) {
    this.listener = `gateway_${o.port}`;
  }

  /** Takes an accepted connection (admitted and counted, paused, adopted for reads). */
  accept(downstream: Socket): void {
    if (!this.o.passthrough) {
      this.route(downstream, NO_BYTES, undefined, false);
      return;
    }
    let head: Buffer = NO_BYTES;
    const done = (sni: string | undefined, hello: boolean): void => {
      this.silent.delete(downstream);
      clearTimeout(timer);
      detachReader(downstream, onData);
      downstream.off('end', onEnd);
      downstream.pause();
      this.route(downstream, head, sni, hello);
    };
    let chunks = 0;
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? owned(chunk) : Buffer.concat([head, chunk]);
      const hello = readClientHello(head);
      // A hello in too many pieces is taken as no hello: closed, NR.
      if (hello.kind === 'incomplete' && ++chunks < MAX_HELLO_CHUNKS) return;
      done(hello.kind === 'hello' ? hello.serverName : undefined, hello.kind === 'hello');
    };
    // A client that closes before its ClientHello (a port check): nothing to route.
    const onEnd = (): void => {
      this.silent.delete(downstream);
      clearTimeout(timer);
      detachReader(downstream, onData);
      downstream.destroy();
    };
    const timer = this.o.helloTimeoutMs > 0 ? setTimeout(() => {
      detachReader(downstream, onData);
      this.silent.delete(downstream);
      downstream.destroy();
    }, this.o.helloTimeoutMs).unref() : undefined;
    this.silent.add(downstream);
    downstream.once('close', () => this.silent.delete(downstream));
    attachReader(downstream, onData);
    downstream.on('end', onEnd);
    downstream.resume();
  }

  /** Route, policy, destination, connect, relay: once per connection. */
  private route(downstream: Socket, head: Buffer, sni: string | undefined, hello: boolean): void {
    const o = this.o;
    const stats = o.stats;
    // The log as it is when the connection begins: its line is whole whenever a Telemetry switches it.
    const sink = liveLog(o.accessLog);
    const started = sink ? performance.now() : 0;
    const local: Endpoint = { address: plainAddress(downstream.localAddress), port: downstream.localPort ?? o.port };
    const source = downstream.remoteAddress === undefined ? undefined : plainAddress(downstream.remoteAddress);
    const routes = o.routes();
    const route = routes === undefined ? undefined : o.passthrough ? tlsRouteFor(routes, sni) : routes.tcp;
    const decision: { -readonly [K in keyof Decision]: Decision[K] } = {
      time: isoAt(Date.now()), listener: this.listener, method: o.passthrough ? 'TLS' : 'TCP',
      authority: sni ?? `${local.address}:${local.port}`, path: '-', jwt: '-', authz: '-', durationMs: 0,
      ...(source !== undefined ? { source } : {}),
    };
    let refusal: Refusal | undefined;
    let upstream: Upstream | undefined;
    if (route === undefined) {
      o.decisions.count('route', 'no_route');
      stats.tcpCxNoRoute++;
      decision.route = o.passthrough
        ? `no route: no tls route of this port matches ${sni === undefined ? (hello ? 'a ClientHello without a server name' : 'a connection that is not TLS') : `server name ${sni}`}`
        : 'no route: no tcp route applies to this port';
      refusal = { flag: 'NR', details: 'filter_chain_not_found' };
    } else {
      o.decisions.count('route', 'routed');
      decision.route = route.name;
      decision.routeName = route.name;
      refusal = this.authorize(local, source, sni, decision);
      if (refusal === undefined) {
        const to = this.destination(route, source);
        if ('flag' in to) refusal = to;
        else upstream = to;
      }
    }
    if (upstream !== undefined) {
      decision.upstream = `${upstream.dst.address.includes(':') ? `[${upstream.dst.address}]` : upstream.dst.address}:${upstream.dst.port}`;
      decision.cluster = upstream.cluster;
    } else if (refusal?.cluster !== undefined) decision.cluster = refusal.cluster;
    if (refusal !== undefined) {
      decision.flag = refusal.flag;
      decision.details = refusal.details;
    }
    o.decisions.record(decision);
    const tcpLog = sink
      ? new TcpLog(sink, 'gateway', downstream, local, started, o.passthrough && hello ? head : undefined, decision, undefined, undefined,
        upstream !== undefined ? { host: upstream.dst, cluster: upstream.cluster } : { host: undefined, cluster: refusal?.cluster })
      : undefined;
    if (refusal !== undefined) {
      log.debug(`gateway: port ${o.port}: connection from ${source ?? '?'} closed: ${refusal.flag} ${refusal.details}`);
      tcpLog?.write(FLAG[refusal.flag], refusal.details);
      if (refusal.flag === 'RBAC') downstream.destroy();
      else resetSocket(downstream);
      return;
    }
    this.relay(downstream, head, upstream!, tcpLog);
  }

  /** AuthorizationPolicy with Istio's TCP semantics; undefined: allowed (or no policy: nothing evaluated). */
  private authorize(local: Endpoint, source: string | undefined, sni: string | undefined, decision: { authz: string }): Refusal | undefined {
    const security = this.o.security;
    if (!security.hasPolicies) return undefined;
    const d = security.checkConnection({
      port: this.o.port, destinationIp: local.address, ...(source !== undefined ? { sourceIp: source, remoteIp: source } : {}), ...(sni !== undefined ? { sni } : {}),
    });
    this.o.decisions.count('authz', d.allowed ? 'allowed' : 'denied');
    decision.authz = d.reason.startsWith(d.allowed ? 'allowed' : 'denied') ? d.reason : `${d.allowed ? 'allowed' : 'denied'}: ${d.reason}`;
    if (d.allowed) return undefined;
    this.o.stats.tcpCxDenied++;
    return { flag: 'RBAC', details: rbacDeniedDetails(d) };
  }

  /** The destination chosen by weight (once), its cluster's endpoint, the TLS to reach it. */
  private destination(route: GatewayL4Route, source: string | undefined): Upstream | Refusal {
    const picked = pickDestination(route.destinations, Math.random, this.o.port);
    if (picked === undefined) return { flag: 'NC', details: 'cluster_not_found' };
    const vsNamespace = route.virtualService.slice(0, route.virtualService.indexOf('/'));
    const target = this.o.clusterFor?.(picked.destination, picked.port, vsNamespace, source);
    if (target !== undefined && 'kind' in target) return { flag: target.flag === 'NC' ? 'NC' : 'UH', details: target.details ?? 'cluster_not_found' };
    if (target !== undefined) {
      const cluster = target.cluster;
      const endpoint = cluster.pickConnection(target.hash === undefined ? undefined : { hash: target.hash });
      if (isPickFailure(endpoint)) return { flag: endpoint.flag, details: endpoint.flag === 'UO' ? 'overflow' : 'no_healthy_upstream', cluster: cluster.name };
      const tls = target.tlsFor(endpoint.spec);
      if (tls?.kind === 'reply') return { flag: 'UH', details: tls.details ?? 'upstream_tls', cluster: cluster.name };
      if (!cluster.tryAcquireConnection(endpoint)) return { flag: 'UO', details: 'overflow', cluster: cluster.name };
      return { dst: { address: endpoint.address, port: endpoint.port }, cluster: cluster.name, tls, target: { target, endpoint } };
    }
    const dst = { address: picked.host, port: picked.port };
    const tls = this.o.upstreamTls?.(dst, picked.host, false);
    if (tls?.kind === 'reply') return { flag: 'UH', details: tls.details ?? 'upstream_tls' };
    return { dst, cluster: `outbound|${picked.port}||${picked.host}`, tls };
  }

  private relay(downstream: Socket, head: Buffer, up: Upstream, tcpLog: TcpLog | undefined): void {
    const stats = this.o.stats;
    let upstream: Socket;
    try {
      // Without metadata of its own to send, the gateway must not let a server select the exchange.
      const tls = up.tls !== undefined && this.o.peerExchange?.frame === undefined && up.tls.alpn === MESH_ALPN_TCP ? { ...up.tls, alpn: MESH_ALPN_TCP_NO_EXCHANGE } : up.tls;
      upstream = tls ? connectTls(up.dst, tls, stats) : connectUpstream(DIRECT, up.dst, undefined);
    } catch (err) { // a socket libc would not make
      if (up.target) up.target.target.cluster.releaseConnection(up.target.endpoint);
      stats.upstreamCxConnectFail++;
      tcpLog?.write(FLAG.UF, (err as Error).message);
      resetSocket(downstream);
      return;
    }
    if (up.target) connectionToCluster(upstream, up.target, up.tls !== undefined);
    let connected = false;
    upstream.once(up.tls ? 'secureConnect' : 'connect', () => { connected = true; });
    upstream.once('error', () => {
      if (connected) return;
      stats.upstreamCxConnectFail++;
      if (up.target) stats.routedCxConnectFail++;
    });
    const pool = up.target?.target.cluster.spec.policy.connectionPool.tcp;
    downstream.setTimeout(pool?.idleTimeoutMs ?? TCP_IDLE_TIMEOUT_MS, () => downstream.destroy());
    if (pool?.maxConnectionDurationMs !== undefined) {
      const limit = setTimeout(() => { downstream.destroy(); upstream.destroy(); }, pool.maxConnectionDurationMs).unref();
      downstream.once('close', () => clearTimeout(limit));
    }
    stats.tcpCxTotal++;
    trackUpstream(upstream, stats, up.target !== undefined);
    // Istio's TCP metadata exchange with a mesh upstream that selects it (the gateway keeps no TCP
    // series of Istio's: the upstream's frame is read off and its metadata not used).
    const frame = this.o.peerExchange?.frame;
    const gate: RelayGate | undefined = frame !== undefined && up.tls?.mesh === true && up.tls.alpn === MESH_ALPN_TCP
      ? upstreamExchangeGate(upstream as TLSSocket, frame, EXCHANGE_TIMEOUT_MS, ignorePeer) : undefined;
    relay(downstream, upstream, head, tcpLog ? tcpLog.relayed(upstream) : relayEnded, gate);
  }
}

function relayEnded(): void { /* nothing to log */ }

function ignorePeer(): void { /* the gateway's TCP connections keep no standard series */ }
