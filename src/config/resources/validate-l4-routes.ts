// A VirtualService's `tcp` and `tls` routes (Istio's TCPRoute and TLSRoute), checked as Istio's
// validation checks them. Sidecars carry them out (src/traffic/l4-routes.ts), and so does the ingress
// gateway on its TCP and TLS PASSTHROUGH servers (src/routing/gateway-l4-table.ts), where Istio reads
// only a match's port and gateways: the other predicates of a match bound to gateways alone are
// accepted with a warning saying so.
import type { L4MatchAttributes, TcpRoute, TlsMatchAttributes, TlsRoute } from './types.js';
import { checkIpOrCidr } from './addresses.js';
import { checkFields, child, FieldError, isObj, item, list, obj, optInt, optList, show, str, type Warn } from './fields.js';
import { checkHostPattern, checkNamespace } from './names.js';
import { labelMap } from './selector.js';
import { intersectHosts } from '../../routing/hosts.js';

const MESH = 'mesh';

/** Istio keeps `sourceSubnet` in the schema, hidden, and never reads it. */
const SOURCE_SUBNET_IGNORED = 'has no effect: Istio never reads this hidden, deprecated field (match on destinationSubnets, or use an AuthorizationPolicy on the server\'s side)';

/** What Istio's gateways ignore in a match (its l4SingleMatch reads port and gateways only). */
const GATEWAY_IGNORES = 'has no effect at a gateway: Istio matches a gateway\'s connections on port and gateways only, '
  + 'and this match is bound to no sidecar (mesh is not among its gateways)';

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
  if (gateways !== undefined) {
    // Only the VirtualService's own gateways (and mesh) take its routes: Istio accepts such a match and never applies it there.
    const unbound = gateways.filter((g) => !ctx.gateways.includes(g));
    if (unbound.length === gateways.length && unbound.includes(MESH)) {
      ctx.warn(at('gateways'), 'has no effect: the VirtualService is not bound to mesh (spec.gateways), so no sidecar uses this match; add mesh to spec.gateways');
    } else if (unbound.length === gateways.length) {
      ctx.warn(at('gateways'), `has no effect: the VirtualService is not bound to ${unbound.join(', ')} (spec.gateways), so no gateway uses this match; add it to spec.gateways`);
    }
  }
  if (!(gateways ?? ctx.gateways).includes(MESH)) {
    for (const k of ['destinationSubnets', 'sourceLabels', 'sourceNamespace'] as const) if (o[k] !== undefined) ctx.warn(at(k), GATEWAY_IGNORES);
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
