// One request against the gateway's route table: the listener port (on a TLS connection, the server
// its SNI chose), then the virtual host by Host (Envoy's domain order), then the first rule whose
// match list matches (rule.ts). The answer says what to do and, in `reason`, why (for the decision
// log). Pure.
import type { RouteDecision } from './decision.js';
import type { RouteTable } from './gateway-table.js';
import { RequestView, type RouteRequest } from './request.js';
import { firstMatchingRule } from './rule.js';

export type { RouteDecision, RuleRef } from './decision.js';

export function route(table: RouteTable, req: RouteRequest): RouteDecision {
  const port = table.ports.get(req.port);
  if (!port) return { kind: 'no-host', reason: `no route: no gateway server on port ${req.port}` };
  const view = new RequestView(req);
  let domains = port.domains;
  if (req.server !== undefined) {
    const server = port.serversByKey.get(req.server);
    if (!server) return { kind: 'no-host', reason: `no route: server ${req.server} is no longer on port ${req.port}` };
    domains = server.domains;
  }
  const vh = domains.lookup(view.host);
  if (!vh) {
    const where = req.server === undefined ? `port ${req.port}` : `port ${req.port} server ${req.server} (the one the client's SNI chose)`;
    return { kind: 'no-host', reason: `no route: no virtual host for ${JSON.stringify(view.host)} on ${where}` };
  }
  if (vh.httpsRedirect && req.scheme === 'http') {
    return { kind: 'redirect', status: 301, location: `https://${view.host}${req.path}`, reason: `https redirect for ${vh.domain} on port ${req.port}` };
  }
  return firstMatchingRule(vh.rules, view) ?? vh.noRoute;
}
