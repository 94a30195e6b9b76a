// Checking one token. The cheap checks run first and synchronously, in Envoy's order (shape and
// algorithm, then issuer, time and audience), so that a token refused for them costs no signature
// verification and no promise; only the signature (WebCrypto, through jose) is asynchronous.
import { jose } from './jose.js';
import { isSupportedAlgorithm, KeySet, SUPPORTED_ALGORITHMS, type KeyEntry } from './key-set.js';
import type { Failure } from './result.js';

/**
 * Allowed clock skew: none. Envoy's jwt_authn allows 60 s by default; here a token is expired from
 * the second its `exp` names, because an operator (or a test) who makes a token expire a second ago
 * expects a 401 now, not a minute later. Clocks of the issuer and this agent are assumed in sync.
 */
export const CLOCK_SKEW_SECONDS = 0;

/** A token split and parsed, before its signature is checked. */
export interface DecodedToken {
  readonly alg: string;
  readonly kid?: string;
  readonly payload: Record<string, unknown>;
  readonly iss?: string;
  readonly sub?: string;
  readonly audiences: readonly string[];
  readonly azp?: string;
  /** `exp` and `nbf` in seconds since the epoch, when present. */
  readonly exp?: number;
  readonly nbf?: number;
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

function malformed(what: string): Failure {
  return { reason: 'malformed', message: `JWT is malformed: ${what}` };
}

type Parsed = { readonly ok: true; readonly value: Record<string, unknown> } | { readonly ok: false; readonly failure: Failure };

function jsonPart(part: string, name: string): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, failure: malformed(`the ${name} is not base64url-encoded JSON`) };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { ok: false, failure: malformed(`the ${name} is not a JSON object`) };
  return { ok: true, value: value as Record<string, unknown> };
}

function optionalString(payload: Record<string, unknown>, claim: string): string | undefined | Failure {
  const v = payload[claim];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : malformed(`claim "${claim}" is not a string`);
}

function optionalNumber(payload: Record<string, unknown>, claim: string): number | undefined | Failure {
  const v = payload[claim];
  if (v === undefined) return undefined;
  return typeof v === 'number' && Number.isFinite(v) ? v : malformed(`claim "${claim}" is not a number`);
}

/** Splits and parses a compact JWS; checks the shape, the algorithm and the types of the registered claims. */
export function decodeToken(token: string): DecodedToken | Failure {
  const dot1 = token.indexOf('.');
  const dot2 = dot1 < 0 ? -1 : token.indexOf('.', dot1 + 1);
  if (dot2 < 0 || token.indexOf('.', dot2 + 1) >= 0) return malformed('expected three dot-separated parts');
  const headerPart = token.slice(0, dot1);
  const payloadPart = token.slice(dot1 + 1, dot2);
  if (headerPart === '' || payloadPart === '') return malformed('empty header or payload');
  if (!BASE64URL.test(headerPart) || !BASE64URL.test(payloadPart) || !BASE64URL.test(token.slice(dot2 + 1))) {
    return malformed('a part is not base64url');
  }
  const parsedHeader = jsonPart(headerPart, 'header');
  if (!parsedHeader.ok) return parsedHeader.failure;
  const header = parsedHeader.value;
  const alg = header.alg;
  if (typeof alg !== 'string' || alg === '') return malformed('the header has no "alg"');
  if (alg.toLowerCase() === 'none') return { reason: 'unsupported_alg', message: 'JWT algorithm "none" (unsigned) is not accepted' };
  if (!isSupportedAlgorithm(alg)) {
    return { reason: 'unsupported_alg', message: `JWT algorithm ${JSON.stringify(alg)} is not supported (accepted: ${SUPPORTED_ALGORITHMS.join(', ')})` };
  }
  if (header.kid !== undefined && typeof header.kid !== 'string') return malformed('the header "kid" is not a string');
  const parsedPayload = jsonPart(payloadPart, 'payload');
  if (!parsedPayload.ok) return parsedPayload.failure;
  const payload = parsedPayload.value;

  const iss = optionalString(payload, 'iss');
  const sub = optionalString(payload, 'sub');
  const azp = optionalString(payload, 'azp');
  const exp = optionalNumber(payload, 'exp');
  const nbf = optionalNumber(payload, 'nbf');
  for (const v of [iss, sub, azp, exp, nbf]) if (typeof v === 'object') return v;
  const aud = payload.aud;
  let audiences: readonly string[];
  if (aud === undefined) audiences = [];
  else if (typeof aud === 'string') audiences = [aud];
  else if (Array.isArray(aud) && aud.every((a) => typeof a === 'string')) audiences = aud as string[];
  else return malformed('claim "aud" is neither a string nor a list of strings');

  return {
    alg,
    ...(header.kid === undefined ? {} : { kid: header.kid as string }),
    payload,
    ...(iss === undefined ? {} : { iss: iss as string }),
    ...(sub === undefined ? {} : { sub: sub as string }),
    ...(azp === undefined ? {} : { azp: azp as string }),
    ...(exp === undefined ? {} : { exp: exp as number }),
    ...(nbf === undefined ? {} : { nbf: nbf as number }),
    audiences,
  };
}

