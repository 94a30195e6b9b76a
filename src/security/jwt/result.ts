// What authenticating one request yields. Three outcomes, as Istio's RequestAuthentication has
// them: no token (passes; routing and policy decide), a valid token (its claims feed routing and
// policy), a token present but not verifiable (the caller answers 401).
import type { JwtRule } from '../../config/resources/types.js';

/** Where a token was read from. */
export type TokenLocation =
  /** `prefix` is stripped from the value; `ignoreCase` for the default `Authorization: Bearer`. */
  | { readonly kind: 'header'; /** lower-cased */ readonly name: string; readonly prefix: string; readonly ignoreCase: boolean }
  | { readonly kind: 'param'; readonly name: string }
  | { readonly kind: 'cookie'; readonly name: string };

/** Why a present token was refused: a closed set, for metrics, logs and tests to branch on. */
export type AuthnReason =
  | 'malformed'        // not three base64url parts, JSON that does not parse, claims of the wrong type
  | 'unsupported_alg'  // `alg: none`, an unknown algorithm, or one the selected key does not allow
  | 'unknown_issuer'   // no rule for the token's `iss` (or none that reads the place it was found)
  | 'bad_signature'
  | 'expired'          // `exp` is not after now
  | 'not_yet_valid'    // `nbf` is after now
  | 'bad_audience'     // the rule lists audiences and the token's `aud` has none of them
  | 'unknown_kid'      // no key matches the token's `kid`, even after refetching the key set
  | 'no_keys';         // the key set was never fetched (or the inline one does not parse)

export interface AbsentToken {
  readonly outcome: 'absent';
}

export interface ValidToken {
  readonly outcome: 'valid';
  readonly issuer: string;
  /** `sub`, or '' when the token has none. */
  readonly subject: string;
  /** Istio's request principal: `iss/sub`. */
  readonly principal: string;
  /** `aud` as a list (a string `aud` is a list of one; none is empty). */
  readonly audiences: readonly string[];
  /** `azp`, when present. */
  readonly presenter?: string;
  /** The payload, deep-frozen (cached results are shared between requests). */
  readonly claims: Readonly<Record<string, unknown>>;
  /** The rule that verified it. */
  readonly rule: JwtRule;
  /** Where this token was found. */
  readonly location: TokenLocation;
  /**
   * The other locations that carried a token in this request (each verified, see jwt/README.md);
   * absent when only `location` did. Removed upstream with it unless the rule forwards the token.
   */
  readonly alsoFoundAt?: readonly TokenLocation[];
  /** The token as presented (never log it). */
  readonly token: string;
}

export interface InvalidToken {
  readonly outcome: 'invalid';
  readonly reason: AuthnReason;
  /** For the operator and the 401 body: what is wrong, naming the value. */
  readonly message: string;
  readonly location: TokenLocation;
  /** The token's `iss`, when it could be read. */
  readonly issuer?: string;
}

export type AuthnResult = AbsentToken | ValidToken | InvalidToken;

/** A check's failure, before it is tied to a location. */
export interface Failure {
  readonly reason: AuthnReason;
  readonly message: string;
}

export const ABSENT: AbsentToken = Object.freeze({ outcome: 'absent' });

export function invalid(f: Failure, location: TokenLocation, issuer?: string): InvalidToken {
  return issuer === undefined
    ? { outcome: 'invalid', reason: f.reason, message: f.message, location }
    : { outcome: 'invalid', reason: f.reason, message: f.message, location, issuer };
}

/** A human description of a location, for messages. */
export function describeLocation(l: TokenLocation): string {
  switch (l.kind) {
    case 'header': return l.prefix === '' ? `header ${l.name}` : `header ${l.name} (prefix ${JSON.stringify(l.prefix)})`;
    case 'param': return `query parameter ${l.name}`;
    case 'cookie': return `cookie ${l.name}`;
  }
}
