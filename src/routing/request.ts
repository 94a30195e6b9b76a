// The request as routing sees it, and the per-request view that computes each derived value (path
// without query, lower-cased path, decoded query parameters) at most once and only when a rule
// asks for it. Pure.
import { hostWithoutPort } from './hosts.js';

/** What the matcher reads of a request, whichever table routes it. */
export interface MatchRequest {
  /** Host/:authority as received; may carry `:port`; compared case-insensitively. */
  readonly host: string;
  readonly method: string;
  /** The request target, with its query string. */
  readonly path: string;
  readonly scheme: 'http' | 'https';
  /** Lower-case names, as Node gives them. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The validated JWT payload (gateway only); undefined: claim matchers never match. */
  readonly claims?: unknown;
  readonly sourceIp?: string;
}

/** A request at the gateway (route()). */
export interface RouteRequest extends MatchRequest {
  /** The listener port the request arrived on. */
  readonly port: number;
  /**
   * On a TLS connection: the server (serverKey) the client's SNI chose; only that server's hosts
   * are routed. Absent (plain HTTP): every server of the port.
   */
  readonly server?: string;
  /** The validated JWT payload; undefined when the request carries no valid token. */
  readonly claims: unknown;
}

/** A sidecar's outbound request (routeMesh). Claims are never known there (Istio's rule). */
export interface MeshRouteRequest extends MatchRequest {
  /** The port the connection was made to (its original destination port). */
  readonly port: number;
}

export class RequestView {
  /** Lower-case, without port. */
  readonly host: string;
  /** Without the query string. */
  readonly path: string;
  /** From `?` on (with the `?`), or ''. */
  readonly query: string;
  private lowerPathCache: string | undefined;
  private paramsCache: Map<string, string> | undefined;

  /** `host`: req.host lower-case without port, when the caller has it already. */
  constructor(readonly req: MatchRequest, host: string = hostWithoutPort(req.host)) {
    this.host = host;
    const q = req.path.indexOf('?');
    this.path = q < 0 ? req.path : req.path.slice(0, q);
    this.query = q < 0 ? '' : req.path.slice(q);
  }

  get lowerPath(): string {
    return (this.lowerPathCache ??= this.path.toLowerCase());
  }

  /** A header's value; several values joined with ',' as Envoy does; pseudo-headers from the request. */
  header(name: string): string | undefined {
    if (name.charCodeAt(0) === 0x3a /* : */) {
      switch (name) {
        case ':authority': return this.host;
        case ':method': return this.req.method;
        case ':path': return this.req.path;
        case ':scheme': return this.req.scheme;
        default: return undefined;
      }
    }
    const v = this.req.headers[name];
    return typeof v === 'string' ? v : v === undefined ? undefined : v.join(',');
  }

  /** A query parameter's decoded value (the first occurrence; `?a` gives ''). */
  queryParam(name: string): string | undefined {
    return (this.paramsCache ??= parseQuery(this.query)).get(name);
  }
}

function decode(s: string): string {
  if (s.indexOf('%') < 0) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s; // malformed escapes: the raw text, as received
  }
}

/** `?a=1&b=x%20y&a=2` → {a: '1', b: 'x y'}; `+` stays `+` (Envoy does not treat it as a space). */
export function parseQuery(query: string): Map<string, string> {
  const params = new Map<string, string>();
  if (query.length <= 1) return params;
  for (const pair of query.slice(1).split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq));
    if (!params.has(name)) params.set(name, eq < 0 ? '' : decode(pair.slice(eq + 1)));
  }
  return params;
}
