// COMPLIANCE_POLICY: a restriction laid over every TLS context this agent makes, last, over what the
// configuration asked (Istio's EnforceCompliance / EnforceGoCompliance do the same for Envoy and for
// the agent's gRPC clients). `fips-140-2` is Istio's: TLS 1.2 only (minimum and maximum), the four
// ECDHE suites with AES-GCM, the P-256 curve. The contexts it covers: mesh mTLS (client and server,
// one context per workload certificate), the gateway's TLS servers, a DestinationRule's SIMPLE and
// MUTUAL origination, the CA client's channel and the RequestAuthentication key set fetches. Not
// covered, as in Istio: the HTTPS probes of the application (over the pod's loopback, unverified)
// and the `wait` command's poll of the status port (test/security/compliance-sites.test.ts keeps
// the list: a new TLS context elsewhere fails it).
// The policy only restricts what Node's OpenSSL negotiates; it does not make that OpenSSL a
// validated module (as Istio says: necessary, not sufficient).
import type { SecureVersion } from 'node:tls';

export type CompliancePolicy = '' | 'fips-140-2';

export const FIPS_140_2 = 'fips-140-2';

/** Istio's fipsCiphers, in its order. */
export const FIPS_CIPHER_SUITES: readonly string[] = Object.freeze([
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384',
]);

/** The curve Istio allows (Envoy's FIPS default, and EnforceGoCompliance's CurvePreferences). */
export const FIPS_ECDH_CURVE = 'P-256';

/** The options of a TLS context that a policy restricts (tls.createSecureContext, https.request). */
export interface RestrictedTlsOptions {
  minVersion?: SecureVersion | undefined;
  maxVersion?: SecureVersion | undefined;
  ciphers?: string | undefined;
  ecdhCurve?: string | undefined;
}

/** True for the values COMPLIANCE_POLICY may take (the registry has refused the others). */
export function isCompliancePolicy(value: string): value is CompliancePolicy {
  return value === '' || value === FIPS_140_2;
}

/**
 * `options` as `policy` allows them. No policy: unchanged. `fips-140-2`: TLS 1.2 only; of the
 * suites `options.ciphers` names, the FIPS ones (in its order), all four when it names none or is
 * absent (as Envoy's FIPS build defaults); the P-256 curve only.
 */
export function compliantTls<T extends object>(policy: string, options: T): T & RestrictedTlsOptions {
  if (policy === '') return options;
  if (policy !== FIPS_140_2) throw new Error(`unknown COMPLIANCE_POLICY ${JSON.stringify(policy)}`);
  const asked = ((options as RestrictedTlsOptions).ciphers ?? '').split(':').map((c) => c.trim()).filter((c) => FIPS_CIPHER_SUITES.includes(c));
  return {
    ...options,
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.2',
    ciphers: [...new Set(asked.length > 0 ? asked : FIPS_CIPHER_SUITES)].join(':'),
    ecdhCurve: FIPS_ECDH_CURVE,
  };
}

/**
 * What the policy takes away from settings a resource asked for (a Gateway server's versions and
 * suites), for the operator's log; undefined when nothing asked for is lost.
 */
export function complianceOverride(policy: string, options: RestrictedTlsOptions): string | undefined {
  if (policy !== FIPS_140_2) return undefined;
  const lost: string[] = [];
  if (options.minVersion === 'TLSv1.3') lost.push('TLS 1.3 as the minimum (TLS 1.2 is the only version)');
  const suites = (options.ciphers ?? '').split(':').filter((c) => c !== '' && !c.startsWith('TLS_'));
  const dropped = suites.filter((c) => !FIPS_CIPHER_SUITES.includes(c));
  if (suites.length > 0 && dropped.length === suites.length) lost.push(`every suite asked for (${dropped.join(', ')}): the FIPS suites are used instead`);
  return lost.length > 0 ? `COMPLIANCE_POLICY=${FIPS_140_2} overrides ${lost.join('; ')}` : undefined;
}

/** One line for the start-up log: what the policy restricts. */
export function complianceSummary(policy: string): string | undefined {
  if (policy !== FIPS_140_2) return undefined;
  return `COMPLIANCE_POLICY=${FIPS_140_2}: every TLS context of the agent (mesh mTLS, gateway servers, DestinationRule TLS, `
    + `the CA client, key set fetches) negotiates TLS 1.2 only, with ${FIPS_CIPHER_SUITES.join(', ')} and the ${FIPS_ECDH_CURVE} curve; `
    + 'the HTTPS probes of the application are not restricted (as in Istio)';
}
