// Small builders for the typed resources routing takes (the validator's output shape), so a test
// case states only what it is about.
import type {
  Gateway, GatewayServer, GatewayTls, HeaderMatch, HttpMatchRequest, HttpRoute, HttpRouteDestination, ResourceKind, ResourceMeta,
  ServerProtocol, StringMatch, VirtualService,
} from '../../src/config/resources/types.js';
import type { MeshRouteRequest, RouteRequest } from '../../src/routing/request.js';
import { parseRouteClaimKey } from '../../src/security/claims.js';

export function meta(kind: ResourceKind, id: string): ResourceMeta {
  const [namespace, name] = id.split('/') as [string, string];
  return { kind, apiVersion: 'networking.mesh.io/v1', name, namespace, origin: { file: 'test.yaml', index: 0 } };
}

export const exact = (value: string): StringMatch => ({ kind: 'exact', value });
export const prefix = (value: string): StringMatch => ({ kind: 'prefix', value });
/** Full-match, as the validator compiles them. */
export const regex = (value: string): StringMatch => ({ kind: 'regex', value, regex: new RegExp(`^(?:${value})$`) });
export const present: StringMatch = { kind: 'present' };

export const header = (name: string, match: StringMatch): HeaderMatch => ({ kind: 'header', name, match });
export function claim(key: string, match: StringMatch): HeaderMatch {
  const parsed = parseRouteClaimKey(key);
  if (!parsed.ok) throw new Error(`bad claim key in test: ${key}: ${parsed.message}`);
  return { kind: 'claim', key, path: parsed.path, match };
}

/** `host` or `ns/host`. */
export function server(port: number, hosts: string[], opts: { protocol?: ServerProtocol; tls?: Partial<GatewayTls>; name?: string } = {}): GatewayServer {
  const protocol = opts.protocol ?? 'HTTP';
  return {
    port: { number: port, name: `${protocol.toLowerCase()}-${port}`, protocol },
    hosts: hosts.map((h) => (h.includes('/') ? { namespace: h.split('/')[0]!, host: h.split('/')[1]! } : { namespace: '*', host: h })),
    ...(opts.tls ? { tls: { mode: 'SIMPLE', httpsRedirect: false, ...opts.tls } } : {}),
    ...(opts.name ? { name: opts.name } : {}),
  };
}

export function gateway(id: string, servers: GatewayServer[]): Gateway {
  return { meta: meta('Gateway', id), selector: { mesh: 'ingressgateway' }, servers };
}

export function match(m: Partial<HttpMatchRequest> = {}): HttpMatchRequest {
  return { headers: [], withoutHeaders: [], queryParams: [], ignoreUriCase: false, ...m };
}

export function dest(host: string, port?: number, weight = 100): HttpRouteDestination {
  return { host, weight, ...(port !== undefined ? { port } : {}) };
}

/** A rule; `match` entries are completed with match(). */
export function rule(r: Omit<Partial<HttpRoute>, 'match'> & { match?: Partial<HttpMatchRequest>[] } = {}): HttpRoute {
  return { route: [dest('backend', 8000)], ...r, match: (r.match ?? []).map(match) };
}

export function virtualService(id: string, hosts: string[], gateways: string[], http: HttpRoute[]): VirtualService {
  return { meta: meta('VirtualService', id), hosts, gateways, http };
}

export function request(r: Partial<RouteRequest> = {}): RouteRequest {
  return { port: 80, host: 'example.com', method: 'GET', path: '/', scheme: 'http', headers: {}, claims: undefined, ...r };
}

/** A sidecar's outbound request: to reviews on its service port unless the case says otherwise. */
export function meshRequest(r: Partial<MeshRouteRequest> = {}): MeshRouteRequest {
  return { port: 9080, host: 'reviews.default.svc.cluster.local', method: 'GET', path: '/', scheme: 'http', headers: {}, ...r };
}
