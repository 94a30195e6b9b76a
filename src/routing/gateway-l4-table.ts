// The gateway's `tcp` and `tls` routes: what its TCP servers (TCP, MONGO, MYSQL, REDIS) and TLS
// PASSTHROUGH servers (TLS or HTTPS with tls.mode PASSTHROUGH) do with a connection, built once per
// configuration as Istio builds those servers' filter chains. Pure.
// - Which VirtualServices: bound to the server's Gateway, with a host the server's hosts match
//   (either may be a wildcard; a server host `ns/host` admits only VirtualServices of `ns`), in
//   input order.
// - Which matches: Istio's gateways read only `port` (the server's) and `gateways` (this one) of a
//   match; destinationSubnets, sourceLabels and sourceNamespace are not looked at (warned at load).
// - TCP: the first route whose matches hold (no match: it holds) of the first VirtualService that
//   has one carries every connection of the server; the first server of a port with a route is the
//   port's (Envoy's listener has one chain without server names). None: the connection is closed (NR).
// - TLS PASSTHROUGH: every holding match of every tls route is a chain for its sniHosts; a match
//   naming a host an earlier one of the port named is skipped whole, with a warning (Istio's rule:
//   Envoy would refuse the listener). A connection's ClientHello server name picks the chain (exact,
//   longest `*.suffix`, `*`); no name or no chain: closed (NR). TLS is never terminated.
// Destinations stay as written: the cluster they name is looked up per connection in the traffic
// configuration in force (as for the HTTP routes), the weighted choice made once per connection.
import type { Gateway, GatewayServer, HttpRouteDestination, L4MatchAttributes, VirtualService } from '../config/resources/types.js';
import { intersectHosts } from './hosts.js';
import { resolveGatewayRef, serverKey } from './gateway-table.js';
import { bestSniMatch } from './sni-match.js';

/** One route of a VirtualService, as a gateway connection takes it. */
export interface GatewayL4Route {
  /** `ns/name tcp[0]`: the access log's route name and the decision log's. */
  readonly name: string;
  /** `ns/name`: short destination hosts are read in its namespace. */
  readonly virtualService: string;
  readonly destinations: readonly HttpRouteDestination[];
}

/** One filter chain of a PASSTHROUGH server: the server names it takes and where they go. */
export interface GatewaySniChain {
  readonly sniHosts: readonly string[];
  readonly route: GatewayL4Route;
  /** serverKey of the server it came from. */
  readonly server: string;
}

export interface GatewayL4Port {
  /** The route of the port's TCP servers; undefined: none (connections closed, NR). */
  readonly tcp: GatewayL4Route | undefined;
  /** The chains of the port's PASSTHROUGH servers, in build order. */
  readonly tls: readonly GatewaySniChain[];
}

export interface GatewayL4Table {
  readonly ports: ReadonlyMap<number, GatewayL4Port>;
  /** Servers with no route, skipped duplicate SNI hosts: one line each. */
  readonly warnings: readonly string[];
}

export type GatewayServerKind = 'http' | 'https' | 'tcp' | 'tls-passthrough' | 'unserved';

/** How this gateway serves a server (Istio's split: HTTP; HTTPS terminated; TCP; TLS passed through). */
export function serverKind(server: GatewayServer): GatewayServerKind {
  switch (server.port.protocol) {
    case 'HTTP': case 'HTTP2': case 'GRPC': return 'http';
    case 'TCP': case 'MONGO': case 'MYSQL': case 'REDIS': return 'tcp';
    case 'HTTPS': case 'TLS':
      if (server.tls?.mode === 'PASSTHROUGH') return 'tls-passthrough';
      return server.port.protocol === 'HTTPS' && server.tls?.mode === 'SIMPLE' ? 'https' : 'unserved';
  }
}

const id = (meta: { readonly namespace: string; readonly name: string }): string => `${meta.namespace}/${meta.name}`;

/** Istio's pickMatchingGatewayHosts: some server host (of the VirtualService's namespace, if it names one) matches some VirtualService host. */
function hostsMatch(server: GatewayServer, vs: VirtualService): boolean {
  return server.hosts.some((sh) => (sh.namespace === '*' || sh.namespace === vs.meta.namespace)
    && vs.hosts.some((h) => intersectHosts(sh.host, h) !== undefined));
}

