// A route's corsPolicy against one request, as Envoy's CORS filter judges it (Istio configures that
// filter from the policy): a request without Origin is not CORS; a preflight (OPTIONS with Origin
// and Access-Control-Request-Method) is answered here with 200 — unless its origin is not allowed
// and unmatched preflights are forwarded (the default); any other request from an allowed origin
// goes on, and its response gets Access-Control-Allow-Origin (and -Credentials, -Expose-Headers).
// A request from an origin not allowed gets no CORS header. Pure: the policy is already compiled
// (lists joined, regexes built) by the validator, so nothing is built here but the answer's lines.
import type { CorsPolicy } from '../config/resources/types.js';
import { matchString } from '../security/claims.js';

/** What a request says that CORS reads (header values as received; undefined: absent). */
export interface CorsRequest {
  readonly method: string;
  readonly origin: string | undefined;
  readonly requestMethod: string | undefined;
  readonly requestHeaders: string | undefined;
}

export type CorsOutcome =
  /** Not a CORS request (no Origin), or nothing to add: the request goes on untouched. */
  | undefined
  /** A preflight answered by the proxy: 200, these headers, no body (Envoy's details `cors_response`). */
  | { readonly kind: 'preflight'; readonly headers: Readonly<Record<string, string>> }
  /** The request goes on; these lines are set on its response. */
  | { readonly kind: 'response'; readonly headers: readonly (readonly [string, string])[] };

/** Envoy's rule: an origin is allowed when a matcher matches it, or matches the literal `*` (a wildcard entry). */
export function originAllowed(policy: CorsPolicy, origin: string): boolean {
  for (const m of policy.allowOrigins) if (matchString(m, '*') || matchString(m, origin)) return true;
  return false;
}

export function applyCors(policy: CorsPolicy, req: CorsRequest): CorsOutcome {
  const origin = req.origin;
  if (origin === undefined || origin === '') return undefined;
  const allowed = originAllowed(policy, origin);
  const preflight = req.method === 'OPTIONS' && req.requestMethod !== undefined && req.requestMethod !== '';
  if (!preflight) {
    if (!allowed) return undefined;
    const headers: [string, string][] = [['access-control-allow-origin', origin]];
    if (policy.allowCredentials === true) headers.push(['access-control-allow-credentials', 'true']);
    if (policy.exposeHeaders !== undefined) headers.push(['access-control-expose-headers', policy.exposeHeaders]);
    return { kind: 'response', headers };
  }
  if (!allowed && policy.unmatchedPreflights === 'FORWARD') return undefined;
  const headers: Record<string, string> = {};
  if (allowed) headers['access-control-allow-origin'] = origin;
  if (policy.allowCredentials === true) headers['access-control-allow-credentials'] = 'true';
  // `*` echoes what the preflight asks for, as Envoy does.
  const methods = policy.allowMethods === '*' ? req.requestMethod : policy.allowMethods;
  if (methods !== undefined && methods !== '') headers['access-control-allow-methods'] = methods;
  const allowHeaders = policy.allowHeaders === '*' ? req.requestHeaders : policy.allowHeaders;
  if (allowHeaders !== undefined && allowHeaders !== '') headers['access-control-allow-headers'] = allowHeaders;
  if (policy.maxAge !== undefined) headers['access-control-max-age'] = policy.maxAge;
  return { kind: 'preflight', headers };
}

/** The response lines CORS sets: a response from upstream loses its own lines of these names first (Envoy sets, not appends). */
export const CORS_RESPONSE_HEADERS: readonly string[] = ['access-control-allow-origin', 'access-control-allow-credentials', 'access-control-expose-headers'];
