// The sidecar's outbound requests and connections under traffic management: a request to a service
// (its original destination is one of the service's addresses, or its Host one of its hosts on a
// captured port) goes to the service's cluster, or to the cluster its VirtualService route picks,
// and from there to an endpoint chosen per attempt (src/proxy/attempts.ts); anything else goes to
// its original destination exactly as before (`base`: the mTLS outbound decider). TLS to an
// endpoint is its cluster's, as Istio builds it per cluster: the cluster's merged tls (a subset's
// replacing the rule's) on its service port, else auto mTLS by the endpoint's labels.
// Per request: a few Map lookups; the cluster targets are made once per configuration.
import type { IncomingMessage } from 'node:http';
import type { HttpFault, HttpRouteDestination } from '../config/resources/types.js';
import { injectFault } from '../proxy/fault-injection.js';
import type { DecisionLog, DecisionRecord } from '../gateway/decisions.js';
import type { DecisionNote } from '../log/access-record.js';
import type { ClusterTarget, ConnectionFacts, ForwardTarget, LocalReply, MirrorTarget, RequestDecider, Verdict } from '../proxy/decider.js';
import { AWAIT_SERVER_NAME, BLACK_HOLE_CLUSTER, BLACK_HOLE_CONNECTION, BLACK_HOLE_REPLY, NO_DESTINATION } from '../proxy/decider.js';
import { authorityOf, hasHeader } from '../proxy/request-view.js';
import type { Endpoint } from '../proxy/socket-options.js';
import type { ClusterTlsFor } from '../security/mtls/outbound-decider.js';
import type { ClusterRuntime } from './cluster.js';
import {
  applyCors, chooseMirrors, CORS_RESPONSE_HEADERS, hasMeshRoutes, NO_ROUTE_REPLY, pickDestination, routeMesh, type ForwardDecision, type MeshRouteTable,
} from '../routing/index.js';
import { mergedEdits, responseEdits } from '../routing/header-edits.js';
import { clusterName, resolveDestination, routeTraffic, type ClusterSet, type ServiceSpec } from './clusters.js';
import type { ClusterManager } from './cluster-manager.js';
import { cookieToGenerate, requestHash, type GeneratedCookie, type HashRequestFacts } from './hash-key.js';
import type { ServiceIndex } from './service-index.js';
import {
  pickL4Destination, selectAddresslessTlsRoute, selectTcpRoute, selectTlsRoute, type L4Route, type L4RouteTable, type ServiceL4Routes,
} from './l4-routes.js';
import { parseIp } from '../security/authz/cidr.js';
import { defaultRetry, type EndpointSpec, type RetrySpec } from './spec.js';

/** A route's answer for one request: which cluster, with which retry policy and time-out, or a local reply. */
export type MeshRouteResult =
  | { readonly kind: 'cluster'; readonly cluster: string; readonly retry: RetrySpec; readonly timeoutMs?: number | undefined; readonly route: string;
    /** Edits the route makes to what is forwarded and to its answer (CORS lines included). */
    readonly forward?: Pick<ForwardTarget, 'path' | 'setHeaders' | 'addHeaders' | 'removeHeaders' | 'addResponseHeaders' | 'removeResponseHeaders'> | undefined;
    /** The rule's fault injection. */
    readonly fault?: HttpFault | undefined;
    /** The clusters this request is copied to (its mirrors drawn), with the route's timeout. */
    readonly mirrors?: readonly string[] | undefined }
  | { readonly kind: 'reply'; readonly reply: LocalReply; readonly route: string; readonly fault?: HttpFault | undefined };

/** What the configuration in force says of outbound traffic (made once per configuration version). */
export interface MeshTraffic {
  readonly set: ClusterSet;
  readonly index: ServiceIndex;
  readonly clusters: ClusterManager;
  /** The VirtualService route for a request to `service` (undefined: no VirtualService for its host: the service's own cluster). */
  route?(service: ServiceSpec, req: IncomingMessage, dst: Endpoint): MeshRouteResult | undefined;
  /** EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY=false: Istio's default retry policy retries a 503 too. */
  readonly retry503?: boolean;
  /** VirtualService tcp / tls routes; undefined when none applies to this workload (nothing is looked up then). */
  readonly l4?: L4RouteTable | undefined;
  /** outboundTrafficPolicy REGISTRY_ONLY: what no service covers goes to the BlackHoleCluster, not its original destination. */
  readonly registryOnly?: boolean;
}

