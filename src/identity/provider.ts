// Which identity source the agent uses, from the environment. Precedence, first match wins:
//   1. PROV_CERT=<dir>            mounted files in <dir> (relative paths from the working directory)
//   2. FILE_MOUNTED_CERTS=true    mounted files in ./etc/certs
//   3. CA_ADDR=<host:port>        certificates requested from (and renewed with) Istio's CA
//   4. otherwise                  no identity: the caller runs plaintext and logs it once
// Files win over the CA because an operator who mounts certificates means them to be used. (Istio's
// agent also uses PROV_CERT as the client certificate towards the CA; this agent does not talk to
// the CA when certificates are provisioned.) Variables that cannot be honoured (key algorithm, CA
// address, JWT policy) throw here, once, before anything starts.
import { resolve } from 'node:path';
import type { EnvValues } from '../config/env/registry.js';
import { AgentError } from '../errors/agent-error.js';
import type { ScopedLogger } from '../log/logger.js';
import { parseCaAddress } from './ca-address.js';
import type { CaSourceOptions } from './ca-source.js';
import { MOUNTED_CERTS_DIR } from './cert-files.js';
import { keyOptionsFromEnv } from './key-options.js';
import { createFileSource } from './file-source.js';
import { workloadSpiffeId } from './spiffe.js';
import type { IdentitySource, IdentityState, WorkloadCertificate } from './workload-certificate.js';

/** Where the projected token is (JWT_POLICY=third-party-jwt, the default) or the legacy one (first-party-jwt). */
export const THIRD_PARTY_TOKEN_FILE = 'var/run/secrets/tokens/istio-token';
export const FIRST_PARTY_TOKEN_FILE = 'var/run/secrets/kubernetes.io/serviceaccount/token';
/** The CA's root when CA_ROOT_CA is empty. */
export const DEFAULT_CA_ROOT_FILE = 'var/run/secrets/istio/root-cert.pem';

/** The variables this module reads. */
export type IdentityEnvValues = Pick<EnvValues,
  | 'PROV_CERT' | 'FILE_MOUNTED_CERTS' | 'CA_ADDR' | 'CA_ROOT_CA' | 'MESHD_SAN' | 'JWT_POLICY' | 'CLUSTER_ID'
  | 'TRUST_DOMAIN' | 'POD_NAMESPACE' | 'SERVICE_ACCOUNT' | 'SECRET_TTL' | 'SECRET_GRACE_PERIOD_RATIO'
  | 'SECRET_GRACE_PERIOD_RATIO_JITTER' | 'OUTPUT_CERTS' | 'ECC_SIGNATURE_ALGORITHM' | 'ECC_CURVE'
  | 'WORKLOAD_RSA_KEY_SIZE' | 'PKCS8_KEY' | 'MESH_GPRC_MAXRECVMSGSIZE' | 'COMPLIANCE_POLICY'>;

export type IdentityChoice =
  | { readonly kind: 'files'; readonly dir: string }
  | { readonly kind: 'ca'; readonly address: string }
  | { readonly kind: 'none' };

/** The precedence above, as data (for logs and tests). */
export function chooseIdentitySource(env: IdentityEnvValues, cwd: string): IdentityChoice {
  if (env.PROV_CERT !== '') return { kind: 'files', dir: resolve(cwd, env.PROV_CERT) };
  if (env.FILE_MOUNTED_CERTS) return { kind: 'files', dir: resolve(cwd, MOUNTED_CERTS_DIR) };
  if (env.CA_ADDR !== '') return { kind: 'ca', address: env.CA_ADDR };
  return { kind: 'none' };
}

export function tokenFileFor(jwtPolicy: string, cwd: string): string {
  if (jwtPolicy === 'third-party-jwt' || jwtPolicy === '') return resolve(cwd, THIRD_PARTY_TOKEN_FILE);
  if (jwtPolicy === 'first-party-jwt') return resolve(cwd, FIRST_PARTY_TOKEN_FILE);
  throw new AgentError('ERR_ENV_VALUE', `JWT_POLICY=${JSON.stringify(jwtPolicy)} is not supported: use third-party-jwt or first-party-jwt`);
}

