import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { AgentError, type ErrorCode } from '../../src/errors/agent-error.js';
import { checkCertificateSet, type CertificateSetText } from '../../src/identity/check.js';
import {
  createIntermediateCa, createRootCa, issueWorkloadCert, joinPem, type TestCa, type WorkloadCertSet,
} from '../helpers/mesh-certs.js';

const names = { chain: '/certs/cert-chain.pem', key: '/certs/key.pem', root: '/certs/root-cert.pem' };
const ID = 'spiffe://cluster.local/ns/shop/sa/cart';
const HOUR = 3_600_000;

const check = (text: CertificateSetText, nowMs = Date.now()) => checkCertificateSet(text, { names, source: 'files /certs', nowMs });

function rejects(code: ErrorCode, pattern: RegExp) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof AgentError, `not an AgentError: ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.match(err.message, pattern);
    return true;
  };
}

describe('checkCertificateSet', () => {
  let root: TestCa;
  let otherRoot: TestCa;
  let intermediate: TestCa;
  let good: WorkloadCertSet;
  let other: WorkloadCertSet;
  before(async () => {
    root = await createRootCa();
    otherRoot = await createRootCa({ subject: 'O=elsewhere, CN=Foreign Root' });
    intermediate = await createIntermediateCa(root);
    good = await issueWorkloadCert(root, { spiffeId: ID });
    other = await issueWorkloadCert(root, { spiffeId: ID });
  });

  it('accepts a leaf signed by the root and reports what it holds', () => {
    const cert = check(good);
    assert.equal(cert.spiffeId, ID);
    assert.equal(cert.serial, good.serial);
    assert.equal(cert.notBeforeMs, good.leaf.notBefore.getTime());
    assert.equal(cert.notAfterMs, good.leaf.notAfter.getTime());
    assert.equal(cert.source, 'files /certs');
    assert.equal(cert.keyPem, good.keyPem);
  });

  it('accepts leaf + intermediate against the root, keeping both in the chain', async () => {
    const viaIntermediate = await issueWorkloadCert(intermediate, { spiffeId: ID });
    const cert = check(viaIntermediate);
    assert.equal(cert.certChainPem.match(/BEGIN CERTIFICATE/g)?.length, 2);
  });

  it('accepts an RSA leaf under an RSA root', async () => {
    const rsaRoot = await createRootCa({ keyType: 'rsa-2048' });
    const cert = check(await issueWorkloadCert(rsaRoot, { spiffeId: ID, keyType: 'rsa-2048' }));
    assert.equal(cert.spiffeId, ID);
  });

  it('drops a trailing root that is in the bundle (the CA answers leaf..root)', async () => {
    const viaIntermediate = await issueWorkloadCert(intermediate, { spiffeId: ID });
    const cert = check({ ...viaIntermediate, chainPem: joinPem(viaIntermediate.chainPem, root.certPem) });
    assert.equal(cert.certChainPem.match(/BEGIN CERTIFICATE/g)?.length, 2);
    assert.ok(!cert.certChainPem.includes(root.certPem.trim()));
  });

  it('accepts a root bundle with several roots', () => {
    const cert = check({ ...good, rootPem: joinPem(otherRoot.certPem, root.certPem) });
    assert.equal(cert.rootPem.match(/BEGIN CERTIFICATE/g)?.length, 2);
  });

  const table: [string, () => Promise<CertificateSetText> | CertificateSetText, ErrorCode, RegExp, number?][] = [
    ['empty chain file', () => ({ ...good, chainPem: '' }), 'ERR_CERT_PEM', /\/certs\/cert-chain.pem is empty/],
    ['chain file not PEM', () => ({ ...good, chainPem: 'hello\n' }), 'ERR_CERT_PEM', /cert-chain.pem holds no PEM/],
    ['corrupt certificate', () => ({ ...good, chainPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' }), 'ERR_CERT_PEM', /cert-chain.pem: certificate #1 is not a valid/],
    ['key not PEM', () => ({ ...good, keyPem: 'x' }), 'ERR_CERT_PEM', /\/certs\/key.pem holds no PEM/],
    ['corrupt key', () => ({ ...good, keyPem: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' }), 'ERR_CERT_PEM', /key.pem: the private key does not parse/],
    ['root not PEM', () => ({ ...good, rootPem: '' }), 'ERR_CERT_PEM', /root-cert.pem is empty/],
    ['mismatched key', () => ({ ...good, keyPem: other.keyPem }), 'ERR_CERT_KEY_MISMATCH', /\/certs\/key.pem does not hold the private key of the leaf certificate in \/certs\/cert-chain.pem/],
    ['RSA key for an EC leaf', async () => ({ ...good, keyPem: (await issueWorkloadCert(root, { keyType: 'rsa-2048' })).keyPem }), 'ERR_CERT_KEY_MISMATCH', /key type rsa, certificate key type ec/],
    ['expired', async () => issueWorkloadCert(root, { spiffeId: ID, notBefore: new Date(Date.now() - 48 * HOUR), validityMs: 24 * HOUR }), 'ERR_CERT_EXPIRED', /the leaf certificate \(serial [0-9A-F]+\) expired at \d{4}-\d\d-\d\dT/],
    ['not yet valid', async () => issueWorkloadCert(root, { spiffeId: ID, notBefore: new Date(Date.now() + HOUR) }), 'ERR_CERT_NOT_YET_VALID', /is not valid before \d{4}-.*check the clocks/],
    ['valid at its own notAfter but not one second later', () => good, 'ERR_CERT_EXPIRED', /expired/, 1000],
    ['foreign root', () => ({ ...good, rootPem: otherRoot.certPem }), 'ERR_CERT_UNTRUSTED', /cert-chain.pem does not lead to a root in \/certs\/root-cert.pem.*Foreign Root/],
    ['intermediate missing from the chain', async () => {
      const set = await issueWorkloadCert(intermediate, { spiffeId: ID });
      return { ...set, chainPem: set.leaf.toString('pem') };
    }, 'ERR_CERT_UNTRUSTED', /does not lead to a root/],
    ['chain out of order', async () => {
      const set = await issueWorkloadCert(intermediate, { spiffeId: ID });
      return { ...set, chainPem: joinPem(set.leaf.toString('pem'), root.certPem, intermediate.certPem) };
    }, 'ERR_CERT_UNTRUSTED', /certificate #1 .* is not signed by the next one, #2/],
    ['chain ends with a foreign root', () => ({ ...good, chainPem: joinPem(good.chainPem, otherRoot.certPem) }), 'ERR_CERT_UNTRUSTED', /not signed by the next one/],
    ['no SAN at all', async () => issueWorkloadCert(root, { spiffeId: null, subject: 'CN=plain' }), 'ERR_CERT_NO_SPIFFE_ID', /cert-chain.pem: the leaf certificate has no spiffe:\/\/ URI SAN \(found no URI SAN; subject CN=plain\)/],
    ['only a DNS SAN', async () => issueWorkloadCert(root, { spiffeId: null, dnsNames: ['a.example'] }), 'ERR_CERT_NO_SPIFFE_ID', /no URI SAN/],
    ['an https URI SAN', async () => issueWorkloadCert(root, { spiffeId: 'https://example.com/x' }), 'ERR_CERT_NO_SPIFFE_ID', /found URI SANs https:\/\/example.com\/x/],
    ['a malformed SPIFFE id', async () => issueWorkloadCert(root, { spiffeId: 'spiffe://cluster.local/ns/a' }), 'ERR_CERT_NO_SPIFFE_ID', /not a usable SPIFFE id/],
  ];
  for (const [name, make, code, pattern, afterExpiryMs] of table) {
    it(`rejects: ${name}`, async () => {
      const set = await make();
      const now = afterExpiryMs === undefined ? Date.now() : good.leaf.notAfter.getTime() + afterExpiryMs;
      if (afterExpiryMs !== undefined) assert.doesNotThrow(() => check(set, good.leaf.notAfter.getTime()));
      assert.throws(() => check(set, now), rejects(code, pattern));
    });
  }
});
