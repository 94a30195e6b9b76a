// A VirtualService's `tcp` and `tls` routes (Istio's TCPRoute and TLSRoute), checked as Istio's
// validation checks them. Sidecars carry them out (src/traffic/l4-routes.ts); the ingress gateway
// serves no TCP or TLS passthrough server, so a route or match bound to a gateway is refused as not
// supported yet rather than accepted with no listener to act on it.
import type { L4MatchAttributes, TcpRoute, TlsMatchAttributes, TlsRoute } from './types.js';
import { checkIpOrCidr } from './addresses.js';
import { checkFields, child, FieldError, isObj, item, list, obj, optInt, optList, show, str, type Warn } from './fields.js';
import { checkHostPattern, checkNamespace } from './names.js';
import { labelMap } from './selector.js';
import { intersectHosts } from '../../routing/hosts.js';

const MESH = 'mesh';

/** Istio keeps `sourceSubnet` in the schema, hidden, and never reads it. */
const SOURCE_SUBNET_IGNORED = 'has no effect: Istio never reads this hidden, deprecated field (match on destinationSubnets, or use an AuthorizationPolicy on the server\'s side)';

const GATEWAY_TCP_TLS = 'is not supported yet on a gateway: this agent\'s gateway serves no TCP or TLS PASSTHROUGH server (Gateway servers of those protocols are not served), '
  + 'so tcp and tls routes apply to sidecars only: bind this route to mesh alone';

export interface L4RouteContext {
  /** The VirtualService's hosts (lower-cased): each SNI host must lie within one. */
  readonly hosts: readonly string[];
  /** The VirtualService's gateways, resolved (`mesh`, `ns/name`). */
  readonly gateways: readonly string[];
  /** Resolves a gateway reference as the HTTP matches do (`name` → `ns/name`). */
  readonly gatewayRef: (raw: unknown, field: string) => string;
  readonly warn: Warn;
}

function parseL4Match(o: Readonly<Record<string, unknown>>, field: string, ctx: L4RouteContext): L4MatchAttributes {
  const at = (k: string): string => child(field, k);
  const port = optInt(o['port'], at('port'), 1, 65535);
  const destinationSubnets = o['destinationSubnets'] === undefined ? undefined
    : list(o['destinationSubnets'], at('destinationSubnets')).map((v, i) => checkIpOrCidr(str(v, item(at('destinationSubnets'), i), { nonEmpty: true }), item(at('destinationSubnets'), i)));
  const sourceLabels = o['sourceLabels'] === undefined ? undefined : labelMap(o['sourceLabels'], at('sourceLabels'));
  const sourceNamespace = o['sourceNamespace'] === undefined ? undefined
    : checkNamespace(str(o['sourceNamespace'], at('sourceNamespace'), { nonEmpty: true }), at('sourceNamespace'));
  const gateways = o['gateways'] === undefined ? undefined
    : list(o['gateways'], at('gateways')).map((g, i) => ctx.gatewayRef(g, item(at('gateways'), i)));
  // The gateway has no TCP / TLS passthrough listener: a match that would bind there is refused.
  if ((gateways ?? ctx.gateways).some((g) => g !== MESH)) throw new FieldError(gateways !== undefined ? at('gateways') : 'spec.gateways', GATEWAY_TCP_TLS);
  if (gateways !== undefined && !ctx.gateways.includes(MESH)) {
    // Sidecars take only VirtualServices bound to mesh: Istio accepts this match and never applies it.
    ctx.warn(at('gateways'), 'has no effect: the VirtualService is not bound to mesh (spec.gateways), so no sidecar uses this match; add mesh to spec.gateways');
  }
  return {
    ...(port !== undefined ? { port } : {}),
    ...(destinationSubnets !== undefined && destinationSubnets.length > 0 ? { destinationSubnets } : {}),
    ...(sourceLabels !== undefined ? { sourceLabels } : {}),
    ...(sourceNamespace !== undefined ? { sourceNamespace } : {}),
    ...(gateways !== undefined ? { gateways } : {}),
  };
}

