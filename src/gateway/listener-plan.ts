// Which ports the gateway listens on, and how, from the Gateway servers that select it. Pure: the
// certificate files are named here and read by the router.
import { resolve } from 'node:path';
import { credentialFiles } from '../config/resources/credentials.js';
import { nodeTlsSettings, parametersWarning, type NodeTlsSettings } from '../config/resources/tls-parameters.js';
import type { Gateway, GatewayServer } from '../config/resources/types.js';
import { DomainIndex } from '../routing/hosts.js';
import { serverKey } from '../routing/gateway-table.js';
import { serverKind } from '../routing/gateway-l4-table.js';

/** Where `tls.credentialName: NAME` is read from (a mounted Secret, Istio's gateway file-mount layout). */
export { CREDENTIALS_DIR } from '../config/resources/credentials.js';

/** One HTTPS server of a port: what a client whose SNI names one of `hosts` is served with. */
export interface TlsServerPlan {
  /** The server in the route table (serverKey): its hosts are all a connection to it can reach. */
  readonly server: string;
  /** The server's hosts without namespace: `*`, `*.suffix` or exact, matched against the SNI. */
  readonly hosts: readonly string[];
  readonly cert: string;
  readonly key: string;
  readonly settings: NodeTlsSettings;
}

export type PortProtocol = 'HTTP' | 'HTTPS' | 'TCP' | 'TLS';

export interface PortPlan {
  readonly port: number;
  /**
   * HTTPS: TLS terminated here, by the server `tlsServers` has for the client's SNI. TCP: each
   * connection relayed by the port's tcp route; TLS: TLS PASSTHROUGH, each connection relayed whole
   * by the tls route its ClientHello's server name picks (src/routing/gateway-l4-table.ts).
   */
  readonly protocol: PortProtocol;
  readonly tlsServers: readonly TlsServerPlan[];
  /** Servers whose plain-HTTP requests are redirected to https (tls.httpsRedirect). */
  readonly httpsRedirect: boolean;
  /** `ns/name` of the gateways with a server on this port. */
  readonly gateways: readonly string[];
  /** The servers' `bind`: the one address the port listens on; absent: every address. */
  readonly bind?: string;
}

export interface ListenerPlan {
  readonly ports: readonly PortPlan[];
  /** Servers that could not be served, one line each (logged by the router). */
  readonly warnings: readonly string[];
}

function tlsServerOf(server: GatewayServer, key: string, cwd: string): TlsServerPlan | undefined {
  const tls = server.tls;
  if (!tls) return undefined;
  const hosts = [...new Set(server.hosts.map((h) => h.host))];
  const settings = nodeTlsSettings(tls);
  if (tls.serverCertificate && tls.privateKey) {
    return { server: key, hosts, cert: resolve(cwd, tls.serverCertificate), key: resolve(cwd, tls.privateKey), settings };
  }
  if (tls.credentialName) {
    const files = credentialFiles(cwd, tls.credentialName);
    return { server: key, hosts, cert: files.cert, key: files.key, settings };
  }
  return undefined;
}

/**
 * The servers of a port by SNI, in Envoy's filter-chain order: the exact name, then the longest
 * `*.suffix`, then a server listing `*` (Istio gives that one a chain without server names).
 */
export function sniIndex<T extends { readonly hosts: readonly string[] }>(servers: readonly T[]): DomainIndex<T> {
  const index = new DomainIndex<T>();
  for (const s of servers) for (const h of s.hosts) index.ensure(h, () => s);
  return index;
}

/**
 * The server for a client's SNI, or undefined: refuse the connection. A client without SNI gets
 * only a `*` server, as Envoy only picks a chain without server names for it.
 */
export function serverForName<T>(index: DomainIndex<T>, serverName: string | undefined): T | undefined {
  return serverName === undefined ? index.catchAll : index.lookup(serverName.toLowerCase());
}

const PORT_PROTOCOL = { 'http': 'HTTP', 'https': 'HTTPS', 'tcp': 'TCP', 'tls-passthrough': 'TLS' } as const;

export function planListeners(gateways: readonly Gateway[], cwd: string): ListenerPlan {
  const byPort = new Map<number, {
    protocol: PortProtocol; bind: string | undefined; tlsServers: TlsServerPlan[]; httpsRedirect: boolean; gateways: string[]; sniHosts: Map<string, string>;
  }>();
  const warnings: string[] = [];
  for (const gw of gateways) {
    const id = `${gw.meta.namespace}/${gw.meta.name}`;
    for (const [index, server] of gw.servers.entries()) {
      const { number: port, protocol: declared } = server.port;
      const kind = serverKind(server);
      if (kind === 'unserved') {
        warnings.push(`gateway ${id}: server on port ${port} (${declared}${server.tls ? `, tls ${server.tls.mode}` : ''}) is not served: `
          + 'this gateway serves HTTP, HTTPS with tls.mode SIMPLE, TCP (MONGO, MYSQL, REDIS), and TLS or HTTPS with tls.mode PASSTHROUGH only');
        continue;
      }
      const protocol = PORT_PROTOCOL[kind];
      const existing = byPort.get(port);
      if (existing && existing.protocol !== protocol) {
        warnings.push(`gateway ${id}: port ${port} is already ${existing.protocol} for ${existing.gateways.join(', ')}; its ${protocol} server is ignored`);
        continue;
      }
      // One listener per port here: servers of a port that bind different addresses cannot share it.
      if (existing && existing.bind !== server.bind) {
        warnings.push(`gateway ${id}: server ${index} on port ${port} (bind ${server.bind ?? 'every address'}) is not served: `
          + `the port already listens on ${existing.bind ?? 'every address'} for ${existing.gateways.join(', ')}`);
        continue;
      }
      const entry = existing ?? { protocol, bind: server.bind, tlsServers: [], httpsRedirect: false, gateways: [], sniHosts: new Map<string, string>() };
      if (protocol === 'HTTPS') {
        // Istio's rule: two TLS servers of a port cannot claim the same name (Envoy would refuse the
        // listener); the later one is skipped.
        const key = serverKey(id, index);
        const taken = server.hosts.map((h) => h.host).filter((h) => entry.sniHosts.has(h));
        if (taken.length > 0) {
          warnings.push(`gateway ${id}: server ${index} on port ${port} is not served: ${taken.join(', ')} already named by ${entry.sniHosts.get(taken[0]!)}`);
          continue;
        }
        const tls = tlsServerOf(server, key, cwd);
        if (!tls) continue;
        for (const h of tls.hosts) entry.sniHosts.set(h, key);
        entry.tlsServers.push(tls);
        const warning = server.tls ? parametersWarning(server.tls) : undefined;
        if (warning !== undefined) warnings.push(`gateway ${id}: server ${index} on port ${port}: ${warning}`);
      }
      if (!entry.gateways.includes(id)) entry.gateways.push(id);
      if (server.tls?.httpsRedirect && protocol === 'HTTP') entry.httpsRedirect = true;
      byPort.set(port, entry);
    }
  }
  const ports = [...byPort.entries()].sort(([a], [b]) => a - b)
    .map(([port, { protocol, bind, tlsServers, httpsRedirect, gateways: names }]) => ({
      port, protocol, tlsServers, httpsRedirect, gateways: names, ...(bind !== undefined ? { bind } : {}),
    }));
  return { ports, warnings };
}
