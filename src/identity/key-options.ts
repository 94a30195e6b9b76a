// Which key the workload certificate gets, from the environment (WORKLOAD_RSA_KEY_SIZE,
// ECC_SIGNATURE_ALGORITHM, ECC_CURVE, PKCS8_KEY): checked at start, before anything is generated.
// Apart from csr.ts so that checking needs none of the X.509 library (loaded only with a CA).
import { AgentError } from '../errors/agent-error.js';

export type KeyAlgorithm =
  | { readonly kind: 'rsa'; readonly bits: number }
  | { readonly kind: 'ecdsa'; readonly curve: 'P256' | 'P384' };

export interface KeyOptions {
  readonly algorithm: KeyAlgorithm;
  /** PKCS#8 (`BEGIN PRIVATE KEY`) instead of `BEGIN RSA PRIVATE KEY` / `BEGIN EC PRIVATE KEY`. */
  readonly pkcs8: boolean;
}

/** The variables that choose the key (a subset of EnvValues). */
export interface KeyEnv {
  readonly ECC_SIGNATURE_ALGORITHM: string;
  readonly ECC_CURVE: string;
  readonly WORKLOAD_RSA_KEY_SIZE: number;
  readonly PKCS8_KEY: boolean;
}

export const DEFAULT_KEY_OPTIONS: KeyOptions = { algorithm: { kind: 'rsa', bits: 2048 }, pkcs8: false };

/** Bounds of WORKLOAD_RSA_KEY_SIZE: below 2048 is refused by current TLS stacks, above 8192 takes minutes to generate. */
const RSA_BITS: readonly [number, number] = [2048, 8192];

/** Validates the key variables once; messages name the variable, the value and what is accepted. */
export function keyOptionsFromEnv(env: KeyEnv): KeyOptions {
  const pkcs8 = env.PKCS8_KEY;
  if (env.ECC_SIGNATURE_ALGORITHM === 'ECDSA') {
    const curve = env.ECC_CURVE || 'P256';
    if (curve !== 'P256' && curve !== 'P384') {
      throw new AgentError('ERR_KEY_OPTIONS', `ECC_CURVE=${JSON.stringify(env.ECC_CURVE)} is not supported: use P256 or P384`);
    }
    return { algorithm: { kind: 'ecdsa', curve }, pkcs8 };
  }
  if (env.ECC_SIGNATURE_ALGORITHM !== '') {
    throw new AgentError('ERR_KEY_OPTIONS',
      `ECC_SIGNATURE_ALGORITHM=${JSON.stringify(env.ECC_SIGNATURE_ALGORITHM)} is not supported: use ECDSA, or leave it empty for RSA`);
  }
  const bits = env.WORKLOAD_RSA_KEY_SIZE;
  if (!Number.isInteger(bits) || bits < RSA_BITS[0] || bits > RSA_BITS[1] || bits % 8 !== 0) {
    throw new AgentError('ERR_KEY_OPTIONS',
      `WORKLOAD_RSA_KEY_SIZE=${bits} is not supported: use a multiple of 8 from ${RSA_BITS[0]} to ${RSA_BITS[1]} (2048, 3072, 4096)`);
  }
  return { algorithm: { kind: 'rsa', bits }, pkcs8 };
}

