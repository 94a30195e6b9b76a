// The CA source against a real gRPC-over-TLS CA (test/helpers/test-ca.ts) on 127.0.0.1: issuance,
// renewal, outages, refusals, key types, OUTPUT_CERTS, and the issued chain checked by openssl.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { readEnvironment } from '../../src/config/env/registry.js';
import { requestCertificate } from '../../src/identity/ca-client.js';
import { createCaSource, type CaSourceOptions } from '../../src/identity/ca-source.js';
import { generateKeyAndCsr } from '../../src/identity/csr.js';
import { identitySourceFrom } from '../../src/identity/provider.js';
import type { IdentitySource, IdentityState, WorkloadCertificate } from '../../src/identity/workload-certificate.js';
import { createRootCa } from '../helpers/mesh-certs.js';
import { recordingLogger, type RecordingLogger } from '../helpers/recording-logger.js';
import { startTestCa, type RunningTestCa } from '../helpers/test-ca.js';
import { waitFor } from '../helpers/wait-for.js';

const ID = 'spiffe://cluster.local/ns/shop/sa/cart';
const TOKEN = 'pod-token-1';
const fastBackoff = { initialMs: 100, maxMs: 400, jitter: 0 };

const errorOf = (s: IdentityState): Extract<IdentityState, { state: 'error' }> | undefined => (s.state === 'error' ? s : undefined);

