// Routing by VirtualService, for the ingress gateway and for the sidecar's outbound requests: a
// table built once per configuration (buildRouteTable: Gateway servers + VirtualServices;
// buildMeshRouteTable: the mesh VirtualServices), then request → decision per request (route,
// routeMesh), with one matcher and one decision builder behind both. Pure; no I/O.
export { buildRouteTable, serverKey, type CompiledRule, type PortRoutes, type RouteTable, type ServerRoutes, type VirtualHost } from './gateway-table.js';
export { route } from './gateway-route.js';
export {
  buildMeshRouteTable, MESH_GATEWAY, type MeshPortRoutes, type MeshRouteTable, type MeshRouteTableOptions, type MeshVirtualHost,
} from './mesh-table.js';
export { hasMeshRoutes, NO_VIRTUAL_SERVICE, routeMesh, type MeshRouteDecision, type NoVirtualServiceDecision } from './mesh-route.js';
export {
  NO_ROUTE_REPLY, routeName, type ForwardDecision, type NoRouteDecision, type RouteDecision, type RuleDecision, type RuleRef,
} from './decision.js';
export type { MatchRequest, MeshRouteRequest, RouteRequest } from './request.js';
export { DEFAULT_DESTINATION_PORT, pickDestination, rewritePath, type PickedDestination } from './destination.js';
export { FAULT_ABORT_DETAILS, faultAbort, faultDelayMs, rolls, type FaultAbortReply } from './fault.js';
export { DomainIndex, hostMatches, hostWithoutPort, intersectHosts } from './hosts.js';
export { applyCors, CORS_RESPONSE_HEADERS, originAllowed, type CorsOutcome, type CorsRequest } from './cors.js';
export { chooseMirrors } from './mirror-choice.js';
