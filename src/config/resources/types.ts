// The typed, validated form of the mesh resources read from `configSources` (Istio's field names
// and meanings). Everything past the validator trusts these shapes: regexes are compiled, claim
// keys are parsed into paths, defaults are filled in, lists are never undefined.
import type { TlsProtocolVersion } from './tls-parameters.js';

/** Where a resource came from: the file and the document's position in it (0-based). */
export interface ResourceOrigin {
  readonly file: string;
  readonly index: number;
}

export type ResourceKind =
  | 'Gateway' | 'VirtualService' | 'ServiceEntry' | 'DestinationRule' | 'WorkloadEntry' | 'Sidecar'
  | 'RequestAuthentication' | 'AuthorizationPolicy' | 'PeerAuthentication' | 'Telemetry';

export interface ResourceMeta {
  readonly kind: ResourceKind;
  /** As written (`networking.mesh.io/v1`, its `v1beta1` alias, or one of Istio's: `networking.istio.io/v1alpha3`...). */
  readonly apiVersion: string;
  readonly name: string;
  /** metadata.namespace, or the agent's own namespace (POD_NAMESPACE) when absent. */
  readonly namespace: string;
  readonly origin: ResourceOrigin;
}

/** Istio's StringMatch; regexes are full-match (RE2 semantics), compiled once. */
export type StringMatch =
  | { readonly kind: 'exact'; readonly value: string }
  | { readonly kind: 'prefix'; readonly value: string }
  | { readonly kind: 'regex'; readonly value: string; readonly regex: RegExp }
  /** `{}` in a header matcher: the header (or claim) is present, whatever its value. */
  | { readonly kind: 'present' };

/** matchLabels; absent means every workload of the resource's namespace (or all, in the root namespace). */
export type LabelSelector = Readonly<Record<string, string>>;

// ---- networking.mesh.io: Gateway ----

/** MONGO, MYSQL, REDIS: carried as TCP at the gateway (Istio adds only protocol-specific stats filters there). */
export type ServerProtocol = 'HTTP' | 'HTTPS' | 'HTTP2' | 'GRPC' | 'TCP' | 'TLS' | 'MONGO' | 'MYSQL' | 'REDIS';

export interface GatewayServerHost {
  /** `*` (any namespace) unless written `ns/host`; `.` is resolved to the Gateway's namespace. */
  readonly namespace: string;
  /** `*`, `*.suffix` or an exact name, lower-cased. */
  readonly host: string;
}

export interface GatewayTls {
  readonly mode: 'SIMPLE' | 'MUTUAL' | 'PASSTHROUGH' | 'ISTIO_MUTUAL' | 'AUTO_PASSTHROUGH' | 'OPTIONAL_MUTUAL';
  readonly httpsRedirect: boolean;
  readonly serverCertificate?: string;
  readonly privateKey?: string;
  /** CA bundle (file path) verifying client certificates, for MUTUAL / OPTIONAL_MUTUAL. */
  readonly caCertificates?: string;
  readonly credentialName?: string;
  /** Absent or TLS_AUTO: TLS 1.2 (tls-parameters.ts); TLS 1.0 and 1.1 are refused by the validator. */
  readonly minProtocolVersion?: TlsProtocolVersion;
  /** Absent or TLS_AUTO: TLS 1.3. */
  readonly maxProtocolVersion?: TlsProtocolVersion;
  /** TLS 1.2 suites (Istio's names); absent or empty: DEFAULT_CIPHER_SUITES. */
  readonly cipherSuites?: readonly string[];
}

export interface GatewayServer {
  readonly port: { readonly number: number; readonly name: string; readonly protocol: ServerProtocol };
  readonly hosts: readonly GatewayServerHost[];
  readonly tls?: GatewayTls;
  readonly name?: string;
  /** `bind`: the IP address the server's listener binds; absent: every address of the workload. */
  readonly bind?: string;
}

export interface Gateway {
  readonly meta: ResourceMeta;
  readonly selector: LabelSelector;
  readonly servers: readonly GatewayServer[];
}

// ---- networking.mesh.io: VirtualService ----

