// The clusters Istio would build for this workload's outbound traffic, from the resources in force:
// one per ServiceEntry host × port (`outbound|80||reviews.shop.svc.cluster.local`) and one per
// DestinationRule subset of it (`outbound|80|v1|...`), each with its policy merged as Istio merges
// it and Istio's defaults filled in. Also how a route's destination names its cluster (or names none:
// the engine then answers 503 with flag NC) and a route's timeout and retry policy. Pure: plain data
// in, frozen plain data out; build once per configuration, never per request.
import type {
  DestinationRule, HttpRoute, HttpRouteDestination, LoadBalancerSettings, LocalityLbSetting, PolicySettings, ResourceSnapshot, ServiceEntry,
  RetryBudgetSettings, ServiceEntryPort, TrafficPolicy, VirtualService, Workload,
} from '../config/resources/types.js';
import { ROOT_NAMESPACE } from '../config/resources/types.js';
import { exportedTo, serviceEntriesFor } from '../config/resources/workload.js';
import { destinationRuleFor } from '../security/mtls/destination-rules.js';
import { DEFAULT_CLUSTER_DOMAIN, hostMatchRank } from '../security/mtls/host-names.js';
import { resolveLocalityLb, type ProxyFacts } from './locality.js';
import {
  DEFAULT_RETRY, DEFAULT_RETRY_WITH_503, defaultRetry, UNLIMITED, type ClusterDiscovery, type ClusterPolicy, type ClusterSpec, type ConnectionPoolSpec, type LoadBalancerSpec,
  type OutlierDetectionSpec, type RetryCondition, type RetrySpec,
} from './spec.js';

/** Istio's mesh config default `connectTimeout`. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Envoy's outlier detection defaults, which Istio leaves in force when the rule does not say. */
export const OUTLIER_DEFAULTS = Object.freeze({
  consecutive5xxErrors: 5,
  consecutiveLocalOriginFailures: 5,
  intervalMs: 10_000,
  baseEjectionTimeMs: 30_000,
  maxEjectionPercent: 10,
  maxEjectionTimeMs: 300_000,
});
/** Envoy's retry back-off base (Istio's routes leave it unless `retries.backoff` is given). */
export const DEFAULT_BACKOFF_MS = 25;

export type Resolution = NonNullable<ServiceEntry['resolution']>;

/** One service: a host of a ServiceEntry visible to this workload, on one of its ports. */
export interface ServiceSpec {
  /** `host:port`: what endpoint sources are asked for (ClusterSpec.service). */
  readonly key: string;
  readonly host: string;
  readonly port: ServiceEntryPort;
  readonly resolution: Resolution;
  /** The entry it comes from (addresses, endpoints, workloadSelector). */
  readonly entry: ServiceEntry;
  /** `ServiceEntry ns/name`. */
  readonly origin: string;
}

export interface ClusterBuildContext {
  /** This workload (the client): its namespace and labels decide which rules and entries it sees. */
  readonly workload: Workload;
  /** Kubernetes short names expand in it; default cluster.local. */
  readonly clusterDomain?: string;
  readonly rootNamespace?: string;
  /** The mesh config's connectTimeout; default 10 s. */
  readonly connectTimeoutMs?: number;
  /** `ns/name` of the Gateways this workload serves: their VirtualServices' destinations are checked too. */
  readonly gateways?: readonly string[];
  /** The mesh config's `localityLbSetting` (Istio's default: enabled); absent: none. */
  readonly localityLbSetting?: LocalityLbSetting;
  /** This proxy's locality (`region/zone/subzone`, '' unknown: workloadLocality); default ''. */
  readonly locality?: string;
}

export interface ClusterSet {
  readonly services: readonly ServiceSpec[];
  readonly clusters: readonly ClusterSpec[];
  readonly byName: ReadonlyMap<string, ClusterSpec>;
  /** Services by host (exact, lower-case; wildcard hosts as written, `*.example.com`). */
  readonly servicesByHost: ReadonlyMap<string, readonly ServiceSpec[]>;
  /** What an operator should know: hosts declared twice, routes to subsets or hosts no cluster serves. */
  readonly warnings: readonly string[];
}

