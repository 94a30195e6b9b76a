// Certificates for tests: a mesh root CA, optional intermediates, workload leaves for a SPIFFE id
// (valid, expired, not yet valid, without SAN), server certificates, and the three files an identity
// source reads. Every certificate is signed here, by `signCertificate`: the test CA server
// (test-ca.ts) and the standalone fixture (test/fixtures/test-ca.mjs) sign through it too.
//
// Usage:
//   const root = await createRootCa();                               // ECDSA P-256 root
//   const leaf = await issueWorkloadCert(root, { spiffeId: 'spiffe://cluster.local/ns/default/sa/sleep' });
//   await writeCertFiles(dir, leaf);                                 // cert-chain.pem, key.pem, root-cert.pem
import { createPrivateKey, type webcrypto } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import { CERT_CHAIN_FILE, KEY_FILE, ROOT_CERT_FILE } from '../../src/identity/cert-files.js';

export type TestKeyType = 'ecdsa-p256' | 'ecdsa-p384' | 'rsa-2048';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface KeyAlgorithm {
  readonly generate: webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams;
  readonly sign: webcrypto.Algorithm | webcrypto.EcdsaParams;
}

const ALGORITHMS: Record<TestKeyType, KeyAlgorithm> = {
  'ecdsa-p256': { generate: { name: 'ECDSA', namedCurve: 'P-256' }, sign: { name: 'ECDSA', hash: 'SHA-256' } as webcrypto.EcdsaParams },
  'ecdsa-p384': { generate: { name: 'ECDSA', namedCurve: 'P-384' }, sign: { name: 'ECDSA', hash: 'SHA-384' } as webcrypto.EcdsaParams },
  'rsa-2048': {
    generate: { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' },
    sign: { name: 'RSASSA-PKCS1-v1_5' },
  },
};

/** A key pair with its PEM (PKCS#8) and the signature algorithm that goes with it. */
export interface TestKey {
  readonly type: TestKeyType;
  readonly keys: webcrypto.CryptoKeyPair;
  readonly signingAlgorithm: webcrypto.Algorithm | webcrypto.EcdsaParams;
  /** PKCS#8 PEM (`BEGIN PRIVATE KEY`). */
  readonly keyPem: string;
}

export async function generateTestKey(type: TestKeyType = 'ecdsa-p256'): Promise<TestKey> {
  const algorithm = ALGORITHMS[type];
  const keys = await crypto.subtle.generateKey(algorithm.generate, true, ['sign', 'verify']) as webcrypto.CryptoKeyPair;
  const der = Buffer.from(await crypto.subtle.exportKey('pkcs8', keys.privateKey));
  const keyPem = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }).export({ type: 'pkcs8', format: 'pem' }) as string;
  return { type, keys, signingAlgorithm: algorithm.sign, keyPem };
}

/** A CA that can sign: a root, or an intermediate with the chain up to (not including) the root. */
export interface TestCa {
  readonly key: TestKey;
  readonly cert: x509.X509Certificate;
  readonly certPem: string;
  /** PEM of this CA and the intermediates above it, nearest first; empty text for a root. */
  readonly chainPem: string;
  /** PEM of the root at the top. */
  readonly rootPem: string;
}

/** Validity: absolute dates win; else `validityMs` from `notBefore` (default: one hour ago). */
export interface ValidityOptions {
  readonly notBefore?: Date;
  readonly notAfter?: Date;
  /** Lifetime when notAfter is not given; default one day. */
  readonly validityMs?: number;
}

export interface SignOptions extends ValidityOptions {
  /** Subject DN, e.g. `CN=x, O=y`; default empty (as Istio's workload certificates). */
  readonly subject?: string;
  readonly isCa?: boolean;
  readonly uris?: readonly string[];
  readonly dnsNames?: readonly string[];
  readonly ipAddresses?: readonly string[];
  /** Hex serial; default random. */
  readonly serialNumber?: string;
}

function validity(options: ValidityOptions): { notBefore: Date; notAfter: Date } {
  const notBefore = options.notBefore ?? new Date(Date.now() - HOUR);
  const notAfter = options.notAfter ?? new Date(notBefore.getTime() + (options.validityMs ?? DAY));
  return { notBefore, notAfter };
}

function randomSerial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0]! & 0x7f) | 0x10; // positive, no leading zero byte, 16 bytes as Istio's CA
  return Buffer.from(bytes).toString('hex');
}

/**
 * The one place test certificates are signed. `issuer` undefined means self-signed by `key`; else the
 * issuer's key signs `publicKey`. Workload leaves get the extensions Istio's CA sets: digitalSignature
 * and keyEncipherment, server and client auth, the SAN critical when the subject is empty.
 */
