// An HTTP authorizer (`envoyExtAuthzHttp`), as Envoy's ext_authz HTTP service speaks to one: the
// check request carries the client's method, the path behind `pathPrefix`, the Host, the headers
// the provider lists (`includeRequestHeadersInCheck`) and its fixed ones, and the body held for
// the check when the provider asks for one (else none: Content-Length: 0). A 200 answer allows; a 5xx is a failed check; any other status is a
// refusal sent back to the client with its body and the headers the provider lets through. Pure.
import { matchesHeader, type HttpAuthzProvider } from '../../config/ext-authz-providers.js';
import { PARTIAL_BODY_HEADER, type CheckAnswer, type CheckInput, type UpstreamHeaderEdit } from './check.js';

export interface HttpCheckRequest {
  readonly method: string;
  readonly path: string;
  /** Lower-case names; every line. */
  readonly headers: readonly (readonly [string, string])[];
  /** The request body held for the check; absent: none (Content-Length: 0). */
  readonly body?: Buffer;
}

/** Lines of a message that are about its framing or its connection, never copied between messages. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length', 'expect', 'host']);

/** Envoy's answer header listing request headers the authorizer wants removed (comma-separated). */
export const REMOVE_HEADER = 'x-envoy-auth-headers-to-remove';

/** A refusal's body is the authorizer's, up to this many bytes (the rest is cut off). */
export const MAX_DENIED_BODY = 64 * 1024;

export function httpCheckRequest(p: HttpAuthzProvider, input: CheckInput): HttpCheckRequest {
  const headers: [string, string][] = [['host', input.host]];
  for (const [name, lines] of input.headers) {
    if (HOP.has(name) || name === PARTIAL_BODY_HEADER || !matchesHeader(p.includeRequestHeaders, name)) continue;
    if (p.additionalHeaders.some(([n]) => n === name)) continue;
    for (const v of lines) headers.push([name, v]);
  }
  for (const [n, v] of p.additionalHeaders) if (!HOP.has(n) && n !== PARTIAL_BODY_HEADER) headers.push([n, v]);
  const body = input.body;
  if (body === undefined) {
    headers.push(['content-length', '0']);
    return { method: input.method, path: p.pathPrefix + input.path, headers };
  }
  // The proxy's own line: whether the body is cut short (a client's or the configuration's copy is never sent).
  headers.push([PARTIAL_BODY_HEADER, body.partial ? 'true' : 'false'], ['content-length', String(body.bytes.length)]);
  return { method: input.method, path: p.pathPrefix + input.path, headers, body: body.bytes };
}

/** The answer's lines by lower-case name, from node's rawHeaders. */
function lines(raw: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i]!.toLowerCase(), raw[i + 1]!]);
  return out;
}

/** Always let through with a refusal when the provider lists headers (Envoy adds them to the list). */
const DENY_ALWAYS = ['www-authenticate', 'location'];

export function httpAnswer(p: HttpAuthzProvider, status: number, rawHeaders: readonly string[], body: string): CheckAnswer {
  const answer = lines(rawHeaders);
  if (status >= 500) return { kind: 'error', reason: `the authorizer answered ${status}` };
  if (status === 200) {
    const upstream: UpstreamHeaderEdit[] = [];
    const remove: string[] = [];
    const downstream: [string, string][] = [];
    for (const [n, v] of answer) {
      if (n === REMOVE_HEADER) {
        for (const r of v.split(',')) if (r.trim() !== '') remove.push(r.trim().toLowerCase());
        continue;
      }
      if (HOP.has(n)) continue;
      if (matchesHeader(p.headersToUpstreamOnAllow, n)) upstream.push({ name: n, value: v, action: 'set' });
      if (matchesHeader(p.headersToDownstreamOnAllow, n)) downstream.push([n, v]);
    }
    return { kind: 'allow', upstream, remove, downstream };
  }
  const only = p.headersToDownstreamOnDeny;
  const headers = answer.filter(([n]) => !HOP.has(n) && n !== REMOVE_HEADER
    && (only === undefined || DENY_ALWAYS.includes(n) || matchesHeader(only, n)));
  return { kind: 'deny', status: status < 200 ? 403 : status, body, headers };
}
