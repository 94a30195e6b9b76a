// The resolved shapes of traffic management: what the configuration (ServiceEntry, WorkloadEntry,
// DestinationRule, VirtualService) says once validated, merged as Istio merges it and with Istio's
// defaults filled in. The config side (src/traffic/clusters.ts) produces them; the balancers, retry
// policy, outlier detection and limits (src/traffic/*) and the engine read them. Plain data: no
// socket, no clock, nothing mutable.
import type { ClientTls } from '../config/resources/types.js';
import type { LocalityLbSpec } from './locality.js';

/** Istio's "unlimited" for the circuit-breaker thresholds it sets by default (2^32 - 1). */
export const UNLIMITED = 4294967295;

/** One endpoint of a cluster, as its source (a ServiceEntry, a WorkloadEntry, DNS) gives it. */
export interface EndpointSpec {
  /** An IP address (as the OS spells it: `10.0.0.1`, `fd00::1`). */
  readonly address: string;
  readonly port: number;
  readonly labels: Readonly<Record<string, string>>;
  /** `region/zone/subzone`, as written; undefined: none. */
  readonly locality?: string | undefined;
  /** Load-balancing weight, at least 1 (Istio: an endpoint without a weight counts as 1). */
  readonly weight: number;
  /** The endpoint's identity, when its source says (WorkloadEntry / ServiceEntry endpoint serviceAccount). */
  readonly serviceAccount?: string | undefined;
  /** Where it came from, for /clusters and the logs: `ServiceEntry ns/name`, `WorkloadEntry ns/name`, `DNS name`. */
  readonly origin: string;
}

export type SimpleLoadBalancer = 'LEAST_REQUEST' | 'ROUND_ROBIN' | 'RANDOM' | 'PASSTHROUGH';

/** What a consistent hash is computed from (one of Istio's `consistentHash` keys). */
export type HashKey =
  | { readonly kind: 'header'; /** lower-cased */ readonly name: string }
  | { readonly kind: 'cookie'; readonly name: string; readonly path?: string | undefined; /** absent: a session cookie is never generated */ readonly ttlMs?: number | undefined }
  | { readonly kind: 'sourceIp' }
  | { readonly kind: 'queryParameter'; readonly name: string };

/** Envoy's slow start (Istio's `warmup`): an endpoint that joins the cluster ramps up its weight over the window. */
export interface SlowStartSpec {
  readonly windowMs: number;
  /** The least share of its weight an endpoint gets, 0..1 (Istio's minimumPercent / 100; default 0.1). */
  readonly minWeight: number;
  /** ≥ 1; the weight follows (time in window / window)^(1 / aggression). */
  readonly aggression: number;
}

export type LoadBalancerSpec =
  | {
    readonly kind: 'simple'; readonly simple: SimpleLoadBalancer;
    /** ROUND_ROBIN and LEAST_REQUEST only (Envoy's); undefined: new endpoints get their full weight at once. */
    readonly slowStart?: SlowStartSpec | undefined;
  }
  | {
    readonly kind: 'consistentHash';
    readonly key: HashKey;
    /** RING_HASH (Istio's default for consistentHash, minimumRingSize 1024) or MAGLEV (table size 65537). */
    readonly table: { readonly kind: 'ringHash'; readonly minimumRingSize: number } | { readonly kind: 'maglev'; readonly tableSize: number };
  };

export interface ConnectionPoolSpec {
  readonly tcp: {
    /** Per cluster (Envoy's circuit breaker), not per endpoint: UNLIMITED by default. */
    readonly maxConnections: number;
    /** The mesh config's connectTimeout (10 s by default) unless the rule sets one. */
    readonly connectTimeoutMs: number;
    /** SO_KEEPALIVE with these settings; undefined: off (Istio's default). */
    readonly tcpKeepalive?: { readonly probes?: number | undefined; readonly timeMs?: number | undefined; readonly intervalMs?: number | undefined } | undefined;
    /** undefined: no limit. */
    readonly maxConnectionDurationMs?: number | undefined;
    /** TCP idle time-out of a connection carried as TCP; undefined: Envoy's 1 h. */
    readonly idleTimeoutMs?: number | undefined;
  };
  readonly http: {
    readonly http1MaxPendingRequests: number;
    readonly http2MaxRequests: number;
    /** 0: unlimited. */
    readonly maxRequestsPerConnection: number;
    readonly maxRetries: number;
    /**
     * Envoy's retry budget (a DestinationRule's `retryBudget`), which replaces maxRetries: retries in
     * flight at most max(minRetryConcurrency, percent % of the requests in flight and pending).
     */
    readonly retryBudget?: { readonly percent: number; readonly minRetryConcurrency: number } | undefined;
    /** Idle upstream connection time-out; undefined: Envoy's 1 h. */
    readonly idleTimeoutMs?: number | undefined;
    readonly h2UpgradePolicy: 'DEFAULT' | 'DO_NOT_UPGRADE' | 'UPGRADE';
    readonly useClientProtocol: boolean;
    /** HTTP/2 streams per upstream connection; undefined: the server's SETTINGS decide. */
    readonly maxConcurrentStreams?: number | undefined;
  };
}

