// What every identity source does alike: hold the certificate in force and the state behind
// readiness, tell the listeners of each new certificate, keep the last good one when an attempt
// fails (the state says why). The sources say how a certificate is got; this says what is held.
import type { IdentitySource, IdentityState, WorkloadCertificate } from './workload-certificate.js';

export abstract class CertificateHolder implements IdentitySource {
  readonly #listeners: ((certificate: WorkloadCertificate) => void)[] = [];
  #current: WorkloadCertificate | undefined;
  #state: IdentityState;
  #closed = false;

  /** `pending`: what the source is doing until its first answer (for readiness and /certs). */
  protected constructor(pending: string) {
    this.#state = { state: 'pending', message: pending };
  }

  abstract start(): Promise<void>;
  /** Ends the source's timers and watches (close() calls it once). */
  protected abstract stop(): void;

  current(): WorkloadCertificate | undefined {
    return this.#current;
  }

  state(): IdentityState {
    return this.#state;
  }

  onChange(listener: (certificate: WorkloadCertificate) => void): void {
    this.#listeners.push(listener);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.stop();
  }

  protected get closed(): boolean {
    return this.#closed;
  }

  /** The certificate in force, if any. */
  protected get held(): WorkloadCertificate | undefined {
    return this.#current;
  }

  /** A new certificate in force: held, ready, and every listener told. */
  protected putInForce(certificate: WorkloadCertificate): void {
    this.#current = certificate;
    this.#state = { state: 'ready', certificate };
    for (const listener of this.#listeners) listener(certificate);
  }

  /** The certificate held is still good (after an error that has passed). */
  protected markReady(): void {
    if (this.#current && this.#state.state !== 'ready') this.#state = { state: 'ready', certificate: this.#current };
  }

  /** An attempt failed: the state says why, and the certificate held (if any) stays in force. */
  protected markFailed(message: string): void {
    this.#state = this.#current ? { state: 'error', message, certificate: this.#current } : { state: 'error', message };
  }
}
