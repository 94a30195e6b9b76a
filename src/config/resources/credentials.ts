// Where a resource's `credentialName: NAME` is read from: a mounted Secret at
// ./etc/mesh/credentials/NAME/ (Istio's TLS-secret keys as file names). One home for the layout,
// read by the gateway's listeners (server certificates) and DestinationRule origination (client
// certificates and CA). Pure: the files are named here and read by whoever uses them.
import { join, resolve } from 'node:path';

export const CREDENTIALS_DIR = './etc/mesh/credentials';

export interface CredentialFiles {
  /** Certificate chain (tls.crt). */
  readonly cert: string;
  /** Private key (tls.key). */
  readonly key: string;
  /** CA bundle (ca.crt): what verifies the peer. */
  readonly ca: string;
}

/** The files of credential `name`, absolute, for an agent running in `cwd`. */
export function credentialFiles(cwd: string, name: string): CredentialFiles {
  const dir = resolve(cwd, CREDENTIALS_DIR, name);
  return { cert: join(dir, 'tls.crt'), key: join(dir, 'tls.key'), ca: join(dir, 'ca.crt') };
}
