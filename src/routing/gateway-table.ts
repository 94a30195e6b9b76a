// The gateway's route table, built once per configuration: per listening port, the Gateway servers
// on it and the virtual hosts they serve, each holding the VirtualService rules that apply there.
// Everything a request would otherwise recompute (host intersections, gateway and port filters on
// match entries, case folding) is done here. Pure.
import type { Gateway, GatewayServerHost, GatewayTls, HttpRoute, ServerProtocol, VirtualService } from '../config/resources/types.js';
import type { NoRouteDecision } from './decision.js';
import { DomainIndex, intersectHosts } from './hosts.js';
import { compileRule, type CompiledRule } from './rule.js';

export type { CompiledRule } from './rule.js';

export interface VirtualHost {
  /** `*`, `*.suffix` or an exact host: the intersection of a server host and a VirtualService host. */
  readonly domain: string;
  /** `ns/name`, in the order their rules are tried. */
  readonly virtualServices: readonly string[];
  readonly rules: readonly CompiledRule[];
  /** Plain-HTTP requests get a 301 to https (the server's tls.httpsRedirect). */
  readonly httpsRedirect: boolean;
  /** The answer when no rule matches. */
  readonly noRoute: NoRouteDecision;
}

export interface ServerRoutes {
  /** `ns/name` of the Gateway. */
  readonly gateway: string;
  /** Position in the Gateway's `servers`. */
  readonly index: number;
  /** serverKey(gateway, index): how a listener names the server a TLS connection's SNI chose. */
  readonly key: string;
  readonly name?: string;
  readonly protocol: ServerProtocol;
  readonly tls?: GatewayTls;
  readonly hosts: readonly GatewayServerHost[];
  /** What this server contributes; empty for servers that do not carry HTTP (TCP, TLS passthrough). */
  readonly virtualHosts: readonly VirtualHost[];
  /**
   * `virtualHosts` by domain: what a request on a TLS connection to this server is routed by (Istio
   * gives each HTTPS server a route table of its own hosts).
   */
  readonly domains: DomainIndex<VirtualHost>;
}

export interface PortRoutes {
  readonly port: number;
  /** The protocol of the first server declared on the port. */
  readonly protocol: ServerProtocol;
  readonly servers: readonly ServerRoutes[];
  /** The port's virtual hosts, merged across its servers by domain: what plain-HTTP requests are routed by. */
  readonly virtualHosts: readonly VirtualHost[];
  /** `virtualHosts` by domain, in Envoy's lookup order. */
  readonly domains: DomainIndex<VirtualHost>;
  /** `servers` by key. */
  readonly serversByKey: ReadonlyMap<string, ServerRoutes>;
}

export interface RouteTable {
  readonly ports: ReadonlyMap<number, PortRoutes>;
  /** Servers that were ignored, one line each. */
  readonly warnings: readonly string[];
}

interface MutableVirtualHost {
  readonly domain: string;
  readonly virtualServices: string[];
  readonly rules: CompiledRule[];
  httpsRedirect: boolean;
  noRoute: NoRouteDecision;
}

/** Protocols that can share a port: HTTP flavours with each other, TLS-based ones by SNI. */
function protocolFamily(p: ServerProtocol): 'http' | 'tls' | 'tcp' {
  switch (p) {
    case 'HTTP': case 'HTTP2': case 'GRPC': return 'http';
    case 'HTTPS': case 'TLS': return 'tls';
    case 'TCP': case 'MONGO': case 'MYSQL': case 'REDIS': return 'tcp';
  }
}

/** HTTP, or HTTPS terminated here: the servers whose requests VirtualService http rules route. */
function carriesHttp(protocol: ServerProtocol, tls: GatewayTls | undefined): boolean {
  if (protocolFamily(protocol) === 'http') return true;
  return protocol === 'HTTPS' && tls?.mode !== 'PASSTHROUGH' && tls?.mode !== 'AUTO_PASSTHROUGH';
}

/** `ns/name` for a gateway reference; a bare name is in the VirtualService's namespace. */
export function resolveGatewayRef(ref: string, vsNamespace: string): string {
  return ref === 'mesh' || ref.includes('/') ? ref : `${vsNamespace}/${ref}`;
}

const id = (meta: { readonly namespace: string; readonly name: string }): string => `${meta.namespace}/${meta.name}`;

/** A Gateway server's name for listeners and routes: `ns/name#index`. */
export function serverKey(gateway: string, index: number): string {
  return `${gateway}#${index}`;
}

/** The rule as it applies on `gateway` and `port`, or undefined when none of its match entries does. */
function compileGatewayRule(vs: VirtualService, vsId: string, route: HttpRoute, ruleIndex: number, gateway: string, port: number): CompiledRule | undefined {
  return compileRule({ virtualService: vsId, gateway, ruleIndex, route }, (m) => {
    if (m.gateways && !m.gateways.some((g) => resolveGatewayRef(g, vs.meta.namespace) === gateway)) return false;
    return m.port === undefined || m.port === port;
  });
}