/** A header matcher, or a matcher on a validated JWT claim (`@request.auth.claims...` keys). */
export type HeaderMatch =
  | { readonly kind: 'header'; /** lower-cased */ readonly name: string; readonly match: StringMatch }
  | { readonly kind: 'claim'; /** the key as written */ readonly key: string; readonly path: readonly string[]; readonly match: StringMatch };

export interface HttpMatchRequest {
  readonly name?: string;
  readonly uri?: StringMatch;
  readonly method?: StringMatch;
  readonly authority?: StringMatch;
  readonly scheme?: StringMatch;
  readonly headers: readonly HeaderMatch[];
  /** Matches when none of these is present/matching. */
  readonly withoutHeaders: readonly HeaderMatch[];
  readonly queryParams: readonly { readonly name: string; readonly match: StringMatch }[];
  readonly ignoreUriCase: boolean;
  readonly port?: number;
  /** Restricts this match to these gateways (resolved `ns/name`, or `mesh`). */
  readonly gateways?: readonly string[];
  /** Sidecars only (Istio ignores it on gateways): the match applies when the workload's own labels contain these. */
  readonly sourceLabels?: Readonly<Record<string, string>>;
  /** Sidecars only (Istio ignores it on gateways): the match applies when the workload is in this namespace. */
  readonly sourceNamespace?: string;
}

/** Istio's HeaderOperations: names lower-case; `set` replaces every line of a name, `add` appends one, `remove` removes. */
export interface HeaderOperations {
  readonly set: Readonly<Record<string, string>>;
  readonly add: Readonly<Record<string, string>>;
  readonly remove: readonly string[];
}

export interface HttpRouteDestination {
  /** `route[].headers`: edits for requests sent to this destination and for their responses, after the rule's own. */
  readonly headers?: { readonly request?: HeaderOperations; readonly response?: HeaderOperations };
  readonly host: string;
  readonly port?: number;
  readonly subset?: string;
  /**
   * Relative weight (Istio: a destination gets weight / sum of the weights; 0 gets nothing). A single
   * destination gets 100 whatever it says; several need a sum above 0.
   */
  readonly weight: number;
}

/** The Envoy retry conditions Istio's validation accepts in `retryOn` (besides HTTP status codes). */
export type RetryOnPolicy =
  | '5xx' | 'gateway-error' | 'reset' | 'reset-before-request' | 'connect-failure' | 'envoy-ratelimited' | 'retriable-4xx'
  | 'refused-stream' | 'retriable-status-codes' | 'retriable-headers' | 'http3-post-connect-failure'
  | 'cancelled' | 'deadline-exceeded' | 'internal' | 'resource-exhausted' | 'unavailable';

/** Istio's HTTPRetry as written (validated); the defaults are filled in by src/traffic/clusters.ts. */
export interface HttpRetry {
  /** Retries after the first try; 0 turns retries off. */
  readonly attempts: number;
  readonly perTryTimeoutMs?: number;
  /** `retryOn` split: Envoy condition names, and the HTTP status codes given as numbers. Absent: Istio's default conditions. */
  readonly retryOn?: { readonly conditions: readonly RetryOnPolicy[]; readonly statusCodes: readonly number[] };
  readonly retryRemoteLocalities?: boolean;
  /** Absent: Istio's choice (true, false with a consistent hash). */
  readonly retryIgnorePreviousHosts?: boolean;
  /** The back-off's base interval; absent: Envoy's 25 ms. */
  readonly backoffMs?: number;
}

/**
 * Istio's HTTPFaultInjection, as Envoy's fault filter carries it out: a share of requests delayed
 * before they go on, a share answered locally. Shares are per million (Envoy's FractionalPercent);
 * a share not given is 0 (Istio leaves Envoy's default: nothing is delayed or aborted).
 */
export interface HttpFault {
  readonly delay?: { readonly fixedDelayMs: number; readonly perMillion: number };
  readonly abort?: { readonly perMillion: number; readonly httpStatus?: number; readonly grpcStatus?: number };
}

/** Istio's HTTPRedirect: at least one of uri, authority, scheme, port (or derivePort) is given. */
export interface HttpRedirect {
  readonly uri?: string;
  readonly authority?: string;
  readonly redirectCode: number;
  readonly scheme?: string;
  readonly port?: number;
  /** FROM_PROTOCOL_DEFAULT: no port (80 for http, 443 for https); FROM_REQUEST_PORT: the port the request came to. */
  readonly derivePort?: 'FROM_PROTOCOL_DEFAULT' | 'FROM_REQUEST_PORT';
}

