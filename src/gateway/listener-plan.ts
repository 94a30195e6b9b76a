// Which ports the gateway listens on, and how, from the Gateway servers that select it. Pure: the
// certificate files are named here and read by the router.
import { join, resolve } from 'node:path';
import type { Gateway, GatewayServer } from '../config/resources/types.js';

/** Where `tls.credentialName: NAME` is read from (a mounted Secret, Istio's gateway file-mount layout). */
export const CREDENTIALS_DIR = './etc/mesh/credentials';

export interface CertificateFiles {
  readonly cert: string;
  readonly key: string;
  /** Server hosts this certificate is for (SNI); `*` entries make it the default. */
  readonly hosts: readonly string[];
}

export interface PortPlan {
  readonly port: number;
  /** HTTPS: TLS terminated here with `certificates` (chosen by SNI, the first as default). */
  readonly protocol: 'HTTP' | 'HTTPS';
  readonly certificates: readonly CertificateFiles[];
  /** Servers whose plain-HTTP requests are redirected to https (tls.httpsRedirect). */
  readonly httpsRedirect: boolean;
  /** `ns/name` of the gateways with a server on this port. */
  readonly gateways: readonly string[];
}

export interface ListenerPlan {
  readonly ports: readonly PortPlan[];
  /** Servers that could not be served, one line each (logged by the router). */
  readonly warnings: readonly string[];
}

function certificateOf(server: GatewayServer, cwd: string): CertificateFiles | undefined {
  const tls = server.tls;
  if (!tls) return undefined;
  const hosts = server.hosts.map((h) => h.host);
  if (tls.serverCertificate && tls.privateKey) {
    return { cert: resolve(cwd, tls.serverCertificate), key: resolve(cwd, tls.privateKey), hosts };
  }
  if (tls.credentialName) {
    const dir = resolve(cwd, CREDENTIALS_DIR, tls.credentialName);
    return { cert: join(dir, 'tls.crt'), key: join(dir, 'tls.key'), hosts };
  }
  return undefined;
}

export function planListeners(gateways: readonly Gateway[], cwd: string): ListenerPlan {
  const byPort = new Map<number, { protocol: 'HTTP' | 'HTTPS'; certificates: CertificateFiles[]; httpsRedirect: boolean; gateways: string[] }>();
  const warnings: string[] = [];
  for (const gw of gateways) {
    const id = `${gw.meta.namespace}/${gw.meta.name}`;
    for (const server of gw.servers) {
      const { number: port, protocol: declared } = server.port;
      let protocol: 'HTTP' | 'HTTPS';
      if (declared === 'HTTP' || declared === 'HTTP2' || declared === 'GRPC') protocol = 'HTTP';
      else if (declared === 'HTTPS' && server.tls?.mode === 'SIMPLE') protocol = 'HTTPS';
      else {
        warnings.push(`gateway ${id}: server on port ${port} (${declared}${server.tls ? `, tls ${server.tls.mode}` : ''}) is not served: `
          + 'this gateway terminates HTTP and HTTPS (tls.mode SIMPLE) only');
        continue;
      }
      const existing = byPort.get(port);
      if (existing && existing.protocol !== protocol) {
        warnings.push(`gateway ${id}: port ${port} is already ${existing.protocol} for ${existing.gateways.join(', ')}; its ${protocol} server is ignored`);
        continue;
      }
      const entry = existing ?? { protocol, certificates: [], httpsRedirect: false, gateways: [] };
      if (!entry.gateways.includes(id)) entry.gateways.push(id);
      if (server.tls?.httpsRedirect && protocol === 'HTTP') entry.httpsRedirect = true;
      const cert = protocol === 'HTTPS' ? certificateOf(server, cwd) : undefined;
      if (cert) entry.certificates.push(cert);
      byPort.set(port, entry);
    }
  }
  const ports = [...byPort.entries()].sort(([a], [b]) => a - b).map(([port, p]) => ({ port, ...p }));
  return { ports, warnings };
}
