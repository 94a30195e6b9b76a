// `pilot-agent proxy router`: listens on the ports of the Gateway servers that select this
// workload, and for each request checks the JWT and the policies, then routes by the
// VirtualServices bound to those gateways (claims included). Listeners follow configuration
// changes: a new port opens, a removed or changed one stops accepting at once and its connections
// get the drain duration (Istio's drainDuration) to finish, and routes change for the next request
// without touching established connections. HTTPS ports terminate
// TLS per Gateway server (tls-termination.ts); a request on a TLS connection is routed by the hosts
// of the server its SNI chose only, as Istio gives each HTTPS server its own route table.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { hostPort, type AccessLogSink } from '../log/access-record.js';
import { scope } from '../log/logger.js';
import type { ConnectionBudget } from '../proxy/connection-budget.js';
import type { UpstreamTlsFor } from '../security/mtls/outbound-decider.js';
import type { ClusterTarget, ForwardTarget, LocalReply, MirrorTarget, RequestDecider, Verdict } from '../proxy/decider.js';
import { injectFault } from '../proxy/fault-injection.js';
import { mergedEdits, responseEdits } from '../routing/header-edits.js';
import type { HttpFault } from '../config/resources/types.js';
import type { HttpRouteDestination } from '../config/resources/types.js';
import type { Http1Settings } from '../proxy/http1/connection.js';
import { Http1Handler, KEEP_ALIVE_TIMEOUT_MS, type HttpHandlerOptions } from '../proxy/http1/handler.js';
import { Http2Handler } from '../proxy/http2/handler.js';
import { byPreface } from '../proxy/http2/preface.js';
import { adoptAccepted } from '../proxy/read-buffers.js';
import { requestedServerName } from '../proxy/tls/requested-server-name.js';
import { admitDownstream, logOverflow } from '../proxy/listener.js';
import { listenOnce } from '../net/listen.js';
import type { ProxyStats } from '../proxy/stats.js';
import {
  applyCors, chooseMirrors, CORS_RESPONSE_HEADERS, DEFAULT_DESTINATION_PORT, pickDestination, route, routeName, type ForwardDecision, type RouteTable,
} from '../routing/index.js';
import { corsFacts } from '../traffic/outbound-decider.js';
import { hostOnly, type RequestContext, type RequestSecurity, type SecurityOutcome } from '../security/request-security.js';
import type { DecisionDraft, DecisionLog } from './decisions.js';
import { clientAddress, plainAddress } from './forwarded-for.js';
import type { PortPlan } from './listener-plan.js';
import { TlsTermination } from './tls-termination.js';
import type { PeerExchange } from '../proxy/peer-exchange.js';
import { GatewayL4Connections, type ConnectionClusterFor } from './l4-connections.js';
import type { GatewayL4Table } from '../routing/gateway-l4-table.js';

