// The file names of a certificate set on disk, shared by the mounted-files source, OUTPUT_CERTS and
// the tests: Istio's names, so a directory prepared for Istio's agent works here unchanged.
import { join } from 'node:path';

export const CERT_CHAIN_FILE = 'cert-chain.pem';
export const KEY_FILE = 'key.pem';
export const ROOT_CERT_FILE = 'root-cert.pem';

/** Where the mounted certificates are when FILE_MOUNTED_CERTS=true, relative to the working directory. */
export const MOUNTED_CERTS_DIR = 'etc/certs';

export interface CertFilePaths {
  readonly chain: string;
  readonly key: string;
  readonly root: string;
}

export function certFilePaths(dir: string): CertFilePaths {
  return { chain: join(dir, CERT_CHAIN_FILE), key: join(dir, KEY_FILE), root: join(dir, ROOT_CERT_FILE) };
}
