// What an external authorizer is asked and what it may answer, as plain data (pure). The HTTP and
// gRPC clients (http-client.ts, grpc-client.ts) turn a CheckInput into their wire form and their
// wire answer into a CheckAnswer; apply.ts turns an answer into the request's edits or a reply.

/** The request as the authorizer sees it: after the JWT filter's edits (Istio runs ext_authz after jwt_authn). */
export interface CheckInput {
  readonly method: string;
  /** The request target (path and query), as forwarded. */
  readonly path: string;
  /** The authority (Host), as sent. */
  readonly host: string;
  readonly scheme: 'http' | 'https';
  /** `HTTP/1.0`, `HTTP/1.1` or `HTTP/2`. */
  readonly protocol: string;
  /** Lower-case names, every line of each. */
  readonly headers: ReadonlyMap<string, readonly string[]>;
  readonly source: CheckPeer;
  readonly destination: CheckPeer;
  /** The request body held for the check (`includeRequestBodyInCheck`); absent: none is sent. */
  readonly body?: CheckBody;
}

export interface CheckBody {
  /** The body, or its first `maxRequestBytes`. */
  readonly bytes: Buffer;
  /** Only the first bytes: the body was longer (allowPartialMessage). */
  readonly partial: boolean;
}

/** Envoy's request header telling an authorizer whether the body it got is cut short (`true`/`false`). */
export const PARTIAL_BODY_HEADER = 'x-envoy-auth-partial-body';

export interface CheckPeer {
  readonly address: string;
  readonly port: number;
  /** The mTLS peer's URI SAN (`spiffe://...`); absent without one. */
  readonly principal?: string;
}

/** One header edit the authorizer asks for on an allowed request. */
export interface UpstreamHeaderEdit {
  /** Lower-case. */
  readonly name: string;
  readonly value: string;
  /** `set` replaces every line; `append` adds a line; `if-absent` sets only when the request has none; `if-present` replaces only existing lines. */
  readonly action: 'set' | 'append' | 'if-absent' | 'if-present';
}

export type CheckAnswer =
  | {
    readonly kind: 'allow';
    readonly upstream: readonly UpstreamHeaderEdit[];
    /** Lower-case names to remove from the request. */
    readonly remove: readonly string[];
    /** Lines added to the response to the client. */
    readonly downstream: readonly (readonly [string, string])[];
  }
  | { readonly kind: 'deny'; readonly status: number; readonly body: string; readonly headers: readonly (readonly [string, string])[] }
  /** No verdict: no connection, time-out, a malformed answer, a 5xx from an HTTP authorizer. */
  | { readonly kind: 'error'; readonly reason: string };

/** Asks one authorizer; never rejects (a failure is an `error` answer). */
export interface Authorizer {
  check(input: CheckInput, signal: AbortSignal): Promise<CheckAnswer>;
  close(): void;
}