/** Narrows the result of `decodeToken`. */
export function isDecoded(v: DecodedToken | Failure): v is DecodedToken {
  return 'payload' in v;
}

function iso(seconds: number): string {
  const d = new Date(seconds * 1000);
  return Number.isNaN(d.getTime()) ? String(seconds) : d.toISOString();
}

/** `exp` and `nbf` against the clock (ms since the epoch), with CLOCK_SKEW_SECONDS. */
export function checkTime(t: DecodedToken, nowMs: number): Failure | undefined {
  const now = nowMs / 1000;
  if (t.exp !== undefined && now >= t.exp + CLOCK_SKEW_SECONDS) {
    return { reason: 'expired', message: `JWT expired at ${iso(t.exp)} (exp ${t.exp})` };
  }
  if (t.nbf !== undefined && now < t.nbf - CLOCK_SKEW_SECONDS) {
    return { reason: 'not_yet_valid', message: `JWT is not valid before ${iso(t.nbf)} (nbf ${t.nbf})` };
  }
  return undefined;
}

/** When the rule lists audiences, the token's `aud` must name one of them. */
export function checkAudience(t: DecodedToken, accepted: readonly string[]): Failure | undefined {
  if (accepted.length === 0 || t.audiences.some((a) => accepted.includes(a))) return undefined;
  const has = t.audiences.length === 0 ? 'has no "aud"' : `audience ${JSON.stringify(t.audiences)} is not`;
  return { reason: 'bad_audience', message: `JWT ${has} among the accepted ${JSON.stringify(accepted)}` };
}

/**
 * Verifies the signature with each candidate key in turn (as Envoy does for several fitting keys).
 * `onVerify` is called once per signature computation (a counter for tests and stats).
 */
export async function verifySignature(token: string, alg: string, keys: readonly KeyEntry[], onVerify?: () => void): Promise<Failure | undefined> {
  let failure: Failure = { reason: 'bad_signature', message: 'JWT signature does not verify' };
  const { compactVerify, errors } = await jose();
  for (const entry of keys) {
    let key;
    try {
      key = await KeySet.importFor(entry, alg);
    } catch (e) {
      failure = { reason: 'unsupported_alg', message: `key ${JSON.stringify(entry.kid ?? '')} cannot verify ${alg}: ${(e as Error).message}` };
      continue;
    }
    try {
      onVerify?.();
      await compactVerify(token, key, { algorithms: [alg] });
      return undefined;
    } catch (e) {
      if (e instanceof errors.JWSSignatureVerificationFailed) continue;
      if (e instanceof errors.JWSInvalid) return malformed((e as Error).message);
      // Too small an RSA key and the like: the key cannot be used for this algorithm.
      failure = { reason: 'unsupported_alg', message: `key ${JSON.stringify(entry.kid ?? '')} cannot verify ${alg}: ${(e as Error).message}` };
    }
  }
  return failure;
}