const log = scope('default');
const NO_BYTES = Buffer.alloc(0);
/** setTimeout's longest delay (a longer one would fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface GatewayRouterOptions {
  readonly stats: ProxyStats;
  /** Istio's metadata exchange with mesh upstreams (this gateway's lines); absent: none spoken. */
  readonly peerExchange?: PeerExchange | undefined;
  readonly security: RequestSecurity;
  readonly decisions: DecisionLog;
  /** How HTTP/1 requests are read (100-continue, HTTP/1.0, path normalization, limits, head time-out). */
  readonly http?: Partial<Http1Settings>;
  /** Mesh config `gatewayTopology.numTrustedProxies` (forwarded-for.ts). */
  readonly numTrustedProxies?: number;
  /** Address to listen on (`::`: both families). */
  readonly host: string;
  /** Several workers listen on the same ports (--concurrency > 1). */
  readonly reusePort?: boolean;
  /**
   * The mesh config's drainDuration: the connections of a listener a configuration change closes
   * (or reopens) get this long to finish, then are closed, as Envoy drains a listener it replaces.
   */
  readonly drainMs: number;
  /** The process's downstream connections (every port, every worker): over its maximum, refused. */
  readonly connections: ConnectionBudget;
  /**
   * From accept to the end of a TLS handshake (MESH_TLS_HANDSHAKE_TIMEOUT), and to a whole ClientHello
   * on a TLS PASSTHROUGH port (Envoy's listener filter time-out); 0: no deadline.
   */
  readonly tlsHandshakeTimeoutMs: number;
  /** COMPLIANCE_POLICY, laid over every HTTPS server's TLS (security/compliance.ts); absent: none. */
  readonly compliancePolicy?: string;
  /** Every request (and every connection refused over the budget) is logged here; absent: none is. */
  readonly accessLog?: AccessLogSink | undefined;
  /** TLS to a route's destination (mTLS into the mesh, a DestinationRule's TLS); absent: plaintext. */
  readonly upstreamTls?: UpstreamTlsFor | undefined;
  /**
   * Traffic management: the cluster a route destination names (a ServiceEntry host), with the
   * route's retries, or a local reply (NC); undefined: the destination is not a service, reached as
   * today (its host and port as they are).
   */
  readonly clusterFor?: ((destination: HttpRouteDestination, port: number, route: ForwardDecision) => ClusterTarget | LocalReply | undefined) | undefined;
  /** The same for a connection of a TCP or TLS PASSTHROUGH port (TLS per endpoint for a connection, the client's address for a source-IP hash). */
  readonly connectionClusterFor?: ConnectionClusterFor | undefined;
}

const NOT_FOUND: Verdict = { kind: 'reply', status: 404, body: '' };
/** A gateway is no forward proxy: Envoy's gateways refuse CONNECT unless a route is made for it. */
const NO_CONNECT: Verdict = { kind: 'reply', status: 405, body: 'CONNECT is not served by this gateway\n', headers: { allow: 'GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE' } };

/**
 * Headers only the mesh may assert: a client's own copies never reach a backend (Istio's gateways
 * run with `forwardClientCertDetails: SANITIZE_SET`; a plaintext client has no certificate).
 */
const ASSERTED = ['x-forwarded-client-cert'];
/** No external authorizer's response lines (the usual case): nothing allocated per request. */
const NO_AUTHZ_RESPONSE: { readonly addResponseHeaders?: readonly (readonly [string, string])[] } = Object.freeze({});

/** A route's response edits and copies when it has none. */
const NO_EXTRAS: Pick<ForwardTarget, 'mirrors'> = Object.freeze({});

/**
 * The headers as the backend will get them (the JWT filter's edits applied), which routes match,
 * as Envoy's router runs after jwt_authn: a client's own copy of a claim header routes nothing.
 */
function editedHeaders(headers: IncomingHttpHeaders, remove: readonly string[], set: readonly (readonly [string, string])[]): IncomingHttpHeaders {
  if (remove.length === 0 && set.length === 0) return headers;
  const out: IncomingHttpHeaders = { ...headers };
  for (const name of remove) delete out[name];
  for (const [name, value] of set) out[name] = value;
  return out;
}

function firstValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}

/** The names of `raw` that are Envoy's internal `x-envoy-*` headers, lower-case. */
function envoyInternal(raw: readonly string[]): string[] {
  const names: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!;
    if (n.length > 8 && (n.charCodeAt(0) | 0x20) === 0x78 && n.toLowerCase().startsWith('x-envoy-')) names.push(n.toLowerCase());
  }
  return names;
}

/** Envoy's NR: no route for the request (404, or 405 for CONNECT). */
function noRoute(draft: DecisionDraft): void {
  draft.flag = 'NR';
  draft.details = 'route_not_found';
}

/** One listening port of the gateway. */
class GatewayListener {
  readonly server: NetServer;
  readonly http: Http1Handler;
  readonly h2: Http2Handler;
  readonly open = new Set<Socket>();
  /** A TCP or TLS PASSTHROUGH port's connections (undefined on an HTTP or HTTPS port). */
  readonly l4: GatewayL4Connections | undefined;
  bound = false;
  error?: string;