export interface OutboundTrafficOptions {
  /** What happens to traffic no service claims (and to PASSTHROUGH / resolution NONE clusters): the original destination, TLS as planned. */
  readonly base: RequestDecider;
  readonly traffic: () => MeshTraffic | undefined;
  /** A cluster endpoint's TLS (the original destination's is `base`'s). */
  readonly tlsFor: ClusterTlsFor;
  /** /debug/decisions: each routed request's cluster, attempts and answer. */
  readonly decisions?: DecisionLog | undefined;
}

const XFCC = 'x-forwarded-client-cert';
const STRIP_XFCC: readonly string[] = [XFCC];
/** This thread's performance.now() origin in epoch ms: a request's start time without a clock read. */
const TIME_ORIGIN = performance.timeOrigin;


type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** What the decision log is given at a request's end (the engine sets `trail` and `endpoint` on its request view). */
interface RoutedView {
  trail?: readonly string[] | undefined;
  endpoint?: string | undefined;
  /** Set by decide() for completed(): two strings, no object per request. */
  routedCluster?: string | undefined;
  routedRoute?: string | undefined;
  /** A fault delayed it (DI, for the log and the metrics). */
  faultDelayed?: boolean;
}

function noCluster(name: string, why: string): LocalReply {
  return { kind: 'reply', status: 503, body: `no cluster ${name}: ${why}\n`, flag: 'NC', details: 'cluster_not_found' };
}

/** A TLS connection no `tls` route matches (Envoy: no filter chain for it): closed, NR. */
function noTlsRoute(service: ServiceSpec, sni: string | undefined): LocalReply {
  return {
    kind: 'reply', status: 404, flag: 'NR', details: 'filter_chain_not_found',
    body: `no tls route of ${service.host}:${service.port.number} matches ${sni === undefined ? 'a connection without a server name' : `server name ${sni}`}\n`,
  };
}

