// What the access log says of one HTTP request or one connection carried as opaque bytes: the
// proxy engine fills an AccessRecord when (and only when) an access log is configured, and
// access-format.ts prints it with Envoy's command operators. Envoy's response flags live here too,
// as bits, so the engine sets them where things happen and the formatter names them. Pure.

/** Which of the proxy's listeners a record comes from: it names the upstream cluster and the route as Istio does. */
export type ListenerRole = 'outbound' | 'inbound' | 'gateway';

/**
 * Envoy's response flags that mean something here, in Envoy's printing order (RBAC, this agent's
 * own, beside UAEX). README "Seeing why" and docs/ACCESS-LOG.md say when each is set.
 */
export const RESPONSE_FLAGS = [
  ['UH', 'NoHealthyUpstream'],
  ['UT', 'UpstreamRequestTimeout'],
  ['LR', 'LocalReset'],
  ['UR', 'UpstreamRemoteReset'],
  ['UF', 'UpstreamConnectionFailure'],
  ['UC', 'UpstreamConnectionTermination'],
  ['UO', 'UpstreamOverflow'],
  ['NR', 'NoRouteFound'],
  ['DI', 'DelayInjected'],
  ['FI', 'FaultInjected'],
  ['UAEX', 'UnauthorizedExternalService'],
  ['RBAC', 'RbacAccessDenied'],
  ['DC', 'DownstreamConnectionTermination'],
  ['URX', 'UpstreamRetryLimitExceeded'],
  ['DPE', 'DownstreamProtocolError'],
  ['UPE', 'UpstreamProtocolError'],
  ['NC', 'NoClusterFound'],
] as const;

export type ResponseFlagName = (typeof RESPONSE_FLAGS)[number][0];

/** Flag name → bit: records carry their flags as one number (no array per request). */
export const FLAG: Readonly<Record<ResponseFlagName, number>> = Object.freeze(
  Object.fromEntries(RESPONSE_FLAGS.map(([name], i) => [name, 1 << i])) as Record<ResponseFlagName, number>,
);

/** `UF,URX` style (Envoy's RESPONSE_FLAGS), undefined for none. */
export function flagsText(flags: number, long = false): string | undefined {
  if (flags === 0) return undefined;
  let out = '';
  for (let i = 0; i < RESPONSE_FLAGS.length; i++) {
    if ((flags & (1 << i)) === 0) continue;
    const [short, longName] = RESPONSE_FLAGS[i]!;
    out += out === '' ? (long ? longName : short) : `,${long ? longName : short}`;
  }
  return out;
}

/**
 * What a decider decided of a request or connection, for the log: this project's own fields
 * (JWT outcome, policy outcome, route) and, when the decision answered locally, Envoy's flag and
 * RESPONSE_CODE_DETAILS for it. The decision log's Decision is one.
 */
export interface DecisionNote {
  /** `absent`, `valid`, `invalid: <reason>: <message>`; `-` for a connection. */
  readonly jwt: string;
  readonly principal?: string | undefined;
  /** `allowed: ...`, `denied: ...`, with the policy that decided. */
  readonly authz: string;
  /** Which rule matched, or why none did (gateway). */
  readonly route?: string | undefined;
  /** Envoy's ROUTE_NAME: the VirtualService rule's name (and its match's), when named. */
  readonly routeName?: string | undefined;
  /** The flag this decision sets (NR, UH, UAEX, RBAC). */
  readonly flag?: ResponseFlagName | undefined;
  /** RESPONSE_CODE_DETAILS of the local answer this decision gave (`route_not_found`, `rbac_access_denied_matched_policy[...]`). */
  readonly details?: string | undefined;
}

/** A request's flags with the one its decision note sets (RBAC, UAEX, NR...), as the log and the metrics show them. */
export function withNoteFlag(flags: number, note: DecisionNote | undefined | void): number {
  return note && note.flag !== undefined ? flags | FLAG[note.flag] : flags;
}

