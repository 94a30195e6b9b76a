// One HTTPMatchRequest against one request: every field present must hold. Matchers are prepared
// once per table (case folding for ignoreUriCase); per request only the comparisons run. Pure.
import type { HeaderMatch, HttpMatchRequest, StringMatch } from '../config/resources/types.js';
import { matchClaim, matchString } from '../security/claims.js';
import type { RequestView } from './request.js';

/** A uri matcher with the comparison value already case-folded when the match ignores case. */
export interface UriMatcher {
  readonly match: StringMatch;
  /** Exact and prefix only (Istio ignores ignoreUriCase for regexes). */
  readonly ignoreCase: boolean;
}

export interface CompiledMatch {
  /** Position in the rule's `match` list. */
  readonly index: number;
  readonly name?: string;
  readonly uri?: UriMatcher;
  readonly method?: StringMatch;
  readonly authority?: StringMatch;
  readonly scheme?: StringMatch;
  readonly headers: readonly HeaderMatch[];
  readonly withoutHeaders: readonly HeaderMatch[];
  readonly queryParams: readonly { readonly name: string; readonly match: StringMatch }[];
}

export function compileMatch(m: HttpMatchRequest, index: number): CompiledMatch {
  let uri: UriMatcher | undefined;
  if (m.uri) {
    const ignoreCase = m.ignoreUriCase && (m.uri.kind === 'exact' || m.uri.kind === 'prefix');
    const match: StringMatch = ignoreCase && (m.uri.kind === 'exact' || m.uri.kind === 'prefix')
      ? { kind: m.uri.kind, value: m.uri.value.toLowerCase() }
      : m.uri;
    uri = { match, ignoreCase };
  }
  return {
    index,
    ...(m.name !== undefined ? { name: m.name } : {}),
    ...(uri ? { uri } : {}),
    ...(m.method ? { method: m.method } : {}),
    ...(m.authority ? { authority: m.authority } : {}),
    ...(m.scheme ? { scheme: m.scheme } : {}),
    headers: m.headers,
    withoutHeaders: m.withoutHeaders,
    queryParams: m.queryParams,
  };
}

/** A header (or claim) matcher; a missing header never matches, nor does a claim without a valid JWT. */
export function matchHeader(h: HeaderMatch, view: RequestView): boolean {
  if (h.kind === 'claim') {
    const claims = view.req.claims;
    return claims !== undefined && claims !== null && matchClaim(h.match, claims, h.path);
  }
  const value = view.header(h.name);
  return value !== undefined && matchString(h.match, value);
}

export function matchRequest(m: CompiledMatch, view: RequestView): boolean {
  if (m.uri && !matchString(m.uri.match, m.uri.ignoreCase ? view.lowerPath : view.path)) return false;
  if (m.method && !matchString(m.method, view.req.method)) return false;
  if (m.authority && !matchString(m.authority, view.host)) return false;
  if (m.scheme && !matchString(m.scheme, view.req.scheme)) return false;
  for (const h of m.headers) if (!matchHeader(h, view)) return false;
  for (const h of m.withoutHeaders) if (matchHeader(h, view)) return false;
  for (const q of m.queryParams) {
    const value = view.queryParam(q.name);
    if (value === undefined || !matchString(q.match, value)) return false;
  }
  return true;
}

/** How much of the path a prefix uri match consumed (for rewrite.uri), else undefined. */
export function matchedPrefixLength(m: CompiledMatch | undefined): number | undefined {
  return m?.uri?.match.kind === 'prefix' ? m.uri.match.value.length : undefined;
}