export interface HttpRoute {
  readonly name?: string;
  /** Empty: matches every request. Entries are ORed; fields inside one entry are ANDed. */
  readonly match: readonly HttpMatchRequest[];
  readonly route: readonly HttpRouteDestination[];
  readonly directResponse?: { readonly status: number; readonly body?: string };
  readonly redirect?: HttpRedirect;
  readonly rewrite?: {
    readonly uri?: string;
    readonly authority?: string;
    /** `uriRegexRewrite`: every match of `regex` in the path (not the query) replaced by `substitution` (JavaScript's `$1` form). */
    readonly uriRegex?: { readonly match: string; readonly regex: RegExp; readonly substitution: string };
  };
  /** Request header edits applied before forwarding. */
  readonly requestHeaders?: HeaderOperations;
  /** Response header edits applied to the upstream's answer (`headers.response`). */
  readonly responseHeaders?: HeaderOperations;
  readonly timeoutMs?: number;
  /** Absent: Istio's default policy (src/traffic/clusters.ts `routeTraffic`). */
  readonly retries?: HttpRetry;
  readonly fault?: HttpFault;
  /** Where copies of the rule's requests go (`mirror` + its percentage, or `mirrors`); absent: none. */
  readonly mirrors?: readonly HttpMirror[];
  readonly corsPolicy?: CorsPolicy;
}

/** One mirror of a rule: a copy of a share of its requests goes to `destination`, its answer discarded. */
export interface HttpMirror {
  /** `weight` is unused (100): the shape a route destination has, so the same resolution applies. */
  readonly destination: HttpRouteDestination;
  /** Share of requests copied, 0–100 (Istio's default 100; 0 turns the mirror off). */
  readonly percent: number;
}

/** A rule's corsPolicy, as Envoy's CORS filter is configured from it (lists already joined with `,`). */
export interface CorsPolicy {
  /** `allowOrigins`, else the deprecated `allowOrigin` read as exact matches. Empty: no origin is allowed. */
  readonly allowOrigins: readonly StringMatch[];
  readonly allowMethods?: string;
  readonly allowHeaders?: string;
  readonly exposeHeaders?: string;
  /** Whole seconds, as text. */
  readonly maxAge?: string;
  readonly allowCredentials?: boolean;
  /** A preflight from an origin not allowed: forwarded upstream (Istio's default), or answered here without CORS headers. */
  readonly unmatchedPreflights: 'FORWARD' | 'IGNORE';
}

/** Istio's L4MatchAttributes: what a `tcp` route's match compares (the connection's, and the workload's own). */
export interface L4MatchAttributes {
  /** The destination port (the service port the connection was made to). */
  readonly port?: number;
  /** IPs and CIDR blocks, as written (validated): the connection's original destination must lie in one. */
  readonly destinationSubnets?: readonly string[];
  /** The workload's own labels must contain these (sidecars). */
  readonly sourceLabels?: Readonly<Record<string, string>>;
  /** The workload's namespace must be this one (sidecars). */
  readonly sourceNamespace?: string;
  /** Restricts this match to these gateways (resolved `ns/name`, or `mesh`). */
  readonly gateways?: readonly string[];
}

/** Istio's TLSMatchAttributes: an L4 match plus the server names of the client's ClientHello. */
export interface TlsMatchAttributes extends L4MatchAttributes {
  /** Lower-cased server names (`*.suffix` allowed), each within one of the VirtualService's hosts. */
  readonly sniHosts: readonly string[];
}

/** A `tcp` route: every connection that one of its matches (or, without any, every one) admits goes to one destination, by weight. */
export interface TcpRoute {
  readonly match: readonly L4MatchAttributes[];
  readonly route: readonly HttpRouteDestination[];
}

/** A `tls` route: like a TCP route, chosen by the ClientHello's server name; the TLS is relayed, never terminated. */
export interface TlsRoute {
  readonly match: readonly TlsMatchAttributes[];
  readonly route: readonly HttpRouteDestination[];
}

