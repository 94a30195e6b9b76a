// The sidecar's route table, built once per configuration from the mesh VirtualServices that apply
// to this workload (src/traffic/mesh-routes.ts meshVirtualServices selects and narrows them): per
// destination port, the virtual hosts by name, each holding the rules of the one VirtualService
// that routes that host. Rules are compiled by the same code as the gateway's (rule.ts), so the
// matcher and the decisions are the gateway's. Pure.
import type { HttpMatchRequest, VirtualService } from '../config/resources/types.js';
import type { NoRouteDecision } from './decision.js';
import { DomainIndex } from './hosts.js';
import { compileRule, type CompiledRule } from './rule.js';

/** The gateway name of the sidecars: RuleRef.gateway of every mesh decision. */
export const MESH_GATEWAY = 'mesh';

export interface MeshVirtualHost {
  /** The VirtualService host, as given (short names already expanded): `*.suffix` or an exact name. */
  readonly domain: string;
  /** `ns/name` of the VirtualService whose rules route this host. */
  readonly virtualService: string;
  /** Never empty: a VirtualService with no rule for a port leaves the host to the default route there. */
  readonly rules: readonly CompiledRule[];
  /** The answer when no rule matches (404, NR: NO_ROUTE_REPLY), built once. */
  readonly noRoute: NoRouteDecision;
}

export interface MeshPortRoutes {
  /** The destination port; undefined for every port that no match entry names. */
  readonly port: number | undefined;
  /** In the order their hosts were claimed. */
  readonly virtualHosts: readonly MeshVirtualHost[];
  /** `virtualHosts` by every name they answer to, in Envoy's lookup order. */
  readonly domains: DomainIndex<MeshVirtualHost>;
}

export interface MeshRouteTable {
  /** The destination ports some match entry names (`match.port`): the rules as they apply there. */
  readonly ports: ReadonlyMap<number, MeshPortRoutes>;
  /** Every other destination port: the entries that name a port are left out. */
  readonly otherPorts: MeshPortRoutes;
  /** VirtualServices (or hosts of them) that were not used, one line each. */
  readonly warnings: readonly string[];
}

export interface MeshRouteTableOptions {
  /**
   * Every name a VirtualService host is reached by from this workload besides itself, as Istio lists
   * them in the virtual host's domains: the Kubernetes short forms (`reviews`, `reviews.default`,
   * `reviews.default.svc` for `reviews.default.svc.cluster.local`), and the addresses of the service
   * (IPv6 in brackets). Pass the function the service index uses, so that a Host that finds a
   * service also finds its VirtualService. Absent: a host is found by its own name only.
   */
  readonly hostNames?: (host: string) => readonly string[];
}

const id = (meta: { readonly namespace: string; readonly name: string }): string => `${meta.namespace}/${meta.name}`;

/** A VirtualService ready to be laid out: its rules for the other ports, and per port it names. */
interface Prepared {
  readonly vs: VirtualService;
  readonly id: string;
  readonly hosts: readonly string[];
  readonly anyPort: readonly CompiledRule[];
  readonly byPort: ReadonlyMap<number, readonly CompiledRule[]>;
  /** (host, port or 'any') → its virtual host, so that a port with the same rules shares it. */
  readonly built: Map<string, MeshVirtualHost>;
}

/** An entry applies on the mesh (not bound to other gateways only) and on `port` (undefined: one it does not name). */
function appliesOn(port: number | undefined): (m: HttpMatchRequest) => boolean {
  return (m) => (m.gateways === undefined || m.gateways.includes(MESH_GATEWAY)) && (m.port === undefined || m.port === port);
}

function compileRules(vs: VirtualService, vsId: string, port: number | undefined): CompiledRule[] {
  const rules: CompiledRule[] = [];
  const applies = appliesOn(port);
  vs.http.forEach((route, ruleIndex) => {
    const rule = compileRule({ virtualService: vsId, gateway: MESH_GATEWAY, ruleIndex, route }, applies);
    if (rule) rules.push(rule);
  });
  return rules;
}

