// The sidecar's `tcp` and `tls` routes (VirtualService TCPRoute / TLSRoute), as Istio turns them into
// the filter chains of a service's outbound listener and Envoy picks a chain per connection. Pure;
// built once per configuration, per service port:
// - which VirtualServices: bound to the mesh, exported to this workload's namespace, with a host that
//   matches the service's (either may be a wildcard), in snapshot order (Istio walks them all, not
//   only the first, for TCP and TLS);
// - which matches: those whose static predicates hold for this workload on this port (gateways
//   include mesh when given, port, sourceLabels within its labels, sourceNamespace its namespace);
// - a port declared TLS or HTTPS takes `tls` routes only, any other TCP-carried port `tcp` routes only
//   (Istio's rule); HTTP ports neither (their connections are HTTP, or pass through);
// - per connection (Envoy's filter-chain order): the most specific destination subnet holding the
//   original destination first (a match without subnets holds every destination, least specific);
//   then for TLS the server name, exact before the longest `*.suffix`; TCP: no subnet route holds it
//   → the first route without subnets (the catch-all; later routes are never reached) → the service's
//   own cluster. TLS with routes: nothing matches → no route (the connection is closed, flag NR), as
//   Envoy's listener has no chain for it.
// Destinations are resolved to cluster names here; the weighted choice is made once per connection.
import type { HttpRouteDestination, L4MatchAttributes, VirtualService, Workload } from '../config/resources/types.js';
import { exportedTo, selects } from '../config/resources/workload.js';
import { intersectHosts } from '../routing/hosts.js';
import { pickDestination } from '../routing/destination.js';
import { sniRank } from '../routing/sni-match.js';
import { cidrContains, parseCidr, type Cidr } from '../security/authz/cidr.js';
import { DEFAULT_CLUSTER_DOMAIN } from '../security/mtls/host-names.js';
import { resolveDestination, resolveShortName, type ClusterSet, type DestinationTarget, type ServiceSpec } from './clusters.js';
import { portFamily } from '../config/resources/validate-service-entry.js';

const MESH = 'mesh';

/** A destination with its cluster (or why none serves it), resolved with the table. */
interface ResolvedDestination extends HttpRouteDestination {
  readonly target: DestinationTarget;
}

/** One route of a VirtualService, ready for a connection: its destinations, and its name for the logs. */
export interface L4Route {
  /** `ns/name tcp[0]` */
  readonly name: string;
  readonly destinations: readonly ResolvedDestination[];
}

interface SubnetRoute {
  readonly cidrs: readonly Cidr[];
  readonly route: L4Route;
}

interface TlsEntry {
  /** Undefined: every destination (the least specific). */
  readonly cidrs: readonly Cidr[] | undefined;
  readonly sniHosts: readonly string[];
  readonly route: L4Route;
}

/** The routes of one service port. */
export type ServiceL4Routes =
  | { readonly kind: 'tcp'; readonly subnets: readonly SubnetRoute[]; readonly catchAll: L4Route | undefined }
  | { readonly kind: 'tls'; readonly entries: readonly TlsEntry[] };

export interface L4RouteTable {
  readonly byService: ReadonlyMap<ServiceSpec, ServiceL4Routes>;
  /**
   * Port → the services without `addresses` whose TLS port has `tls` routes: a connection to one of
   * their endpoints cannot be told apart by address, so the server name picks the service too (as
   * Istio's listener on 0.0.0.0 for such a port does), in this order.
   */
  readonly addressless: ReadonlyMap<number, readonly ServiceSpec[]>;
  /** Routes that can never apply, destinations no cluster serves. */
  readonly warnings: readonly string[];
}

export interface L4RouteContext {
  readonly workload: Workload;
  readonly clusterDomain?: string;
}

/** Istio's `IsTLS()`: the ports whose listener takes `tls` routes (and no `tcp` route). */
export function isTlsPort(protocol: string | undefined): boolean {
  return protocol === 'TLS' || protocol === 'HTTPS';
}

/** Istio's host.Name.Matches: either name may be a wildcard covering the other. */
function hostsMatch(vsHost: string, serviceHost: string): boolean {
  return intersectHosts(vsHost, serviceHost) !== undefined;
}

function staticMatch(m: L4MatchAttributes, port: number, w: Workload): boolean {
  if (m.gateways !== undefined && m.gateways.length > 0 && !m.gateways.includes(MESH)) return false;
  if (m.port !== undefined && m.port !== port) return false;
  if (m.sourceNamespace !== undefined && m.sourceNamespace !== w.namespace) return false;
  return m.sourceLabels === undefined || selects(m.sourceLabels, w.labels);
}

