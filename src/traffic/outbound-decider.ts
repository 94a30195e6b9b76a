// The sidecar's outbound requests and connections under traffic management: a request to a service
// (its original destination is one of the service's addresses, or its Host one of its hosts on a
// captured port) goes to the service's cluster, or to the cluster its VirtualService route picks,
// and from there to an endpoint chosen per attempt (src/proxy/attempts.ts); anything else goes to
// its original destination exactly as before (`base`: the mTLS outbound decider). TLS to an
// endpoint is its cluster's, as Istio builds it per cluster: the cluster's merged tls (a subset's
// replacing the rule's) on its service port, else auto mTLS by the endpoint's labels.
// Per request: a few Map lookups; the cluster targets are made once per configuration.
import type { IncomingMessage } from 'node:http';
import type { HttpRouteDestination } from '../config/resources/types.js';
import { isoAt, type DecisionLog } from '../gateway/decisions.js';
import type { DecisionNote } from '../log/access-record.js';
import type { ClusterTarget, ConnectionFacts, ForwardTarget, LocalReply, RequestDecider, Verdict } from '../proxy/decider.js';
import { BLACK_HOLE_CLUSTER, BLACK_HOLE_CONNECTION, BLACK_HOLE_REPLY, NO_DESTINATION } from '../proxy/decider.js';
import { authorityOf, hasHeader } from '../proxy/request-view.js';
import type { Endpoint } from '../proxy/socket-options.js';
import type { ClusterTlsFor } from '../security/mtls/outbound-decider.js';
import type { ClusterRuntime } from './cluster.js';
import { hasMeshRoutes, NO_ROUTE_REPLY, pickDestination, routeMesh, type ForwardDecision, type MeshRouteTable } from '../routing/index.js';
import { clusterName, resolveDestination, routeTraffic, type ClusterSet, type ServiceSpec } from './clusters.js';
import type { ClusterManager } from './cluster-manager.js';
import { cookieToGenerate, requestHash, type GeneratedCookie, type HashRequestFacts } from './hash-key.js';
import type { ServiceIndex } from './service-index.js';
import { defaultRetry, type EndpointSpec, type RetrySpec } from './spec.js';

/** A route's answer for one request: which cluster, with which retry policy and time-out, or a local reply. */
export type MeshRouteResult =
  | { readonly kind: 'cluster'; readonly cluster: string; readonly retry: RetrySpec; readonly timeoutMs?: number | undefined; readonly route: string;
    /** Edits the route makes to what is forwarded. */
    readonly forward?: Pick<import('../proxy/decider.js').ForwardTarget, 'path' | 'setHeaders' | 'addHeaders' | 'removeHeaders'> | undefined }
  | { readonly kind: 'reply'; readonly reply: LocalReply; readonly route: string };

/** What the configuration in force says of outbound traffic (made once per configuration version). */
export interface MeshTraffic {
  readonly set: ClusterSet;
  readonly index: ServiceIndex;
  readonly clusters: ClusterManager;
  /** The VirtualService route for a request to `service` (undefined: no VirtualService for its host: the service's own cluster). */
  route?(service: ServiceSpec, req: IncomingMessage, dst: Endpoint): MeshRouteResult | undefined;
  /** EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY=false: Istio's default retry policy retries a 503 too. */
  readonly retry503?: boolean;
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


type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** What the decision log is given at a request's end (the engine sets `trail` and `endpoint` on its request view). */
interface RoutedView {
  trail?: readonly string[] | undefined;
  endpoint?: string | undefined;
  /** Set by decide() for completed(): two strings, no object per request. */
  routedCluster?: string | undefined;
  routedRoute?: string | undefined;
}

function noCluster(name: string, why: string): LocalReply {
  return { kind: 'reply', status: 503, body: `no cluster ${name}: ${why}\n`, flag: 'NC', details: 'cluster_not_found' };
}

export function outboundTrafficDecider(o: OutboundTrafficOptions): RequestDecider {
  /** Cluster targets (default retry policy) per cluster and protocol, for the configuration in force. */
  let targetsFor: MeshTraffic | undefined;
  let httpTargets = new Map<string, ClusterTarget>();
  let tcpTargets = new Map<string, ClusterTarget>();

  const target = (t: MeshTraffic, runtime: ClusterRuntime, http: boolean): ClusterTarget => {
    if (targetsFor !== t) {
      targetsFor = t;
      httpTargets = new Map();
      tcpTargets = new Map();
    }
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
    return made;
  };

  /** Each service's default cluster name, made once (a string built per request costs its hashing too). */
  const defaultNames = new WeakMap<ServiceSpec, string>();

  /** The cluster a request or connection to `service` goes to when no route says otherwise. */
  const defaultCluster = (t: MeshTraffic, service: ServiceSpec): ClusterRuntime | undefined => {
    let name = defaultNames.get(service);
    if (name === undefined) defaultNames.set(service, (name = clusterName(service.port.number, undefined, service.host)));
    return t.clusters.get(name);
  };

  const passesThrough = (runtime: ClusterRuntime): boolean => runtime.passthrough || runtime.spec.discovery === 'ORIGINAL_DST';

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
      const routed = t.route?.(service, req, dst);
      if (routed !== undefined) {
        if (routed.kind === 'reply') return routed.reply;
        routeName = routed.route;
        runtime = t.clusters.get(routed.cluster);
        if (runtime === undefined) return noCluster(routed.cluster, `the route ${routed.route} names a cluster that does not exist`);
        retry = routed.retry;
        timeoutMs = routed.timeoutMs;
        edits = routed.forward;
      } else {
        runtime = defaultCluster(t, service);
        if (runtime === undefined) return o.base.decide(req, dst);
      }
      (req as RoutedView).routedCluster = runtime.name;
      (req as RoutedView).routedRoute = routeName;
      if (passesThrough(runtime)) return o.base.decide(req, dst);
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
      if (cookie !== undefined) v.addResponseHeaders = [['set-cookie', cookie.header]];
      return v;
    },