export async function signCertificate(
  publicKey: x509.PublicKeyType, issuer: { key: TestKey; cert?: x509.X509Certificate }, options: SignOptions,
): Promise<x509.X509Certificate> {
  const { notBefore, notAfter } = validity(options);
  const subject = options.subject ?? '';
  const extensions: x509.Extension[] = [];
  if (options.isCa) {
    extensions.push(new x509.BasicConstraintsExtension(true, undefined, true));
    extensions.push(new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true));
    extensions.push(await x509.SubjectKeyIdentifierExtension.create(publicKey));
  } else {
    extensions.push(new x509.BasicConstraintsExtension(false, undefined, true));
    extensions.push(new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true));
    extensions.push(new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]));
  }
  if (issuer.cert) extensions.push(await x509.AuthorityKeyIdentifierExtension.create(issuer.cert));
  const names: x509.JsonGeneralName[] = [
    ...(options.uris ?? []).map((value) => ({ type: 'url' as const, value })),
    ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  if (names.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(names, subject === ''));
  return x509.X509CertificateGenerator.create({
    serialNumber: options.serialNumber ?? randomSerial(),
    subject,
    issuer: issuer.cert ? issuer.cert.subject : subject,
    notBefore,
    notAfter,
    publicKey,
    signingKey: issuer.key.keys.privateKey,
    signingAlgorithm: issuer.key.signingAlgorithm,
    extensions,
  });
}

export interface RootCaOptions extends ValidityOptions {
  readonly keyType?: TestKeyType;
  /** Default `O=cluster.local` (Istio's self-signed root names the trust domain as organisation). */
  readonly subject?: string;
}

/** A self-signed root CA; default ECDSA P-256, valid from an hour ago for ten years. */
export async function createRootCa(options: RootCaOptions = {}): Promise<TestCa> {
  const key = await generateTestKey(options.keyType);
  const subject = options.subject ?? 'O=cluster.local, CN=Test Mesh Root CA';
  const cert = await signCertificate(key.keys.publicKey, { key }, {
    validityMs: 3650 * DAY, ...options, subject, isCa: true,
  });
  const certPem = cert.toString('pem');
  return { key, cert, certPem, chainPem: '', rootPem: certPem };
}

/** An intermediate CA signed by `parent` (a root or another intermediate). */
export async function createIntermediateCa(parent: TestCa, options: RootCaOptions = {}): Promise<TestCa> {
  const key = await generateTestKey(options.keyType);
  const subject = options.subject ?? `O=cluster.local, CN=Test Intermediate CA ${randomSerial().slice(0, 6)}`;
  const cert = await signCertificate(key.keys.publicKey, parent, { validityMs: 365 * DAY, ...options, subject, isCa: true });
  const certPem = cert.toString('pem');
  return { key, cert, certPem, chainPem: joinPem(certPem, parent.chainPem), rootPem: parent.rootPem };
}

export interface WorkloadCertOptions extends ValidityOptions {
  /** The URI SAN; default `spiffe://cluster.local/ns/default/sa/default`; `null` for a leaf without SAN. */
  readonly spiffeId?: string | null;
  readonly keyType?: TestKeyType;
  /** Sign this key instead of a new one (a key from elsewhere, e.g. to build mismatched sets). */
  readonly key?: TestKey;
  readonly dnsNames?: readonly string[];
  readonly ipAddresses?: readonly string[];
  readonly subject?: string;
}

/** The three texts an identity source reads, plus the leaf for assertions. */
export interface WorkloadCertSet {
  /** Leaf, then the issuer's intermediates (not the root). */
  readonly chainPem: string;
  /** PKCS#8 PEM of the leaf's key. */
  readonly keyPem: string;
  readonly rootPem: string;
  readonly leaf: x509.X509Certificate;
  /** Hex, upper case, as node:crypto and OpenSSL print it. */
  readonly serial: string;
}

export const DEFAULT_TEST_SPIFFE_ID = 'spiffe://cluster.local/ns/default/sa/default';

/** A workload certificate signed by `issuer`, valid from an hour ago for a day unless told otherwise. */
export async function issueWorkloadCert(issuer: TestCa, options: WorkloadCertOptions = {}): Promise<WorkloadCertSet> {
  const key = options.key ?? await generateTestKey(options.keyType);
  const spiffeId = options.spiffeId === undefined ? DEFAULT_TEST_SPIFFE_ID : options.spiffeId;
  const leaf = await signCertificate(key.keys.publicKey, issuer, {
    ...options,
    uris: spiffeId === null ? [] : [spiffeId],
  });
  const leafPem = leaf.toString('pem');
  return {
    chainPem: joinPem(leafPem, issuer.chainPem),
    keyPem: key.keyPem,
    rootPem: issuer.rootPem,
    leaf,
    serial: leaf.serialNumber.toUpperCase(),
  };
}

/** Concatenates PEM texts, one per line block, skipping empty ones. */
export function joinPem(...texts: readonly string[]): string {
  return texts.map((t) => t.trim()).filter((t) => t !== '').join('\n') + '\n';
}

export { CERT_CHAIN_FILE, KEY_FILE, ROOT_CERT_FILE };

/**
 * Writes cert-chain.pem, key.pem and root-cert.pem into `dir` (created if missing). Each file is
 * written beside and renamed over, so a watcher never sees half a file; pass `only` to write a subset.
 */
export async function writeCertFiles(
  dir: string, set: Pick<WorkloadCertSet, 'chainPem' | 'keyPem' | 'rootPem'>,
  only: readonly ('chain' | 'key' | 'root')[] = ['chain', 'key', 'root'],
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const files = { chain: [CERT_CHAIN_FILE, set.chainPem], key: [KEY_FILE, set.keyPem], root: [ROOT_CERT_FILE, set.rootPem] } as const;
  for (const which of only) {
    const [name, text] = files[which];
    const tmp = join(dir, `.${name}.${process.pid}.tmp`);
    await writeFile(tmp, text, { mode: which === 'key' ? 0o600 : 0o644 });
    await rename(tmp, join(dir, name));
  }
}