export interface VirtualService {
  readonly meta: ResourceMeta;
  /** Lower-cased host patterns (`*`, `*.suffix`, exact). */
  readonly hosts: readonly string[];
  /** Resolved to `ns/name` (a bare name is in the VirtualService's namespace), or `mesh`. Absent in the file: `['mesh']`. */
  readonly gateways: readonly string[];
  readonly http: readonly HttpRoute[];
  /** Routes for connections carried as TCP (absent: none). */
  readonly tcp?: readonly TcpRoute[];
  /** Routes for TLS connections by their server name, relayed without terminating TLS (absent: none). */
  readonly tls?: readonly TlsRoute[];
  /** Namespaces whose sidecars see it (`.` resolved); absent: every namespace. */
  readonly exportTo?: readonly string[];
}

// ---- networking.mesh.io: ServiceEntry (services: names for the DNS proxy, endpoints, auto mTLS) ----

/** The endpoint label that says "this endpoint speaks mesh mTLS". */
export const TLS_MODE_LABEL = 'security.mesh.io/tlsMode';
export const TLS_MODE_MESH = 'mesh';
/** Istio's spelling of the same label, read too: WorkloadEntries and endpoints written for Istio carry it. */
export const ISTIO_TLS_MODE_LABEL = 'security.istio.io/tlsMode';
export const ISTIO_TLS_MODE_MESH = 'istio';

/** Whether an endpoint's labels say it speaks mesh mTLS, in the spec's spelling or Istio's. */
export function hasMeshTlsLabel(labels: Readonly<Record<string, string>>): boolean {
  return labels[TLS_MODE_LABEL] === TLS_MODE_MESH || labels[ISTIO_TLS_MODE_LABEL] === ISTIO_TLS_MODE_MESH;
}

/** One of a ServiceEntry's `endpoints` (Istio's WorkloadEntry fields). */
export interface ServiceEntryEndpoint {
  /** An IP address (as written), or with DNS resolution a DNS name (lower-cased). */
  readonly address: string;
  /** Port name → the endpoint's port number for it. */
  readonly ports: Readonly<Record<string, number>>;
  readonly labels: Readonly<Record<string, string>>;
  readonly network?: string;
  readonly locality?: string;
  /** 0 when not written (Istio: the load balancer then treats the endpoints equally). */
  readonly weight: number;
  /** The endpoint's identity: `spiffe://<trust domain>/ns/<entry namespace>/sa/<serviceAccount>`. */
  readonly serviceAccount?: string;
}

export interface ServiceEntryPort {
  readonly number: number;
  /** A DNS label (Istio requires one); `''` only in entries built by code. */
  readonly name: string;
  /** Upper-cased: HTTP, HTTPS, HTTP2, GRPC, GRPC-WEB, HTTP_PROXY, TLS, TCP, UDP, MONGO, MYSQL, REDIS; absent: unknown (sniffed). */
  readonly protocol?: string;
  /** The endpoints' port when an endpoint does not map this port by name (Istio's `targetPort`). */
  readonly targetPort?: number;
}

export interface ServiceEntry {
  readonly meta: ResourceMeta;
  /** Lower-cased. */
  readonly hosts: readonly string[];
  /**
   * IPv4/IPv6 addresses as written, and CIDR blocks (`10.0.0.0/24`; a block of one address is
   * reduced to the address, so every entry that passes isIP is one address).
   */
  readonly addresses: readonly string[];
  readonly ports: readonly ServiceEntryPort[];
  readonly location?: 'MESH_EXTERNAL' | 'MESH_INTERNAL';
  readonly resolution?: 'NONE' | 'STATIC' | 'DNS' | 'DNS_ROUND_ROBIN';
  readonly endpoints: readonly ServiceEntryEndpoint[];
  /** Identities a TLS origination to these endpoints accepts (unless a DestinationRule names its own). */
  readonly subjectAltNames: readonly string[];
  /** WorkloadEntries of the entry's namespace whose labels contain these are its endpoints (instead of `endpoints`). */
  readonly workloadSelector?: LabelSelector;
  /** Namespaces that see the entry (`.` resolved to its namespace; `~`: none); absent: every namespace. */
  readonly exportTo?: readonly string[];
}