export type DestinationTarget =
  | { readonly kind: 'cluster'; readonly cluster: ClusterSpec }
  /** No cluster serves it (unknown host, port or subset): the engine answers 503 with flag NC. */
  | { readonly kind: 'no-cluster'; readonly name: string; readonly reason: string };

/** Istio's cluster name: `outbound|<port>|<subset>|<host>` (the subset empty without one). */
export function clusterName(port: number, subset: string | undefined, host: string): string {
  return `outbound|${port}|${subset ?? ''}|${host}`;
}

export function serviceKey(host: string, port: number): string {
  return `${host}:${port}`;
}

const ref = (r: { readonly meta: { readonly namespace: string; readonly name: string } }, kind: string): string =>
  `${kind} ${r.meta.namespace}/${r.meta.name}`;

/** A host as Istio reads it in a VirtualService of `namespace`: a name without dots is a Kubernetes short name. */
export function resolveShortName(host: string, namespace: string, clusterDomain = DEFAULT_CLUSTER_DOMAIN): string {
  return host.includes('.') || host.includes('*') ? host : `${host}.${namespace}.svc.${clusterDomain}`;
}

// ---- merging (Istio's MergeTrafficPolicy) ----

const SETTING_KEYS = ['loadBalancer', 'connectionPool', 'outlierDetection', 'tls'] as const;

function pick(s: PolicySettings): PolicySettings {
  const out: { -readonly [K in keyof PolicySettings]: PolicySettings[K] } = {};
  for (const k of SETTING_KEYS) if (s[k] !== undefined) (out as Record<string, unknown>)[k] = s[k];
  return out;
}

/** The policy for one port: its port-level settings when it has some (replacing wholesale), else the policy's own. */
function forPort(policy: TrafficPolicy | undefined, port: number): { settings: PolicySettings | undefined; portLevel: boolean } {
  if (policy === undefined) return { settings: undefined, portLevel: false };
  const p = policy.portLevelSettings.find((s) => s.port === port);
  return p !== undefined ? { settings: pick(p), portLevel: true } : { settings: pick(policy), portLevel: false };
}

/**
 * Istio's merge for a cluster on `port`: the rule's policy, replaced wholesale by its port-level
 * settings for the port; then the subset's policy overriding field by field, or, when the subset
 * has port-level settings for the port, replacing all four fields (an absent one falls back to the
 * default, not to the rule's).
 */
export function mergeTrafficPolicy(rule: TrafficPolicy | undefined, subset: TrafficPolicy | undefined, port: number): PolicySettings {
  const base = forPort(rule, port).settings;
  if (subset === undefined) return base ?? {};
  const { settings: own, portLevel } = forPort(subset, port);
  if (base === undefined) return own ?? {};
  const merged: Record<string, unknown> = { ...base };
  for (const k of SETTING_KEYS) {
    if (own?.[k] !== undefined || portLevel) merged[k] = own?.[k];
  }
  return pick(merged as PolicySettings);
}

// ---- defaults (Istio's applyTrafficPolicy on Envoy's defaults) ----

function loadBalancerOf(lb: LoadBalancerSettings | undefined): LoadBalancerSpec {
  if (lb === undefined) return { kind: 'simple', simple: 'LEAST_REQUEST' };
  if (lb.kind === 'simple') {
    // Envoy ramps up endpoints under ROUND_ROBIN and LEAST_REQUEST only (the others are warned about at load).
    const w = lb.warmup;
    const slowStart = w !== undefined && (lb.simple === 'ROUND_ROBIN' || lb.simple === 'LEAST_REQUEST')
      ? { windowMs: w.durationMs, minWeight: w.minimumPercent / 100, aggression: w.aggression } : undefined;
    return { kind: 'simple', simple: lb.simple, ...(slowStart !== undefined ? { slowStart } : {}) };
  }
  return { kind: 'consistentHash', key: lb.key, table: lb.table };
}