/** Istio's l4SingleMatch at a gateway: the port and the gateways, nothing else. */
function holds(m: L4MatchAttributes, vsNamespace: string, gateway: string, port: number): boolean {
  if (m.port !== undefined && m.port !== port) return false;
  return m.gateways === undefined || m.gateways.length === 0 || m.gateways.some((g) => resolveGatewayRef(g, vsNamespace) === gateway);
}

function bound(vs: VirtualService, gateway: string): boolean {
  return vs.gateways.some((g) => resolveGatewayRef(g, vs.meta.namespace) === gateway);
}

export function buildGatewayL4Table(gateways: readonly Gateway[], virtualServices: readonly VirtualService[]): GatewayL4Table {
  const warnings: string[] = [];
  const ports = new Map<number, { tcp: GatewayL4Route | undefined; tls: GatewaySniChain[]; sniTaken: Map<string, string> }>();
  const routes = new Map<string, GatewayL4Route>();
  const routeOf = (vs: VirtualService, kind: 'tcp' | 'tls', i: number, destinations: readonly HttpRouteDestination[]): GatewayL4Route => {
    const name = `${id(vs.meta)} ${kind}[${i}]`;
    let r = routes.get(name);
    if (r === undefined) routes.set(name, (r = Object.freeze({ name, virtualService: id(vs.meta), destinations })));
    return r;
  };
  const l4 = virtualServices.filter((vs) => vs.tcp !== undefined || vs.tls !== undefined);
  for (const gw of gateways) {
    const gwId = id(gw.meta);
    gw.servers.forEach((server, index) => {
      const kind = serverKind(server);
      if (kind !== 'tcp' && kind !== 'tls-passthrough') return;
      const port = server.port.number;
      let entry = ports.get(port);
      if (entry === undefined) ports.set(port, (entry = { tcp: undefined, tls: [], sniTaken: new Map() }));
      const candidates = l4.filter((vs) => bound(vs, gwId) && hostsMatch(server, vs));
      const where = `gateway ${gwId}: server ${index} on port ${port} (${server.port.protocol}${kind === 'tls-passthrough' ? ', tls PASSTHROUGH' : ''})`;
      if (kind === 'tcp') {
        let found: GatewayL4Route | undefined;
        for (const vs of candidates) {
          const i = (vs.tcp ?? []).findIndex((r) => r.match.length === 0 || r.match.some((m) => holds(m, vs.meta.namespace, gwId, port)));
          if (i >= 0) {
            found = routeOf(vs, 'tcp', i, vs.tcp![i]!.route);
            break;
          }
        }
        if (found === undefined) warnings.push(`${where}: no tcp route of a VirtualService bound to it applies; its connections are closed (NR)`);
        else if (entry.tcp === undefined) entry.tcp = found;
        return;
      }
      const before = entry.tls.length;
      const key = serverKey(gwId, index);
      for (const vs of candidates) {
        (vs.tls ?? []).forEach((r, i) => {
          r.match.forEach((m, j) => {
            if (!holds(m, vs.meta.namespace, gwId, port)) return;
            const taken = m.sniHosts.filter((h) => entry.sniTaken.has(h));
            if (taken.length > 0) {
              warnings.push(`${where}: VirtualService ${id(vs.meta)} spec.tls[${i}].match[${j}] skipped: ${taken.join(', ')} already routed by ${entry.sniTaken.get(taken[0]!)} on this port (as Istio skips duplicate SNI hosts)`);
              return;
            }
            const route = routeOf(vs, 'tls', i, r.route);
            for (const h of m.sniHosts) entry.sniTaken.set(h, route.name);
            entry.tls.push({ sniHosts: m.sniHosts, route, server: key });
          });
        });
      }
      if (entry.tls.length === before) warnings.push(`${where}: no tls route of a VirtualService bound to it applies; its connections are closed (NR)`);
    });
  }
  const out = new Map<number, GatewayL4Port>();
  for (const [port, e] of ports) out.set(port, Object.freeze({ tcp: e.tcp, tls: Object.freeze(e.tls) }));
  return { ports: out, warnings };
}

/** A TLS PASSTHROUGH connection's route by its ClientHello's server name; undefined: none (closed, NR). */
export function tlsRouteFor(port: GatewayL4Port, serverName: string | undefined): GatewayL4Route | undefined {
  return bestSniMatch(port.tls, serverName)?.route;
}