// ---- networking.mesh.io: WorkloadEntry (an endpoint of the ServiceEntries that select it) ----

export interface WorkloadEntry {
  readonly meta: ResourceMeta;
  /** An IP address, or a DNS name (lower-cased) that entries with DNS resolution resolve; `''` with a network only. */
  readonly address: string;
  /** Port name (of the selecting ServiceEntry) → this workload's port number for it. */
  readonly ports: Readonly<Record<string, number>>;
  readonly labels: Readonly<Record<string, string>>;
  readonly network?: string;
  readonly locality?: string;
  /** 0 when not written (treated as 1 by the load balancer). */
  readonly weight: number;
  readonly serviceAccount?: string;
}

// ---- networking.mesh.io: DestinationRule (how connections to a host are originated) ----

export type ClientTlsMode = 'DISABLE' | 'SIMPLE' | 'MUTUAL' | 'ISTIO_MUTUAL';

/** Istio's ClientTLSSettings. File paths as written (relative to the working directory unless absolute). */
export interface ClientTls {
  readonly mode: ClientTlsMode;
  readonly clientCertificate?: string;
  readonly privateKey?: string;
  readonly caCertificates?: string;
  /** Files under ./etc/mesh/credentials/<credentialName>/ (tls.crt, tls.key, ca.crt), as for a Gateway. */
  readonly credentialName?: string;
  readonly subjectAltNames: readonly string[];
  readonly sni?: string;
  readonly insecureSkipVerify: boolean;
}

export interface DestinationRulePortSetting {
  readonly port: number;
  readonly tls?: ClientTls;
}

/** Istio's simple load balancers; `{}`, UNSPECIFIED and the deprecated LEAST_CONN read as LEAST_REQUEST (Istio's default). */
export type SimpleLb = 'LEAST_REQUEST' | 'ROUND_ROBIN' | 'RANDOM' | 'PASSTHROUGH';

export type ConsistentHashKey =
  | { readonly kind: 'header'; /** lower-cased */ readonly name: string }
  | { readonly kind: 'cookie'; readonly name: string; readonly path?: string; /** absent: never generated; 0: a session cookie */ readonly ttlMs?: number }
  | { readonly kind: 'sourceIp' }
  | { readonly kind: 'queryParameter'; readonly name: string };

/** `loadBalancer`, validated; Istio's defaults that depend on nothing else are filled in. */
export type LoadBalancerSettings = (
  | { readonly kind: 'simple'; readonly simple: SimpleLb }
  | {
    readonly kind: 'consistentHash';
    readonly key: ConsistentHashKey;
    /** RING_HASH unless maglev is given; minimumRingSize 1024 unless given (Envoy's default, which Istio keeps). */
    readonly table: { readonly kind: 'ringHash'; readonly minimumRingSize: number } | { readonly kind: 'maglev'; readonly tableSize: number };
  }) & {
  /** `localityLbSetting` as written (checked as Istio checks it); absent: the mesh config's. */
  readonly locality?: LocalityLbSetting;
  /** `warmup` (or the deprecated `warmupDurationSecs`): Envoy's slow start of endpoints that join. */
  readonly warmup?: WarmupSettings;
};

export interface WarmupSettings {
  readonly durationMs: number;
  /** Percent of its weight a new endpoint starts with (default 10). */
  readonly minimumPercent: number;
  /** Speed of the ramp (default 1: linear; higher: faster at first). */
  readonly aggression: number;
}

/**
 * Istio's LocalityLoadBalancerSetting (a DestinationRule's `loadBalancer.localityLbSetting`, or the
 * mesh config's `localityLbSetting`). Localities are `region/zone/subzone`, a trailing `*` a wildcard.
 */
export interface LocalityLbSetting {
  /** Absent: on (Istio's default); false turns locality balancing off for the rule. */
  readonly enabled?: boolean;
  /** From the proxy's locality (`from`) to these localities, by percent (the weights sum to 100). */
  readonly distribute: readonly { readonly from: string; readonly to: readonly { readonly locality: string; readonly weight: number }[] }[];
  /** Regions: when every endpoint of the proxy's region `from` is unhealthy, region `to` next. */
  readonly failover: readonly { readonly from: string; readonly to: string }[];
  /** Labels (`key`, or `key=value` to give the proxy's value) ranking endpoints by how many of them, in order, they share. */
  readonly failoverPriority: readonly string[];
}

