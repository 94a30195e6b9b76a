// What the data plane needs from a workload's identity: the certificate it presents, its key, the
// root it trusts, and what the certificate says. Where it came from (mounted files, a CA) is the
// identity sources' business; the proxy only reads the current one for each new connection.

/** A checked certificate set: the key fits the leaf, the chain leads to the root, the leaf holds a SPIFFE id. */
export interface WorkloadCertificate {
  /** PEM: the leaf first, then any intermediates. */
  readonly certChainPem: string;
  /** PEM: the leaf's private key. */
  readonly keyPem: string;
  /** PEM: the mesh's trust anchor(s); a peer's chain must lead to one of them. */
  readonly rootPem: string;
  /** The leaf's URI SAN: `spiffe://<trust domain>/ns/<namespace>/sa/<service account>`. */
  readonly spiffeId: string;
  /** The leaf's serial number, hex, as OpenSSL prints it. */
  readonly serial: string;
  /** Validity of the leaf, in ms since the epoch (plain numbers cross to the worker threads). */
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
  /** Where it came from, for the logs and /certs: `files ./etc/certs`, `ca istiod.mesh-system.svc:15012`. */
  readonly source: string;
}

/** Whether an identity is held, for readiness and the logs. */
export type IdentityState =
  | { readonly state: 'none' }
  | { readonly state: 'pending'; readonly message: string }
  | { readonly state: 'ready'; readonly certificate: WorkloadCertificate }
  /** The last attempt failed; `certificate` is the one still in use, if any. */
  | { readonly state: 'error'; readonly message: string; readonly certificate?: WorkloadCertificate };

/** A source of the workload's certificate, replaced over time (files rewritten, CA renewals). */
export interface IdentitySource {
  /** Resolves after the first attempt (successful or not); never rejects for bad input. */
  start(): Promise<void>;
  current(): WorkloadCertificate | undefined;
  state(): IdentityState;
  /** Called with each new certificate put in force. */
  onChange(listener: (certificate: WorkloadCertificate) => void): void;
  close(): void;
}
