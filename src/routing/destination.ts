// After a rule matched: which destination gets the request (weighted), and the path and authority
// it is forwarded or redirected with. Pure.
import type { HttpRedirect, HttpRouteDestination } from '../config/resources/types.js';
import type { RequestView } from './request.js';

/** Istio resolves a missing port from the service's single port; with no service registry, 80 (the gateway's choice). */
export const DEFAULT_DESTINATION_PORT = 80;

export interface PickedDestination {
  readonly destination: HttpRouteDestination;
  readonly host: string;
  readonly port: number;
  /** True when the destination named no port and `defaultPort` was used. */
  readonly portDefaulted: boolean;
}

/**
 * A weighted choice (weights normally sum to 100); a 0-weight destination is never chosen. Per
 * request: two requests on one connection may go to different destinations.
 * Undefined when there is nothing to choose (no destination, or every weight 0).
 * `defaultPort`: for a destination without port. Istio's rule (GetDestinationCluster): the
 * destination service's only port when it has one, else the port the request was made to; the
 * gateway, which has no service registry, uses DEFAULT_DESTINATION_PORT.
 */
export function pickDestination(
  destinations: readonly HttpRouteDestination[], random: () => number = Math.random, defaultPort: number = DEFAULT_DESTINATION_PORT,
): PickedDestination | undefined {
  let chosen: HttpRouteDestination | undefined;
  if (destinations.length === 1) {
    chosen = destinations[0]!.weight > 0 ? destinations[0] : undefined;
  } else {
    let total = 0;
    for (const d of destinations) total += d.weight > 0 ? d.weight : 0;
    if (total > 0) {
      const r = random() * total;
      let acc = 0;
      for (const d of destinations) {
        if (d.weight <= 0) continue;
        acc += d.weight;
        chosen = d;
        if (r < acc) break;
      }
    }
  }
  if (!chosen) return undefined;
  return chosen.port === undefined
    ? { destination: chosen, host: chosen.host, port: defaultPort, portDefaulted: true }
    : { destination: chosen, host: chosen.host, port: chosen.port, portDefaulted: false };
}

/**
 * The forwarded path for `rewrite.uri`: after a prefix match the matched prefix is replaced (Envoy's
 * prefix_rewrite, as Istio configures it); after any other match the whole path is. The query stays.
 */
export function rewritePath(path: string, query: string, replacement: string, matchedPrefixLength: number | undefined): string {
  const rest = matchedPrefixLength === undefined ? '' : path.slice(matchedPrefixLength);
  return replacement + rest + query;
}

/**
 * Where a redirect sends the client, as Envoy's redirect action does it with the fields Istio sets:
 * the scheme (`scheme`, else the request's), the host (`authority`, else the request's Host), the
 * port (`port`, or the request's with derivePort FROM_REQUEST_PORT; omitted when it is the scheme's
 * default, as Istio omits :80 for http and :443 for https; FROM_PROTOCOL_DEFAULT: none), the path
 * (`uri`, the query kept unless it brings its own). Without a port field the Host keeps its port,
 * except the old scheme's default one when the scheme changes (Envoy's rule).
 */
export function redirectLocation(r: HttpRedirect, view: RequestView): string {
  const req = view.req;
  const scheme = r.scheme ?? req.scheme;
  const target = r.uri === undefined ? req.path : r.uri.includes('?') ? r.uri : r.uri + view.query;
  let host = r.authority ?? req.host;
  let port: number | undefined;
  if (r.port !== undefined) port = r.port;
  else if (r.derivePort === 'FROM_REQUEST_PORT') port = (req as { port?: number }).port;
  if (port !== undefined || r.derivePort !== undefined) {
    const colon = portColon(host);
    if (colon >= 0) host = host.slice(0, colon);
    if (port !== undefined && !isDefaultPort(scheme, port)) host += `:${port}`;
  } else if (r.scheme !== undefined && r.scheme !== req.scheme) {
    const colon = portColon(host);
    if (colon >= 0 && isDefaultPort(req.scheme, Number(host.slice(colon + 1)))) host = host.slice(0, colon);
  }
  return `${scheme}://${host}${target}`;
}

function isDefaultPort(scheme: string, port: number): boolean {
  return (scheme === 'http' && port === 80) || (scheme === 'https' && port === 443);
}

/** Where a Host's `:port` starts (after an IPv6 literal's `]`), or -1. */
function portColon(host: string): number {
  const colon = host.lastIndexOf(':');
  return colon > host.lastIndexOf(']') ? colon : -1;
}