/** `connectionPool` as written (absent fields stay absent: Istio's defaults depend on presence and on the mesh config). */
export interface ConnectionPoolSettings {
  readonly tcp?: {
    readonly maxConnections?: number;
    readonly connectTimeoutMs?: number;
    readonly tcpKeepalive?: { readonly probes?: number; readonly timeMs?: number; readonly intervalMs?: number };
    readonly maxConnectionDurationMs?: number;
    readonly idleTimeoutMs?: number;
  };
  readonly http?: {
    readonly http1MaxPendingRequests?: number;
    readonly http2MaxRequests?: number;
    readonly maxRequestsPerConnection?: number;
    readonly maxRetries?: number;
    readonly idleTimeoutMs?: number;
    readonly h2UpgradePolicy?: 'DEFAULT' | 'DO_NOT_UPGRADE' | 'UPGRADE';
    readonly useClientProtocol?: boolean;
    readonly maxConcurrentStreams?: number;
  };
}

/** `outlierDetection` as written (Istio's translation to Envoy's defaults: src/traffic/clusters.ts). */
export interface OutlierDetectionSettings {
  readonly consecutive5xxErrors?: number;
  readonly consecutiveGatewayErrors?: number;
  readonly consecutiveLocalOriginFailures?: number;
  readonly splitExternalLocalOriginErrors: boolean;
  readonly intervalMs?: number;
  readonly baseEjectionTimeMs?: number;
  /** 0 or absent: Envoy's 10 (Istio cannot tell 0 from absent). */
  readonly maxEjectionPercent?: number;
  /** Absent: 0 (Istio always sets the panic threshold to this). */
  readonly minHealthPercent?: number;
}

/** The four settings a traffic policy and each of its port-level settings carry. */
export interface PolicySettings {
  readonly loadBalancer?: LoadBalancerSettings;
  readonly connectionPool?: ConnectionPoolSettings;
  readonly outlierDetection?: OutlierDetectionSettings;
  readonly tls?: ClientTls;
}

export interface PortTrafficPolicy extends PolicySettings {
  readonly port: number;
}

/** A rule's or a subset's `trafficPolicy`. */
/** Istio's RetryBudget as written: absent (or 0) fields take Envoy's defaults (20 %, 3). */
export interface RetryBudgetSettings {
  readonly percent?: number;
  readonly minRetryConcurrency?: number;
}

export interface TrafficPolicy extends PolicySettings {
  /** The rule's (or a subset's) retry budget; not a port-level setting in Istio's API. */
  readonly retryBudget?: RetryBudgetSettings;
  /** A port's settings replace the policy's (all four, absent ones falling back to the defaults). */
  readonly portLevelSettings: readonly PortTrafficPolicy[];
}

export interface DestinationRuleSubset {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Merged over the rule's policy field by field (Istio's rule); its port-level settings replace. */
  readonly trafficPolicy?: TrafficPolicy;
}

export interface DestinationRule {
  readonly meta: ResourceMeta;
  /** Lower-cased: an exact name, a short name (`reviews`), `*.suffix` or `*`. */
  readonly host: string;
  /** `trafficPolicy.tls` (also in trafficPolicy; kept here for the mTLS resolver). */
  readonly tls?: ClientTls;
  /** `trafficPolicy.portLevelSettings` that carry a tls (for the mTLS resolver). */
  readonly portLevelTls: readonly DestinationRulePortSetting[];
  /** The whole `trafficPolicy`; absent when the rule has none. */
  readonly trafficPolicy?: TrafficPolicy;
  readonly subsets: readonly DestinationRuleSubset[];
  /** `.` resolved to the rule's namespace; `*` for everyone (the default). */
  readonly exportTo: readonly string[];
  /** Only client workloads of the rule's own namespace that match (Istio). */
  readonly workloadSelector?: LabelSelector;
}

// ---- security.mesh.io: RequestAuthentication ----