function checkRatio(name: string, value: number): number {
  if (!(value >= 0 && value <= 1)) throw new AgentError('ERR_ENV_VALUE', `${name}=${value} is not a ratio from 0 to 1`);
  return value;
}

/** A positive count from the environment, or an error naming the variable. */
function positive(name: string, value: number): number {
  if (!(Number.isSafeInteger(value) && value > 0)) throw new AgentError('ERR_ENV_VALUE', `${name}=${value} is not a positive integer`);
  return value;
}

/** A source that holds nothing: no certificates are configured. */
export function noIdentitySource(): IdentitySource {
  const state: IdentityState = { state: 'none' };
  return {
    start: async () => {},
    current: () => undefined,
    state: () => state,
    onChange: () => {},
    close: () => {},
  };
}

/** The identity source the environment asks for (see the precedence at the top of this file). */
export function identitySourceFrom(env: IdentityEnvValues, cwd: string, log: ScopedLogger): IdentitySource {
  // The agent's own gRPC (the CA client; it serves none): checked whatever the source, so a bad value is said at start.
  // MESH_GPRC_MAXSTREAMS bounds a gRPC server's concurrent streams: this agent serves none (it is not read; a start-up warning says so).
  const maxReceiveMessageBytes = positive('MESH_GPRC_MAXRECVMSGSIZE', env.MESH_GPRC_MAXRECVMSGSIZE);
  const choice = chooseIdentitySource(env, cwd);
  if (choice.kind === 'none') return noIdentitySource();
  if (choice.kind === 'files') return createFileSource({ dir: choice.dir, log });
  parseCaAddress(choice.address);
  if (!(env.SECRET_TTL > 0)) throw new AgentError('ERR_ENV_VALUE', `SECRET_TTL=${env.SECRET_TTL / 1000}s is not a positive duration`);
  return lazyCaSource({
    client: {
      address: choice.address,
      rootCertFile: resolve(cwd, env.CA_ROOT_CA || DEFAULT_CA_ROOT_FILE),
      ...(env.MESHD_SAN !== '' ? { serverName: env.MESHD_SAN } : {}),
      tokenFile: tokenFileFor(env.JWT_POLICY, cwd),
      clusterId: env.CLUSTER_ID,
      maxReceiveMessageBytes,
      compliancePolicy: env.COMPLIANCE_POLICY,
    },
    spiffeId: workloadSpiffeId(env),
    ttlMs: env.SECRET_TTL,
    rotation: {
      graceRatio: checkRatio('SECRET_GRACE_PERIOD_RATIO', env.SECRET_GRACE_PERIOD_RATIO),
      graceJitter: checkRatio('SECRET_GRACE_PERIOD_RATIO_JITTER', env.SECRET_GRACE_PERIOD_RATIO_JITTER),
    },
    key: keyOptionsFromEnv(env),
    ...(env.OUTPUT_CERTS !== '' ? { outputDir: resolve(cwd, env.OUTPUT_CERTS) } : {}),
    log,
  });
}

/**
 * The CA source, loaded when it starts: gRPC and the X.509 library cost a worker hundreds of
 * milliseconds to load, and a sidecar with mounted certificates (or none) never needs them.
 */
function lazyCaSource(options: CaSourceOptions): IdentitySource {
  let inner: IdentitySource | undefined;
  let closed = false;
  const listeners: ((c: WorkloadCertificate) => void)[] = [];
  const pending: IdentityState = { state: 'pending', message: `asking the CA at ${options.client.address}` };
  return {
    async start() {
      const { createCaSource } = await import('./ca-source.js');
      if (closed) return;
      inner = createCaSource(options);
      for (const l of listeners) inner.onChange(l);
      await inner.start();
    },
    current: () => inner?.current(),
    state: () => inner?.state() ?? pending,
    onChange(listener) {
      listeners.push(listener);
      inner?.onChange(listener);
    },
    close() {
      closed = true;
      inner?.close();
    },
  };
}
