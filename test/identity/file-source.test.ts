// The mounted-files source against real files in a temporary directory: rename-over, Kubernetes'
// `..data` symlink swap, a bad replacement, files that appear later.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { createFileSource, type FileSourceOptions } from '../../src/identity/file-source.js';
import type { IdentitySource, WorkloadCertificate } from '../../src/identity/workload-certificate.js';
import { createRootCa, issueWorkloadCert, writeCertFiles, type TestCa } from '../helpers/mesh-certs.js';
import { recordingLogger, type RecordingLogger } from '../helpers/recording-logger.js';
import { waitFor } from '../helpers/wait-for.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';

describe('file source', () => {
  let root: TestCa;
  const dirs: string[] = [];
  before(async () => { root = await createRootCa(); });
  after(async () => { await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))); });

  async function tempDir(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'pa-identity-files-'));
    dirs.push(dir);
    return dir;
  }

  /** A started source, closed when the test ends (even when it fails). */
  async function started(t: TestContext, dir: string, extra: Partial<FileSourceOptions> = {}):
    Promise<{ source: IdentitySource; log: RecordingLogger; changes: WorkloadCertificate[] }> {
    const log = recordingLogger();
    const source = createFileSource({ dir, log, debounceMs: 50, ...extra });
    t.after(() => source.close());
    const changes: WorkloadCertificate[] = [];
    source.onChange((c) => changes.push(c));
    await source.start();
    return { source, log, changes };
  }

  it('starts ready with good files', async (t) => {
    const dir = await tempDir();
    const set = await issueWorkloadCert(root, { spiffeId: ID });
    await writeCertFiles(dir, set);
    const { source, changes } = await started(t, dir);
    const state = source.state();
    assert.equal(state.state, 'ready', JSON.stringify(state));
    assert.equal(source.current()?.serial, set.serial);
    assert.equal(source.current()?.spiffeId, ID);
    assert.equal(source.current()?.source, `files ${dir}`);
    assert.equal(changes.length, 1);
  });

  it('puts a replaced valid set in force (files renamed over)', async (t) => {
    const dir = await tempDir();
    await writeCertFiles(dir, await issueWorkloadCert(root, { spiffeId: ID }));
    const { source, changes } = await started(t, dir);
    const next = await issueWorkloadCert(root, { spiffeId: ID });
    await writeCertFiles(dir, next);
    const changed = await waitFor('onChange with the new serial', () => changes.find((c) => c.serial === next.serial), 2000);
    assert.equal(source.current()?.serial, next.serial);
    assert.equal(changed.keyPem, next.keyPem);
    assert.equal(source.state().state, 'ready');
  });

  it('follows Kubernetes ..data symlink swaps', async (t) => {
    const dir = await tempDir();
    const publish = async (version: string, set: Awaited<ReturnType<typeof issueWorkloadCert>>): Promise<void> => {
      await writeCertFiles(join(dir, version), set);
      await symlink(version, join(dir, '..data_tmp'));
      await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    };
    const first = await issueWorkloadCert(root, { spiffeId: ID });
    await publish('..v1', first);
    for (const name of ['cert-chain.pem', 'key.pem', 'root-cert.pem']) await symlink(join('..data', name), join(dir, name));
    const { source, changes } = await started(t, dir);
    assert.equal(source.current()?.serial, first.serial);
    const second = await issueWorkloadCert(root, { spiffeId: ID });
    await publish('..v2', second);
    await waitFor('the swapped set', () => changes.find((c) => c.serial === second.serial), 2000);
    assert.equal(source.state().state, 'ready');
  });

  it('keeps the last good set when a replacement has a mismatched key, and says which file', async (t) => {
    const dir = await tempDir();
    const good = await issueWorkloadCert(root, { spiffeId: ID });
    await writeCertFiles(dir, good);
    const { source, log, changes } = await started(t, dir);
    const other = await issueWorkloadCert(root, { spiffeId: ID });
    await writeCertFiles(dir, { ...good, keyPem: other.keyPem }, ['key']);
    const state = await waitFor('the error state', () => { const s = source.state(); return s.state === 'error' ? s : undefined; }, 2000);
    assert.match(state.message, new RegExp(`${join(dir, 'key.pem')} does not hold the private key`));
    assert.equal(state.certificate?.serial, good.serial);
    assert.equal(source.current()?.serial, good.serial);
    assert.equal(changes.length, 1);
    // Touching the same bad content again is not logged again.
    await writeCertFiles(dir, { ...good, keyPem: other.keyPem }, ['key']);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(log.matching('error', /key\.pem does not hold/).length, 1);
    // The good key back: ready again, no new certificate announced.
    await writeCertFiles(dir, good, ['key']);
    await waitFor('ready again', () => source.state().state === 'ready', 2000);
    assert.equal(changes.length, 1);
  });

  it('starts in error when files are missing, then picks them up when they appear', async (t) => {
    const dir = await tempDir();
    const { source, changes } = await started(t, dir);
    const state = source.state();
    assert.equal(state.state, 'error');
    assert.match(state.state === 'error' ? state.message : '', new RegExp(`${join(dir, 'cert-chain.pem')} does not exist`));
    assert.equal(source.current(), undefined);
    const set = await issueWorkloadCert(root, { spiffeId: ID });
    await writeCertFiles(dir, set);
    await waitFor('ready after the files appear', () => source.state().state === 'ready', 2000);
    assert.equal(changes[0]?.serial, set.serial);
  });

  it('picks up a directory created after start (the poll re-arms the watch)', async (t) => {
    const parent = await tempDir();
    const dir = join(parent, 'etc', 'certs');
    const { source } = await started(t, dir, { pollMs: 200 });
    assert.equal(source.state().state, 'error');
    const set = await issueWorkloadCert(root, { spiffeId: ID });
    await writeCertFiles(dir, set);
    await waitFor('ready after the directory appears', () => source.current()?.serial === set.serial, 3000);
  });

  it('reports an expired set and an in-place rewrite of a bad chain', async (t) => {
    const dir = await tempDir();
    await mkdir(dir, { recursive: true });
    const expired = await issueWorkloadCert(root, { spiffeId: ID, notBefore: new Date(Date.now() - 7_200_000), validityMs: 3_600_000 });
    await writeCertFiles(dir, expired);
    const { source } = await started(t, dir);
    const state = source.state();
    assert.equal(state.state, 'error');
    assert.match(state.state === 'error' ? state.message : '', /cert-chain\.pem: the leaf certificate .* expired at/);
    await writeFile(join(dir, 'cert-chain.pem'), 'garbage\n');
    await waitFor('the new problem', () => { const s = source.state(); return s.state === 'error' && /holds no PEM/.test(s.message); }, 2000);
  });

  it('notices the certificate in force expiring', async (t) => {
    const dir = await tempDir();
    const set = await issueWorkloadCert(root, { spiffeId: ID });
    await writeCertFiles(dir, set);
    let now = Date.now();
    const { source, log } = await started(t, dir, { pollMs: 50, now: () => now });
    assert.equal(source.state().state, 'ready');
    now = set.leaf.notAfter.getTime() + 1000;
    const state = await waitFor('expiry reported', () => { const s = source.state(); return s.state === 'error' ? s : undefined; }, 2000);
    assert.match(state.message, /expired at .*waiting for new files/);
    assert.equal(state.certificate?.serial, set.serial);
    assert.equal(log.matching('error', /expired/).length, 1);
  });
});
