// The workload's certificate from Istio's CA: a fresh key and CSR, `CreateCertificate`, the answer
// checked like mounted files are, then a timer for the renewal (rotation.ts). A failed request is
// retried with back-off while the certificate in force stays in use; the state says which CA failed.
import { readFile } from 'node:fs/promises';
import { AgentError } from '../errors/agent-error.js';
import type { ScopedLogger } from '../log/logger.js';
import { requestCertificate, type CaClientOptions, type CertificateRequest } from './ca-client.js';
import { checkCertificateSet, isIssuedBy, parsePemCertificates } from './check.js';
import { generateKeyAndCsr } from './csr.js';
import type { KeyOptions } from './key-options.js';
import { writeOutputCerts } from './output-certs.js';
import { DEFAULT_BACKOFF, backoffDelayMs, renewalDelayMs, type BackoffPolicy, type RotationPolicy } from './rotation.js';
import { CertificateHolder } from './certificate-holder.js';
import type { IdentitySource, WorkloadCertificate } from './workload-certificate.js';

export interface CaSourceOptions {
  readonly client: CaClientOptions;
  /** The id put in the CSR's URI SAN. */
  readonly spiffeId: string;
  /** SECRET_TTL: the validity asked for. */
  readonly ttlMs: number;
  readonly rotation: RotationPolicy;
  readonly key: KeyOptions;
  /** OUTPUT_CERTS: where to copy each certificate put in force; none when undefined. */
  readonly outputDir?: string;
  readonly log: ScopedLogger;
  readonly backoff?: BackoffPolicy;
  readonly now?: () => number;
  readonly random?: () => number;
  /** The CA call; tests may wrap it. */
  readonly request?: (client: CaClientOptions, request: CertificateRequest) => Promise<string[]>;
}

/** setTimeout's longest delay (about 24.8 days); longer waits are taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

class CaIdentitySource extends CertificateHolder {
  readonly #o: CaSourceOptions;
  readonly #now: () => number;
  readonly #random: () => number;
  #failures = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: CaSourceOptions) {
    super(`requesting a certificate for ${options.spiffeId} from CA ${options.client.address}`);
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
  }

  get #source(): string {
    return `ca ${this.#o.client.address}`;
  }

  async start(): Promise<void> {
    await this.#attempt();
  }

  protected stop(): void {
    clearTimeout(this.#timer);
  }

  /** Waits `delayMs` (in steps past setTimeout's limit), then asks the CA again. */
  #schedule(delayMs: number): void {
    if (this.closed) return;
    const due = this.#now() + delayMs;
    const step = (): void => {
      const left = due - this.#now();
      if (left > 0) {
        this.#timer = setTimeout(step, Math.min(left, MAX_TIMER_MS));
        this.#timer.unref();
      } else {
        void this.#attempt();
      }
    };
    step();
  }

  async #attempt(): Promise<void> {
    try {
      const certificate = await this.#fetch();
      if (this.closed) return;
      this.#failures = 0;
      this.putInForce(certificate);
      const delay = renewalDelayMs(certificate, this.#now(), this.#o.rotation, this.#random);
      this.#o.log.info('workload certificate in force', {
        source: certificate.source, spiffeId: certificate.spiffeId, serial: certificate.serial,
        notAfter: new Date(certificate.notAfterMs).toISOString(), renewAt: new Date(this.#now() + delay).toISOString(),
      });
      await this.#writeOutput(certificate);
      this.#schedule(delay);
    } catch (err) {
      if (this.closed) return;
      this.#failures += 1;
      const delay = backoffDelayMs(this.#failures, this.#o.backoff ?? DEFAULT_BACKOFF, this.#random);
      const kept = this.held ? `; keeping the certificate in force (serial ${this.held.serial}, valid until ${new Date(this.held.notAfterMs).toISOString()})` : '';
      const message = `${(err as Error).message}${kept}`;
      this.#o.log.error(`certificate request failed: ${message}; retry ${this.#failures} in ${(delay / 1000).toFixed(1)} s`, {
        code: (err as AgentError).code,
      });
      this.markFailed(message);
      this.#schedule(delay);
    }
  }

  /** A new key, the CA's answer, and the same checks as mounted files get. */
  async #fetch(): Promise<WorkloadCertificate> {
    const { client } = this.#o;
    const { csrPem, keyPem } = await generateKeyAndCsr(this.#o.spiffeId, this.#o.key);
    const call = this.#o.request ?? requestCertificate;
    const answer = await call(client, { csrPem, validitySeconds: this.#o.ttlMs / 1000 });
    const where = `the certificate chain from CA ${client.address}`;
    const certs = parsePemCertificates(answer.join('\n'), where);
    // Istio's CA ends the chain with its root, which becomes the trust anchor for peers. A chain
    // that does not end self-signed is checked against the CA's root file instead.
    const last = certs[certs.length - 1]!;
    const endsWithRoot = certs.length > 1 && isIssuedBy(last, last);
    let rootPem: string;
    let rootName: string;
    if (endsWithRoot) {
      rootPem = last.toString();
      rootName = `the root at the end of ${where}`;
    } else {
      rootPem = await readFile(client.rootCertFile, 'utf8').catch((err: Error) => {
        throw new AgentError('ERR_CERT_FILE', `the CA's root certificate ${client.rootCertFile} cannot be read (${err.message})`, { cause: err });
      });
      rootName = client.rootCertFile;
    }
    const certificate = checkCertificateSet(
      { chainPem: answer.join('\n'), keyPem, rootPem },
      { names: { chain: where, key: 'the key generated for the request', root: rootName }, source: this.#source, nowMs: this.#now() },
    );
    // Istio's CA takes the identity from the token, not from the CSR; what it vouches for is used,
    // but a difference means the pod's environment and its service account disagree.
    if (certificate.spiffeId !== this.#o.spiffeId) {
      this.#o.log.warn(`CA ${client.address} issued a certificate for ${certificate.spiffeId}, not ${this.#o.spiffeId} as requested `
        + '(check POD_NAMESPACE, SERVICE_ACCOUNT and TRUST_DOMAIN against the token)');
    }
    return certificate;
  }

  async #writeOutput(certificate: WorkloadCertificate): Promise<void> {
    if (this.#o.outputDir === undefined) return;
    try {
      await writeOutputCerts(this.#o.outputDir, certificate);
    } catch (err) {
      this.#o.log.error(`OUTPUT_CERTS: cannot write the certificate files into ${this.#o.outputDir}: ${(err as Error).message}`);
    }
  }
}

/** An IdentitySource that requests and renews the workload certificate from Istio's CA. */
export function createCaSource(options: CaSourceOptions): IdentitySource {
  return new CaIdentitySource(options);
}
