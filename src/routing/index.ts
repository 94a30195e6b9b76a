// Routing by VirtualService: Gateway servers + VirtualServices → a route table (once per
// configuration), then request → decision (per request). Pure; no I/O.
export { buildRouteTable, serverKey, type CompiledRule, type PortRoutes, type RouteTable, type ServerRoutes, type VirtualHost } from './gateway-table.js';
export { route } from './gateway-route.js';
export {
  NO_ROUTE_REPLY, routeName, type ForwardDecision, type NoRouteDecision, type RouteDecision, type RuleDecision, type RuleRef,
} from './decision.js';
export type { MatchRequest, RouteRequest } from './request.js';
export { DEFAULT_DESTINATION_PORT, pickDestination, rewritePath, type PickedDestination } from './destination.js';
export { DomainIndex, hostMatches, hostWithoutPort, intersectHosts } from './hosts.js';
