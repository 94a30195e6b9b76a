// The TLS parameters of a Gateway server (`minProtocolVersion`, `maxProtocolVersion`, `cipherSuites`)
// in Istio's words, and what they become for Node's TLS (OpenSSL 3): one home for the names, the
// defaults and what this agent cannot do, read by the validator (what is rejected) and the listener
// plan (what is configured). Pure. The claims about OpenSSL are checked against the running Node by
// test/config/resources/tls-parameters.test.ts, so a Node with another OpenSSL fails there first.

export type TlsProtocolVersion = 'TLS_AUTO' | 'TLSV1_0' | 'TLSV1_1' | 'TLSV1_2' | 'TLSV1_3';
export const TLS_PROTOCOL_VERSIONS: readonly TlsProtocolVersion[] = ['TLS_AUTO', 'TLSV1_0', 'TLSV1_1', 'TLSV1_2', 'TLSV1_3'];

/** The versions this agent negotiates, as Node names them (tls.SecureVersion). */
export type NodeTlsVersion = 'TLSv1.2' | 'TLSv1.3';

/**
 * TLS 1.0 and 1.1 sign the handshake with SHA-1, which OpenSSL 3 refuses at its default security
 * level: a server asking for them would fail every such handshake ("no suitable signature
 * algorithm"). Lowering the level for one server would weaken it for every client of that server,
 * so a Gateway naming them is rejected instead.
 */
export const UNAVAILABLE_VERSIONS: ReadonlySet<TlsProtocolVersion> = new Set(['TLSV1_0', 'TLSV1_1']);

const NODE_VERSION: Readonly<Record<'TLSV1_2' | 'TLSV1_3', NodeTlsVersion>> = { TLSV1_2: 'TLSv1.2', TLSV1_3: 'TLSv1.3' };
const RANK: Readonly<Record<TlsProtocolVersion, number>> = { TLS_AUTO: 0, TLSV1_0: 10, TLSV1_1: 11, TLSV1_2: 12, TLSV1_3: 13 };

/** `TLS_AUTO` as a minimum: TLS 1.2 (Istio's gateway default). */
export const DEFAULT_MIN_VERSION: NodeTlsVersion = 'TLSv1.2';
/** `TLS_AUTO` as a maximum: TLS 1.3 (Envoy's server default). */
export const DEFAULT_MAX_VERSION: NodeTlsVersion = 'TLSv1.3';

/**
 * The TLS 1.0–1.2 cipher suites Istio's `ServerTLSSettings.cipherSuites` accepts (BoringSSL's names,
 * which are OpenSSL's too).
 */
export const ISTIO_CIPHER_SUITES: readonly string[] = [
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
  'ECDHE-ECDSA-AES128-SHA', 'ECDHE-RSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-RSA-AES256-SHA',
  'AES128-GCM-SHA256', 'AES256-GCM-SHA384', 'AES128-SHA', 'AES256-SHA', 'DES-CBC3-SHA',
];

/** Of those, the ones this agent's OpenSSL does not offer (3DES is not in OpenSSL 3's default set). */
export const UNAVAILABLE_CIPHER_SUITES: ReadonlySet<string> = new Set(['DES-CBC3-SHA']);

/**
 * Without `cipherSuites`: Envoy's default server list less its four suites without forward secrecy
 * (RSA key exchange: AES128-GCM-SHA256, AES128-SHA, AES256-GCM-SHA384, AES256-SHA), in Envoy's
 * order. Envoy's equal-preference groups ([AES128-GCM|CHACHA20]) do not exist in OpenSSL; the
 * client's order decides among these, as OpenSSL servers do by default.
 */
export const DEFAULT_CIPHER_SUITES: readonly string[] = [
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-RSA-CHACHA20-POLY1305', 'ECDHE-ECDSA-AES128-SHA', 'ECDHE-RSA-AES128-SHA',
  'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-RSA-AES256-SHA',
];

/**
 * TLS 1.3 suites are not configurable, as in Envoy (BoringSSL always offers these three). Node
 * reads TLS 1.3 suites from the same cipher string: they are always appended, since a string
 * without any would turn TLS 1.3 off.
 */