  /**
   * `tlsServerOf`: where the server (serverKey) each TLS connection's SNI chose is kept; `l4Routes`:
   * the tcp / tls routes in force (read per connection of a TCP or TLS port).
   */
  constructor(public plan: PortPlan, decider: RequestDecider, o: GatewayRouterOptions, tlsServerOf: WeakMap<Socket, string>,
    l4Routes: () => GatewayL4Table | undefined) {
    const stats = o.stats.inbound;
    const http: HttpHandlerOptions = {
      stats, upstream: { kind: 'direct' }, destinationOf: () => undefined, decider, settings: o.http, accessLog: o.accessLog, role: 'gateway',
      // Istio's gateways report their requests as the source (they send them into the mesh).
      standard: o.stats.outbound.standard, peerExchange: o.peerExchange,
    };
    this.http = new Http1Handler(http);
    this.h2 = new Http2Handler(http);
    const accessLog = o.accessLog;
    const overflow = accessLog
      ? (socket: Socket): void => {
        if (accessLog.on) logOverflow(accessLog, 'gateway', socket, hostPort(socket.localAddress, socket.localPort));
      }
      : undefined;
    const l4 = plan.protocol === 'TCP' || plan.protocol === 'TLS'
      ? new GatewayL4Connections({
        peerExchange: o.peerExchange,
        port: plan.port, passthrough: plan.protocol === 'TLS', stats, routes: () => l4Routes()?.ports.get(plan.port),
        security: o.security, decisions: o.decisions, accessLog: o.accessLog, helloTimeoutMs: o.tlsHandshakeTimeoutMs,
        clusterFor: o.connectionClusterFor, upstreamTls: o.upstreamTls,
      })
      : undefined;
    this.l4 = l4;
    const tls = plan.protocol === 'HTTPS'
      ? new TlsTermination({
        port: plan.port, servers: plan.tlsServers, stats, handshakeTimeoutMs: o.tlsHandshakeTimeoutMs,
        ...(o.compliancePolicy !== undefined ? { compliancePolicy: o.compliancePolicy } : {}),
        onSecure: (socket, server) => {
          tlsServerOf.set(socket, server);
          if (socket.alpnProtocol === 'h2') this.h2.accept(socket, NO_BYTES);
          else this.http.acceptSocket(socket);
        },
      })
      : undefined;
    // allowHalfOpen: a client's FIN after its request still gets the answer. A plaintext connection
    // reads into reused buffers (read-buffers.ts: it is taken over before it reads, hence paused).
    this.server = new NetServer({ noDelay: true, allowHalfOpen: true, pauseOnConnect: !tls }, (accepted) => {
      const socket = tls ? accepted : adoptAccepted(accepted);
      if (!admitDownstream(socket, stats, this.open, o.connections, overflow)) return;
      if (l4) l4.accept(socket);
      else if (tls) tls.accept(socket);
      // HTTP/1.1 or HTTP/2 with prior knowledge on every plaintext port (Envoy's AUTO codec).
      else byPreface(socket, KEEP_ALIVE_TIMEOUT_MS, (kind, head) => (kind === 'h2' ? this.h2 : this.http).accept(socket, head));
    });
    this.server.on('error', (err) => log.error(`gateway listener ${plan.port} error: ${err.message}`));
  }

  get name(): string {
    return `gateway_${this.plan.port}`;
  }

  /** On the servers' `bind` address, else `host`; `reusePort`: every worker binds the port (SO_REUSEPORT), the kernel spreads connections. */
  listen(host: string, reusePort: boolean): Promise<void> {
    return listenOnce(this.server, this.plan.port, this.plan.bind ?? host, { reusePort }).then(() => { this.bound = true; }, (err: Error) => {
      this.error = err.message;
      log.error(`gateway: cannot listen on ${this.plan.bind === undefined ? '' : `${this.plan.bind} `}port ${this.plan.port}: ${err.message}`);
    });
  }