/** Until every VirtualService is in: buildRouteTable replaces it before returning. */
const PENDING = Object.freeze({ kind: 'no-route' as const, virtualServices: [], reason: 'no route: table not built' });

function noRoute(vh: MutableVirtualHost): NoRouteDecision {
  return Object.freeze({
    kind: 'no-route' as const,
    virtualServices: vh.virtualServices,
    reason: vh.virtualServices.length === 0 ? `no route: no rule for ${vh.domain}` : `no route: no rule of ${vh.virtualServices.join(', ')} matched`,
  });
}

/** The domains a VirtualService serves under a server: its hosts intersected with the server's. */
function domainsFor(vs: VirtualService, serverHosts: readonly GatewayServerHost[]): string[] {
  const domains: string[] = [];
  for (const sh of serverHosts) {
    if (sh.namespace !== '*' && sh.namespace !== vs.meta.namespace) continue;
    for (const vh of vs.hosts) {
      const d = intersectHosts(sh.host, vh);
      if (d !== undefined && !domains.includes(d)) domains.push(d);
    }
  }
  return domains;
}

/**
 * Builds the table from the Gateways that select this workload and all VirtualServices (in file
 * order). VirtualServices on the same host and gateway port are merged: their rules concatenated in
 * input order, as Istio does for gateways.
 */
export function buildRouteTable(gateways: readonly Gateway[], virtualServices: readonly VirtualService[]): RouteTable {
  const warnings: string[] = [];
  const ports = new Map<number, { protocol: ServerProtocol; first: string; servers: ServerRoutes[]; hosts: MutableVirtualHost[]; domains: DomainIndex<MutableVirtualHost> }>();

  for (const gw of gateways) {
    const gwId = id(gw.meta);
    gw.servers.forEach((server, index) => {
      const { number: port, protocol } = server.port;
      let entry = ports.get(port);
      if (!entry) {
        entry = { protocol, first: gwId, servers: [], hosts: [], domains: new DomainIndex() };
        ports.set(port, entry);
      } else if (protocolFamily(entry.protocol) !== protocolFamily(protocol)) {
        warnings.push(`port ${port}: gateway ${gwId} server ${index} declares ${protocol}, but ${entry.first} declared ${entry.protocol} first; server ignored`);
        return;
      }
      const own = new DomainIndex<MutableVirtualHost>();
      const ownHosts: MutableVirtualHost[] = [];
      if (carriesHttp(protocol, server.tls)) {
        const httpsRedirect = server.tls?.httpsRedirect === true && protocolFamily(protocol) === 'http';
        for (const vs of virtualServices) {
          if (!vs.gateways.some((g) => resolveGatewayRef(g, vs.meta.namespace) === gwId)) continue;
          const domains = domainsFor(vs, server.hosts);
          if (domains.length === 0) continue;
          const vsId = id(vs.meta);
          const rules: CompiledRule[] = [];
          vs.http.forEach((r, i) => {
            const rule = compileGatewayRule(vs, vsId, r, i, gwId, port);
            if (rule) rules.push(rule);
          });
          for (const domain of domains) {
            for (const [index, list] of [[own, ownHosts], [entry.domains, entry.hosts]] as const) {
              const vh = index.ensure(domain, () => {
                const created: MutableVirtualHost = { domain, virtualServices: [], rules: [], httpsRedirect, noRoute: PENDING };
                list.push(created);
                return created;
              });
              // The same VirtualService through a second server on this port adds nothing new.
              if (vh.virtualServices.includes(vsId)) continue;
              vh.virtualServices.push(vsId);
              vh.rules.push(...rules);
            }
          }
        }
      }
      entry.servers.push({
        gateway: gwId, index, key: serverKey(gwId, index),
        ...(server.name !== undefined ? { name: server.name } : {}),
        protocol,
        ...(server.tls ? { tls: server.tls } : {}),
        hosts: server.hosts,
        virtualHosts: ownHosts,
        domains: own,
      });
    });
  }

  const table = new Map<number, PortRoutes>();
  for (const [port, e] of ports) {
    for (const vh of e.hosts) vh.noRoute = noRoute(vh);
    for (const s of e.servers) for (const vh of s.virtualHosts as MutableVirtualHost[]) vh.noRoute = noRoute(vh);
    table.set(port, {
      port, protocol: e.protocol, servers: e.servers, virtualHosts: e.hosts, domains: e.domains, serversByKey: new Map(e.servers.map((s) => [s.key, s])),
    });
  }
  return { ports: table, warnings };
}