describe('CA source against a real test CA', () => {
  let ca: RunningTestCa;
  let dir: string;
  let rootFile: string;
  let tokenFile: string;
  before(async () => {
    ca = await startTestCa({ token: TOKEN });
    dir = await mkdtemp(join(tmpdir(), 'pa-identity-ca-'));
    rootFile = join(dir, 'ca-root.pem');
    tokenFile = join(dir, 'token');
    await writeFile(rootFile, ca.rootPem);
    await writeFile(tokenFile, `${TOKEN}\n`);
  });
  after(async () => {
    await ca?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  function options(log: RecordingLogger, extra: Partial<CaSourceOptions> = {}): CaSourceOptions {
    return {
      client: { address: ca.address, rootCertFile: rootFile, tokenFile, clusterId: 'Kubernetes', timeoutMs: 3000 },
      spiffeId: ID,
      ttlMs: 24 * 3_600_000,
      rotation: { graceRatio: 0.5, graceJitter: 0 },
      key: { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false },
      log,
      backoff: fastBackoff,
      ...extra,
    };
  }

  /** A started source, closed when the test ends (even when it fails), with its announcements. */
  async function started(t: TestContext, extra: Partial<CaSourceOptions> = {}):
    Promise<{ source: IdentitySource; log: RecordingLogger; changes: WorkloadCertificate[] }> {
    const log = recordingLogger();
    const source = createCaSource(options(log, extra));
    t.after(() => source.close());
    const changes: WorkloadCertificate[] = [];
    source.onChange((c) => changes.push(c));
    await source.start();
    return { source, log, changes };
  }

  it('gets a certificate for the identity, valid for SECRET_TTL, with token and cluster id sent', async (t) => {
    const before = ca.calls;
    const { source, changes } = await started(t, { ttlMs: 24 * 3_600_000 });
    const state = source.state();
    assert.equal(state.state, 'ready', JSON.stringify(state));
    const cert = source.current()!;
    assert.equal(cert.spiffeId, ID);
    assert.equal(cert.notAfterMs - cert.notBeforeMs, 24 * 3_600_000);
    assert.equal(cert.source, `ca ${ca.address}`);
    assert.equal(cert.rootPem.trim(), ca.rootPem.trim());
    assert.equal(cert.certChainPem.match(/BEGIN CERTIFICATE/g)?.length, 1, 'the root is not part of the chain presented');
    assert.equal(changes.length, 1);
    assert.equal(ca.calls, before + 1);
    const request = ca.requests.at(-1)!;
    assert.equal(request.authorization, `Bearer ${TOKEN}`);
    assert.equal(request.clusterId, 'Kubernetes');
    assert.equal(request.validitySeconds, 86_400);
    assert.deepEqual(request.uris, [ID]);
    const leaf = new X509Certificate(cert.certChainPem);
    assert.ok(leaf.checkPrivateKey(createPrivateKey(cert.keyPem)));
    assert.equal(leaf.subjectAltName, `URI:${ID}`);
  });

  it('renews repeatedly with a short TTL (4 s, ratio 0.5), a new key and serial each time', async (t) => {
    const { changes } = await started(t, { ttlMs: 4000 });
    await waitFor('three renewals', () => changes.length >= 4, 12_000, 50);
    const serials = new Set(changes.map((c) => c.serial));
    const keys = new Set(changes.map((c) => c.keyPem));
    assert.equal(serials.size, changes.length);
    assert.equal(keys.size, changes.length);
    // Each renewal came about half-way through the previous certificate's life (≥ 1.5 s apart).
    for (let i = 1; i < changes.length; i++) {
      const gap = changes[i]!.notBeforeMs - changes[i - 1]!.notBeforeMs;
      assert.ok(gap >= 1000 && gap <= 3000, `renewal ${i} came ${gap} ms after the previous one`);
    }
  });

  it('keeps the certificate while the CA is down, names the address, and renews when it is back', async (t) => {
    const { source, changes } = await started(t, { ttlMs: 3000 });
    const first = source.current()!;
    await ca.stop();
    t.after(() => ca.restart());
    const down = await waitFor('the error state', () => errorOf(source.state()), 6000, 50);
    assert.match(down.message, new RegExp(`CA ${ca.address.replace(/[.[\]]/g, '\\$&')} unreachable \\(UNAVAILABLE`));
    assert.ok(down.certificate, 'the certificate in force is kept');
    assert.equal(source.current()?.serial, changes.at(-1)!.serial);
    await ca.restart();
    const renewed = await waitFor('a renewal after the CA is back', () => {
      const c = source.current();
      return source.state().state === 'ready' && c && c.serial !== first.serial && c.notBeforeMs > first.notBeforeMs && c;
    }, 6000, 50);
    assert.equal(renewed.spiffeId, ID);
  });

  it('reports a CA told to fail with UNAVAILABLE as unreachable, and retries', async (t) => {
    ca.failWith(grpc.status.UNAVAILABLE, 'maintenance');
    t.after(() => ca.failWith(undefined));
    const before = ca.calls;
    const { source, log } = await started(t);
    const state = errorOf(source.state());
    assert.match(state?.message ?? '', /unreachable \(UNAVAILABLE: maintenance\)/);
    assert.equal(state?.certificate, undefined);
    await waitFor('two retries', () => ca.calls >= before + 3, 3000, 20);
    assert.ok(log.matching('error', /retry \d+ in/).length >= 2);
    ca.failWith(undefined);
    await waitFor('ready after the CA recovers', () => source.state().state === 'ready', 3000, 20);
  });

  it('names UNAUTHENTICATED when the token is wrong', async (t) => {
    const wrong = join(dir, 'wrong-token');
    await writeFile(wrong, 'not-the-token');
    const log = recordingLogger();
    const { source } = await started(t, { client: { ...options(log).client, tokenFile: wrong } });
    const state = errorOf(source.state());
    assert.match(state?.message ?? '', new RegExp(`CA .* refused the certificate request \\(UNAUTHENTICATED: `));
  });

  it('re-reads the token on every call (projected tokens rotate)', async (t) => {
    const rotating = join(dir, 'rotating-token');
    await writeFile(rotating, 'old-token');
    const log = recordingLogger();
    const { source } = await started(t, { client: { ...options(log).client, tokenFile: rotating } });
    assert.equal(source.state().state, 'error');
    await writeFile(rotating, TOKEN);
    await waitFor('ready with the new token', () => source.state().state === 'ready', 3000, 20);
  });

  it('names the token file when it is missing', async (t) => {
    const missing = join(dir, 'nowhere', 'istio-token');
    const log = recordingLogger();
    const { source } = await started(t, { client: { ...options(log).client, tokenFile: missing } });
    const state = errorOf(source.state());
    assert.match(state?.message ?? '', new RegExp(`token file ${missing} does not exist`));
  });

  it('refuses a CA whose certificate does not lead to CA_ROOT_CA, naming that file', async (t) => {
    const other = await createRootCa();
    const otherFile = join(dir, 'other-root.pem');
    await writeFile(otherFile, other.certPem);
    const log = recordingLogger();
    const { source } = await started(t, { client: { ...options(log).client, rootCertFile: otherFile } });
    const state = errorOf(source.state());
    assert.match(state?.message ?? '', new RegExp(`unreachable .*checked against ${otherFile}`));
  });

  for (const [name, key, type, detail] of [
    ['ECDSA P256', { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false }, 'ec', 'prime256v1'],
    ['ECDSA P384', { algorithm: { kind: 'ecdsa', curve: 'P384' }, pkcs8: false }, 'ec', 'secp384r1'],
    ['RSA 2048', { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: false }, 'rsa', '2048'],
    ['RSA 2048 PKCS#8', { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: true }, 'rsa', '2048'],
  ] as const) {
    it(`issues for a ${name} key`, async (t) => {
      const { source } = await started(t, { key });
      const cert = source.current();
      assert.ok(cert, JSON.stringify(source.state()));
      const leafKey = new X509Certificate(cert.certChainPem).publicKey;
      assert.equal(leafKey.asymmetricKeyType, type);
      const details = leafKey.asymmetricKeyDetails!;
      assert.equal(String(type === 'ec' ? details.namedCurve : details.modulusLength), detail);
      assert.match(cert.keyPem, key.pkcs8 ? /^-----BEGIN PRIVATE KEY-----/ : type === 'ec' ? /^-----BEGIN EC PRIVATE KEY-----/ : /^-----BEGIN RSA PRIVATE KEY-----/);
    });
  }

  it('writes OUTPUT_CERTS (key 0600) after each success; openssl verifies the chain', async (t) => {
    const out = join(dir, 'out', 'certs');
    const { source, changes } = await started(t, { outputDir: out, ttlMs: 3000 });
    const first = source.current()!;
    const keyStat = await stat(join(out, 'key.pem'));
    assert.equal(keyStat.mode & 0o777, 0o600);
    assert.equal(await readFile(join(out, 'key.pem'), 'utf8'), first.keyPem);
    assert.equal(await readFile(join(out, 'cert-chain.pem'), 'utf8'), first.certChainPem);
    assert.equal(await readFile(join(out, 'root-cert.pem'), 'utf8'), first.rootPem);
    const ok = execFileSync('openssl', ['verify', '-CAfile', join(out, 'root-cert.pem'), '-untrusted', join(out, 'cert-chain.pem'), join(out, 'cert-chain.pem')], { encoding: 'utf8' });
    assert.match(ok, /: OK/);
    const text = execFileSync('openssl', ['x509', '-in', join(out, 'cert-chain.pem'), '-noout', '-ext', 'subjectAltName'], { encoding: 'utf8' });
    assert.match(text, new RegExp(`URI:${ID.replace(/[/.]/g, '\\$&')}`));
    await waitFor('a renewal', () => changes.length >= 2, 5000, 50);
    await waitFor('the renewed key on disk', async () => (await readFile(join(out, 'key.pem'), 'utf8')) === changes.at(-1)!.keyPem, 2000);
  });

  it('the raw client: empty cert_chain and address errors are named', async () => {
    const { csrPem } = await generateKeyAndCsr(ID, { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false });
    await assert.rejects(requestCertificate({ address: 'no-port', rootCertFile: rootFile, tokenFile, clusterId: 'c' }, { csrPem, validitySeconds: 60 }),
      /CA_ADDR="no-port" is not host:port/);
    await assert.rejects(requestCertificate({ address: ca.address, rootCertFile: join(dir, 'absent.pem'), tokenFile, clusterId: 'c' }, { csrPem, validitySeconds: 60 }),
      (err: Error & { code?: string }) => err.code === 'ERR_CERT_FILE' && err.message.includes('absent.pem does not exist'));
    // The CA's certificate names localhost as well as 127.0.0.1: the host part is what is verified.
    const chain = await requestCertificate({ address: `localhost:${ca.port}`, rootCertFile: rootFile, tokenFile, clusterId: 'c' }, { csrPem, validitySeconds: 60 });
    assert.equal(chain.length, 2);
    ca.answerWith([]);
    try {
      await assert.rejects(requestCertificate({ address: ca.address, rootCertFile: rootFile, tokenFile, clusterId: 'c' }, { csrPem, validitySeconds: 60 }),
        (err: Error & { code?: string }) => err.code === 'ERR_CA_EMPTY_CHAIN' && err.message.includes(`CA ${ca.address} answered without a certificate`));
    } finally {
      ca.answerWith(undefined);
    }
  });

  it('refuses an answer signed by another root, keeping nothing', async (t) => {
    const other = await createRootCa({ subject: 'CN=Other Root' });
    ca.answerWith([other.certPem]);
    t.after(() => ca.answerWith(undefined));
    const { source } = await started(t);
    const state = errorOf(source.state());
    assert.match(state?.message ?? '', /the certificate chain from CA .*: the leaf|key generated for the request does not hold/);
    assert.equal(source.current(), undefined);
  });
});

describe('identitySourceFrom with the CA (Istio paths under a working directory)', () => {
  let ca: RunningTestCa;
  let cwd: string;
  before(async () => {
    ca = await startTestCa({ token: TOKEN });
    cwd = await mkdtemp(join(tmpdir(), 'pa-identity-cwd-'));
    for (const [file, text] of [
      ['var/run/secrets/tokens/istio-token', TOKEN],
      ['var/run/secrets/istio/root-cert.pem', ca.rootPem],
    ]) {
      await mkdir(dirname(join(cwd, file!)), { recursive: true });
      await writeFile(join(cwd, file!), text!);
    }
  });
  after(async () => {
    await ca?.close();
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it('forms the id from the environment, uses the default token and root files, writes OUTPUT_CERTS', async (t) => {
    const env = readEnvironment({
      CA_ADDR: ca.address, POD_NAMESPACE: 'shop', SERVICE_ACCOUNT: 'cart', CLUSTER_ID: 'east',
      SECRET_TTL: '1h', OUTPUT_CERTS: 'out', ECC_SIGNATURE_ALGORITHM: 'ECDSA',
    }).values;
    const source = identitySourceFrom(env, cwd, recordingLogger());
    t.after(() => source.close());
    await source.start();
    const cert = source.current();
    assert.ok(cert, JSON.stringify(source.state()));
    assert.equal(cert.spiffeId, ID);
    assert.equal(cert.notAfterMs - cert.notBeforeMs, 3_600_000);
    assert.equal(ca.requests.at(-1)?.clusterId, 'east');
    assert.match(cert.keyPem, /BEGIN EC PRIVATE KEY/);
    assert.equal((await stat(join(cwd, 'out', 'key.pem'))).mode & 0o777, 0o600);
  });

  it('first-party-jwt reads the service-account token', async (t) => {
    const env = readEnvironment({ CA_ADDR: ca.address, JWT_POLICY: 'first-party-jwt' }).values;
    const source = identitySourceFrom(env, cwd, recordingLogger());
    t.after(() => source.close());
    await source.start();
    assert.match(errorOf(source.state())?.message ?? '', /var\/run\/secrets\/kubernetes.io\/serviceaccount\/token does not exist/);
  });
});