export interface JwtRule {
  readonly issuer: string;
  readonly audiences: readonly string[];
  readonly jwksUri?: string;
  /** Inline JWKS (JSON text), used instead of fetching jwksUri. */
  readonly jwks?: string;
  /** `timeout`: how long a fetch of the rule's key set may take; absent: 5 s (Istio's default). */
  readonly timeoutMs?: number;
  /** Where tokens are read; empty lists: `Authorization: Bearer` and the `access_token` query parameter. */
  readonly fromHeaders: readonly { readonly name: string; readonly prefix: string }[];
  readonly fromParams: readonly string[];
  readonly fromCookies: readonly string[];
  readonly outputPayloadToHeader?: string;
  readonly forwardOriginalToken: boolean;
  readonly outputClaimToHeaders: readonly { readonly header: string; readonly claim: readonly string[] }[];
}

export interface RequestAuthentication {
  readonly meta: ResourceMeta;
  readonly selector?: LabelSelector;
  readonly jwtRules: readonly JwtRule[];
}

// ---- security.mesh.io: AuthorizationPolicy ----

export type AuthorizationAction = 'ALLOW' | 'DENY' | 'AUDIT' | 'CUSTOM';

/** Every field a list of values (exact, `prefix*`, `*suffix`, `*`); absent means "no constraint". */
export interface AuthorizationSource {
  readonly principals?: readonly string[];
  readonly notPrincipals?: readonly string[];
  readonly requestPrincipals?: readonly string[];
  readonly notRequestPrincipals?: readonly string[];
  readonly namespaces?: readonly string[];
  readonly notNamespaces?: readonly string[];
  readonly ipBlocks?: readonly string[];
  readonly notIpBlocks?: readonly string[];
  readonly remoteIpBlocks?: readonly string[];
  readonly notRemoteIpBlocks?: readonly string[];
  /** `ns/sa`, resolved (a bare `sa` is in the policy's namespace); matched exactly against the peer's principal, any trust domain. */
  readonly serviceAccounts?: readonly string[];
  readonly notServiceAccounts?: readonly string[];
  /** Lower-cased patterns (`*` any run of characters) matched against the peer principal's trust domain. */
  readonly trustDomains?: readonly string[];
  readonly notTrustDomains?: readonly string[];
}

export interface AuthorizationOperation {
  readonly hosts?: readonly string[];
  readonly notHosts?: readonly string[];
  readonly ports?: readonly string[];
  readonly notPorts?: readonly string[];
  readonly methods?: readonly string[];
  readonly notMethods?: readonly string[];
  readonly paths?: readonly string[];
  readonly notPaths?: readonly string[];
}

export interface AuthorizationCondition {
  /** As written, e.g. `request.auth.claims[groups]`, `request.headers[x-id]`, `source.ip`. */
  readonly key: string;
  /** For `request.auth.claims[...]` keys: the parsed claim path. */
  readonly claimPath?: readonly string[];
  /** For `request.headers[...]` keys: the lower-cased header name (`:authority`, `:method`, `:path` included). */
  readonly header?: string;
  readonly values?: readonly string[];
  readonly notValues?: readonly string[];
}

export interface AuthorizationRule {
  /** Entries ORed; empty: any source. */
  readonly from: readonly AuthorizationSource[];
  /** Entries ORed; empty: any operation. */
  readonly to: readonly AuthorizationOperation[];
  /** All must hold. */
  readonly when: readonly AuthorizationCondition[];
}

export interface AuthorizationPolicy {
  readonly meta: ResourceMeta;
  readonly selector?: LabelSelector;
  /** Default ALLOW. */
  readonly action: AuthorizationAction;
  /** ALLOW with no rules matches nothing (denies all); `rules: [{}]` matches everything. */
  readonly rules: readonly AuthorizationRule[];
  /** CUSTOM: the name of the mesh config's extension provider (an external authorizer) that checks the requests the rules select. */
  readonly provider?: string;
}

// ---- security.mesh.io: PeerAuthentication ----

export type PeerAuthenticationMode = 'UNSET' | 'DISABLE' | 'PERMISSIVE' | 'STRICT';