export function outboundTrafficDecider(o: OutboundTrafficOptions): RequestDecider {
  /**
   * A routed request's record for /debug/decisions, filled in place at each request's end: the ring
   * copies it (DecisionLog.record keeps nothing of it), so no record object is made per request
   * (~180 B each, measured with an allocation profile).
   */
  const routed: Mutable<DecisionRecord> = {
    time: 0, listener: 'outbound', method: '', authority: '', path: '', jwt: '-', authz: '-', route: undefined, routeName: undefined,
    cluster: undefined, upstream: undefined, attempts: undefined, flag: undefined, details: undefined, status: undefined, durationMs: 0,
  };
  /** Cluster targets (default retry policy) per cluster and protocol, for the configuration in force. */
  let targetsFor: MeshTraffic | undefined;
  let httpTargets = new Map<string, ClusterTarget>();
  let tcpTargets = new Map<string, ClusterTarget>();

  /** The last HTTP target made or found, and its runtime: a client's requests mostly repeat it (no lookup). */
  let lastHttp: ClusterTarget | undefined;

  const target = (t: MeshTraffic, runtime: ClusterRuntime, http: boolean): ClusterTarget => {
    if (targetsFor !== t) {
      targetsFor = t;
      httpTargets = new Map();
      tcpTargets = new Map();
      lastHttp = undefined;
    }
    if (http && lastHttp?.cluster === runtime) return lastHttp;
    const cache = http ? httpTargets : tcpTargets;
    let made = cache.get(runtime.name);
    if (made === undefined) {
      const spec = runtime.spec;
      made = Object.freeze({
        cluster: runtime,
        retry: defaultRetry(t.retry503),
        tlsFor: (endpoint: EndpointSpec) => o.tlsFor(spec, endpoint, http),
      });
      cache.set(runtime.name, made);
    }
    if (http) lastHttp = made;
    return made;
  };

  /** Each service's default cluster name, made once (a string built per request costs its hashing too). */
  const defaultNames = new WeakMap<ServiceSpec, string>();

  /** defaultCluster's last question and answer (a configuration's clusters change only with a new MeshTraffic). */
  let lastDefault: { readonly t: MeshTraffic; readonly service: ServiceSpec; readonly runtime: ClusterRuntime | undefined } | undefined;

  /** The cluster a request or connection to `service` goes to when no route says otherwise. */
  const defaultCluster = (t: MeshTraffic, service: ServiceSpec): ClusterRuntime | undefined => {
    const last = lastDefault;
    // (Its clusters closed at shutdown: asked again, as they are gone.)
    if (last !== undefined && last.service === service && last.t === t && last.runtime?.isClosed !== true) return last.runtime;
    let name = defaultNames.get(service);
    if (name === undefined) defaultNames.set(service, (name = clusterName(service.port.number, undefined, service.host)));
    const runtime = t.clusters.get(name);
    lastDefault = { t, service, runtime };
    return runtime;
  };

  const passesThrough = (runtime: ClusterRuntime): boolean => runtime.passthrough || runtime.spec.discovery === 'ORIGINAL_DST';

  /**
   * A connection under `tcp` / `tls` routes: the cluster its route's destination (chosen by weight,
   * once) names; undefined: no route holds it, the service's own cluster; or a LocalReply (no tls
   * route: NR; no cluster: NC) or AWAIT_SERVER_NAME (the ClientHello is needed first).
   */
  const l4Cluster = (t: MeshTraffic, service: ServiceSpec, routes: ServiceL4Routes, facts: ConnectionFacts):
    ClusterRuntime | LocalReply | typeof AWAIT_SERVER_NAME | undefined => {
    const ip = parseIp(facts.destination.address);
    let route;
    if (routes.kind === 'tcp') {
      route = selectTcpRoute(routes, ip);
      if (route === undefined) return undefined;
    } else {
      if (facts.helloRead !== true) return AWAIT_SERVER_NAME;
      route = selectTlsRoute(routes, ip, facts.sni);
      if (route === undefined) return noTlsRoute(service, facts.sni);
    }
    return routeRuntime(t, route);
  };

  /** The cluster of the destination a connection on `route` takes (by weight, once). */
  const routeRuntime = (t: MeshTraffic, route: L4Route): ClusterRuntime | LocalReply => {
    const picked = pickL4Destination(route, Math.random);
    if (picked === undefined) return noCluster('-', `the route ${route.name} has no destination with weight above 0`);
    if (picked.kind === 'no-cluster') return noCluster(picked.name, picked.reason);
    return t.clusters.get(picked.cluster.name) ?? noCluster(picked.cluster.name, `the route ${route.name} names a cluster that does not exist`);
  };

  /**
   * A connection no service's address claims, on a port where TLS services without addresses have
   * `tls` routes: when the port's protocol there is TCP (the destination is one of their endpoints),
   * the ClientHello's server name picks the route; none: the original destination, as before.
   */
  const addresslessTls = (t: MeshTraffic, l4: L4RouteTable, facts: ConnectionFacts): ClusterRuntime | LocalReply | typeof AWAIT_SERVER_NAME | undefined => {
    if (t.index.protocolAt(facts.destination.address, facts.destination.port) !== 'tcp') return undefined;
    if (facts.helloRead !== true) return AWAIT_SERVER_NAME;
    const route = selectAddresslessTlsRoute(l4, facts.destination.port, parseIp(facts.destination.address), facts.sni);
    return route === undefined ? undefined : routeRuntime(t, route);
  };

  /**
   * Where this request's copies go: each mirror cluster's endpoints. A cluster that does not exist
   * (any more) or has no endpoints of its own (resolution NONE: no original destination to copy
   * to) gets no copy, as Envoy sends no shadow to a cluster it does not know.
   */
  const mirrorTargets = (t: MeshTraffic, names: readonly string[], timeoutMs: number | undefined): MirrorTarget[] | undefined => {
    let out: MirrorTarget[] | undefined;
    for (const name of names) {
      const runtime = t.clusters.get(name);
      if (runtime === undefined || passesThrough(runtime)) continue;
      (out ??= []).push({ cluster: target(t, runtime, true), address: '', port: 0, name, ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
    }
    return out;
  };

  return {
    decide(req, dst): Verdict | Promise<Verdict> {
      if (!dst) return NO_DESTINATION;
      const t = o.traffic();
      if (t === undefined) return o.base.decide(req, dst);
      // Only a destination no service covers pays for the REGISTRY_ONLY check (one property read).
      if (t.set.services.length === 0) return t.registryOnly === true ? blackHole(req) : o.base.decide(req, dst);
      const service = t.index.forRequest(authorityOf(req), dst.address, dst.port);
      if (service === undefined) return t.registryOnly === true ? blackHole(req) : o.base.decide(req, dst);
      let runtime: ClusterRuntime | undefined;
      const baseRetry = defaultRetry(t.retry503);
      let retry = baseRetry;
      let timeoutMs: number | undefined;
      let routeName = 'default';
      let edits: Extract<MeshRouteResult, { kind: 'cluster' }>['forward'];
      let mirrors: MirrorTarget[] | undefined;
      const routed = t.route?.(service, req, dst);
      if (routed !== undefined) {
        if (routed.kind === 'reply') return routed.fault === undefined ? routed.reply : faulted(routed.fault, req, routed.reply);
        routeName = routed.route;
        runtime = t.clusters.get(routed.cluster);
        if (runtime === undefined) return noCluster(routed.cluster, `the route ${routed.route} names a cluster that does not exist`);
        retry = routed.retry;
        timeoutMs = routed.timeoutMs;
        edits = routed.forward;
        if (routed.mirrors !== undefined) mirrors = mirrorTargets(t, routed.mirrors, timeoutMs);
      } else {
        runtime = defaultCluster(t, service);
        if (runtime === undefined) return o.base.decide(req, dst);
      }
      (req as RoutedView).routedCluster = runtime.name;
      (req as RoutedView).routedRoute = routeName;
      if (passesThrough(runtime)) {
        // The original destination, as without a route; the route's fault, copies and CORS lines still apply.
        const through = o.base.decide(req, dst);
        const fault = routed?.kind === 'cluster' ? routed.fault : undefined;
        if (fault === undefined && mirrors === undefined && edits?.addResponseHeaders === undefined) return through;
        const extras = (v: Verdict): Verdict | Promise<Verdict> => {
          const x = withRouteExtras(v, mirrors, edits);
          return fault === undefined ? x : faulted(fault, req, x);
        };
        return through instanceof Promise ? through.then(extras) : extras(through);
      }
      let cluster = target(t, runtime, true);
      let cookie: GeneratedCookie | undefined;
      if (retry !== baseRetry || runtime.hashKey !== undefined) {
        let hash: number | undefined;
        if (runtime.hashKey !== undefined) {
          const facts = hashFacts(req);
          hash = requestHash(runtime.hashKey, facts);
          // A cookie key with a ttl and no such cookie: Envoy makes one, and the answer sets it.
          cookie = cookieToGenerate(runtime.hashKey, facts);
        }
        cluster = { cluster: runtime, retry, hash, tlsFor: cluster.tlsFor };
      }
      const xfcc = hasHeader(req, XFCC);
      const removeHeaders = xfcc ? [...STRIP_XFCC, ...(edits?.removeHeaders ?? [])] : edits?.removeHeaders;
      // Fields set one by one, not spread: this runs for every request (object spreads cost).
      const v: Mutable<ForwardTarget> = { kind: 'forward', address: dst.address, port: dst.port, cluster };
      if (timeoutMs !== undefined) v.timeoutMs = timeoutMs;
      if (edits?.path !== undefined) v.path = edits.path;
      if (edits?.setHeaders !== undefined) v.setHeaders = edits.setHeaders;
      if (edits?.addHeaders !== undefined) v.addHeaders = edits.addHeaders;
      if (removeHeaders !== undefined) v.removeHeaders = removeHeaders;
      if (edits?.removeResponseHeaders !== undefined) v.removeResponseHeaders = edits.removeResponseHeaders;
      if (edits?.addResponseHeaders !== undefined) v.addResponseHeaders = edits.addResponseHeaders;
      if (cookie !== undefined) v.addResponseHeaders = [...(v.addResponseHeaders ?? []), ['set-cookie', cookie.header]];
      if (mirrors !== undefined) v.mirrors = mirrors;
      return routed?.kind === 'cluster' && routed.fault !== undefined ? faulted(routed.fault, req, v) : v;
    },

    completed(req, verdict, status, durationMs, startedAt): DecisionNote | undefined {
      let base = o.base.completed?.(req, verdict, status, durationMs, startedAt) || undefined;
      const view = req as RoutedView;
      if (view.faultDelayed === true) base = { ...(base ?? { jwt: '-', authz: '-' }), flag: 'DI' };
      const cluster = view.routedCluster;
      if (cluster === undefined || o.decisions === undefined) return base;
      const reply = verdict?.kind === 'reply' && verdict.flag ? verdict : undefined;
      const r = routed;
      r.time = startedAt === undefined ? Date.now() - durationMs : TIME_ORIGIN + startedAt;
      r.method = req.method ?? 'GET';
      r.authority = authorityOf(req);
      r.path = req.url ?? '/';
      r.route = r.routeName = view.routedRoute;
      r.cluster = cluster;
      r.upstream = view.endpoint;
      r.attempts = view.trail;
      r.flag = reply?.flag;
      r.details = reply?.details;
      r.status = status;
      r.durationMs = durationMs;
      o.decisions.record(r);
      // Copied: the request's own texts and trail are not held here until the next one.
      r.method = r.authority = r.path = '';
      r.attempts = undefined;
      return base;
    },

    admitConnection: o.base.admitConnection?.bind(o.base),
    connectionDecided: o.base.connectionDecided?.bind(o.base),
    policesConnections: o.base.policesConnections,
    connectionUpstream(facts: ConnectionFacts) {
      const t = o.traffic();
      if (t?.registryOnly === true && uncovered(t, facts.destination)) return BLACK_HOLE_CONNECTION;
      return o.base.connectionUpstream?.(facts);
    },

    connectionProtocol(destination: Endpoint): 'tcp' | 'http' | undefined {
      const t = o.traffic();
      if (t === undefined) return undefined;
      const declared = t.index.protocolAt(destination.address, destination.port);
      // REGISTRY_ONLY, and no service can be reached here, not even by a Host: carried as TCP, which
      // closes it at once (BlackHoleCluster) rather than waiting for bytes that cannot change that.
      if (declared === undefined && t.registryOnly === true && !t.index.mayRouteByHost(destination.port) && uncovered(t, destination)) return 'tcp';
      return declared;
    },

    connectionCluster(facts: ConnectionFacts): ClusterTarget | LocalReply | typeof AWAIT_SERVER_NAME | undefined {
      const t = o.traffic();
      if (t === undefined || t.set.services.length === 0) return undefined;
      const service = t.index.byDestination(facts.destination.address, facts.destination.port);
      let runtime: ClusterRuntime | undefined;
      if (service === undefined) {
        if (t.l4 === undefined || !t.l4.addressless.has(facts.destination.port)) return undefined;
        const routed = addresslessTls(t, t.l4, facts);
        if (routed === undefined || 'kind' in routed) return routed;
        runtime = routed;
      } else {
        const routes = t.l4?.byService.get(service);
        if (routes !== undefined) {
          const routed = l4Cluster(t, service, routes, facts);
          if (routed !== undefined && 'kind' in routed) return routed; // a reply, or the server name first
          runtime = routed;
        }
        runtime ??= defaultCluster(t, service);
      }
      if (runtime === undefined || passesThrough(runtime)) return undefined;
      const made = target(t, runtime, false);
      if (runtime.hashKey?.kind !== 'sourceIp' || facts.source === undefined) return made;
      return { ...made, hash: requestHash(runtime.hashKey, connectionFacts(facts.source)) };
    },
  };
}

/** A routed request under its rule's fault injection; a delayed one is marked for completed() (DI). */
function faulted(fault: HttpFault, req: IncomingMessage, v: Verdict): Verdict | Promise<Verdict> {
  return injectFault(fault, req, v, () => { (req as RoutedView).faultDelayed = true; });
}

/** A forward verdict with a route's copies and response lines added (a local reply stays as it is). */
function withRouteExtras(v: Verdict, mirrors: readonly MirrorTarget[] | undefined, edits: Extract<MeshRouteResult, { kind: 'cluster' }>['forward']): Verdict {
  if (v.kind !== 'forward') return v;
  return {
    ...v,
    ...(mirrors !== undefined ? { mirrors } : {}),
    ...(edits?.addResponseHeaders !== undefined ? { addResponseHeaders: [...(v.addResponseHeaders ?? []), ...edits.addResponseHeaders] } : {}),
    ...(edits?.removeResponseHeaders !== undefined ? { removeResponseHeaders: [...(v.removeResponseHeaders ?? []), ...edits.removeResponseHeaders] } : {}),
  };
}

/** A route's edits with the CORS lines its policy gives this request: they replace the app's lines of those names, as Envoy's filter sets them. */
function withCorsLines(edits: Extract<MeshRouteResult, { kind: 'cluster' }>['forward'], cors: readonly (readonly [string, string])[]): NonNullable<Extract<MeshRouteResult, { kind: 'cluster' }>['forward']> {
  const removed = edits?.removeResponseHeaders ?? [];
  return {
    ...edits,
    addResponseHeaders: [...(edits?.addResponseHeaders ?? []), ...cors],
    removeResponseHeaders: [...removed, ...CORS_RESPONSE_HEADERS.filter((n) => !removed.includes(n))],
  };
}

/** No service holds this destination: not by address, nor as an endpoint of a service without addresses. */
function uncovered(t: MeshTraffic, dst: Endpoint): boolean {
  return t.index.byDestination(dst.address, dst.port) === undefined && t.index.protocolAt(dst.address, dst.port) === undefined;
}

/** A request no service covers under REGISTRY_ONLY: 502 NR, recorded as the BlackHoleCluster's in /debug/decisions. */
function blackHole(req: IncomingMessage): LocalReply {
  (req as RoutedView).routedCluster = BLACK_HOLE_CLUSTER;
  (req as RoutedView).routedRoute = 'block_all';
  return BLACK_HOLE_REPLY;
}

const nothing = (): undefined => undefined;

/** A connection carried as TCP hashes by its client's address only. */
function connectionFacts(source: string): HashRequestFacts {
  return { header: nothing, cookie: nothing, queryParameter: nothing, sourceIp: source, connection: source };
}

/** What a consistent hash reads of a request: a header, a cookie, the client's address, a query parameter. */
export function hashFacts(req: IncomingMessage): HashRequestFacts {
  const s = req.socket;
  return {
    header: (name: string) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(',') : v;
    },
    cookie: (name: string) => cookieValue(req.headers.cookie, name),
    sourceIp: s?.remoteAddress,
    queryParameter: (name: string) => queryValue(req.url ?? '', name),
    connection: `${s?.remoteAddress ?? ''}:${s?.remotePort ?? 0}+${s?.localAddress ?? ''}:${s?.localPort ?? 0}`,
  };
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function queryValue(url: string, name: string): string | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  return new URLSearchParams(url.slice(q + 1)).get(name) ?? undefined;
}

/**
 * The `route` function of MeshTraffic: a request to a service goes through the mesh VirtualServices
 * (src/routing: first matching rule of the host's VirtualService), and a routed request to the
 * destination its weights pick, as the cluster resolveDestination names (NC when none serves it).
 */
export function meshRouter(table: MeshRouteTable, set: ClusterSet, clusterDomain: string, opts: { retry503?: boolean } = {}): NonNullable<MeshTraffic['route']> {
  return (service, req, dst) => {
    if (!hasMeshRoutes(table, dst.port)) return undefined;
    const d = routeMesh(table, {
      port: dst.port, host: authorityOf(req), method: req.method ?? 'GET', path: req.url ?? '/', scheme: 'http',
      // Read only when a rule matches on a header: building the header object costs.
      get headers() { return req.headers; },
      claims: undefined,
      ...(req.socket?.remoteAddress !== undefined ? { sourceIp: req.socket.remoteAddress } : {}),
    });
    switch (d.kind) {
      case 'no-virtual-service': return undefined;
      case 'no-route':
        return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: NO_ROUTE_REPLY.status, body: 'route not found\n', flag: 'NR', details: NO_ROUTE_REPLY.details } };
      case 'direct':
        return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: d.status, body: d.body ?? '', details: 'direct_response' }, fault: d.fault };
      case 'redirect':
        return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: d.status, body: '', headers: { location: d.location }, details: 'direct_response' }, fault: d.fault };
      case 'route': {
        let corsLines: readonly (readonly [string, string])[] | undefined;
        if (d.cors !== undefined) {
          const c = applyCors(d.cors, corsFacts(req));
          if (c?.kind === 'preflight') return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: 200, body: '', headers: c.headers, details: 'cors_response' } };
          if (c !== undefined) corsLines = c.headers;
        }
        const ports = set.servicesByHost.get(service.host);
        const picked = pickDestination(d.destinations, Math.random, ports?.length === 1 ? ports[0]!.port.number : dst.port);
        if (picked === undefined) {
          return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: 503, body: 'no healthy upstream\n', flag: 'UH', details: 'no_healthy_upstream' }, fault: d.fault };
        }
        const vsNamespace = d.virtualService.slice(0, d.virtualService.indexOf('/'));
        const target = resolveDestination(set, picked.destination, dst.port, vsNamespace, clusterDomain);
        if (target.kind === 'no-cluster') {
          return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: 503, body: `no cluster ${target.name}: ${target.reason}\n`, flag: 'NC', details: 'cluster_not_found' }, fault: d.fault };
        }
        const traffic = routeTraffic({ retries: d.retries, timeoutMs: d.timeoutMs, fault: d.fault }, {
          consistentHash: target.cluster.policy.loadBalancer.kind === 'consistentHash', retry503: opts.retry503 === true,
        });
        const chosen = d.mirrors === undefined ? undefined : chooseMirrors(d.mirrors);
        let mirrors: string[] | undefined;
        if (chosen !== undefined) {
          for (const m of chosen) {
            const to = resolveDestination(set, m.destination, dst.port, vsNamespace, clusterDomain);
            if (to.kind === 'cluster') (mirrors ??= []).push(to.cluster.name);
          }
        }
        const edits = routeEdits(d, picked.destination);
        return {
          kind: 'cluster', cluster: target.cluster.name, retry: traffic.retry, timeoutMs: traffic.timeoutMs, route: d.reason,
          forward: corsLines === undefined ? edits : withCorsLines(edits, corsLines),
          fault: d.fault, mirrors,
        };
      }
    }
  };
}