/** DestinationRule outlierDetection with Istio's translation to Envoy applied (see outlier.ts). */
export interface OutlierDetectionSpec {
  /** 0: off. Envoy's default 5 when the rule has outlierDetection without it. */
  readonly consecutive5xxErrors: number;
  /** 0: off (Istio leaves Envoy's enforcement at 0 unless set). */
  readonly consecutiveGatewayErrors: number;
  /** Only with splitExternalLocalOriginErrors; 0: off. */
  readonly consecutiveLocalOriginFailures: number;
  readonly splitExternalLocalOriginErrors: boolean;
  /** Envoy's defaults: 10 s, 30 s, 10 %, 300 s. */
  readonly intervalMs: number;
  readonly baseEjectionTimeMs: number;
  readonly maxEjectionPercent: number;
  readonly maxEjectionTimeMs: number;
  /** Istio's minHealthPercent, Envoy's healthy panic threshold: 0 (Istio's default) disables panic. */
  readonly minHealthPercent: number;
}

/** A cluster's policy, after Istio's merge (rule → port level → subset → subset's port level; a port level replaces, never merges). */
export interface ClusterPolicy {
  readonly loadBalancer: LoadBalancerSpec;
  readonly connectionPool: ConnectionPoolSpec;
  /** undefined: no outlier detection (nothing is ever ejected). */
  readonly outlierDetection?: OutlierDetectionSpec | undefined;
  readonly tls?: ClientTls | undefined;
  /**
   * Locality-aware balancing (`localityLbSetting`, the rule's or the mesh's) when it can change
   * anything for this proxy: `distribute` covering its locality, or failover with outlierDetection.
   * Undefined: every endpoint is one priority (no cost per pick).
   */
  readonly locality?: LocalityLbSpec | undefined;
  /** `DestinationRule ns/name` the policy came from, if any (for /config_dump and the decisions). */
  readonly rule?: string | undefined;
}

/** One cluster: a service's port, perhaps one subset of its endpoints, with its policy. */
export interface ClusterSpec {
  /** Istio's name: `outbound|80|v1|reviews.default.svc.cluster.local` (`outbound|80||host` without subset). */
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly subset?: string | undefined;
  /** Where the endpoints come from, for the endpoint sources: the service's key and the subset's labels. */
  readonly service: string;
  readonly subsetLabels?: Readonly<Record<string, string>> | undefined;
  readonly policy: ClusterPolicy;
  /** `ServiceEntry ns/name`. */
  readonly origin: string;
  /**
   * Envoy's cluster type, for /clusters and the engine: EDS (endpoints from ServiceEntry endpoints or
   * WorkloadEntries), STRICT_DNS (resolution DNS: every address), LOGICAL_DNS (DNS_ROUND_ROBIN: the
   * first address, per new connection), ORIGINAL_DST (resolution NONE or loadBalancer PASSTHROUGH:
   * no endpoints, the connection's original destination). Absent: EDS.
   */
  readonly discovery?: ClusterDiscovery | undefined;
  /**
   * The service port declares HTTP (or HTTP_PROXY) and no rule asks otherwise: requests go to the
   * endpoints as HTTP/1.1 whatever the client speaks (an HTTP/2 client's streams too, as Istio's
   * cluster has no HTTP/2 options). Absent: the client's protocol (HTTP/2 tried first for HTTP/2).
   */
  readonly http1Upstream?: true | undefined;
}

export type ClusterDiscovery = 'EDS' | 'STRICT_DNS' | 'LOGICAL_DNS' | 'ORIGINAL_DST';

/** The Envoy retry conditions (`retryOn`) this proxy knows. */
export type RetryCondition =
  | '5xx' | 'gateway-error' | 'reset' | 'reset-before-request' | 'connect-failure' | 'envoy-ratelimited' | 'retriable-4xx'
  | 'refused-stream' | 'retriable-status-codes' | 'retriable-headers' | 'http3-post-connect-failure'
  | 'cancelled' | 'deadline-exceeded' | 'internal' | 'resource-exhausted' | 'unavailable';

export interface RetrySpec {
  /** Retries after the first try (Istio's `attempts`); 0: none. */
  readonly attempts: number;
  readonly perTryTimeoutMs?: number | undefined;
  readonly retryOn: ReadonlySet<RetryCondition>;
  readonly retriableStatusCodes: readonly number[];
  /** Each retry prefers an endpoint not tried yet (Istio's default; false with a consistent hash). */
  readonly ignorePreviousHosts: boolean;
  readonly retryRemoteLocalities: boolean;
  /** Jittered exponential back-off from this base (25 ms), capped at 10× it. */
  readonly backoffBaseMs: number;
}

/** Istio's default retry policy (a route without `retries`): 2 retries on connection failures and gRPC UNAVAILABLE / CANCELLED; a 503 is not retried. */
export const DEFAULT_RETRY: RetrySpec = Object.freeze({
  attempts: 2,
  retryOn: new Set<RetryCondition>(['connect-failure', 'refused-stream', 'unavailable', 'cancelled', 'retriable-status-codes']),
  retriableStatusCodes: Object.freeze([]) as readonly number[],
  ignorePreviousHosts: true,
  retryRemoteLocalities: false,
  backoffBaseMs: 25,
});

/**
 * The same with EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY=false (Istio before 1.24): a 503 answer is
 * retried too (retriable-status-codes [503]), whatever the method.
 */
export const DEFAULT_RETRY_WITH_503: RetrySpec = Object.freeze({ ...DEFAULT_RETRY, retriableStatusCodes: Object.freeze([503]) as readonly number[] });

/** Istio's default policy, as EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY says (`retry503`: it is false). */
export function defaultRetry(retry503: boolean | undefined): RetrySpec {
  return retry503 === true ? DEFAULT_RETRY_WITH_503 : DEFAULT_RETRY;
}