export interface PeerAuthentication {
  readonly meta: ResourceMeta;
  /** Absent or `{}`: namespace-wide (mesh-wide in the root namespace). */
  readonly selector?: LabelSelector;
  /** `mtls.mode`; UNSET (also when `mtls` is absent) inherits from the level above. */
  readonly mode: PeerAuthenticationMode;
  /** Port (the workload's own port) → mode; only with a non-empty selector. UNSET: this policy's `mode`. */
  readonly portLevelMtls: readonly { readonly port: number; readonly mode: PeerAuthenticationMode }[];
}

// ---- networking.mesh.io: Sidecar (what a sidecar sees of the mesh, and what it does with the rest) ----

/** Istio's outboundTrafficPolicy.mode: pass unknown destinations through, or refuse them (BlackHoleCluster). */
export type OutboundTrafficMode = 'ALLOW_ANY' | 'REGISTRY_ONLY';

/** One `egress[].hosts` entry, `namespace/dnsName`, split (`.` resolved to the Sidecar's namespace). */
export interface SidecarEgressHost {
  /** A namespace, `*` (any) or `~` (none). */
  readonly namespace: string;
  /** Lower-cased host pattern: `*`, `*.suffix` or a name. */
  readonly host: string;
}

export interface Sidecar {
  readonly meta: ResourceMeta;
  /** `workloadSelector.labels`; absent: every workload of the namespace (the root namespace's: the mesh default). */
  readonly selector?: LabelSelector;
  /** The services and VirtualServices the workload sees; absent: every one exported to its namespace. */
  readonly egressHosts?: readonly SidecarEgressHost[];
  /** Absent: the mesh config's. */
  readonly outboundTrafficPolicy?: OutboundTrafficMode;
}

// ---- telemetry.mesh.io: Telemetry (the access log turned on or off per workload; other overrides refused at load) ----

/** One `accessLogging` entry, as telemetry-scope.ts merges it (Istio's order: root, namespace, workload). */
export interface AccessLoggingEntry {
  /** It names the `envoy` provider (the one accepted); false: it takes the providers of the entry before it. */
  readonly namesProvider: boolean;
  /** `disabled: true`; false (absent or `false`): the entry turns the log on. */
  readonly disabled: boolean;
  /** `match.mode` CLIENT or CLIENT_AND_SERVER (a sidecar's outbound; all of a gateway's traffic). */
  readonly client: boolean;
  /** `match.mode` SERVER or CLIENT_AND_SERVER (a sidecar's inbound). */
  readonly server: boolean;
}

export interface Telemetry {
  readonly meta: ResourceMeta;
  readonly selector?: LabelSelector;
  /** The `accessLogging` entries, in order; absent when the list is absent or empty (the Telemetry says nothing of the log). */
  readonly accessLogging?: readonly AccessLoggingEntry[];
}

// ---- the whole set ----

/** An accepted resource's field worth a word to the operator (Istio ignores it, or warns about it too). */
export interface ResourceWarning {
  readonly file: string;
  readonly index: number;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  readonly field: string;
  readonly message: string;
}

/** A resource that did not validate: one line for the operator, naming file, resource and field. */
export interface Rejection {
  readonly file: string;
  readonly index: number;
  readonly kind?: string;
  readonly name?: string;
  readonly namespace?: string;
  /** The offending field path, e.g. `spec.http[0].match[1].uri.regex`. */
  readonly field: string;
  readonly message: string;
}

/** Every accepted resource, in file order (files sorted by path, then document order). */
export interface ResourceSnapshot {
  /** Increases with every change that took effect. */
  readonly version: number;
  readonly gateways: readonly Gateway[];
  readonly virtualServices: readonly VirtualService[];
  readonly serviceEntries: readonly ServiceEntry[];
  readonly destinationRules: readonly DestinationRule[];
  readonly workloadEntries: readonly WorkloadEntry[];
  readonly requestAuthentications: readonly RequestAuthentication[];
  readonly authorizationPolicies: readonly AuthorizationPolicy[];
  readonly peerAuthentications: readonly PeerAuthentication[];
  readonly sidecars: readonly Sidecar[];
  readonly telemetries: readonly Telemetry[];
}

/** The workload this agent serves: its namespace (POD_NAMESPACE) and labels (./etc/mesh/pod/labels). */
export interface Workload {
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
}

export const ROOT_NAMESPACE = 'mesh-system';