export const TLS13_CIPHER_SUITES: readonly string[] = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];

/** The server's TLS parameters as the validator leaves them. */
export interface TlsParameters {
  readonly minProtocolVersion?: TlsProtocolVersion;
  readonly maxProtocolVersion?: TlsProtocolVersion;
  /** Empty or absent: DEFAULT_CIPHER_SUITES. */
  readonly cipherSuites?: readonly string[];
}

/** What a server's TLS context is made with (tls.createSecureContext options). */
export interface NodeTlsSettings {
  readonly minVersion: NodeTlsVersion;
  readonly maxVersion: NodeTlsVersion;
  /** TLS 1.2 suites, then the TLS 1.3 ones, `:`-separated (OpenSSL's cipher string). */
  readonly ciphers: string;
}

function nodeVersion(v: TlsProtocolVersion | undefined, auto: NodeTlsVersion): NodeTlsVersion {
  return v === 'TLSV1_2' || v === 'TLSV1_3' ? NODE_VERSION[v] : auto;
}

/** The context settings for validated parameters (the validator has refused what cannot be done). */
export function nodeTlsSettings(p: TlsParameters): NodeTlsSettings {
  const suites = p.cipherSuites && p.cipherSuites.length > 0 ? [...new Set(p.cipherSuites)] : DEFAULT_CIPHER_SUITES;
  return {
    minVersion: nodeVersion(p.minProtocolVersion, DEFAULT_MIN_VERSION),
    maxVersion: nodeVersion(p.maxProtocolVersion, DEFAULT_MAX_VERSION),
    ciphers: [...suites, ...TLS13_CIPHER_SUITES].join(':'),
  };
}

/** Why a version cannot be a server's bound, or undefined when it can. */
export function versionProblem(v: TlsProtocolVersion): string | undefined {
  if (!UNAVAILABLE_VERSIONS.has(v)) return undefined;
  return `${v} cannot be negotiated by this agent's OpenSSL at its security level (TLS 1.0 and 1.1 sign the handshake with SHA-1); `
    + 'use TLSV1_2, TLSV1_3 or TLS_AUTO';
}

/** Why `max` cannot go with `min` (max below min), or undefined. TLS_AUTO is 1.2 as a minimum, 1.3 as a maximum. */
export function rangeProblem(min: TlsProtocolVersion | undefined, max: TlsProtocolVersion | undefined): string | undefined {
  if (max === undefined || max === 'TLS_AUTO') return undefined;
  const low = min === undefined || min === 'TLS_AUTO' ? RANK.TLSV1_2 : RANK[min];
  if (RANK[max] >= low) return undefined;
  return `${max} is below minProtocolVersion ${min === undefined || min === 'TLS_AUTO' ? 'TLS_AUTO (TLS 1.2)' : min}`;
}

/** Why a `cipherSuites` entry cannot be honoured, or undefined. */
export function cipherProblem(name: string): string | undefined {
  if (TLS13_CIPHER_SUITES.includes(name)) {
    return `${JSON.stringify(name)} is a TLS 1.3 suite; TLS 1.3 suites are not configurable (as in Envoy): TLS 1.3 always offers `
      + `${TLS13_CIPHER_SUITES.join(', ')}. cipherSuites lists TLS 1.2 suites only`;
  }
  if (UNAVAILABLE_CIPHER_SUITES.has(name)) return `${JSON.stringify(name)} is not offered by this agent's OpenSSL`;
  if (!ISTIO_CIPHER_SUITES.includes(name)) {
    return `${JSON.stringify(name)} is not a cipher suite this gateway accepts; accepted: `
      + ISTIO_CIPHER_SUITES.filter((c) => !UNAVAILABLE_CIPHER_SUITES.has(c)).join(', ');
  }
  return undefined;
}

/** A setting that is valid but has no effect, for the operator's log; undefined when none. */
export function parametersWarning(p: TlsParameters): string | undefined {
  if (p.minProtocolVersion === 'TLSV1_3' && p.cipherSuites && p.cipherSuites.length > 0) {
    return 'cipherSuites have no effect with minProtocolVersion TLSV1_3 (they apply to TLS 1.2; TLS 1.3 suites are fixed)';
  }
  return undefined;
}
