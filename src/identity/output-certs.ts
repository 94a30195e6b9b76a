// OUTPUT_CERTS: a copy of each certificate put in force, for tools outside the agent (VMs, debugging).
// Each file is written to a temporary name in the same directory and renamed over, so a reader sees
// the old file or the new one, never half of one; the key is readable by the owner only.
import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CERT_CHAIN_FILE, KEY_FILE, ROOT_CERT_FILE } from './cert-files.js';
import type { WorkloadCertificate } from './workload-certificate.js';

async function writeAtomically(path: string, text: string, mode: number): Promise<void> {
  const tmp = join(path, '..', `.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, text, { mode, flag: 'wx' });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Writes cert-chain.pem (leaf and intermediates), key.pem (0600) and root-cert.pem into `dir`. */
export async function writeOutputCerts(dir: string, certificate: WorkloadCertificate): Promise<void> {
  await mkdir(dir, { recursive: true });
  // Three renames are not one: a reader may meet a new key beside the old chain for a moment, so
  // readers should check the pair and retry (the mounted-files source here does).
  await writeAtomically(join(dir, KEY_FILE), certificate.keyPem, 0o600);
  await writeAtomically(join(dir, CERT_CHAIN_FILE), certificate.certChainPem, 0o644);
  await writeAtomically(join(dir, ROOT_CERT_FILE), certificate.rootPem, 0o644);
}