/** What CORS reads of a request. */
export function corsFacts(req: IncomingMessage): import('../routing/index.js').CorsRequest {
  const h = req.headers;
  return {
    method: req.method ?? 'GET', origin: h.origin, requestMethod: h['access-control-request-method'] as string | undefined,
    requestHeaders: h['access-control-request-headers'] as string | undefined,
  };
}

/**
 * A rule's edits of what is forwarded and of its answer: rewrite (path, authority), the rule's and
 * then the chosen destination's header operations. Undefined when the rule has none (no work per request).
 */
function routeEdits(d: ForwardDecision, dest: HttpRouteDestination): Extract<MeshRouteResult, { kind: 'cluster' }>['forward'] {
  const dh = dest.headers;
  if (d.requestHeaders === undefined && d.responseHeaders === undefined && d.rewrite === undefined && dh === undefined) return undefined;
  const req = mergedEdits(d.requestHeaders, dh?.request);
  if (d.rewrite?.authority !== undefined) req.set.push(['host', d.rewrite.authority]);
  const resp = d.responseHeaders !== undefined || dh?.response !== undefined ? responseEdits(mergedEdits(d.responseHeaders, dh?.response)) : undefined;
  return {
    ...(d.rewrite?.path !== undefined ? { path: d.rewrite.path } : {}),
    ...(req.set.length > 0 ? { setHeaders: req.set } : {}),
    ...(req.add.length > 0 ? { addHeaders: req.add } : {}),
    ...(req.remove.length > 0 ? { removeHeaders: req.remove } : {}),
    ...(resp !== undefined && resp.add.length > 0 ? { addResponseHeaders: resp.add } : {}),
    ...(resp !== undefined && resp.remove.length > 0 ? { removeResponseHeaders: resp.remove } : {}),
  };
}

