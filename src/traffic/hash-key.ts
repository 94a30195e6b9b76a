// What a consistent hash is computed from, per request (Istio's `consistentHash` keys as Envoy's
// hash policies read them), and the cookie Envoy sets when a cookie key has a ttl and the request
// carries no such cookie. Pure: the engine hands in getters over the request it already parsed.
import { hash53, hash64Hex } from './hash.js';
import type { HashKey } from './spec.js';

/** What hashKeyOf reads from a request; each getter returns undefined when the request has no such value. */
export interface HashRequestFacts {
  /** The header's value (name lower-cased; several values joined with `,` by the engine). */
  header(name: string): string | undefined;
  /** The value of the first cookie of this name in the Cookie headers, quotes removed. */
  cookie(name: string): string | undefined;
  /** The value of the first query parameter of this name, percent-decoded. */
  queryParameter(name: string): string | undefined;
  /** The downstream peer's address (the original client: the engine resolves X-Forwarded-For as it trusts it). */
  readonly sourceIp: string | undefined;
  /**
   * Envoy's seed for a generated cookie: the downstream connection's remote and local addresses
   * (`10.0.0.7:51000` + `10.0.0.2:80`), so that the requests of one connection that race before
   * the first answer all get the same cookie.
   */
  readonly connection: string;
}

/** A cookie the engine must set on the response (Set-Cookie), Envoy's generated hash cookie. */
export interface GeneratedCookie {
  readonly name: string;
  readonly value: string;
  /** Empty: no Path attribute. */
  readonly path: string;
  /** undefined: a session cookie (ttl 0), no Max-Age. */
  readonly maxAgeSeconds: number | undefined;
  /** The whole Set-Cookie value as Envoy writes it: `name="value"; Max-Age=N; Path=/p; HttpOnly`. */
  readonly header: string;
}

// Why: the generated value depends on the connection only, so a retry or a racing request of the
// same connection hashes to the same endpoint, and the client's next request (cookie present)
// hashes the same value again.
function generatedValue(facts: HashRequestFacts): string {
  return hash64Hex(facts.connection);
}

/**
 * The text the hash is computed from, or undefined when the request has none (the balancer then
 * picks at random, as Envoy does with no hash). For a cookie key with a ttl and no such cookie in
 * the request, the value of the cookie about to be generated (cookieToGenerate gives the header).
 */
export function hashKeyOf(key: HashKey, facts: HashRequestFacts): string | undefined {
  switch (key.kind) {
    case 'header': return facts.header(key.name);
    case 'sourceIp': return facts.sourceIp;
    case 'queryParameter': return facts.queryParameter(key.name);
    case 'cookie': {
      const value = facts.cookie(key.name);
      if (value !== undefined || key.ttlMs === undefined) return value;
      return generatedValue(facts);
    }
  }
}

/** The 53-bit hash the balancer takes (ctx.hash), or undefined with no key. */
export function requestHash(key: HashKey, facts: HashRequestFacts): number | undefined {
  const text = hashKeyOf(key, facts);
  return text === undefined ? undefined : hash53(text);
}

/**
 * The cookie to set on the response, when the key is a cookie with a ttl and the request had no
 * such cookie (Envoy generates it then; with no ttl it never does). Undefined otherwise.
 */
export function cookieToGenerate(key: HashKey, facts: HashRequestFacts): GeneratedCookie | undefined {
  if (key.kind !== 'cookie' || key.ttlMs === undefined || facts.cookie(key.name) !== undefined) return undefined;
  const value = generatedValue(facts);
  // Envoy's max-age is whole seconds (a Duration truncated); 0 means a session cookie.
  const seconds = Math.floor(key.ttlMs / 1000);
  const maxAgeSeconds = seconds > 0 ? seconds : undefined;
  const path = key.path ?? '';
  let header = `${key.name}="${value}"`;
  if (maxAgeSeconds !== undefined) header += `; Max-Age=${maxAgeSeconds}`;
  if (path !== '') header += `; Path=${path}`;
  header += '; HttpOnly';
  return { name: key.name, value, path, maxAgeSeconds, header };
}
