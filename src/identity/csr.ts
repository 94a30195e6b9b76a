// A fresh key and a PKCS#10 request for the workload's SPIFFE id, as Istio's agent makes them: empty
// subject, the URI SAN as the only (critical) name, RSA or ECDSA as the environment says, the key
// written as Istio writes it (traditional PEM unless PKCS8_KEY). Generated with WebCrypto and
// @peculiar/x509; node:crypto only converts the key's PEM form.
import { createPrivateKey, type webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { AgentError } from '../errors/agent-error.js';

export type KeyAlgorithm =
  | { readonly kind: 'rsa'; readonly bits: number }
  | { readonly kind: 'ecdsa'; readonly curve: 'P256' | 'P384' };

export interface KeyOptions {
  readonly algorithm: KeyAlgorithm;
  /** PKCS#8 (`BEGIN PRIVATE KEY`) instead of `BEGIN RSA PRIVATE KEY` / `BEGIN EC PRIVATE KEY`. */
  readonly pkcs8: boolean;
}

/** The variables that choose the key (a subset of EnvValues). */
export interface KeyEnv {
  readonly ECC_SIGNATURE_ALGORITHM: string;
  readonly ECC_CURVE: string;
  readonly WORKLOAD_RSA_KEY_SIZE: number;
  readonly PKCS8_KEY: boolean;
}

export const DEFAULT_KEY_OPTIONS: KeyOptions = { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: false };

/** Bounds of WORKLOAD_RSA_KEY_SIZE: below 2048 is refused by current TLS stacks, above 8192 takes minutes to generate. */
const RSA_BITS: readonly [number, number] = [2048, 8192];

/** Validates the key variables once; messages name the variable, the value and what is accepted. */
export function keyOptionsFromEnv(env: KeyEnv): KeyOptions {
  const pkcs8 = env.PKCS8_KEY;
  if (env.ECC_SIGNATURE_ALGORITHM === 'ECDSA') {
    const curve = env.ECC_CURVE || 'P256';
    if (curve !== 'P256' && curve !== 'P384') {
      throw new AgentError('ERR_KEY_OPTIONS', `ECC_CURVE=${JSON.stringify(env.ECC_CURVE)} is not supported: use P256 or P384`);
    }
    return { algorithm: { kind: 'ecdsa', curve }, pkcs8 };
  }
  if (env.ECC_SIGNATURE_ALGORITHM !== '') {
    throw new AgentError('ERR_KEY_OPTIONS',
      `ECC_SIGNATURE_ALGORITHM=${JSON.stringify(env.ECC_SIGNATURE_ALGORITHM)} is not supported: use ECDSA, or leave it empty for RSA`);
  }
  const bits = env.WORKLOAD_RSA_KEY_SIZE;
  if (!Number.isInteger(bits) || bits < RSA_BITS[0] || bits > RSA_BITS[1] || bits % 8 !== 0) {
    throw new AgentError('ERR_KEY_OPTIONS',
      `WORKLOAD_RSA_KEY_SIZE=${bits} is not supported: use a multiple of 8 from ${RSA_BITS[0]} to ${RSA_BITS[1]} (2048, 3072, 4096)`);
  }
  return { algorithm: { kind: 'rsa', bits }, pkcs8 };
}

interface WebCryptoParams {
  readonly generate: webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams;
  readonly sign: webcrypto.Algorithm | webcrypto.EcdsaParams;
}

function webCryptoParams(algorithm: KeyAlgorithm): WebCryptoParams {
  if (algorithm.kind === 'rsa') {
    return {
      generate: { name: 'RSASSA-PKCS1-v1_5', modulusLength: algorithm.bits, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' },
      sign: { name: 'RSASSA-PKCS1-v1_5' },
    };
  }
  const p384 = algorithm.curve === 'P384';
  return {
    generate: { name: 'ECDSA', namedCurve: p384 ? 'P-384' : 'P-256' },
    sign: { name: 'ECDSA', hash: p384 ? 'SHA-384' : 'SHA-256' } as webcrypto.EcdsaParams,
  };
}

export interface KeyAndCsr {
  /** PEM `CERTIFICATE REQUEST`. */
  readonly csrPem: string;
  /** PEM of the new private key, in the form KeyOptions.pkcs8 asks for. */
  readonly keyPem: string;
}

/** A new key pair and a CSR whose only name is `spiffeId` as a URI SAN. */
export async function generateKeyAndCsr(spiffeId: string, options: KeyOptions): Promise<KeyAndCsr> {
  const params = webCryptoParams(options.algorithm);
  const keys = await globalThis.crypto.subtle.generateKey(params.generate, true, ['sign', 'verify']) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    keys,
    signingAlgorithm: params.sign,
    // An empty subject makes the SAN the certificate's only name; RFC 5280 then wants it critical.
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: spiffeId }], true)],
  });
  const der = Buffer.from(await globalThis.crypto.subtle.exportKey('pkcs8', keys.privateKey));
  const key = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  const type = options.pkcs8 ? 'pkcs8' : options.algorithm.kind === 'rsa' ? 'pkcs1' : 'sec1';
  return { csrPem: csr.toString('pem'), keyPem: key.export({ type, format: 'pem' }) as string };
}