  close(): Promise<void> {
    this.http.drain();
    this.h2.drain();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Shutdown: every connection of this port ends now. */
  closeAll(): void {
    for (const socket of this.open) socket.destroy();
  }
}

/** Whether a port's listener can stay as it is: the gateways using it may change, nothing else. */
function sameListener(a: PortPlan, b: PortPlan): boolean {
  return a.protocol === b.protocol && a.bind === b.bind && a.httpsRedirect === b.httpsRedirect && JSON.stringify(a.tlsServers) === JSON.stringify(b.tlsServers);
}

export class GatewayRouter {
  private table: RouteTable | undefined;
  private l4Table: GatewayL4Table | undefined;
  private readonly listeners = new Map<number, GatewayListener>();
  /** Listeners a change closed whose connections have not all ended yet. */
  private readonly draining = new Set<GatewayListener>();
  /** The server (serverKey) each TLS connection's SNI chose: its requests are routed by that server's hosts only. */
  private readonly tlsServerOf = new WeakMap<Socket, string>();

  constructor(private readonly o: GatewayRouterOptions) {}

  /** Applies a new configuration: routes at once, listeners opened and closed to match the plan. */
  async update(table: RouteTable, ports: readonly PortPlan[], l4?: GatewayL4Table): Promise<void> {
    this.table = table;
    this.l4Table = l4;
    const wanted = new Map(ports.map((p) => [p.port, p]));
    for (const [port, listener] of this.listeners) {
      const plan = wanted.get(port);
      if (plan && sameListener(plan, listener.plan) && listener.bound) {
        listener.plan = plan;
        continue;
      }
      log.info(`gateway: ${plan ? 'reopening' : 'closing'} port ${port}; its connections get ${this.o.drainMs}ms (drainDuration) to finish`);
      this.listeners.delete(port);
      // Not awaited: a connection that never ends must not hold up this configuration or the next.
      this.retire(listener);
    }
    for (const plan of ports) {
      if (this.listeners.has(plan.port)) continue;
      const listener = new GatewayListener(plan, this.decider(plan), this.o, this.tlsServerOf, () => this.l4Table);
      this.listeners.set(plan.port, listener);
      await listener.listen(this.o.host, this.o.reusePort ?? false);
      if (listener.bound) log.info(`gateway: listening on ${plan.protocol} port ${plan.port}${plan.bind === undefined ? '' : ` (bind ${plan.bind})`} for ${plan.gateways.join(', ')}`);
    }
  }

  /** Ready when every planned port is bound. */
  unbound(): string[] {
    return [...this.listeners.values()].filter((l) => !l.bound).map((l) => `${l.plan.port} (${l.error ?? 'binding'})`);
  }

  get activeConnections(): number {
    let n = 0;
    for (const l of this.listeners.values()) n += l.open.size;
    for (const l of this.draining) n += l.open.size;
    return n;
  }

  info(): { name: string; address: string; port: number; protocol: string; gateways: readonly string[] }[] {
    return [...this.listeners.values()].map((l) => ({
      name: l.name, address: l.plan.bind ?? (this.o.host === '::' ? '0.0.0.0' : this.o.host), port: l.plan.port, protocol: l.plan.protocol, gateways: l.plan.gateways,
    }));
  }

  /** Drain: stop accepting everywhere; keep-alive connections close after their current response. */
  async close(): Promise<void> {
    await Promise.all([...this.listeners.values()].map((l) => l.close()));
  }

  /** Idle keep-alive connections close now, busy ones after their response (EXIT_ON_ZERO_ACTIVE_CONNECTIONS). */
  closeIdle(): void {
    for (const l of [...this.listeners.values(), ...this.draining]) {
      l.http.drain();
      l.h2.closeIdle();
      for (const socket of l.l4?.silent ?? []) socket.destroy();
    }
  }

  /** Shutdown: stop accepting and end every connection now. */
  async shutdown(): Promise<void> {
    const closed = this.close();
    for (const l of [...this.listeners.values(), ...this.draining]) l.closeAll();
    await closed;
  }

