// A fresh key and a PKCS#10 request for the workload's SPIFFE id, as Istio's agent makes them: empty
// subject, the URI SAN as the only (critical) name, RSA or ECDSA as the environment says, the key
// written as Istio writes it (traditional PEM unless PKCS8_KEY). Generated with WebCrypto and
// @peculiar/x509; node:crypto only converts the key's PEM form.
import { createPrivateKey, type webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { KeyAlgorithm, KeyOptions } from './key-options.js';

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
