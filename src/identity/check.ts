// Turns certificate, key and root text into a checked WorkloadCertificate, or an AgentError that says
// which file holds what problem. Pure over text and a clock (node:crypto parses, nothing is read), so
// the file source, the CA source and the tests share one set of rules.
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { AgentError, type ErrorCode } from '../errors/agent-error.js';
import { SPIFFE_SCHEME, parseSpiffeId } from './spiffe.js';
import type { WorkloadCertificate } from './workload-certificate.js';

/** The texts to check. */
export interface CertificateSetText {
  /** Leaf first, then intermediates; may end with the root (Istio's CA answers leaf first, root last). */
  readonly chainPem: string;
  readonly keyPem: string;
  /** One or more trust anchors. */
  readonly rootPem: string;
}

/** How each text is named in messages: a path for files, a description for a CA's answer. */
export interface CertificateSetNames {
  readonly chain: string;
  readonly key: string;
  readonly root: string;
}

export interface CheckOptions {
  readonly names: CertificateSetNames;
  /** Copied to WorkloadCertificate.source. */
  readonly source: string;
  readonly nowMs: number;
}

// node gives `undefined` for an empty name (Istio's workload certificates have an empty subject).
const dn = (name: string | undefined): string => (name ?? '').replace(/\n/g, ', ');
const certName = (cert: X509Certificate): string => dn(cert.subject) || '(empty subject)';

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** Each PEM certificate block of a text, parsed; text outside the blocks (comments) is ignored. */
export function parsePemCertificates(text: string, name: string): X509Certificate[] {
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) {
    const what = text.trim() === '' ? 'is empty' : 'holds no PEM "BEGIN CERTIFICATE" block';
    throw new AgentError('ERR_CERT_PEM', `${name} ${what}`);
  }
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new AgentError('ERR_CERT_PEM',
        `${name}: certificate #${i + 1} is not a valid X.509 certificate (${(err as Error).message})`, { cause: err });
    }
  });
}

function parsePrivateKey(text: string, name: string): KeyObject {
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
    const what = text.trim() === '' ? 'is empty' : 'holds no PEM "BEGIN ... PRIVATE KEY" block';
    throw new AgentError('ERR_CERT_PEM', `${name} ${what}`);
  }
  try {
    return createPrivateKey(text);
  } catch (err) {
    throw new AgentError('ERR_CERT_PEM', `${name}: the private key does not parse (${(err as Error).message})`, { cause: err });
  }
}

/** Validity in ms; node 20's X509Certificate gives only OpenSSL's text form (`Jan  1 00:00:00 2030 GMT`). */
export function validityOf(cert: X509Certificate): { notBeforeMs: number; notAfterMs: number } {
  return { notBeforeMs: Date.parse(cert.validFrom), notAfterMs: Date.parse(cert.validTo) };
}

const iso = (ms: number): string => new Date(ms).toISOString();

function checkDates(cert: X509Certificate, what: string, nowMs: number): void {
  const { notBeforeMs, notAfterMs } = validityOf(cert);
  if (nowMs > notAfterMs) {
    throw new AgentError('ERR_CERT_EXPIRED', `${what} expired at ${iso(notAfterMs)} (valid from ${iso(notBeforeMs)}; now ${iso(nowMs)})`);
  }
  if (nowMs < notBeforeMs) {
    throw new AgentError('ERR_CERT_NOT_YET_VALID', `${what} is not valid before ${iso(notBeforeMs)} (now ${iso(nowMs)}; check the clocks)`);
  }
}

/** True when `parent` issued `child`: names match and the signature verifies with the parent's key. */
export function isIssuedBy(child: X509Certificate, parent: X509Certificate): boolean {
  return child.checkIssued(parent) && child.verify(parent.publicKey);
}

const isSelfSigned = (cert: X509Certificate): boolean => isIssuedBy(cert, cert);

