// JWT claims as routing and policy read them: the two spellings of a claim key, and a claim's
// values as strings. Istio's rules: `@request.auth.claims.a.b` and `@request.auth.claims[a][b]`
// are the same nested claim; a name containing `.` needs brackets; the prefix is case-insensitive;
// a list claim offers each element; `scope` and `permission` strings are lists of their words.
import type { StringMatch } from '../config/resources/types.js';

export const ROUTE_CLAIM_PREFIX = '@request.auth.claims';
export const POLICY_CLAIM_PREFIX = 'request.auth.claims';

/** Claim names whose space-delimited string value is a list (Envoy's jwt_authn, as Istio sets it). */
const SPACE_DELIMITED = new Set(['scope', 'permission']);

export type ClaimPathResult = { readonly ok: true; readonly path: readonly string[] } | { readonly ok: false; readonly message: string };

/** `[a][b]` → ['a', 'b']; every segment non-empty, nothing between or after the brackets. */
function bracketPath(rest: string): ClaimPathResult {
  const path: string[] = [];
  const segment = /\[([^\][]+)\]/y;
  let at = 0;
  while (at < rest.length) {
    segment.lastIndex = at;
    const m = segment.exec(rest);
    if (!m) return { ok: false, message: `expected [name] at ${JSON.stringify(rest.slice(at))}` };
    path.push(m[1]!);
    at = segment.lastIndex;
  }
  return path.length > 0 ? { ok: true, path } : { ok: false, message: 'no claim name' };
}

/** True for a header-matcher key that names a claim (the prefix compared case-insensitively). */
export function isRouteClaimKey(key: string): boolean {
  return key.length > ROUTE_CLAIM_PREFIX.length
    && key.slice(0, ROUTE_CLAIM_PREFIX.length).toLowerCase() === ROUTE_CLAIM_PREFIX
    && (key[ROUTE_CLAIM_PREFIX.length] === '.' || key[ROUTE_CLAIM_PREFIX.length] === '[');
}

/** Parses `@request.auth.claims.a.b` or `@request.auth.claims[a][b]` (a VirtualService header key). */
export function parseRouteClaimKey(key: string): ClaimPathResult {
  if (!isRouteClaimKey(key)) return { ok: false, message: `expected ${ROUTE_CLAIM_PREFIX}.<claim> or ${ROUTE_CLAIM_PREFIX}[<claim>]` };
  const rest = key.slice(ROUTE_CLAIM_PREFIX.length);
  if (rest.startsWith('[')) return bracketPath(rest);
  const path = rest.slice(1).split('.');
  if (path.some((p) => p === '')) return { ok: false, message: 'empty claim name between dots' };
  if (path.some((p) => p.includes('[') || p.includes(']'))) return { ok: false, message: 'mixes the . and [] forms; use one' };
  return { ok: true, path };
}

/** Parses `request.auth.claims[a][b]` (an AuthorizationPolicy `when` key; brackets only, as Istio). */
export function parsePolicyClaimKey(key: string): ClaimPathResult {
  if (!key.startsWith(`${POLICY_CLAIM_PREFIX}[`)) return { ok: false, message: `expected ${POLICY_CLAIM_PREFIX}[<claim>]` };
  return bracketPath(key.slice(POLICY_CLAIM_PREFIX.length));
}

/** The value at `path` in a claims object, or undefined. */
export function claimAt(claims: unknown, path: readonly string[]): unknown {
  let v = claims;
  for (const p of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
    v = (v as Record<string, unknown>)[p];
  }
  return v;
}

function scalarText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  // Beyond Istio (DESIGN): booleans and numbers match their JSON text.
  if (typeof v === 'boolean' || typeof v === 'number') return JSON.stringify(v);
  return undefined;
}

/**
 * The strings a claim offers to a matcher: a string (or its words, for `scope`/`permission`),
 * each scalar element of a list, a boolean's or number's JSON text. Undefined: absent or an object.
 */
export function claimValues(claims: unknown, path: readonly string[]): readonly string[] | undefined {
  const v = claimAt(claims, path);
  if (v === undefined || v === null) return undefined;
  if (Array.isArray(v)) return v.map(scalarText).filter((s): s is string => s !== undefined);
  const text = scalarText(v);
  if (text === undefined) return undefined;
  if (typeof v === 'string' && path.length === 1 && SPACE_DELIMITED.has(path[0]!)) return text.split(' ').filter((w) => w !== '');
  return [text];
}

/** Istio's StringMatch on one value. */
export function matchString(m: StringMatch, value: string): boolean {
  switch (m.kind) {
    case 'exact': return value === m.value;
    case 'prefix': return value.startsWith(m.value);
    case 'regex': return m.regex.test(value);
    case 'present': return true;
  }
}

/** A matcher against a claim: true when any of the claim's values matches (a list contains it). */
export function matchClaim(m: StringMatch, claims: unknown, path: readonly string[]): boolean {
  const values = claimValues(claims, path);
  if (values === undefined) return false;
  if (m.kind === 'present') return true;
  return values.some((v) => matchString(m, v));
}
