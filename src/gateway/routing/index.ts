// The ingress gateway's routing: Gateway servers + VirtualServices → a route table (once per
// configuration), then request → decision (per request). Pure; no I/O.
export { buildRouteTable, type CompiledRule, type PortRoutes, type RouteTable, type ServerRoutes, type VirtualHost } from './table.js';
export { route, type RouteDecision, type RuleRef } from './route.js';
export type { RouteRequest } from './request.js';
export { DEFAULT_DESTINATION_PORT, pickDestination, rewritePath, type PickedDestination } from './destination.js';
export { hostMatches, hostWithoutPort, intersectHosts } from './hosts.js';