/** The leaf's one spiffe:// URI SAN; node prints SANs as `URI:spiffe://..., DNS:...`. */
export function spiffeIdOf(leaf: X509Certificate, name: string): string {
  const uris = (leaf.subjectAltName ?? '').split(', ')
    .filter((entry) => entry.startsWith('URI:'))
    .map((entry) => entry.slice('URI:'.length));
  const spiffe = uris.filter((uri) => uri.startsWith(SPIFFE_SCHEME));
  if (spiffe.length === 0) {
    const found = uris.length === 0 ? 'no URI SAN' : `URI SANs ${uris.join(', ')}`;
    throw new AgentError('ERR_CERT_NO_SPIFFE_ID', `${name}: the leaf certificate has no ${SPIFFE_SCHEME} URI SAN (found ${found}; subject ${certName(leaf)})`);
  }
  if (spiffe.length > 1) {
    throw new AgentError('ERR_CERT_NO_SPIFFE_ID', `${name}: the leaf certificate has ${spiffe.length} ${SPIFFE_SCHEME} URI SANs (${spiffe.join(', ')}); a workload has exactly one`);
  }
  const id = spiffe[0]!;
  try {
    parseSpiffeId(id);
  } catch (err) {
    throw new AgentError('ERR_CERT_NO_SPIFFE_ID', `${name}: the leaf's URI SAN is not a usable SPIFFE id: ${(err as Error).message}`, { cause: err });
  }
  return id;
}


function fail(code: ErrorCode, message: string): never {
  throw new AgentError(code, message);
}

/**
 * Checks a certificate set and returns it in the data plane's form. The order of checks gives the most
 * useful message first: each text parses; the key fits the leaf; dates; the chain's links; a root of
 * the bundle signs the last link; the leaf names one SPIFFE id. A trailing self-signed certificate
 * found in the root bundle is dropped from the chain: peers have it already.
 */
export function checkCertificateSet(text: CertificateSetText, options: CheckOptions): WorkloadCertificate {
  const { names, nowMs } = options;
  const chain = parsePemCertificates(text.chainPem, names.chain);
  const key = parsePrivateKey(text.keyPem, names.key);
  const roots = parsePemCertificates(text.rootPem, names.root);
  const leaf = chain[0]!;

  if (!leaf.checkPrivateKey(key)) {
    fail('ERR_CERT_KEY_MISMATCH', `${names.key} does not hold the private key of the leaf certificate in ${names.chain} `
      + `(serial ${leaf.serialNumber}, subject ${certName(leaf)}; key type ${key.asymmetricKeyType}, certificate key type ${leaf.publicKey.asymmetricKeyType})`);
  }
  chain.forEach((cert, i) => checkDates(cert, i === 0
    ? `${names.chain}: the leaf certificate (serial ${cert.serialNumber})`
    : `${names.chain}: certificate #${i + 1} (${certName(cert)})`, nowMs));

  for (let i = 0; i + 1 < chain.length; i++) {
    if (!isIssuedBy(chain[i]!, chain[i + 1]!)) {
      fail('ERR_CERT_UNTRUSTED', `${names.chain}: certificate #${i + 1} (${certName(chain[i]!)}) is not signed by the next one, `
        + `#${i + 2} (${certName(chain[i + 1]!)}); the file must list the leaf first, then each issuer in order`);
    }
  }
  let kept = chain;
  const last = chain[chain.length - 1]!;
  const lastIsRoot = chain.length > 1 && isSelfSigned(last);
  if (lastIsRoot) {
    if (!roots.some((root) => root.fingerprint256 === last.fingerprint256)) {
      fail('ERR_CERT_UNTRUSTED', `${names.chain} ends with the root ${certName(last)}, which is not in ${names.root} `
        + `(that holds ${roots.map(certName).join('; ')})`);
    }
    kept = chain.slice(0, -1);
  } else {
    const top = kept[kept.length - 1]!;
    if (!roots.some((root) => root.fingerprint256 === top.fingerprint256 || isIssuedBy(top, root))) {
      fail('ERR_CERT_UNTRUSTED', `${names.chain} does not lead to a root in ${names.root}: its last certificate was issued by `
        + `${dn(top.issuer) || '(empty issuer)'}, and no root there (${roots.map(certName).join('; ')}) signed it`);
    }
  }
  const spiffeId = spiffeIdOf(leaf, names.chain);
  return {
    certChainPem: kept.map((cert) => cert.toString().trim()).join('\n') + '\n',
    keyPem: text.keyPem,
    rootPem: roots.map((cert) => cert.toString().trim()).join('\n') + '\n',
    spiffeId,
    serial: leaf.serialNumber,
    ...validityOf(leaf),
    source: options.source,
  };
}
