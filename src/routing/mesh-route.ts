// One sidecar outbound request against the mesh route table: the destination port (its own rules
// when some match entry names it), then the virtual host by Host (Envoy's domain order: exact, the
// longest `*.suffix`, `*`; the port in the Host is ignored, as Istio configures sidecars), then the
// first rule whose match list matches (rule.ts, the gateway's matcher). Pure.
import type { NoRouteDecision, RuleDecision } from './decision.js';
import { hostWithoutPort } from './hosts.js';
import type { MeshRouteTable } from './mesh-table.js';
import { RequestView, type MeshRouteRequest } from './request.js';
import { firstMatchingRule } from './rule.js';

/** No VirtualService routes this host: the caller sends the request by the service's default route. */
export interface NoVirtualServiceDecision {
  readonly kind: 'no-virtual-service';
  readonly reason: string;
}

/**
 * What routeMesh answers: a matched rule's decision (the gateway's shape: route / direct /
 * redirect), `no-route` (a VirtualService routes the host and none of its rules matched: 404, NR),
 * or `no-virtual-service`.
 */
export type MeshRouteDecision = RuleDecision | NoRouteDecision | NoVirtualServiceDecision;

/** One shared answer: the request's host is not in it, so nothing is built per request. */
export const NO_VIRTUAL_SERVICE: NoVirtualServiceDecision = Object.freeze({
  kind: 'no-virtual-service', reason: 'no VirtualService for this host: default route',
});

export function routeMesh(table: MeshRouteTable, req: MeshRouteRequest): MeshRouteDecision {
  const routes = table.ports.get(req.port) ?? table.otherPorts;
  // Most sidecars have no VirtualService at all: answer before reading the Host.
  if (routes.virtualHosts.length === 0) return NO_VIRTUAL_SERVICE;
  return routeWith(routes, req);
}

/** Whether any mesh VirtualService applies on `port`: none, and a caller need not build the request's facts. */
export function hasMeshRoutes(table: MeshRouteTable, port: number): boolean {
  return (table.ports.get(port) ?? table.otherPorts).virtualHosts.length > 0;
}

function routeWith(routes: MeshRouteTable['otherPorts'], req: MeshRouteRequest): MeshRouteDecision {
  const host = hostWithoutPort(req.host);
  const vh = routes.domains.lookup(host);
  if (vh === undefined) return NO_VIRTUAL_SERVICE;
  return firstMatchingRule(vh.rules, new RequestView(req, host)) ?? vh.noRoute;
}
