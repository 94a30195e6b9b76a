// Keys and CSRs, checked with @peculiar/x509, node:crypto and, as a client nobody here wrote, openssl.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import * as x509 from '@peculiar/x509';
import { AgentError } from '../../src/errors/agent-error.js';
import { generateKeyAndCsr } from '../../src/identity/csr.js';
import { keyOptionsFromEnv, type KeyEnv, type KeyOptions } from '../../src/identity/key-options.js';

const ID = 'spiffe://cluster.local/ns/shop/sa/cart';
const defaults: KeyEnv = { ECC_SIGNATURE_ALGORITHM: '', ECC_CURVE: 'P256', WORKLOAD_RSA_KEY_SIZE: 2048, PKCS8_KEY: false };

describe('keyOptionsFromEnv', () => {
  const good: [string, Partial<KeyEnv>, KeyOptions][] = [
    ['defaults: RSA 2048, traditional PEM', {}, { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: false }],
    ['RSA 4096, PKCS#8', { WORKLOAD_RSA_KEY_SIZE: 4096, PKCS8_KEY: true }, { algorithm: { kind: 'rsa', bits: 4096 }, pkcs8: true }],
    ['ECDSA defaults to P256', { ECC_SIGNATURE_ALGORITHM: 'ECDSA' }, { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false }],
    ['ECDSA with an empty curve is P256', { ECC_SIGNATURE_ALGORITHM: 'ECDSA', ECC_CURVE: '' }, { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false }],
    ['ECDSA P384', { ECC_SIGNATURE_ALGORITHM: 'ECDSA', ECC_CURVE: 'P384' }, { algorithm: { kind: 'ecdsa', curve: 'P384' }, pkcs8: false }],
    ['a curve is ignored without ECDSA', { ECC_CURVE: 'bogus' }, { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: false }],
  ];
  for (const [name, tweak, expected] of good) it(name, () => assert.deepEqual(keyOptionsFromEnv({ ...defaults, ...tweak }), expected));

  const bad: [Partial<KeyEnv>, RegExp][] = [
    [{ ECC_SIGNATURE_ALGORITHM: 'ECDSA', ECC_CURVE: 'P521' }, /ECC_CURVE="P521" is not supported: use P256 or P384/],
    [{ ECC_SIGNATURE_ALGORITHM: 'ED25519' }, /ECC_SIGNATURE_ALGORITHM="ED25519" is not supported/],
    [{ WORKLOAD_RSA_KEY_SIZE: 1024 }, /WORKLOAD_RSA_KEY_SIZE=1024 is not supported/],
    [{ WORKLOAD_RSA_KEY_SIZE: 2049 }, /WORKLOAD_RSA_KEY_SIZE=2049/],
  ];
  for (const [tweak, pattern] of bad) {
    it(`rejects ${JSON.stringify(tweak)}`, () => assert.throws(() => keyOptionsFromEnv({ ...defaults, ...tweak }),
      (err: unknown) => err instanceof AgentError && err.code === 'ERR_KEY_OPTIONS' && pattern.test(err.message)));
  }
});

describe('generateKeyAndCsr', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pa-identity-csr-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  const cases: [string, KeyOptions, RegExp, string, Record<string, unknown>][] = [
    ['RSA 2048, PKCS#1', { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: false }, /^-----BEGIN RSA PRIVATE KEY-----/, 'rsa', { modulusLength: 2048 }],
    ['RSA 2048, PKCS#8', { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: true }, /^-----BEGIN PRIVATE KEY-----/, 'rsa', { modulusLength: 2048 }],
    ['ECDSA P256, SEC1', { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false }, /^-----BEGIN EC PRIVATE KEY-----/, 'ec', { namedCurve: 'prime256v1' }],
    ['ECDSA P384, SEC1', { algorithm: { kind: 'ecdsa', curve: 'P384' }, pkcs8: false }, /^-----BEGIN EC PRIVATE KEY-----/, 'ec', { namedCurve: 'secp384r1' }],
    ['ECDSA P256, PKCS#8', { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: true }, /^-----BEGIN PRIVATE KEY-----/, 'ec', { namedCurve: 'prime256v1' }],
  ];
  for (const [name, options, header, type, details] of cases) {
    it(name, async () => {
      const { csrPem, keyPem } = await generateKeyAndCsr(ID, options);
      assert.match(keyPem, header);
      const key = createPrivateKey(keyPem);
      assert.equal(key.asymmetricKeyType, type);
      for (const [k, v] of Object.entries(details)) assert.equal((key.asymmetricKeyDetails as Record<string, unknown>)[k], v, k);

      const csr = new x509.Pkcs10CertificateRequest(csrPem);
      assert.ok(await csr.verify(), 'CSR signature');
      assert.equal(csr.subject, '');
      const san = csr.extensions.find((e): e is x509.SubjectAlternativeNameExtension => e instanceof x509.SubjectAlternativeNameExtension);
      assert.deepEqual(san?.names.toJSON(), [{ type: 'url', value: ID }]);
      assert.equal(san?.critical, true);
      // The CSR's public key is the key's.
      assert.ok(Buffer.from(csr.publicKey.rawData).equals(createPublicKey(keyPem).export({ type: 'spki', format: 'der' })), 'CSR key');

      // openssl reads and verifies it, and sees the URI SAN.
      const file = join(dir, `${name.replace(/\W+/g, '-')}.csr`);
      writeFileSync(file, csrPem);
      const text = execFileSync('openssl', ['req', '-in', file, '-noout', '-text', '-verify'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      assert.match(text, new RegExp(`URI:${ID.replace(/[/.]/g, '\\$&')}`));
      assert.match(text, /X509v3 Subject Alternative Name: critical/);
      const keyFile = join(dir, `${name.replace(/\W+/g, '-')}.key`);
      writeFileSync(keyFile, keyPem);
      execFileSync('openssl', ['pkey', '-in', keyFile, '-noout'], { stdio: 'ignore' });
    });
  }

  it('makes a new key every time', async () => {
    const options: KeyOptions = { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false };
    const [a, b] = await Promise.all([generateKeyAndCsr(ID, options), generateKeyAndCsr(ID, options)]);
    assert.notEqual(a.keyPem, b.keyPem);
  });
});