/** A request's headers as forwarded: the lines received (Host = the authority) with the decider's edits. */
export interface ForwardedHeaders {
  /** `[name, value, ...]` as received, names in any case. */
  readonly raw: readonly string[];
  /** Lower-case names set (replacing every line of that name). */
  readonly set?: readonly (readonly [string, string])[] | undefined;
  /** Lower-case names removed. */
  readonly remove?: readonly string[] | undefined;
  /** Lines appended after the others (a route's `add`). */
  readonly add?: readonly (readonly [string, string])[] | undefined;
}

export interface AccessRecord {
  /** `http`: one request and its answer (or why none); `tcp`: one connection carried or refused as opaque bytes. */
  readonly kind: 'http' | 'tcp';
  readonly role: ListenerRole;
  /** When the request's head (the connection) arrived, ms since the epoch. */
  readonly startMs: number;
  /** Until the last byte of the answer went out (the connection closed). */
  readonly durationMs: number;
  readonly method: string | undefined;
  /** The request target as forwarded (after a rule's rewrite): `:PATH`. */
  readonly path: string | undefined;
  /** The target as received (normalized) when a rewrite changed it: `X-ENVOY-ORIGINAL-PATH`. */
  readonly originalPath: string | undefined;
  /** `HTTP/1.1`; undefined for a connection. */
  readonly protocol: string | undefined;
  /** The status sent; 0: none (a connection, or the client left before an answer). */
  readonly status: number;
  /** FLAG bits. */
  readonly flags: number;
  readonly details: string | undefined;
  readonly terminationDetails: string | undefined;
  /** Request body bytes (a connection's bytes from the client); a tunnel's bytes included. */
  readonly bytesReceived: number;
  /** Response body bytes (a connection's bytes to the client); a tunnel's bytes included. */
  readonly bytesSent: number;
  /** From the request sent upstream to the response head (X-ENVOY-UPSTREAM-SERVICE-TIME). */
  readonly upstreamServiceMs: number | undefined;
  /** From the request's arrival to the response head from upstream (RESPONSE_DURATION). */
  readonly responseMs: number | undefined;
  /** Times the request was sent upstream (2: a pooled connection was found closed and it went again). */
  readonly attempts: number | undefined;
  readonly requestHeaders: ForwardedHeaders | undefined;
  /** `[lower-case name, value, ...]`: the response headers the format asks for (or a local answer's). */
  readonly responseHeaders: readonly string[] | undefined;
  readonly upstreamHost: string | undefined;
  readonly upstreamCluster: string | undefined;
  readonly upstreamLocal: string | undefined;
  readonly downstreamLocal: string | undefined;
  readonly downstreamRemote: string | undefined;
  /** The SNI of a TLS connection (gateway HTTPS, a sidecar's TLS connection relayed as TCP). */
  readonly serverName: string | undefined;
  readonly routeName: string | undefined;
  readonly decision: DecisionNote | undefined;
  /** The downstream's SPIFFE id, when it came over mutual TLS (its absence: connection_security_policy none). */
  readonly downstreamPeerUriSan?: string | undefined;
  /** SHA-256 of the downstream's certificate, hex. */
  readonly downstreamPeerFingerprint?: string | undefined;
  /** This workload's SPIFFE id, on a connection it terminated mutual TLS for. */
  readonly downstreamLocalUriSan?: string | undefined;
  /** A gRPC call's `grpc-status` (from the trailers, a trailers-only response, or the proxy's own answer). */
  readonly grpcStatus?: number | undefined;
  /** Why TLS to the upstream failed (Envoy's UPSTREAM_TRANSPORT_FAILURE_REASON). */
  readonly upstreamTransportFailure?: string | undefined;
}

/** Where the proxy engine sends its records (the access log), and what it must keep for the format. */
export interface AccessLogSink {
  /**
   * False: nothing is logged now (a Telemetry turned the log off, or none is configured). The engines
   * read it once when a request or connection begins, and build nothing for a log while it is false.
   */
  readonly on: boolean;
  write(record: AccessRecord): void;
  /** Lower-case response header names the format reads (RESP): only those are kept per response. */
  readonly responseHeaders: readonly string[];
}

/** The sink if it is on now, else undefined: what an engine reads once when a connection or request begins. */
export function liveLog(log: AccessLogSink | undefined): AccessLogSink | undefined {
  return log !== undefined && log.on ? log : undefined;
}