    completed(req, verdict, status, durationMs): DecisionNote | undefined {
      const base = o.base.completed?.(req, verdict, status, durationMs) || undefined;
      const view = req as RoutedView;
      const cluster = view.routedCluster;
      if (cluster === undefined || o.decisions === undefined) return base;
      const reply = verdict?.kind === 'reply' && verdict.flag ? verdict : undefined;
      o.decisions.record({
        time: isoAt(Date.now() - durationMs), listener: 'outbound', method: req.method ?? 'GET',
        authority: authorityOf(req), path: req.url ?? '/', jwt: '-', authz: '-', route: view.routedRoute, routeName: view.routedRoute,
        cluster, upstream: view.endpoint, attempts: view.trail, flag: reply?.flag, details: reply?.details, status, durationMs,
      });
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

    connectionCluster(facts: ConnectionFacts): ClusterTarget | undefined {
      const t = o.traffic();
      if (t === undefined || t.set.services.length === 0) return undefined;
      const service = t.index.byDestination(facts.destination.address, facts.destination.port);
      if (service === undefined) return undefined;
      const runtime = defaultCluster(t, service);
      if (runtime === undefined || passesThrough(runtime)) return undefined;
      const made = target(t, runtime, false);
      if (runtime.hashKey?.kind !== 'sourceIp' || facts.source === undefined) return made;
      return { ...made, hash: requestHash(runtime.hashKey, connectionFacts(facts.source)) };
    },
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
        return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: d.status, body: d.body ?? '', details: 'direct_response' } };
      case 'redirect':
        return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: d.status, body: '', headers: { location: d.location }, details: 'direct_response' } };
      case 'route': {
        const ports = set.servicesByHost.get(service.host);
        const picked = pickDestination(d.destinations, Math.random, ports?.length === 1 ? ports[0]!.port.number : dst.port);
        if (picked === undefined) {
          return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: 503, body: 'no healthy upstream\n', flag: 'UH', details: 'no_healthy_upstream' } };
        }
        const vsNamespace = d.virtualService.slice(0, d.virtualService.indexOf('/'));
        const target = resolveDestination(set, picked.destination, dst.port, vsNamespace, clusterDomain);
        if (target.kind === 'no-cluster') {
          return { kind: 'reply', route: d.reason, reply: { kind: 'reply', status: 503, body: `no cluster ${target.name}: ${target.reason}\n`, flag: 'NC', details: 'cluster_not_found' } };
        }
        const traffic = routeTraffic({ retries: d.retries, timeoutMs: d.timeoutMs }, {
          consistentHash: target.cluster.policy.loadBalancer.kind === 'consistentHash', retry503: opts.retry503 === true,
        });
        return {
          kind: 'cluster', cluster: target.cluster.name, retry: traffic.retry, timeoutMs: traffic.timeoutMs, route: d.reason,
          forward: routeEdits(d),
        };
      }
    }
  };
}

/** A rule's edits of what is forwarded: rewrite (path, authority) and request header set / add / remove. */
function routeEdits(d: ForwardDecision): Extract<MeshRouteResult, { kind: 'cluster' }>['forward'] {
  const rh = d.requestHeaders;
  if (rh === undefined && d.rewrite === undefined) return undefined;
  const setHeaders: [string, string][] = [];
  const addHeaders: [string, string][] = [];
  const removeHeaders: string[] = [];
  if (rh) {
    for (const [n, v] of Object.entries(rh.set)) setHeaders.push([n.toLowerCase(), v]);
    for (const [n, v] of Object.entries(rh.add)) addHeaders.push([n.toLowerCase(), v]);
    removeHeaders.push(...rh.remove.map((n) => n.toLowerCase()));
  }
  if (d.rewrite?.authority !== undefined) setHeaders.push(['host', d.rewrite.authority]);
  return {
    ...(d.rewrite?.path !== undefined ? { path: d.rewrite.path } : {}),
    ...(setHeaders.length > 0 ? { setHeaders } : {}),
    ...(addHeaders.length > 0 ? { addHeaders } : {}),
    ...(removeHeaders.length > 0 ? { removeHeaders } : {}),
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
    if (t === undefined || t.set.services.length === 0) return undefined;
    const vsNamespace = route.virtualService.slice(0, route.virtualService.indexOf('/'));
    const target = resolveDestination(t.set, destination, port, vsNamespace);
    if (target.kind === 'no-cluster') {
      // A host no ServiceEntry declares is an address or a name the gateway reaches as it is.
      if (target.reason.startsWith('host ')) return undefined;
      return noCluster(target.name, target.reason);
    }
    const runtime = t.clusters.get(target.cluster.name);
    if (runtime === undefined || runtime.passthrough || runtime.spec.discovery === 'ORIGINAL_DST') return undefined;
    const traffic2 = routeTraffic({ retries: route.retries, timeoutMs: route.timeoutMs }, { consistentHash: runtime.hashKey !== undefined, retry503: t.retry503 === true });
    const spec = runtime.spec;
    return { cluster: runtime, retry: traffic2.retry, tlsFor: (endpoint) => tlsFor(spec, endpoint, true) };
  };
}
