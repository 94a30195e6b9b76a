// The contract between the proxy engine and whoever decides where requests go: the sidecar's
// original destination, its inbound policy checks, the gateway's routes. The engine parses,
// normalizes and forwards; a decider only looks at the request (a view of what will be forwarded)
// and answers a Verdict. Connections that are not carried as HTTP are admitted by the same decider
// (Istio's TCP semantics for policy).
import type { IncomingMessage } from 'node:http';
import type { DecisionNote, ResponseFlagName } from '../log/access-record.js';
import type { ClusterRuntime } from '../traffic/cluster.js';
import type { EndpointSpec, RetrySpec } from '../traffic/spec.js';
import type { Endpoint } from './socket-options.js';
import type { UpstreamTls } from './tls/origination.js';
import type { PeerIdentity } from './tls/peer-identity.js';

/** Forward the request to `address:port`, edited as given. */
export interface ForwardTarget {
  readonly kind: 'forward';
  readonly address: string;
  readonly port: number;
  /** Replaces the request target (path and query). */
  readonly path?: string;
  /** Lower-case names of request headers not to forward (e.g. a JWT the rule does not forward). */
  readonly removeHeaders?: readonly string[];
  /** Request headers to set (replacing any of the same name); values are text, sent as UTF-8. */
  readonly setHeaders?: readonly (readonly [string, string])[];
  /**
   * Request header lines to append (Istio's `headers.request.add`, Envoy's APPEND): after the lines
   * forwarded, the client's lines of the same name kept; never Host or a name the proxy owns.
   */
  readonly addHeaders?: readonly (readonly [string, string])[];
  /** No response head within this time: 504. */
  readonly timeoutMs?: number;
  /** Speak TLS to the upstream (mTLS to another sidecar, or a DestinationRule's TLS); absent: plaintext. */
  readonly tls?: UpstreamTls;
  /**
   * Traffic management: the request goes to one of this cluster's endpoints, chosen per attempt,
   * retried and timed out as its route says (`address`/`port` are then the original destination,
   * for the log). Absent: to `address`/`port` as they are.
   */
  readonly cluster?: ClusterTarget;
  /** Response header lines to add (a consistent hash's generated cookie: Set-Cookie; a route's `headers.response`); values are text, sent as UTF-8. */
  readonly addResponseHeaders?: readonly (readonly [string, string])[];
  /** Lower-case names of response headers not to pass on (a route's `headers.response` remove, and set: removed, then added). */
  readonly removeResponseHeaders?: readonly string[];
  /** Copies of this request to send, fire and forget (a route's mirrors, already drawn for this request). */
  readonly mirrors?: readonly MirrorTarget[];
}

/** Where one mirrored copy goes: a cluster's endpoints (balanced, within its limits), else `address:port` as it is. */
export interface MirrorTarget {
  readonly cluster?: ClusterTarget | undefined;
  readonly address: string;
  readonly port: number;
  /** TLS to `address:port` when there is no cluster (a cluster's endpoints use its tlsFor). */
  readonly tls?: UpstreamTls | undefined;
  /** The copy is given up after this long (the route's timeout; absent: MIRROR_TIMEOUT_MS). */
  readonly timeoutMs?: number | undefined;
  /** The cluster's name, or host:port, for the logs. */
  readonly name: string;
}

/** A request's cluster and its route's traffic settings (src/proxy/attempts.ts carries them out). */
export interface ClusterTarget {
  readonly cluster: ClusterRuntime;
  /** The route's retry policy (Istio's default when the route says none). */
  readonly retry: RetrySpec;
  /** The request's consistent-hash value, when the cluster balances by one. */
  readonly hash?: number | undefined;
  /**
   * How an endpoint is reached: TLS settings, plaintext (undefined), or a 503 when TLS is required
   * and cannot be had. The cluster's TLS, planned by its service port (not the endpoint's), auto mTLS
   * by the endpoint's labels.
   */
  tlsFor(endpoint: EndpointSpec): UpstreamTls | LocalReply | undefined;
}

/** Answer locally (401, 403, 404, a redirect...) without going upstream. */
export interface LocalReply {
  readonly kind: 'reply';
  readonly status: number;
  readonly body: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** A gRPC call's answer: this grpc-status (absent: the one gRPC maps `status` to). */
  readonly grpcStatus?: number;
  /** For the access log: Envoy's response flag for this answer, and its RESPONSE_CODE_DETAILS. */
  readonly flag?: ResponseFlagName;
  readonly details?: string;
}

export type Verdict = ForwardTarget | LocalReply;

/** A connection the proxy carries as opaque bytes (not HTTP it parses), as policy sees it. */
export interface ConnectionFacts {
  /** The peer's address. */
  readonly source: string | undefined;
  /** The peer's identity, when it came over mutual TLS. */
  readonly peer?: PeerIdentity | undefined;
  /** Where the connection was going. */
  readonly destination: Endpoint;
  /** What its first bytes looked like: `tcp` (unknown), `tls`, `h2` (HTTP/2 prior knowledge), `connect` (a CONNECT tunnel). */
  readonly kind: 'tcp' | 'tls' | 'h2' | 'connect';
  /** The server name of the client's TLS ClientHello (mutual TLS terminated here, or TLS carried as bytes); absent otherwise. */
  readonly sni?: string | undefined;
  /**
   * True when the client's first bytes were read for a ClientHello before routing (AWAIT_SERVER_NAME):
   * `sni` is then all there is to know (absent: no TLS, or no server name).
   */
  readonly helloRead?: boolean | undefined;
}