/** `ip:port` as Envoy prints it (`[v6]:port`), an IPv4-mapped address as IPv4; undefined when unknown. */
export function hostPort(address: string | undefined, port: number | undefined): string | undefined {
  if (address === undefined || address === '' || port === undefined) return undefined;
  const plain = address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
  return plain.includes(':') ? `[${plain}]:${port}` : `${plain}:${port}`;
}

/**
 * The upstream cluster Istio would name: the sidecar's passthrough clusters (there are no Services
 * here), a gateway route's `outbound|port||host`.
 */
export function clusterName(role: ListenerRole, address: string, port: number): string {
  switch (role) {
    case 'outbound': return 'PassthroughCluster';
    case 'inbound': return 'InboundPassthroughCluster';
    case 'gateway': return `outbound|${port}||${address}`;
  }
}

/** The route name Istio's sidecar routes carry (the gateway's comes from the decision). */
export function defaultRouteName(role: ListenerRole, kind: AccessRecord['kind']): string | undefined {
  if (kind === 'tcp') return undefined;
  return role === 'outbound' ? 'allow_any' : role === 'inbound' ? 'default' : undefined;
}

/** Where a request was sent, as its ForwardTarget said (address, port, a rewritten path, header edits). */
export interface LoggedTarget {
  readonly address: string;
  readonly port: number;
  readonly path?: string | undefined;
  readonly setHeaders?: readonly (readonly [string, string])[] | undefined;
  readonly addHeaders?: readonly (readonly [string, string])[] | undefined;
  readonly removeHeaders?: readonly string[] | undefined;
  /** Traffic management: the cluster the request went to (its name is the log's upstream cluster). */
  readonly cluster?: { readonly cluster: { readonly name: string } } | undefined;
}

/** The client connection's side of a request's record. */
export interface LoggedDownstream {
  readonly localText: string | undefined;
  readonly remoteText: string | undefined;
  readonly serverName: string | undefined;
  readonly peer: { readonly spiffeId: string; readonly certHash: string } | undefined;
  readonly localUriSan: string | undefined;
}

/** What an HTTP path (HTTP/1.x or HTTP/2) knows of one request when it ends. */
export interface HttpExchangeFacts {
  readonly role: ListenerRole;
  /** performance.now() when the request arrived, and when its answer began (0: none from upstream). */
  readonly started: number;
  readonly sentAt: number;
  readonly respAt: number;
  readonly durationMs: number;
  /** Undefined for a request refused before it was read as one (no method, no target). */
  readonly method: string | undefined;
  readonly url: string | undefined;
  readonly rawHeaders: readonly string[] | undefined;
  readonly protocol: string;
  readonly status: number | undefined;
  readonly flags: number;
  readonly details: string | undefined;
  readonly note: DecisionNote | undefined;
  readonly target: LoggedTarget | undefined;
  /** Answered before any decision (a malformed request): no cluster. */
  readonly fixed: boolean;
  readonly retried: boolean;
  /** Traffic management: attempts sent (retries + 1); absent: 1, or 2 when `retried`. */
  readonly attempts?: number | undefined;
  /** Traffic management: the endpoint of the last attempt (`10.0.0.1:8080`). */
  readonly endpoint?: string | undefined;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly respHeaders: readonly string[] | undefined;
  /** The upstream's address as connected, when it differs from the target's. */
  readonly upHost: string | undefined;
  readonly upLocal: string | undefined;
  readonly transportFailure: string | undefined;
  readonly grpcStatus?: number | undefined;
  readonly downstream: LoggedDownstream;
}