/** Istio's rule: an SNI host must fall within one of the VirtualService's hosts (`a.example.com` within `*.example.com`). */
function sniHost(raw: unknown, field: string, hosts: readonly string[]): string {
  const host = checkHostPattern(str(raw, field, { nonEmpty: true }), field);
  if (!hosts.some((h) => intersectHosts(host, h) === host)) {
    throw new FieldError(field, `${show(host)} is not within any of the VirtualService's hosts (${hosts.join(', ')}), which Istio refuses`);
  }
  return host;
}

function parseTcpMatch(raw: unknown, field: string, ctx: L4RouteContext): L4MatchAttributes {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['port', 'destinationSubnets', 'sourceLabels', 'sourceNamespace', 'gateways'], istioIgnores: { sourceSubnet: SOURCE_SUBNET_IGNORED } }, ctx.warn);
  return parseL4Match(o, field, ctx);
}

function parseTlsMatch(raw: unknown, field: string, ctx: L4RouteContext): TlsMatchAttributes {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['sniHosts', 'port', 'destinationSubnets', 'sourceLabels', 'sourceNamespace', 'gateways'] });
  const sniField = child(field, 'sniHosts');
  if (o['sniHosts'] === undefined) throw new FieldError(sniField, 'required: a TLS match needs at least one SNI host (Istio\'s rule)');
  const sniHosts = list(o['sniHosts'], sniField, { nonEmpty: true }).map((h, i) => sniHost(h, item(sniField, i), ctx.hosts));
  return { sniHosts, ...parseL4Match(o, field, ctx) };
}

/**
 * A route's destinations: as an HTTP route's (`parseDestinations`), without the HTTP-only
 * per-destination `headers` (Istio's RouteDestination has only destination and weight).
 */
function l4Destinations(raw: unknown, field: string, parseDestinations: (raw: unknown, field: string) => TcpRoute['route']): TcpRoute['route'] {
  const routes = optList(raw, field);
  if (routes.length === 0) throw new FieldError(field, 'required: a route needs at least one destination (Istio\'s rule)');
  routes.forEach((r, i) => {
    if (isObj(r)) checkFields(r, item(field, i), { supported: ['destination', 'weight'] });
  });
  return parseDestinations(routes, field);
}

export function parseTcpRoutes(raw: unknown, ctx: L4RouteContext, parseDestinations: (raw: unknown, field: string) => TcpRoute['route']): TcpRoute[] {
  return optList(raw, 'spec.tcp').map((r, i) => {
    const field = item('spec.tcp', i);
    const o = obj(r, field);
    checkFields(o, field, { supported: ['match', 'route'] });
    const match = optList(o['match'], child(field, 'match')).map((m, j) => parseTcpMatch(m, item(child(field, 'match'), j), ctx));
    // No match: every connection; on a VirtualService bound to a gateway too.
    if (match.length === 0 && ctx.gateways.some((g) => g !== MESH)) throw new FieldError('spec.gateways', GATEWAY_TCP_TLS);
    return { match, route: l4Destinations(o['route'], child(field, 'route'), parseDestinations) };
  });
}

export function parseTlsRoutes(raw: unknown, ctx: L4RouteContext, parseDestinations: (raw: unknown, field: string) => TlsRoute['route']): TlsRoute[] {
  return optList(raw, 'spec.tls').map((r, i) => {
    const field = item('spec.tls', i);
    const o = obj(r, field);
    checkFields(o, field, { supported: ['match', 'route'] });
    const mField = child(field, 'match');
    if (o['match'] === undefined) throw new FieldError(mField, 'required: a TLS route needs at least one match, with sniHosts (Istio\'s rule)');
    const match = list(o['match'], mField, { nonEmpty: true }).map((m, j) => parseTlsMatch(m, item(mField, j), ctx));
    return { match, route: l4Destinations(o['route'], child(field, 'route'), parseDestinations) };
  });
}