  /**
   * A listener a change removed: it stops accepting now (its port is free for a new listener),
   * keep-alive connections close after their response, and whatever is open after the drain
   * duration is closed.
   */
  private retire(listener: GatewayListener): void {
    this.draining.add(listener);
    const deadline = setTimeout(() => {
      if (listener.open.size > 0) {
        log.info(`gateway: port ${listener.plan.port}: drain over after ${this.o.drainMs}ms, closing its ${listener.open.size} remaining connection(s)`);
      }
      listener.closeAll();
    }, Math.min(this.o.drainMs, MAX_TIMER_MS));
    deadline.unref();
    void listener.close().then(() => {
      clearTimeout(deadline);
      this.draining.delete(listener);
    });
  }

  private decider(plan: PortPlan): RequestDecider {
    const scheme = plan.protocol === 'HTTPS' ? 'https' : 'http';
    const listener = `gateway_${plan.port}`;
    return {
      decide: (req) => {
        const draft = this.o.decisions.begin(req, listener);
        if (req.method === 'CONNECT') {
          draft.route = 'CONNECT refused (a gateway is not a forward proxy)';
          noRoute(draft);
          return NO_CONNECT;
        }
        if (plan.httpsRedirect) {
          draft.route = 'https redirect (tls.httpsRedirect)';
          draft.details = 'direct_response';
          return { kind: 'reply', status: 301, body: '', headers: { location: `https://${hostOnly(draft.authority)}${draft.path}` } };
        }
        // Nothing to check (no JWT rule, no policy): the context is not read, no address looked up.
        // Otherwise it is whole, even for a policy that arrives while a JWT's keys are fetched.
        const ctx = this.o.security.idle ? { port: plan.port } : this.requestContext(req, plan.port, scheme);
        const outcome = this.o.security.check(req, ctx, draft);
        if (outcome instanceof Promise) return outcome.then((x) => this.routeRequest(req, x, draft, plan.port, scheme));
        return this.routeRequest(req, outcome, draft, plan.port, scheme);
      },
      completed: (req, _verdict, status, durationMs) => this.o.decisions.complete(req, status, durationMs),
    };
  }

  /**
   * What policy knows of a request beyond its headers: the listener's port and the address the
   * client connected to (`destination.port`, `destination.ip`: the accepted connection's local
   * end, as in Envoy), the peer and the client behind any trusted proxies, and on an HTTPS port
   * the SNI of the client's ClientHello (`connection.sni`).
   */
  private requestContext(req: IncomingMessage, port: number, scheme: 'http' | 'https'): RequestContext {
    const socket = req.socket;
    const peer = socket.remoteAddress;
    const local = socket.localAddress;
    const sni = requestedServerName(socket);
    return {
      port,
      ...(local ? { destinationIp: plainAddress(local) } : {}),
      ...(peer ? { sourceIp: peer, remoteIp: clientAddress(firstValue(req.headers['x-forwarded-for']), plainAddress(peer), this.o.numTrustedProxies ?? 0) } : {}),
      ...(sni ? { sni } : {}),
      scheme,
    };
  }

  private routeRequest(req: IncomingMessage, security: SecurityOutcome, draft: DecisionDraft, port: number, scheme: 'http' | 'https'): Verdict | Promise<Verdict> {
    if (security.reply) return security.reply;
    this.lastFault = undefined;
    const v = this.routeChecked(req, security, draft, port, scheme);
    // Envoy's fault filter runs after authentication and policy and before the router, whatever the route's action.
    const fault = this.lastFault;
    if (fault === undefined) return v;
    return injectFault(fault, req, v, () => { draft.flag = 'DI'; });
  }

  /** The matched rule's fault, handed from routeChecked to routeRequest (no object per request). */
  private lastFault: HttpFault | undefined = undefined;