/** A limit of 0 means "not set" to Istio, which cannot tell them apart: Envoy's (Istio's) unlimited. */
const limit = (v: number | undefined): number => (v !== undefined && v > 0 ? v : UNLIMITED);

function connectionPoolOf(cp: PolicySettings['connectionPool'], connectTimeoutMs: number): ConnectionPoolSpec {
  const tcp = cp?.tcp;
  const http = cp?.http;
  const httpIdle = http?.idleTimeoutMs ?? tcp?.idleTimeoutMs;
  return {
    tcp: {
      maxConnections: limit(tcp?.maxConnections),
      connectTimeoutMs: tcp?.connectTimeoutMs ?? connectTimeoutMs,
      ...(tcp?.tcpKeepalive !== undefined ? { tcpKeepalive: { ...tcp.tcpKeepalive } } : {}),
      ...(tcp?.maxConnectionDurationMs !== undefined ? { maxConnectionDurationMs: tcp.maxConnectionDurationMs } : {}),
      ...(tcp?.idleTimeoutMs !== undefined ? { idleTimeoutMs: tcp.idleTimeoutMs } : {}),
    },
    http: {
      http1MaxPendingRequests: limit(http?.http1MaxPendingRequests),
      http2MaxRequests: limit(http?.http2MaxRequests),
      maxRequestsPerConnection: http?.maxRequestsPerConnection ?? 0,
      maxRetries: limit(http?.maxRetries),
      // Istio: the pool's idle time-out is http's, else tcp's.
      ...(httpIdle !== undefined ? { idleTimeoutMs: httpIdle } : {}),
      h2UpgradePolicy: http?.h2UpgradePolicy ?? 'DEFAULT',
      useClientProtocol: http?.useClientProtocol ?? false,
      ...(http?.maxConcurrentStreams !== undefined && http.maxConcurrentStreams > 0 ? { maxConcurrentStreams: http.maxConcurrentStreams } : {}),
    },
  };
}

/** Envoy's defaults for what a retry budget leaves out (Istio passes only what is above 0): 20 %, 3. */
function retryBudgetOf(b: RetryBudgetSettings): { percent: number; minRetryConcurrency: number } {
  return {
    percent: b.percent !== undefined && b.percent > 0 ? b.percent : 20,
    minRetryConcurrency: b.minRetryConcurrency !== undefined && b.minRetryConcurrency > 0 ? b.minRetryConcurrency : 3,
  };
}

function outlierDetectionOf(od: PolicySettings['outlierDetection']): OutlierDetectionSpec | undefined {
  if (od === undefined) return undefined;
  const split = od.splitExternalLocalOriginErrors;
  return {
    consecutive5xxErrors: od.consecutive5xxErrors ?? OUTLIER_DEFAULTS.consecutive5xxErrors,
    // Envoy counts gateway errors but enforces nothing unless Istio sets the count.
    consecutiveGatewayErrors: od.consecutiveGatewayErrors ?? 0,
    // Istio sets the count only when above 0; Envoy's 5 applies otherwise (with the split on).
    consecutiveLocalOriginFailures: split ? (od.consecutiveLocalOriginFailures ?? 0) > 0 ? od.consecutiveLocalOriginFailures! : OUTLIER_DEFAULTS.consecutiveLocalOriginFailures : 0,
    splitExternalLocalOriginErrors: split,
    intervalMs: od.intervalMs ?? OUTLIER_DEFAULTS.intervalMs,
    baseEjectionTimeMs: od.baseEjectionTimeMs ?? OUTLIER_DEFAULTS.baseEjectionTimeMs,
    maxEjectionPercent: od.maxEjectionPercent !== undefined && od.maxEjectionPercent > 0 ? od.maxEjectionPercent : OUTLIER_DEFAULTS.maxEjectionPercent,
    maxEjectionTimeMs: OUTLIER_DEFAULTS.maxEjectionTimeMs,
    minHealthPercent: od.minHealthPercent ?? 0,
  };
}

