// The workload's certificate as the TLS layer uses it: one secure context per certificate (the same
// serves inbound and outbound mTLS: it presents the certificate and trusts the mesh root), made
// once when a certificate comes into force and replaced when the next one does. Connections made
// before keep the context they were made with: a rotation never cuts a connection.
import type { SecureContext } from 'node:tls'; // the module: on first use (process.getBuiltinModule)
import type { WorkloadCertificate } from '../../identity/workload-certificate.js';
import { compliantTls } from '../../security/compliance.js';

/**
 * Mesh TLS: 1.2 at least (Istio's default minimum); TLS 1.3 suites in the order Envoy's BoringSSL
 * prefers them (AES-128-GCM first); forward-secret suites only for 1.2.
 */
const MESH_TLS: { minVersion: 'TLSv1.2' | 'TLSv1.3'; maxVersion?: 'TLSv1.2' | 'TLSv1.3'; ciphers: string; ecdhCurve?: string } = {
  minVersion: 'TLSv1.2',
  ciphers: 'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:'
    + 'ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305',
};

export interface MeshContexts {
  readonly certificate: WorkloadCertificate;
  readonly trustDomain: string;
  /** Presents the workload's certificate, asks for the peer's, trusts the mesh root. */
  readonly context: SecureContext;
}

export class MeshCredentials {
  private held: MeshContexts | undefined;
  private readonly tls: typeof MESH_TLS;

  /** `compliancePolicy`: COMPLIANCE_POLICY, laid over the mesh's TLS settings (security/compliance.ts). */
  constructor(compliancePolicy = '') {
    this.tls = compliantTls(compliancePolicy, { ...MESH_TLS });
  }

  /** Puts a certificate in force (undefined: none). Throws when OpenSSL refuses it (the caller keeps the last one). */
  set(certificate: WorkloadCertificate | undefined): void {
    if (!certificate) {
      this.held = undefined;
      return;
    }
    if (this.held?.certificate.serial === certificate.serial && this.held.certificate.rootPem === certificate.rootPem) return;
    const context = process.getBuiltinModule('node:tls').createSecureContext({ cert: certificate.certChainPem, key: certificate.keyPem, ca: certificate.rootPem, ...this.tls });
    const trustDomain = /^spiffe:\/\/([^/]+)/.exec(certificate.spiffeId)?.[1] ?? '';
    this.held = { certificate, trustDomain, context };
  }

  get current(): MeshContexts | undefined {
    return this.held;
  }
}
