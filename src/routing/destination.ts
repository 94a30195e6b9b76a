// After a rule matched: which destination gets the request (weighted), and the path and authority
// it is forwarded or redirected with. Pure.
import type { HttpRouteDestination } from '../config/resources/types.js';

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