/** A merged policy with Istio's defaults: what the balancers, pools and outlier detection run with. */
export function clusterPolicy(
  merged: PolicySettings,
  opts: {
    connectTimeoutMs?: number; rule?: string; passthrough?: boolean; retryBudget?: RetryBudgetSettings; meshLocality?: LocalityLbSetting; proxy?: ProxyFacts;
  } = {},
): ClusterPolicy {
  const od = outlierDetectionOf(merged.outlierDetection);
  const pool = connectionPoolOf(merged.connectionPool, opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
  const locality = opts.passthrough || opts.proxy === undefined ? undefined
    : resolveLocalityLb(merged.loadBalancer?.locality, opts.meshLocality, od !== undefined, opts.proxy);
  return {
    loadBalancer: opts.passthrough ? { kind: 'simple', simple: 'PASSTHROUGH' } : loadBalancerOf(merged.loadBalancer),
    connectionPool: opts.retryBudget === undefined ? pool : { ...pool, http: { ...pool.http, retryBudget: retryBudgetOf(opts.retryBudget) } },
    ...(od !== undefined ? { outlierDetection: od } : {}),
    ...(merged.tls !== undefined ? { tls: merged.tls } : {}),
    ...(locality !== undefined ? { locality } : {}),
    ...(opts.rule !== undefined ? { rule: opts.rule } : {}),
  };
}

function discoveryOf(resolution: Resolution, policy: ClusterPolicy): ClusterDiscovery {
  if (resolution === 'NONE' || (policy.loadBalancer.kind === 'simple' && policy.loadBalancer.simple === 'PASSTHROUGH')) return 'ORIGINAL_DST';
  if (resolution === 'DNS') return 'STRICT_DNS';
  if (resolution === 'DNS_ROUND_ROBIN') return 'LOGICAL_DNS';
  return 'EDS';
}

// ---- building ----

/** Entries this workload sees, its own namespace's first (Istio prefers them for a host declared twice), then file order. */
function visibleEntries(entries: readonly ServiceEntry[], workload: Workload): ServiceEntry[] {
  const visible = serviceEntriesFor(entries, workload.namespace);
  return [...visible.filter((se) => se.meta.namespace === workload.namespace), ...visible.filter((se) => se.meta.namespace !== workload.namespace)];
}

export function buildClusters(snapshot: Pick<ResourceSnapshot, 'serviceEntries' | 'destinationRules' | 'virtualServices'>, ctx: ClusterBuildContext): ClusterSet {
  const clusterDomain = ctx.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
  const rootNamespace = ctx.rootNamespace ?? ROOT_NAMESPACE;
  const warnings: string[] = [];
  const services: ServiceSpec[] = [];
  const clusters: ClusterSpec[] = [];
  const byName = new Map<string, ClusterSpec>();
  const servicesByHost = new Map<string, ServiceSpec[]>();
  const declaredBy = new Map<string, ServiceEntry>();
  const rules = new Map<string, DestinationRule | undefined>();
  const entries = visibleEntries(snapshot.serviceEntries, ctx.workload);
  const proxy: ProxyFacts = { locality: ctx.locality ?? '', labels: ctx.workload.labels };

  const ruleFor = (host: string): DestinationRule | undefined => {
    if (!rules.has(host)) {
      // Only entries this workload sees say which namespace a host's rules live in (the mTLS planner reads the same).
      rules.set(host, destinationRuleFor([host], ctx.workload, snapshot.destinationRules, entries, clusterDomain, rootNamespace)?.rule);
    }
    return rules.get(host);
  };
  const add = (c: ClusterSpec): void => {
    clusters.push(c);
    byName.set(c.name, c);
  };

  for (const entry of entries) {
    const origin = ref(entry, 'ServiceEntry');
    const resolution: Resolution = entry.resolution ?? 'NONE';
    for (const host of entry.hosts) {
      const first = declaredBy.get(host);
      if (first !== undefined) {
        if (first !== entry) warnings.push(`host ${host} is declared by ${ref(first, 'ServiceEntry')} and ${origin}; ${ref(first, 'ServiceEntry')} is used (Istio prefers the client's namespace, then the oldest)`);
        continue;
      }
      declaredBy.set(host, entry);
      const rule = ruleFor(host);
      const ruleRef = rule !== undefined ? ref(rule, 'DestinationRule') : undefined;
      for (const port of entry.ports) {
        const service: ServiceSpec = { key: serviceKey(host, port.number), host, port, resolution, entry, origin };
        const list = servicesByHost.get(host) ?? [];
        list.push(service);
        servicesByHost.set(host, list);
        // UDP is not proxied: Istio builds no listener and no cluster for the port (a route to it finds none).
        if (port.protocol === 'UDP') continue;
        services.push(service);
        const make = (subset: DestinationRule['subsets'][number] | undefined): ClusterSpec => {
          const merged = mergeTrafficPolicy(rule?.trafficPolicy, subset?.trafficPolicy, port.number);
          // Not a port-level setting: the subset's budget, else the rule's.
          const retryBudget = subset?.trafficPolicy?.retryBudget ?? rule?.trafficPolicy?.retryBudget;
          const policy = clusterPolicy(merged, {
            ...(retryBudget !== undefined ? { retryBudget } : {}),
            ...(ctx.connectTimeoutMs !== undefined ? { connectTimeoutMs: ctx.connectTimeoutMs } : {}),
            ...(ruleRef !== undefined ? { rule: ruleRef } : {}),
            passthrough: resolution === 'NONE',
            ...(ctx.localityLbSetting !== undefined ? { meshLocality: ctx.localityLbSetting } : {}),
            proxy,
          });
          return {
            name: clusterName(port.number, subset?.name, host), host, port: port.number, service: service.key, policy, origin,
            discovery: discoveryOf(resolution, policy),
            ...(subset !== undefined ? { subset: subset.name, subsetLabels: subset.labels } : {}),
            ...(http1Upstream(port.protocol, policy) ? { http1Upstream: true as const } : {}),
          };
        };
        add(make(undefined));
        for (const subset of rule?.subsets ?? []) add(make(subset));
      }
    }
  }
  const set: ClusterSet = { services, clusters, byName, servicesByHost, warnings };
  for (const vs of routesToCheck(snapshot.virtualServices, ctx)) warnings.push(...destinationWarnings(set, vs, ctx, ruleFor));
  return deepFreeze(set);
}

/** The VirtualServices whose destinations this workload uses: mesh-bound ones it sees, and those of its gateways. */
function routesToCheck(virtualServices: readonly VirtualService[], ctx: ClusterBuildContext): VirtualService[] {
  const gateways = new Set(ctx.gateways ?? []);
  return virtualServices.filter((vs) =>
    (vs.gateways.includes('mesh') && exportedTo(vs.exportTo, ctx.workload.namespace)) || vs.gateways.some((g) => gateways.has(g)));
}

function destinationWarnings(set: ClusterSet, vs: VirtualService, ctx: ClusterBuildContext, ruleFor: (host: string) => DestinationRule | undefined): string[] {
  const out: string[] = [];
  vs.http.forEach((route, r) => route.route.forEach((d, i) => {
    const host = resolveShortName(d.host, vs.meta.namespace, ctx.clusterDomain);
    // Without a port the request's port decides; a subset exists on every port of a host alike, so any port tells.
    const anyPort = set.servicesByHost.get(serviceHost(set, host) ?? host)?.[0]?.port.number ?? 0;
    const target = resolveDestination(set, d, d.port ?? anyPort, vs.meta.namespace, ctx.clusterDomain);
    if (target.kind === 'cluster') return;
    const where = `${ref(vs, 'VirtualService')} spec.http[${r}].route[${i}]`;
    const rule = ruleFor(host);
    const why = d.subset !== undefined && target.reason.startsWith('subset')
      ? `${rule !== undefined ? `${ref(rule, 'DestinationRule')} defines no subset ${d.subset} for it` : `no DestinationRule defines subset ${d.subset} for it`}`
      : target.reason;
    const name = d.port === undefined && anyPort === 0 ? clusterName(0, d.subset, host).replace('|0|', '|<request port>|') : target.name;
    out.push(`${where} routes to ${name}, which no cluster serves (${why}): its requests get 503 with flag NC`);
  }));
  return out;
}

/** The service a destination host names: exact, else the most specific wildcard host. */
function serviceHost(set: ClusterSet, host: string): string | undefined {
  if (set.servicesByHost.has(host)) return host;
  let best: { host: string; rank: number } | undefined;
  for (const h of set.servicesByHost.keys()) {
    if (!h.startsWith('*')) continue;
    const rank = hostMatchRank(h, host);
    if (rank !== undefined && (best === undefined || rank > best.rank)) best = { host: h, rank };
  }
  return best?.host;
}

/**
 * The cluster of a route destination, for a request that arrived on `requestPort` (the port a
 * destination without one goes to, unless the service has a single port). A VirtualService's short
 * host is read in its namespace. No cluster: the name Istio would have used and why there is none.
 */
export function resolveDestination(set: ClusterSet, d: HttpRouteDestination, requestPort: number, vsNamespace: string,
  clusterDomain = DEFAULT_CLUSTER_DOMAIN): DestinationTarget {
  const host = resolveShortName(d.host, vsNamespace, clusterDomain);
  const found = serviceHost(set, host);
  const ports = found !== undefined ? set.servicesByHost.get(found)! : [];
  const port = d.port ?? (ports.length === 1 ? ports[0]!.port.number : requestPort);
  const name = clusterName(port, d.subset, found ?? host);
  if (found === undefined) return { kind: 'no-cluster', name, reason: `host ${host} is not declared by any ServiceEntry this workload sees` };
  const service = ports.find((s) => s.port.number === port);
  if (service === undefined) return { kind: 'no-cluster', name, reason: `port ${port} is not a port of ${found}` };
  if (service.port.protocol === 'UDP') return { kind: 'no-cluster', name, reason: `port ${port} of ${found} is UDP, which is not proxied` };
  const cluster = set.byName.get(name);
  if (cluster === undefined) return { kind: 'no-cluster', name, reason: `subset ${d.subset ?? ''} is not defined for ${found}` };
  return { kind: 'cluster', cluster };
}

/**
 * Whether a cluster speaks only HTTP/1.1 to its endpoints, whatever the client speaks: Istio gives the
 * cluster of a port declared HTTP (or HTTP_PROXY) no HTTP/2 options unless the DestinationRule sets
 * `useClientProtocol` (the client's protocol; `h2UpgradePolicy: UPGRADE` is refused at load). HTTP2, GRPC,
 * GRPC-WEB: HTTP/2 (an HTTP/1.1 client's requests stay HTTP/1.1 here: warned at load); unset: the client's.
 */
function http1Upstream(protocol: string | undefined, policy: ClusterPolicy): boolean {
  if (protocol !== 'HTTP' && protocol !== 'HTTP_PROXY') return false;
  const http = policy.connectionPool.http;
  return !http.useClientProtocol;
}

// ---- routes: timeout and retries ----

export interface RouteTraffic {
  /** undefined: no time-out (Istio turns Envoy's 15 s off). */
  readonly timeoutMs?: number | undefined;
  /** attempts 0: no retries. */
  readonly retry: RetrySpec;
}

/** No retries (`retries.attempts: 0`). */
export const NO_RETRY: RetrySpec = Object.freeze({
  attempts: 0,
  retryOn: new Set<RetryCondition>(),
  retriableStatusCodes: Object.freeze([]) as readonly number[],
  ignorePreviousHosts: false,
  retryRemoteLocalities: false,
  backoffBaseMs: DEFAULT_BACKOFF_MS,
});

/** Istio's default policy on a route whose destination hashes consistently: retries stay on the same endpoint. */
export const DEFAULT_CONSISTENT_HASH_RETRY: RetrySpec = Object.freeze({ ...DEFAULT_RETRY, ignorePreviousHosts: false });
const DEFAULT_CONSISTENT_HASH_RETRY_WITH_503: RetrySpec = Object.freeze({ ...DEFAULT_RETRY_WITH_503, ignorePreviousHosts: false });

/**
 * A route's timeout and retry policy as Istio's ConvertPolicy makes it: the default policy when
 * `retries` is absent, none when attempts is 0, else the default overridden field by field
 * (status codes in retryOn add retriable-status-codes). `consistentHash`: the destination's cluster
 * balances by a consistent hash, so a retry does not seek another endpoint unless told to.
 * `retry503` (EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY=false): the default policy retries a 503 too, and
 * so does a route's `retries` without `retryOn` (Istio starts from the default and keeps its codes).
 */
export function routeTraffic(route: Pick<HttpRoute, 'retries' | 'timeoutMs' | 'fault'>, opts: { consistentHash?: boolean; retry503?: boolean } = {}): RouteTraffic {
  const timeout = route.timeoutMs !== undefined ? { timeoutMs: route.timeoutMs } : {};
  // Istio's reference: retries are not enabled on a route with fault injection (its delayed requests
  // are not retried; its aborts never reach an attempt anyway). The route's timeout stays, as Envoy's
  // router applies it after the fault filter.
  if (route.fault !== undefined) return { ...timeout, retry: NO_RETRY };
  const r = route.retries;
  const base = defaultRetry(opts.retry503);
  if (r === undefined) {
    const hashed = opts.retry503 === true ? DEFAULT_CONSISTENT_HASH_RETRY_WITH_503 : DEFAULT_CONSISTENT_HASH_RETRY;
    return { ...timeout, retry: opts.consistentHash ? hashed : base };
  }
  if (r.attempts === 0) return { ...timeout, retry: NO_RETRY };
  let retryOn: ReadonlySet<RetryCondition> = base.retryOn;
  let retriableStatusCodes: readonly number[] = base.retriableStatusCodes;
  if (r.retryOn !== undefined) {
    const conditions = new Set<RetryCondition>(r.retryOn.conditions);
    if (r.retryOn.statusCodes.length > 0) conditions.add('retriable-status-codes');
    retryOn = conditions;
    retriableStatusCodes = Object.freeze([...r.retryOn.statusCodes]);
  }
  return {
    ...timeout,
    retry: Object.freeze({
      attempts: r.attempts,
      ...(r.perTryTimeoutMs !== undefined ? { perTryTimeoutMs: r.perTryTimeoutMs } : {}),
      retryOn,
      retriableStatusCodes,
      ignorePreviousHosts: r.retryIgnorePreviousHosts ?? !opts.consistentHash,
      retryRemoteLocalities: r.retryRemoteLocalities ?? false,
      backoffBaseMs: r.backoffMs ?? DEFAULT_BACKOFF_MS,
    }),
  };
}

/** True when every cluster a route can send to balances by a consistent hash (Istio then uses the hash variant of its retries). */
export function hashesConsistently(targets: readonly DestinationTarget[]): boolean {
  const clusters = targets.flatMap((t) => (t.kind === 'cluster' ? [t.cluster] : []));
  return clusters.length > 0 && clusters.every((c) => c.policy.loadBalancer.kind === 'consistentHash');
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    if (value instanceof Map) {
      for (const v of value.values()) deepFreeze(v);
    } else if (!(value instanceof Set)) {
      for (const v of Object.values(value)) deepFreeze(v);
    }
    Object.freeze(value);
  }
  return value;
}