  private routeChecked(req: IncomingMessage, security: SecurityOutcome, draft: DecisionDraft, port: number, scheme: 'http' | 'https'): Verdict {
    const table = this.table;
    if (!table) {
      draft.route = 'no route: no configuration loaded yet';
      noRoute(draft);
      return NOT_FOUND;
    }
    const authn = security.authn;
    const { setHeaders, removeHeaders, path: tokenlessPath, responseHeaders, beforeAuthorizer } = security.edits;
    // An external authorizer's lines for the client's response (CUSTOM), on whatever is forwarded.
    const authzResponse = responseHeaders !== undefined ? { addResponseHeaders: responseHeaders } : NO_AUTHZ_RESPONSE;
    const server = this.tlsServerOf.get(req.socket);
    const decision = route(table, {
      port, ...(server !== undefined ? { server } : {}), host: draft.authority, method: draft.method, path: draft.path, scheme,
      // The route is chosen on the request as it came to the external authorizer (Envoy does not choose it again after its edits).
      headers: beforeAuthorizer ? editedHeaders(req.headers, beforeAuthorizer.removeHeaders, beforeAuthorizer.setHeaders) : editedHeaders(req.headers, removeHeaders, setHeaders),
      claims: authn.outcome === 'valid' ? authn.claims : undefined,
      ...(req.socket.remoteAddress ? { sourceIp: req.socket.remoteAddress } : {}),
    });
    draft.route = decision.reason;
    if (decision.kind !== 'no-host' && decision.kind !== 'no-route') {
      const name = routeName(decision.ruleName, decision.matchName);
      if (name !== undefined) draft.routeName = name;
      if (decision.fault !== undefined) this.lastFault = decision.fault;
    }
    switch (decision.kind) {
      case 'no-host':
      case 'no-route':
        this.o.decisions.count('route', 'no_route');
        noRoute(draft);
        return NOT_FOUND;
      case 'direct':
        this.o.decisions.count('route', 'direct_response');
        draft.details = 'direct_response';
        return { kind: 'reply', status: decision.status, body: decision.body ?? '' };
      case 'redirect':
        this.o.decisions.count('route', 'redirect');
        draft.details = 'direct_response';
        return { kind: 'reply', status: decision.status, body: '', headers: { location: decision.location } };
      case 'route': {
        let cors: readonly (readonly [string, string])[] | undefined;
        if (decision.cors !== undefined) {
          const c = applyCors(decision.cors, corsFacts(req));
          if (c?.kind === 'preflight') {
            this.o.decisions.count('route', 'cors_preflight');
            draft.details = 'cors_response';
            return { kind: 'reply', status: 200, body: '', headers: c.headers, details: 'cors_response' };
          }
          if (c !== undefined) cors = c.headers;
        }
        this.o.decisions.count('route', 'routed');
        const dst = pickDestination(decision.destinations);
        if (!dst) {
          draft.route += ' (every destination has weight 0)';
          draft.flag = 'UH';
          draft.details = 'no_healthy_upstream';
          return { kind: 'reply', status: 503, body: 'no healthy upstream' };
        }
        draft.upstream = `${dst.host}:${dst.port}`;
        const forwardedFor = req.headers['x-forwarded-for'];
        const client = plainAddress(req.socket.remoteAddress);
        setHeaders.push(['x-forwarded-for', forwardedFor ? `${forwardedFor}, ${client}` : client], ['x-forwarded-proto', scheme]);
        removeHeaders.push(...ASSERTED, ...envoyInternal(req.rawHeaders));
        // Istio's `add` appends a line (Envoy's APPEND): the client's of that name stay; `set` replaces them.
        let addHeaders: [string, string][] | undefined;
        let responseHeaders: { remove: string[]; add: [string, string][] } | undefined;
        const dh = dst.destination.headers;
        if (decision.requestHeaders !== undefined || decision.responseHeaders !== undefined || dh !== undefined) {
          const rh = mergedEdits(decision.requestHeaders, dh?.request);
          // What the proxy asserts or strips for this request (claim headers whether set or dropped, the
          // token it does not forward, x-forwarded-*, XFCC) no route edits: a route's line would let the
          // application read the route's value for the proxy's word.
          const owned = (n: string): boolean => setHeaders.some(([s]) => s === n) || removeHeaders.includes(n);
          const removing = rh.remove.filter((n) => !owned(n));
          for (const [n, v] of rh.set) if (!owned(n)) setHeaders.push([n, v]);
          for (const [n, v] of rh.add) if (!owned(n)) (addHeaders ??= []).push([n, v]);
          removeHeaders.push(...removing);
          if (decision.responseHeaders !== undefined || dh?.response !== undefined) responseHeaders = responseEdits(mergedEdits(decision.responseHeaders, dh?.response));
        }
        if (decision.rewrite?.authority) setHeaders.push(['host', decision.rewrite.authority]);
        const path = decision.rewrite?.path ?? tokenlessPath;
        const cluster = this.o.clusterFor?.(dst.destination, dst.port, decision);
        if (cluster !== undefined && 'kind' in cluster) {
          draft.flag = cluster.flag;
          draft.details = cluster.details;
          return cluster;
        }
        const mirrors = decision.mirrors === undefined ? undefined : this.mirrorTargets(decision);
        // Nothing is built for a route without CORS or mirrors (the common case).
        // CORS sets its lines, replacing the app's of those names, after the route's response edits.
        if (cors !== undefined) {
          const removed = responseHeaders?.remove ?? [];
          responseHeaders = {
            add: [...(responseHeaders?.add ?? []), ...cors.map(([n, v]): [string, string] => [n, v])],
            remove: [...removed, ...CORS_RESPONSE_HEADERS.filter((n) => !removed.includes(n))],
          };
        }
        const extras = mirrors === undefined ? NO_EXTRAS : { mirrors };
        if (cluster !== undefined) {
          draft.upstream = cluster.cluster.name;
          const path = decision.rewrite?.path ?? tokenlessPath;
          return {
            kind: 'forward', address: dst.host, port: dst.port, setHeaders, removeHeaders, cluster, ...authzResponse,
            ...(addHeaders ? { addHeaders } : {}),
            ...(responseHeaders ? { addResponseHeaders: responseHeaders.add, removeResponseHeaders: responseHeaders.remove } : {}),
            ...(path !== undefined && path !== draft.path ? { path } : {}),
            ...(decision.timeoutMs ? { timeoutMs: decision.timeoutMs } : {}),
            ...extras,
          };
        }
        const tls = this.o.upstreamTls?.({ address: dst.host, port: dst.port }, dst.host, true);
        if (tls?.kind === 'reply') {
          draft.flag = tls.flag;
          draft.details = tls.details;
          return tls;
        }
        const target: ForwardTarget = {
          kind: 'forward', address: dst.host, port: dst.port, setHeaders, removeHeaders, ...(tls ? { tls } : {}), ...authzResponse,
          ...(addHeaders ? { addHeaders } : {}),
          ...(responseHeaders ? { addResponseHeaders: responseHeaders.add, removeResponseHeaders: responseHeaders.remove } : {}),
          ...(path !== undefined && path !== draft.path ? { path } : {}),
          ...(decision.timeoutMs ? { timeoutMs: decision.timeoutMs } : {}),
          ...extras,
        };
        return target;
      }
    }
  }