/**
 * connectionCluster's answer when the destination's routes go by the server name (VirtualService
 * `tls` routes): nothing is opened, the ClientHello is read, and the question asked again with it.
 */
export const AWAIT_SERVER_NAME: { readonly kind: 'await-server-name' } = Object.freeze({ kind: 'await-server-name' });

export interface ConnectionVerdict {
  readonly allowed: boolean;
  /** For the logs and the decision record: which policy decided, or why none did. */
  readonly reason: string;
  /** For the access log (CONNECTION_TERMINATION_DETAILS) of a refused one: `rbac_access_denied_matched_policy[...]`. */
  readonly details?: string;
}

/**
 * Where requests go: policy and routing plug in here. Synchronous when it can (the hot path).
 * `req` is the request as it will be forwarded: method, `url` (normalized path and query),
 * `headers` (Host = the authority, hop-by-hop lines out), `socket` for the peer's address.
 */
export interface RequestDecider {
  decide(req: IncomingMessage, dst: Endpoint | undefined): Verdict | Promise<Verdict>;
  /**
   * Once per request, when its response is complete or abandoned (status undefined: no answer sent).
   * Answers what was decided, for the access log (undefined: nothing beyond the verdict).
   * `startedAt`: when the request began, in performance.now() ms of this thread (a record's time
   * comes from it: a clock read per request costs ~50 ns).
   */
  completed?(req: IncomingMessage, verdict: Verdict | undefined, status: number | undefined, durationMs: number,
    startedAt?: number): DecisionNote | undefined | void;
  /**
   * Whether a connection carried as opaque bytes may pass (absent: every one may). Pure (nothing
   * counted): asked at accept, before the proxy opens anything upstream for the connection, which
   * may still turn out to be HTTP. A refused one is closed before a byte reaches the app.
   */
  admitConnection?(facts: ConnectionFacts): ConnectionVerdict;
  /** Once per connection carried (or refused) as opaque bytes: for the counts and the logs; answers what the access log shows of it. */
  connectionDecided?(facts: ConnectionFacts, verdict: ConnectionVerdict): DecisionNote | undefined | void;
  /** Whether admitConnection would refuse some connection now (no policy: the check is skipped). */
  readonly policesConnections?: boolean;
  /**
   * Whether admitConnection reads `sni` (a policy names connection.sni): TLS carried as bytes is then
   * judged once its whole ClientHello has come, with the server name it asks for.
   */
  readonly readsSni?: boolean;
  /**
   * How a connection carried as opaque bytes reaches its destination: TLS (mTLS to a sidecar, a
   * DestinationRule's TLS), plaintext (undefined), or not at all (a LocalReply: mTLS is required and
   * cannot be had; the connection is reset and the reason logged). Absent: plaintext.
   */
  connectionUpstream?(facts: ConnectionFacts): UpstreamTls | LocalReply | undefined;
  /**
   * Traffic management: the cluster a connection carried as opaque bytes goes to (an endpoint is
   * chosen per connection; its tlsFor gives TCP's TLS). Undefined or absent: the original destination.
   * A LocalReply: none (its flag, NR or NC, and body say why; the connection is closed).
   * AWAIT_SERVER_NAME: ask again once the ClientHello is read (`helloRead`).
   */
  connectionCluster?(facts: ConnectionFacts): ClusterTarget | LocalReply | typeof AWAIT_SERVER_NAME | undefined;
  /**
   * How a connection to `destination` is carried, by the protocol its ServiceEntry port declares
   * (asked once per connection, before a byte is read): `tcp` — relayed from the first byte, never
   * parsed; `http` — HTTP/1.x or HTTP/2, and anything else passed through to the original destination
   * as TCP (Istio's fall-through filter chain). Undefined or absent: sniffed from the first bytes.
   */
  connectionProtocol?(destination: Endpoint): 'tcp' | 'http' | undefined;
}

/** A captured connection whose original destination could not be read (Envoy's original-dst cluster has no host: UH). */
export const NO_DESTINATION: LocalReply = {
  kind: 'reply', status: 503, body: 'upstream connect error or disconnect/reset before headers. reset reason: no original destination\n',
  flag: 'UH', details: 'no_healthy_upstream',
};

/**
 * Istio's BlackHoleCluster (outboundTrafficPolicy REGISTRY_ONLY): where a request or connection to a
 * destination no service covers goes. A request gets 502 NR (Istio's catch-all route answers 502);
 * a connection is closed without an upstream (its refusal reason starts with BLACK_HOLE_CLUSTER).
 */
export const BLACK_HOLE_CLUSTER = 'BlackHoleCluster';
export const BLACK_HOLE_REPLY: LocalReply = { kind: 'reply', status: 502, body: '', flag: 'NR', details: 'route_not_found' };
export const BLACK_HOLE_CONNECTION: LocalReply = {
  kind: 'reply', status: 502, body: `${BLACK_HOLE_CLUSTER}: no service covers this destination (outboundTrafficPolicy REGISTRY_ONLY)`,
  flag: 'UH', details: BLACK_HOLE_CLUSTER,
};

/** The sidecar's default: every request to the connection's original destination. */
export const ORIGINAL_DESTINATION: RequestDecider = {
  decide: (_req, dst) => (dst ? { kind: 'forward', address: dst.address, port: dst.port } : NO_DESTINATION),
};