/**
 * The gateway's side of the same clusters: a route destination whose host is a service goes to its
 * cluster (endpoints, balancing, the route's retries, ejection), with TLS per endpoint as the
 * resources say; a destination no service declares is not this function's (undefined). A
 * destination to a subset no rule defines: 503 NC.
 */
export function gatewayClusters(traffic: () => MeshTraffic | undefined, tlsFor: ClusterTlsFor):
  (destination: HttpRouteDestination, port: number, route: ForwardDecision) => ClusterTarget | LocalReply | undefined {
  return (destination, port, route) => {
    const t = traffic();
    if (t === undefined) return undefined;
    const runtime = gatewayRuntime(t, destination, port, route.virtualService.slice(0, route.virtualService.indexOf('/')));
    if (runtime === undefined || 'kind' in runtime) return runtime;
    const traffic2 = routeTraffic({ retries: route.retries, timeoutMs: route.timeoutMs, fault: route.fault }, { consistentHash: runtime.hashKey !== undefined, retry503: t.retry503 === true });
    const spec = runtime.spec;
    return { cluster: runtime, retry: traffic2.retry, tlsFor: (endpoint) => tlsFor(spec, endpoint, true) };
  };
}

/**
 * The cluster a gateway route's destination goes to: a service's (undefined when it passes through
 * to its original destination), NC for a subset or port no cluster serves, undefined for a host no
 * ServiceEntry declares (an address or a name the gateway reaches as it is).
 */