  /**
   * Where this request's copies go (its mirrors drawn): a destination a ServiceEntry declares goes
   * to its cluster's endpoints, any other to its host and port as a route destination would (80
   * when none is given); one that cannot be reached (no subset, TLS not to be had) gets no copy.
   */
  private mirrorTargets(decision: ForwardDecision): MirrorTarget[] | undefined {
    const chosen = chooseMirrors(decision.mirrors!);
    if (chosen === undefined) return undefined;
    let out: MirrorTarget[] | undefined;
    for (const m of chosen) {
      const d = m.destination;
      const port = d.port ?? DEFAULT_DESTINATION_PORT;
      const timeout = decision.timeoutMs !== undefined ? { timeoutMs: decision.timeoutMs } : {};
      const cluster = this.o.clusterFor?.(d, port, decision);
      if (cluster !== undefined && 'kind' in cluster) continue;
      if (cluster !== undefined) {
        (out ??= []).push({ cluster, address: d.host, port, name: cluster.cluster.name, ...timeout });
        continue;
      }
      const tls = this.o.upstreamTls?.({ address: d.host, port }, d.host, true);
      if (tls?.kind === 'reply') continue;
      (out ??= []).push({ address: d.host, port, name: `${d.host}:${port}`, ...(tls ? { tls } : {}), ...timeout });
    }
    return out;
  }
}