function cidrsOf(subnets: readonly string[]): Cidr[] {
  return subnets.flatMap((s) => parseCidr(s) ?? []);
}

/**
 * The table for this workload; undefined when no VirtualService it sees has a tcp or tls route (the
 * data path then checks one flag and nothing else).
 */
export function buildL4RouteTable(virtualServices: readonly VirtualService[], set: ClusterSet, ctx: L4RouteContext): L4RouteTable | undefined {
  const domain = ctx.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
  const ns = ctx.workload.namespace;
  const relevant = virtualServices
    .filter((vs) => (vs.tcp !== undefined || vs.tls !== undefined) && vs.gateways.includes(MESH) && exportedTo(vs.exportTo, ns))
    .map((vs) => ({ vs, hosts: vs.hosts.map((h) => resolveShortName(h, vs.meta.namespace, domain)), ref: `${vs.meta.namespace}/${vs.meta.name}` }));
  if (relevant.length === 0) return undefined;
  const warnings: string[] = [];
  const warned = new Set<string>();
  const warn = (w: string): void => {
    if (!warned.has(w)) warnings.push(w);
    warned.add(w);
  };
  /** `ref kind[i]` → whether it applied to some service port. */
  const used = new Set<string>();
  const resolved = new Map<string, L4Route>();
  const routeOf = (ref: string, kind: 'tcp' | 'tls', i: number, destinations: readonly HttpRouteDestination[], vsNamespace: string, port: number): L4Route => {
    const name = `${ref} ${kind}[${i}]`;
    used.add(name);
    const key = `${name}|${port}`;
    let r = resolved.get(key);
    if (r === undefined) {
      r = {
        name,
        destinations: destinations.map((d, j) => {
          const target = resolveDestination(set, d, port, vsNamespace, domain);
          if (target.kind === 'no-cluster') {
            warn(`VirtualService ${ref} spec.${kind}[${i}].route[${j}] routes to ${target.name}, which no cluster serves (${target.reason}): its connections are closed with flag NC`);
          }
          return { ...d, target };
        }),
      };
      resolved.set(key, r);
    }
    return r;
  };

  const byService = new Map<ServiceSpec, ServiceL4Routes>();
  const addressless = new Map<number, ServiceSpec[]>();
  for (const service of set.services) {
    const family = portFamily(service.port.protocol);
    if (family === 'http' || family === 'udp') continue;
    const port = service.port.number;
    const configs = relevant.filter((c) => c.hosts.some((h) => hostsMatch(h, service.host)));
    if (configs.length === 0) continue;
    if (isTlsPort(service.port.protocol)) {
      const entries: TlsEntry[] = [];
      const seen = new Set<string>();
      for (const { vs, ref } of configs) {
        vs.tls?.forEach((tls, i) => {
          for (const m of tls.match) {
            if (!staticMatch(m, port, ctx.workload)) continue;
            const route = routeOf(ref, 'tls', i, tls.route, vs.meta.namespace, port);
            // Istio keeps the first of matches whose runtime predicates are the same.
            const key = `${m.sniHosts.join(',')}|${(m.destinationSubnets ?? []).join(',')}`;
            if (seen.has(key)) continue;
            seen.add(key);
            entries.push({ cidrs: m.destinationSubnets ? cidrsOf(m.destinationSubnets) : undefined, sniHosts: m.sniHosts, route });
          }
        });
      }
      if (entries.length > 0) {
        byService.set(service, { kind: 'tls', entries });
        if (service.entry.addresses.length === 0) addressless.set(port, [...addressless.get(port) ?? [], service]);
      }
      continue;
    }
    const subnets: SubnetRoute[] = [];
    let catchAll: L4Route | undefined;
    outer: for (const { vs, ref } of configs) {
      for (const [i, tcp] of (vs.tcp ?? []).entries()) {
        if (tcp.match.length === 0) {
          catchAll = routeOf(ref, 'tcp', i, tcp.route, vs.meta.namespace, port);
          break outer;
        }
        const cidrs: Cidr[] = [];
        for (const m of tcp.match) {
          if (!staticMatch(m, port, ctx.workload)) continue;
          if (m.destinationSubnets === undefined) {
            catchAll = routeOf(ref, 'tcp', i, tcp.route, vs.meta.namespace, port);
            break outer;
          }
          cidrs.push(...cidrsOf(m.destinationSubnets));
        }
        if (cidrs.length > 0) subnets.push({ cidrs, route: routeOf(ref, 'tcp', i, tcp.route, vs.meta.namespace, port) });
      }
    }
    if (subnets.length > 0 || catchAll !== undefined) byService.set(service, { kind: 'tcp', subnets, catchAll });
  }

  // A route none of whose matches holds here is normal (sourceLabels...); one that names a host
  // whose ports cannot take it is a mistake worth a line.
  for (const { vs, hosts, ref } of relevant) {
    const services = set.services.filter((s) => hosts.some((h) => hostsMatch(h, s.host)));
    if (services.length === 0) continue;
    for (const kind of ['tcp', 'tls'] as const) {
      const routes = vs[kind] ?? [];
      const fits = services.some((s) => portFamily(s.port.protocol) !== 'http' && portFamily(s.port.protocol) !== 'udp'
        && (kind === 'tls') === isTlsPort(s.port.protocol));
      if (routes.length > 0 && !fits) {
        warn(`VirtualService ${ref} spec.${kind} has no effect: no port of ${[...new Set(services.map((s) => s.host))].join(', ')} takes ${kind} routes `
          + `(as in Istio, tls routes apply to ports declared TLS or HTTPS, tcp routes to the other ports carried as TCP: TCP, MONGO, MYSQL, REDIS, or unset)`);
      }
    }
  }
  return { byService, addressless, warnings };
}