function prepare(vs: VirtualService): Prepared {
  const vsId = id(vs.meta);
  const named = new Set<number>();
  for (const r of vs.http) for (const m of r.match) if (m.port !== undefined) named.add(m.port);
  return {
    vs, id: vsId, hosts: [...new Set(vs.hosts)],
    anyPort: compileRules(vs, vsId, undefined),
    byPort: new Map([...named].map((port) => [port, compileRules(vs, vsId, port)])),
    built: new Map(),
  };
}

function virtualHostFor(p: Prepared, host: string, port: number | undefined): MeshVirtualHost | undefined {
  const own = port === undefined ? undefined : p.byPort.get(port);
  const rules = own ?? p.anyPort;
  // Istio builds no virtual host for a VirtualService without a rule on this port: the host keeps
  // its default route there (and a later VirtualService for it may apply).
  if (rules.length === 0) return undefined;
  const key = `${host}|${own ? port : 'any'}`;
  let vh = p.built.get(key);
  if (vh === undefined) {
    vh = Object.freeze({
      domain: host, virtualService: p.id, rules,
      noRoute: Object.freeze({ kind: 'no-route' as const, virtualServices: Object.freeze([p.id]), reason: `no route: no rule of ${p.id} matched` }),
    });
    p.built.set(key, vh);
  }
  return vh;
}

/**
 * The virtual hosts on one destination port. Hosts as written are claimed first, in input order, so
 * that a short form or an address never displaces a host some VirtualService names; a name already
 * claimed stays with the earlier VirtualService (Istio keeps the oldest and does not merge).
 */
function layOut(prepared: readonly Prepared[], port: number | undefined, hostNames: (host: string) => readonly string[], warn: (msg: string) => void): MeshPortRoutes {
  const domains = new DomainIndex<MeshVirtualHost>();
  const virtualHosts: MeshVirtualHost[] = [];
  const listed = new Set<MeshVirtualHost>();
  const claim = (name: string, vh: MeshVirtualHost, written: boolean): void => {
    const held = domains.ensure(name, () => vh);
    if (held === vh) {
      if (!listed.has(vh)) {
        listed.add(vh);
        virtualHosts.push(vh);
      }
    } else if (written && held.virtualService !== vh.virtualService) {
      const where = port === undefined ? '' : ` on port ${port}`;
      warn(`VirtualService ${vh.virtualService}: host ${name} is already routed by ${held.virtualService}${where} (earlier in the files); `
        + `sidecars do not merge VirtualServices (Istio's rule, istioctl's IST0109), so its rules for ${name} are not used${where}`);
    }
  };
  for (const p of prepared) {
    for (const host of p.hosts) {
      const vh = virtualHostFor(p, host, port);
      if (vh) claim(host, vh, true);
    }
  }
  for (const p of prepared) {
    for (const host of p.hosts) {
      const vh = virtualHostFor(p, host, port);
      if (!vh) continue;
      for (const name of hostNames(host)) if (name !== host) claim(name, vh, false);
    }
  }
  return { port, virtualHosts, domains };
}

/**
 * Builds the sidecar's table from its mesh VirtualServices (meshVirtualServices' output, in file
 * order: our stand-in for Istio's creation order). A VirtualService not bound to `mesh`, and match
 * entries bound to other gateways only, are left out, should they be passed.
 */
export function buildMeshRouteTable(virtualServices: readonly VirtualService[], options: MeshRouteTableOptions = {}): MeshRouteTable {
  const hostNames = options.hostNames ?? ((host: string): readonly string[] => [host]);
  const warnings: string[] = [];
  const seen = new Set<string>();
  const warn = (msg: string): void => {
    if (!seen.has(msg)) {
      seen.add(msg);
      warnings.push(msg);
    }
  };
  const prepared = virtualServices.filter((vs) => vs.gateways.includes(MESH_GATEWAY)).map(prepare);
  const named = new Set<number>();
  for (const p of prepared) for (const port of p.byPort.keys()) named.add(port);
  const otherPorts = layOut(prepared, undefined, hostNames, warn);
  const ports = new Map<number, MeshPortRoutes>();
  for (const port of [...named].sort((a, b) => a - b)) ports.set(port, layOut(prepared, port, hostNames, warn));
  return { ports, otherPorts, warnings };
}
