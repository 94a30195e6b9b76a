// A parsed JSON Web Key Set and the choice of keys for a token (pure, apart from jose's key import).
// Selection follows Envoy's jwt_authn: a key whose `kid` differs from the token's is skipped (a key
// without `kid` stays a candidate), then the key must fit the algorithm (family, curve, its own
// `alg` if it states one); every remaining key is tried in turn.
import type { CryptoKey, JWK } from 'jose';
import { jose } from './jose.js';
import type { Failure } from './result.js';

/** The key type (and curve) each accepted algorithm needs. */
const ALGORITHMS: Readonly<Record<string, { readonly kty: string; readonly crv?: string }>> = {
  RS256: { kty: 'RSA' }, RS384: { kty: 'RSA' }, RS512: { kty: 'RSA' },
  PS256: { kty: 'RSA' }, PS384: { kty: 'RSA' }, PS512: { kty: 'RSA' },
  ES256: { kty: 'EC', crv: 'P-256' }, ES384: { kty: 'EC', crv: 'P-384' }, ES512: { kty: 'EC', crv: 'P-521' },
  EdDSA: { kty: 'OKP', crv: 'Ed25519' }, Ed25519: { kty: 'OKP', crv: 'Ed25519' },
  HS256: { kty: 'oct' }, HS384: { kty: 'oct' }, HS512: { kty: 'oct' },
};

export const SUPPORTED_ALGORITHMS: readonly string[] = Object.keys(ALGORITHMS);

export function isSupportedAlgorithm(alg: string): boolean {
  return Object.hasOwn(ALGORITHMS, alg);
}

export type VerificationKey = CryptoKey | Uint8Array;

/** One usable key: only its public members are kept (a private `d` in a JWKS is never imported). */
export interface KeyEntry {
  readonly kid?: string;
  readonly kty: string;
  readonly crv?: string;
  readonly alg?: string;
  readonly jwk: Readonly<JWK>;
  /** Imported keys by algorithm, imported once. */
  readonly imported: Map<string, Promise<VerificationKey>>;
}

export type KeySetParse =
  | { readonly ok: true; readonly set: KeySet; /** one line per key left out, and why */ readonly skipped: readonly string[] }
  | { readonly ok: false; readonly message: string };

export type KeySelection = { readonly ok: true; readonly keys: readonly KeyEntry[] } | ({ readonly ok: false } & Failure);

const PUBLIC_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  RSA: ['n', 'e'], EC: ['crv', 'x', 'y'], OKP: ['crv', 'x'], oct: ['k'],
};

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function describeKey(i: number, kid: string | undefined): string {
  return kid === undefined ? `key ${i}` : `key ${i} (kid ${JSON.stringify(kid)})`;
}

function parseKey(raw: unknown, i: number): KeyEntry | string {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return `key ${i}: not an object`;
  const o = raw as Record<string, unknown>;
  const kid = str(o.kid);
  const kty = str(o.kty);
  const members = kty === undefined ? undefined : PUBLIC_MEMBERS[kty];
  if (members === undefined) return `${describeKey(i, kid)}: kty ${JSON.stringify(o.kty)} is not one of RSA, EC, OKP, oct`;
  // An encryption key (`use: enc`, or key_ops without verify) is not for signatures.
  if (o.use !== undefined && o.use !== 'sig') return `${describeKey(i, kid)}: use ${JSON.stringify(o.use)} is not "sig"`;
  if (Array.isArray(o.key_ops) && !o.key_ops.includes('verify')) return `${describeKey(i, kid)}: key_ops does not include "verify"`;
  const jwk: Record<string, string> = { kty: kty! };
  for (const m of members) {
    const v = str(o[m]);
    if (v === undefined) return `${describeKey(i, kid)}: ${kty} key without "${m}"`;
    jwk[m] = v;
  }
  const alg = str(o.alg);
  if (alg !== undefined && !isSupportedAlgorithm(alg)) return `${describeKey(i, kid)}: alg ${JSON.stringify(alg)} is not supported`;
  const crv = str(o.crv);
  return {
    ...(kid === undefined ? {} : { kid }),
    kty: kty!,
    ...(crv === undefined ? {} : { crv }),
    ...(alg === undefined ? {} : { alg }),
    jwk: Object.freeze(jwk as JWK),
    imported: new Map(),
  };
}

export class KeySet {
  private readonly kids: ReadonlySet<string>;

  private constructor(readonly keys: readonly KeyEntry[], /** the text it was parsed from */ readonly source: string) {
    this.kids = new Set(keys.flatMap((k) => (k.kid === undefined ? [] : [k.kid])));
  }

  /** Parses JWKS JSON text; a set without a single usable key is refused (keeping the old one is better). */
  static parse(text: string): KeySetParse {
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (e) {
      return { ok: false, message: `not JSON: ${(e as Error).message}` };
    }
    if (doc === null || typeof doc !== 'object' || !Array.isArray((doc as { keys?: unknown }).keys)) {
      return { ok: false, message: 'not a JSON Web Key Set: expected an object with a "keys" array' };
    }
    const keys: KeyEntry[] = [];
    const skipped: string[] = [];
    (doc as { keys: unknown[] }).keys.forEach((raw, i) => {
      const k = parseKey(raw, i);
      if (typeof k === 'string') skipped.push(k);
      else keys.push(k);
    });
    if (keys.length === 0) {
      return { ok: false, message: skipped.length === 0 ? 'the key set is empty' : `no usable key: ${skipped.join('; ')}` };
    }
    return { ok: true, set: new KeySet(keys, text), skipped };
  }

  /** True when some key carries exactly this `kid` (else a rotation may have happened: refetch). */
  hasKid(kid: string): boolean {
    return this.kids.has(kid);
  }

  /** The keys to try for a token with this `alg` (supported, not `none`) and `kid`. */
  select(alg: string, kid: string | undefined): KeySelection {
    const byKid = kid === undefined ? this.keys : this.keys.filter((k) => k.kid === undefined || k.kid === kid);
    if (byKid.length === 0) {
      return { ok: false, reason: 'unknown_kid', message: `no key with kid ${JSON.stringify(kid)} in the key set (kids: ${[...this.kids].join(', ')})` };
    }
    const need = ALGORITHMS[alg]!;
    const fit = byKid.filter((k) => k.kty === need.kty && (need.crv === undefined || k.crv === need.crv) && (k.alg === undefined || k.alg === alg));
    if (fit.length === 0) {
      const message = kid === undefined
        ? `no key in the key set allows algorithm ${alg}`
        : `the key with kid ${JSON.stringify(kid)} does not allow algorithm ${alg}`;
      return { ok: false, reason: 'unsupported_alg', message };
    }
    return { ok: true, keys: fit };
  }

  /** The key imported for `alg` (cached per key and algorithm). */
  static importFor(entry: KeyEntry, alg: string): Promise<VerificationKey> {
    let key = entry.imported.get(alg);
    if (key === undefined) {
      key = jose().then((j) => j.importJWK(entry.jwk as JWK, alg));
      entry.imported.set(alg, key);
      // A key that fails to import fails the same way every time; keep the rejection cached but handled.
      key.catch(() => undefined);
    }
    return key;
  }
}