function gatewayRuntime(t: MeshTraffic, destination: HttpRouteDestination, port: number, vsNamespace: string): ClusterRuntime | LocalReply | undefined {
  if (t.set.services.length === 0) return undefined;
  const target = resolveDestination(t.set, destination, port, vsNamespace);
  if (target.kind === 'no-cluster') return target.reason.startsWith('host ') ? undefined : noCluster(target.name, target.reason);
  const runtime = t.clusters.get(target.cluster.name);
  if (runtime === undefined || runtime.passthrough || runtime.spec.discovery === 'ORIGINAL_DST') return undefined;
  return runtime;
}

/**
 * The gateway's connections (TCP and TLS PASSTHROUGH ports) to the same clusters: a route destination
 * whose host is a service goes to its cluster, TLS per endpoint as for the sidecar's connections, a
 * source-IP hash by the client's address; a destination no service declares: undefined (reached as
 * written); a subset or port no cluster serves: NC.
 */
export function gatewayConnectionClusters(traffic: () => MeshTraffic | undefined, tlsFor: ClusterTlsFor):
  (destination: HttpRouteDestination, port: number, vsNamespace: string, source: string | undefined) => ClusterTarget | LocalReply | undefined {
  return (destination, port, vsNamespace, source) => {
    const t = traffic();
    if (t === undefined) return undefined;
    const runtime = gatewayRuntime(t, destination, port, vsNamespace);
    if (runtime === undefined || 'kind' in runtime) return runtime;
    const spec = runtime.spec;
    const made: ClusterTarget = { cluster: runtime, retry: defaultRetry(t.retry503), tlsFor: (endpoint) => tlsFor(spec, endpoint, false) };
    if (runtime.hashKey?.kind !== 'sourceIp' || source === undefined) return made;
    return { ...made, hash: requestHash(runtime.hashKey, connectionFacts(source)) };
  };
}