/** The most specific prefix length among `cidrs` that holds `ip`; -1 when none does. */
function bestPrefix(cidrs: readonly Cidr[], ip: Uint8Array | undefined): number {
  let best = -1;
  if (ip === undefined) return best;
  for (const c of cidrs) if (c.bits > best && cidrContains(c, ip)) best = c.bits;
  return best;
}

/** A TCP connection's route: by its original destination (`parseIp` bytes); undefined: the service's own cluster. */
export function selectTcpRoute(routes: Extract<ServiceL4Routes, { kind: 'tcp' }>, destination: Uint8Array | undefined): L4Route | undefined {
  let chosen: L4Route | undefined;
  let best = -1;
  for (const s of routes.subnets) {
    const bits = bestPrefix(s.cidrs, destination);
    if (bits > best) {
      best = bits;
      chosen = s.route;
    }
  }
  return chosen ?? routes.catchAll;
}

/**
 * A TLS connection's route: the entries of the most specific destination subnet holding the
 * destination, then the best server-name match among them (Envoy does not fall back to a less
 * specific subnet). Undefined: no route (the connection is closed).
 */
export function selectTlsRoute(routes: Extract<ServiceL4Routes, { kind: 'tls' }>, destination: Uint8Array | undefined,
  serverName: string | undefined): L4Route | undefined {
  let bestBits = -2;
  for (const e of routes.entries) {
    const bits = e.cidrs === undefined ? -1 : bestPrefix(e.cidrs, destination);
    if (e.cidrs !== undefined && bits < 0) continue;
    if (bits > bestBits) bestBits = bits;
  }
  if (bestBits === -2 || serverName === undefined) return undefined;
  const name = serverName.toLowerCase();
  let chosen: L4Route | undefined;
  let bestRank = -1;
  for (const e of routes.entries) {
    const bits = e.cidrs === undefined ? -1 : bestPrefix(e.cidrs, destination);
    if (bits !== bestBits) continue;
    for (const p of e.sniHosts) {
      const rank = sniRank(p, name);
      if (rank > bestRank) {
        bestRank = rank;
        chosen = e.route;
      }
    }
  }
  return chosen;
}

/**
 * A TLS connection to a port where services without addresses have `tls` routes, and whose
 * destination no service's address claims: the first such service with a route for its server name.
 * Undefined: none (the connection keeps its original destination, as before).
 */
export function selectAddresslessTlsRoute(table: L4RouteTable, port: number, destination: Uint8Array | undefined,
  serverName: string | undefined): L4Route | undefined {
  for (const service of table.addressless.get(port) ?? []) {
    const routes = table.byService.get(service);
    const route = routes?.kind === 'tls' ? selectTlsRoute(routes, destination, serverName) : undefined;
    if (route !== undefined) return route;
  }
  return undefined;
}

/** The destination a connection takes on `route`, by weight (once per connection); undefined: every weight is 0. */
export function pickL4Destination(route: L4Route, random: () => number): DestinationTarget | undefined {
  const picked = pickDestination(route.destinations, random);
  return picked === undefined ? undefined : (picked.destination as ResolvedDestination).target;
}