/** One request's access log record, the same for both HTTP paths. */
export function httpExchangeRecord(f: HttpExchangeFacts): AccessRecord {
  const { target: t, role, note, status } = f;
  return {
    kind: 'http', role, startMs: performance.timeOrigin + f.started, durationMs: f.durationMs,
    method: f.method, path: t?.path ?? f.url,
    originalPath: t?.path !== undefined && t.path !== f.url ? f.url : undefined,
    protocol: f.protocol, status: status ?? 0,
    flags: withNoteFlag(f.flags, note),
    details: f.details ?? note?.details ?? (status !== undefined ? 'direct_response' : undefined),
    terminationDetails: undefined,
    bytesReceived: f.bytesIn, bytesSent: f.bytesOut,
    upstreamServiceMs: f.respAt > 0 ? f.respAt - f.sentAt : undefined,
    responseMs: f.respAt > 0 ? f.respAt - f.started : undefined,
    attempts: t ? f.attempts ?? (f.retried ? 2 : 1) : undefined,
    requestHeaders: f.rawHeaders ? { raw: f.rawHeaders, set: t?.setHeaders, remove: t?.removeHeaders, add: t?.addHeaders } : undefined,
    responseHeaders: f.respHeaders,
    upstreamHost: f.upHost ?? f.endpoint ?? (t ? hostPort(t.address, t.port) : undefined),
    // A sidecar's cluster is known before any verdict (Istio logs it on a local 403 too); a gateway's comes with its route.
    upstreamCluster: t?.cluster ? t.cluster.cluster.name : t ? clusterName(role, t.address, t.port) : role !== 'gateway' && !f.fixed ? clusterName(role, '', 0) : undefined,
    upstreamLocal: f.upLocal,
    downstreamLocal: f.downstream.localText, downstreamRemote: f.downstream.remoteText, serverName: f.downstream.serverName,
    routeName: note?.routeName ?? defaultRouteName(role, 'http'),
    decision: note,
    downstreamPeerUriSan: f.downstream.peer?.spiffeId, downstreamPeerFingerprint: f.downstream.peer?.certHash,
    downstreamLocalUriSan: f.downstream.localUriSan,
    upstreamTransportFailure: f.transportFailure,
    grpcStatus: f.grpcStatus,
  };
}

/** Envoy's way of making free text one word in RESPONSE_CODE_DETAILS: white space becomes `_`. */
export function detailsWord(text: string): string {
  return text.replace(/\s+/g, '_');
}

/** What a connection's record says; the HTTP fields are `-`. */
export interface ConnectionFields {
  readonly role: ListenerRole;
  readonly startMs: number;
  readonly durationMs: number;
  readonly flags: number;
  readonly terminationDetails?: string | undefined;
  readonly bytesReceived: number;
  readonly bytesSent: number;
  readonly upstreamHost?: string | undefined;
  readonly upstreamCluster?: string | undefined;
  readonly upstreamLocal?: string | undefined;
  readonly downstreamLocal?: string | undefined;
  readonly downstreamRemote?: string | undefined;
  readonly serverName?: string | undefined;
  readonly decision?: DecisionNote | undefined;
  readonly downstreamPeerUriSan?: string | undefined;
  readonly downstreamPeerFingerprint?: string | undefined;
  readonly downstreamLocalUriSan?: string | undefined;
  readonly upstreamTransportFailure?: string | undefined;
}

/** The record of a connection carried (or refused) as opaque bytes: Envoy's TCP proxy line (`"- - -" 0 ...`). */
export function connectionRecord(c: ConnectionFields): AccessRecord {
  return {
    kind: 'tcp', role: c.role, startMs: c.startMs, durationMs: c.durationMs,
    method: undefined, path: undefined, originalPath: undefined, protocol: undefined, status: 0,
    flags: c.flags, details: undefined, terminationDetails: c.terminationDetails,
    bytesReceived: c.bytesReceived, bytesSent: c.bytesSent, upstreamServiceMs: undefined, responseMs: undefined,
    attempts: undefined, requestHeaders: undefined, responseHeaders: undefined,
    upstreamHost: c.upstreamHost, upstreamCluster: c.upstreamCluster, upstreamLocal: c.upstreamLocal,
    downstreamLocal: c.downstreamLocal, downstreamRemote: c.downstreamRemote, serverName: c.serverName,
    routeName: undefined, decision: c.decision, downstreamPeerUriSan: c.downstreamPeerUriSan,
    downstreamPeerFingerprint: c.downstreamPeerFingerprint, downstreamLocalUriSan: c.downstreamLocalUriSan,
    upstreamTransportFailure: c.upstreamTransportFailure,
  };
}
