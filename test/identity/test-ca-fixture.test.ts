// The standalone test CA (test/fixtures/test-ca.mjs) as e2e tests use it: a child process on a given
// address, its root written to a file, an agent-side source getting a certificate from it.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { it, type TestContext } from 'node:test';
import { requestCertificate } from '../../src/identity/ca-client.js';
import { createCaSource } from '../../src/identity/ca-source.js';
import { generateKeyAndCsr } from '../../src/identity/csr.js';
import { AgentError } from '../../src/errors/agent-error.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { repoRoot } from '../helpers/repo.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** test-ca.mjs on a free loopback port (ended with the test), its root and a token file for it, in a fresh directory. */
async function startTestCa(t: TestContext): Promise<{ child: ChildProcess; port: number; rootFile: string; tokenFile: string; first: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'pa-identity-fixture-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const port = await freePort();
  const rootFile = join(dir, 'ca', 'root-cert.pem');
  const child = spawn(process.execPath, [join(repoRoot, 'test', 'fixtures', 'test-ca.mjs'),
    '--listen', `127.0.0.1:${port}`, '--root-out', rootFile, '--token', 'fixture-token', '--validity', '90s'], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => { child.kill('SIGTERM'); });
  const lines = createInterface({ input: child.stdout! });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`test-ca.mjs exited with ${code}`)));
  });
  const tokenFile = join(dir, 'token');
  await writeFile(tokenFile, 'fixture-token');
  return { child, port, rootFile, tokenFile, first };
}

it('test-ca.mjs listens where told, writes its root, and issues certificates', async (t) => {
  const { child, port, rootFile, tokenFile, first } = await startTestCa(t);
  assert.equal(first, `listening 127.0.0.1:${port}`);
  assert.match(await readFile(rootFile, 'utf8'), /BEGIN CERTIFICATE/);

  const source = createCaSource({
    client: { address: `127.0.0.1:${port}`, rootCertFile: rootFile, tokenFile, clusterId: 'Kubernetes' },
    spiffeId: 'spiffe://cluster.local/ns/default/sa/fixture',
    ttlMs: 3_600_000, rotation: { graceRatio: 0.5, graceJitter: 0.01 },
    key: { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false }, log: recordingLogger(),
  });
  t.after(() => source.close());
  await source.start();
  const cert = source.current();
  assert.ok(cert, JSON.stringify(source.state()));
  assert.equal(cert.notAfterMs - cert.notBeforeMs, 90_000, '--validity overrides SECRET_TTL');
  assert.equal(cert.spiffeId, 'spiffe://cluster.local/ns/default/sa/fixture');

  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});

it('the CA client refuses an answer larger than MESH_GPRC_MAXRECVMSGSIZE, saying so', async (t) => {
  const { port, rootFile, tokenFile } = await startTestCa(t);
  const csrPem = (await generateKeyAndCsr('spiffe://cluster.local/ns/default/sa/fixture', { algorithm: { kind: 'ecdsa', curve: 'P256' }, pkcs8: false })).csrPem;
  const client = { address: `127.0.0.1:${port}`, rootCertFile: rootFile, tokenFile, clusterId: 'Kubernetes' };
  await assert.rejects(requestCertificate({ ...client, maxReceiveMessageBytes: 100 }, { csrPem, validitySeconds: 60 }),
    (err: unknown) => err instanceof AgentError && /answered more than MESH_GPRC_MAXRECVMSGSIZE allows/.test(err.message));
  const chain = await requestCertificate({ ...client, maxReceiveMessageBytes: 4194304 }, { csrPem, validitySeconds: 60 });
  assert.match(chain[0]!, /BEGIN CERTIFICATE/);
});
