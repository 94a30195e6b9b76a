// The CA client's TLS on real sockets: what its ClientHello names (read on the wire by a front that
// records it, test/helpers/sni-recorder.ts) and what the CA's certificate must name. CA_ADDR given as
// an address sends no SNI (RFC 6066) and is still checked against the address as an IP SAN; MESHD_SAN
// (or a host name in CA_ADDR) is sent and checked; a certificate for another address fails. No
// DEP0123 warning either way.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readEnvironment } from '../../src/config/env/registry.js';
import { requestCertificate } from '../../src/identity/ca-client.js';
import { generateKeyAndCsr } from '../../src/identity/csr.js';
import { identitySourceFrom } from '../../src/identity/provider.js';
import { createRootCa, type TestCa } from '../helpers/mesh-certs.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { startSniRecorder, type SniRecorder } from '../helpers/sni-recorder.js';
import { startTestCa, type RunningTestCa } from '../helpers/test-ca.js';

const ID = 'spiffe://cluster.local/ns/shop/sa/cart';
const TOKEN = 'pod-token-sni';
const CA_NAME = 'meshd.mesh-system.svc';

describe('CA client TLS: SNI only for a name, the certificate checked against the address or the name', () => {
  const warnings: Error[] = [];
  const onWarning = (w: Error): void => { warnings.push(w); };
  let root: TestCa;
  let dir: string;
  let rootFile: string;
  let tokenFile: string;
  let csrPem: string;
  const running: { close(): Promise<void> }[] = [];

  before(async () => {
    process.on('warning', onWarning);
    root = await createRootCa();
    dir = await mkdtemp(join(tmpdir(), 'pa-ca-sni-'));
    rootFile = join(dir, 'root.pem');
    tokenFile = join(dir, 'token');
    await writeFile(rootFile, root.certPem);
    await writeFile(tokenFile, TOKEN);
    ({ csrPem } = await generateKeyAndCsr(ID, { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false }));
  });
  after(async () => {
    process.off('warning', onWarning);
    for (const r of running) await r.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A test CA whose serving certificate names `serverNames`, behind a front on `host` that records SNI. */
  async function caBehindRecorder(serverNames: string[], host = '127.0.0.1'): Promise<{ ca: RunningTestCa; front: SniRecorder }> {
    const ca = await startTestCa({ root, token: TOKEN, serverNames });
    running.push(ca);
    const front = await startSniRecorder({ host: '127.0.0.1', port: ca.port }, host);
    running.push(front);
    return { ca, front };
  }

  const ask = (address: string, serverName?: string): Promise<string[]> => requestCertificate(
    { address, rootCertFile: rootFile, tokenFile, clusterId: 'c', timeoutMs: 3000, ...(serverName !== undefined ? { serverName } : {}) },
    { csrPem, validitySeconds: 600 });

  it('CA_ADDR=127.0.0.1:port: no SNI, and the certificate is checked against the address (IP SAN)', async () => {
    const { ca, front } = await caBehindRecorder(['127.0.0.1']);
    const chain = await ask(`127.0.0.1:${front.port}`);
    assert.equal(chain.length, 2);
    assert.equal(ca.calls, 1);
    assert.ok(front.serverNames.length >= 1);
    assert.deepEqual(front.serverNames, front.serverNames.map(() => undefined), 'no ClientHello carries a server name');
  });

  it('a certificate for another address fails verification (the CA is never asked), naming the address expected', async () => {
    const { ca, front } = await caBehindRecorder(['10.9.9.9']);
    await assert.rejects(ask(`127.0.0.1:${front.port}`), (err: Error & { code?: string }) =>
      err.code === 'ERR_CA_UNREACHABLE' && /must name 127\.0\.0\.1/.test(err.message)
      && /IP: 127\.0\.0\.1 is not in the cert's list: 10\.9\.9\.9/.test(err.message));
    assert.equal(ca.calls, 0);
    assert.ok(front.serverNames.length >= 1);
    assert.deepEqual(front.serverNames, front.serverNames.map(() => undefined));
  });

  it('CA_ADDR=[::1]:port: no SNI for an IPv6 address, checked against it', async (t) => {
    let pair: { ca: RunningTestCa; front: SniRecorder };
    try {
      pair = await caBehindRecorder(['::1'], '::1');
    } catch (err) {
      t.skip(`no IPv6 loopback here (${(err as Error).message})`);
      return;
    }
    assert.equal((await ask(`[::1]:${pair.front.port}`)).length, 2);
    assert.deepEqual(pair.front.serverNames, pair.front.serverNames.map(() => undefined));
  });

  it('MESHD_SAN with CA_ADDR an address: the name is sent as SNI and is what the certificate must hold', async () => {
    const { front } = await caBehindRecorder([CA_NAME]);
    assert.equal((await ask(`127.0.0.1:${front.port}`, CA_NAME)).length, 2);
    assert.deepEqual(front.serverNames, front.serverNames.map(() => CA_NAME));
    // Without MESHD_SAN the address is what is checked, and this certificate does not hold it.
    await assert.rejects(ask(`127.0.0.1:${front.port}`), /must name 127\.0\.0\.1/);
  });

  it('CA_ADDR=localhost:port: the host name is sent and checked', async () => {
    const { front } = await caBehindRecorder(['localhost']);
    assert.equal((await ask(`localhost:${front.port}`)).length, 2);
    assert.ok(front.serverNames.includes('localhost'));
    assert.ok(front.serverNames.every((n) => n === 'localhost'));
  });

  it('the environment: MESHD_SAN reaches the CA client', async (t) => {
    const { front } = await caBehindRecorder([CA_NAME]);
    const env = readEnvironment({ CA_ADDR: `127.0.0.1:${front.port}`, MESHD_SAN: CA_NAME, CA_ROOT_CA: rootFile, POD_NAMESPACE: 'shop', SERVICE_ACCOUNT: 'cart' }).values;
    // The token is read from Istio's path under the working directory.
    const cwd = await mkdtemp(join(tmpdir(), 'pa-ca-sni-cwd-'));
    t.after(() => rm(cwd, { recursive: true, force: true }));
    await mkdir(join(cwd, 'var/run/secrets/tokens'), { recursive: true });
    await writeFile(join(cwd, 'var/run/secrets/tokens/istio-token'), TOKEN);
    const source = identitySourceFrom(env, cwd, recordingLogger());
    t.after(() => source.close());
    await source.start();
    assert.equal(source.current()?.spiffeId, ID, JSON.stringify(source.state()));
    assert.deepEqual(front.serverNames, front.serverNames.map(() => CA_NAME));
  });

  it('printed no DEP0123 (nor any other) warning', () => {
    assert.deepEqual(warnings.map((w) => `${(w as Error & { code?: string }).code ?? w.name}: ${w.message}`), []);
  });
});
