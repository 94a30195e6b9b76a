// What makes an HTTP/2 message malformed (RFC 9113 8.1.1, 8.2, 8.3), judged on a decoded header
// list: field names and values (8.2.1, through field-validity.ts), connection-specific fields
// (8.2.2), pseudo-header fields (8.3) and content-length. A malformed message is refused whole (a
// stream error PROTOCOL_ERROR): nothing of it is forwarded. Pure.
import { strictFieldFault } from '../field-validity.js';

export type HeaderBlockKind = 'request' | 'response' | 'trailers';

/** What a well-formed block said that the frame layer needs: its content-length (-1: none) and, for a response, its status. */
export interface BlockFacts {
  contentLength: number;
  status: number;
  /** A request's method is CONNECT, or a response is 1xx (more headers follow). */
  connect: boolean;
  informational: boolean;
}

/** RFC 9113 8.2.2, by length first: most names are none of these and cost a length compare. */
function connectionSpecific(name: string): boolean {
  switch (name.length) {
    case 7: return name === 'upgrade';
    case 10: return name === 'connection' || name === 'keep-alive';
    case 16: return name === 'proxy-connection';
    case 17: return name === 'transfer-encoding';
    default: return false;
  }
}

/** RFC 9110 tchar: a method. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** RFC 3986 3.1: a scheme. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+\-.]*$/;
/** RFC 3986 authority characters without '@': RFC 9113 8.3.1 forbids userinfo in :authority (and a host that hides one routes elsewhere). */
const AUTHORITY = /^[A-Za-z0-9\-._~%!$&'()*+,;=:[\]]+$/;

/**
 * The pseudo-header values last found valid: HPACK hands the same string objects again for fields
 * sent by index (most :method, :scheme and :authority values), so a repeat costs one compare.
 */
let validMethod = 'GET';
let validScheme = 'https';
let validAuthority = 'localhost';

/**
 * Judges one decoded header block (`fields`: [name, value, ...] as latin1 strings). Returns why it is
 * malformed, or undefined and fills `facts`. `judged`: each field's name and value were judged
 * already (8.2.1, by the HPACK decoder as it decoded them, strictFieldFault); the rest is judged here.
 */
export function judgeBlock(fields: readonly string[], kind: HeaderBlockKind, facts: BlockFacts, judged = false): string | undefined {
  facts.contentLength = -1;
  facts.status = 0;
  facts.connect = false;
  facts.informational = false;
  let method: string | undefined;
  let scheme: string | undefined;
  let path: string | undefined;
  let authority: string | undefined;
  let protocol = false;
  let status: string | undefined;
  let host: string | undefined;
  let regular = false;
  const n = fields.length;
  for (let i = 0; i < n; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    if (name.charCodeAt(0) === 0x3a) { // a pseudo-header field (8.3)
      if (regular) return `the pseudo-header field ${name} after a regular field`;
      if (kind === 'trailers') return `the pseudo-header field ${name} in trailers`;
      if (kind === 'response') {
        if (name !== ':status') return `the pseudo-header field ${name} in a response`;
        if (status !== undefined) return 'a second :status';
        status = value;
        continue;
      }
      switch (name) {
        case ':method': if (method !== undefined) return 'a second :method'; method = value; break;
        case ':scheme': if (scheme !== undefined) return 'a second :scheme'; scheme = value; break;
        case ':path': if (path !== undefined) return 'a second :path'; path = value; break;
        case ':authority': if (authority !== undefined) return 'a second :authority'; authority = value; break;
        case ':protocol': protocol = true; break;
        default: return `the pseudo-header field ${name} in a request`;
      }
      continue;
    }
    regular = true;
    if (!judged) {
      const fault = strictFieldFault(name, value, kind === 'request');
      if (fault !== undefined) return `${fault}: ${JSON.stringify(name)}`;
    }
    if (connectionSpecific(name)) return `the connection-specific field ${name}`;
    if (name === 'te' && value !== 'trailers' && value.toLowerCase() !== 'trailers') return 'a te field other than "trailers"';
    if (name === 'content-length') {
      if (!/^[0-9]{1,15}$/.test(value)) return `content-length ${JSON.stringify(value)}`;
      const cl = Number(value);
      if (facts.contentLength >= 0 && facts.contentLength !== cl) return 'two different content-length values';
      facts.contentLength = cl;
    } else if (name === 'host' && kind === 'request') {
      if (host !== undefined) return 'a second host field';
      host = value;
    }
  }
  if (kind === 'trailers') return undefined;
  if (kind === 'response') {
    if (status === undefined) return 'no :status';
    if (!/^[1-9][0-9][0-9]$/.test(status)) return `:status ${JSON.stringify(status)}`;
    facts.status = Number(status);
    if (facts.status === 101) return ':status 101 (no protocol switch in HTTP/2)';
    facts.informational = facts.status < 200;
    return undefined;
  }
  if (method === undefined) return 'no :method';
  if (method !== validMethod) {
    if (!TOKEN.test(method)) return `:method ${JSON.stringify(method)}`;
    validMethod = method;
  }
  // The extended CONNECT (RFC 8441) is not offered: SETTINGS_ENABLE_CONNECT_PROTOCOL is never sent.
  if (protocol) return 'a :protocol field (extended CONNECT is not offered)';
  if (authority !== undefined && authority !== validAuthority) {
    if (!AUTHORITY.test(authority)) return `:authority ${JSON.stringify(authority)}`;
    validAuthority = authority;
  }
  if (host !== undefined && (host === '' || !AUTHORITY.test(host))) return `host ${JSON.stringify(host)}`;
  // 8.3.1: a host that names another authority than :authority is a request two readers see differently.
  if (host !== undefined && authority !== undefined && host.toLowerCase() !== authority.toLowerCase()) return 'a host field that differs from :authority';
  if (method === 'CONNECT') {
    if (authority === undefined) return 'CONNECT without :authority';
    if (scheme !== undefined || path !== undefined) return 'CONNECT with :scheme or :path';
    facts.connect = true;
    return undefined;
  }
  if (scheme === undefined) return 'no :scheme';
  if (scheme !== validScheme) {
    if (!SCHEME.test(scheme)) return `:scheme ${JSON.stringify(scheme)}`;
    validScheme = scheme;
  }
  if (path === undefined) return 'no :path';
  if (path.charCodeAt(0) !== 0x2f && !(path === '*' && method === 'OPTIONS')) return `:path ${JSON.stringify(path)} (neither absolute nor * for OPTIONS)`;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f || c > 0xff) return `:path ${JSON.stringify(path)}`;
  }
  return undefined;
}
