// `/certs`: the workload's certificates as Envoy's admin endpoint shows them (one entry with the
// root under `ca_cert` and the chain under `cert_chain`, each with serial, SANs, validity and days
// left), plus this agent's identity fields at the top. Pure over PEM text.
import type { X509Certificate } from 'node:crypto'; // the module: on first use (process.getBuiltinModule)
import type { IdentityState } from '../identity/workload-certificate.js';

const DAY_MS = 86_400_000;

interface CertDetails {
  readonly path: string;
  readonly serial_number: string;
  readonly subject_alt_names: readonly Record<string, string>[];
  readonly days_until_expiration: number;
  readonly valid_from: string;
  readonly expiration_time: string;
  readonly subject: string;
  readonly issuer: string;
}

function pemBlocks(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

/** `URI:spiffe://..., DNS:a.example` → Envoy's `[{uri: ...}, {dns: ...}]`. */
function sansOf(cert: X509Certificate): Record<string, string>[] {
  return (cert.subjectAltName ?? '').split(', ').filter((s) => s !== '').map((s) => {
    const colon = s.indexOf(':');
    return { [s.slice(0, colon).toLowerCase()]: s.slice(colon + 1) };
  });
}

function details(pem: string, path: string, nowMs: number): CertDetails {
  const c = new (process.getBuiltinModule('node:crypto').X509Certificate)(pem);
  const until = Date.parse(c.validTo);
  return {
    path, serial_number: c.serialNumber.toLowerCase(), subject_alt_names: sansOf(c),
    days_until_expiration: Math.floor((until - nowMs) / DAY_MS),
    valid_from: new Date(Date.parse(c.validFrom)).toISOString(), expiration_time: new Date(until).toISOString(),
    // Istio's workload certificates have an empty subject (node then says undefined).
    subject: (c.subject ?? '').replace(/\n/g, ', '), issuer: (c.issuer ?? '').replace(/\n/g, ', '),
  };
}

/** The `/certs` document for the identity's state. */
export function certsDump(state: IdentityState, nowMs: number): Record<string, unknown> {
  const certificate = state.state === 'ready' || state.state === 'error' ? state.certificate : undefined;
  const head = {
    identity_state: state.state,
    ...(state.state === 'pending' || state.state === 'error' ? { message: state.message } : {}),
  };
  if (!certificate) return { ...head, certificates: [] };
  return {
    ...head,
    identity: certificate.spiffeId,
    source: certificate.source,
    certificates: [{
      ca_cert: pemBlocks(certificate.rootPem).map((pem) => details(pem, `${certificate.source} root`, nowMs)),
      cert_chain: pemBlocks(certificate.certChainPem).map((pem) => details(pem, `${certificate.source} chain`, nowMs)),
    }],
  };
}
