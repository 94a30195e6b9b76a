// From an HTTP/2 request's header block to the request the proxy judges and forwards, and back to
// the header blocks sent upstream. The rule is the HTTP/1 path's (http1/message.ts): what the
// decider sees is what the upstream receives. nghttp2 has already refused what RFC 9113 calls
// malformed (upper-case names, connection-specific fields, `te` other than `trailers`, pseudo-header
// fields repeated, missing or after regular ones, CR/LF/NUL in values, a content-length the DATA
// frames contradict); here:
// - `:authority` and `host` must agree when both are sent (RFC 9113 8.3.1): either may be what an
//   application routes by, so the judged authority is the only one forwarded;
// - `:path` is read as an HTTP/1 origin-form target (`*` only for OPTIONS) and normalized once;
// - an underscore spelling of a framing header is refused, as on the HTTP/1 path (an HTTP/1.1
//   upstream behind CGI-style mapping would read it as the real one), and so are a method with
//   lower-case letters and a `:path` byte outside visible ASCII (the HTTP/1 parser's rules: the
//   HTTP/1.1 leg must carry exactly what was judged);
// - CONNECT (plain or extended) is not carried over HTTP/2: 501.
// Pure.
import type { OutgoingHttpHeaders } from 'node:http';
import { cgiName, isHopByHop, isProxyOwned, lookalike, wireText } from '../http1/headers.js';
import type { MessageError, UpstreamEdits } from '../http1/message.js';
import { parseTarget, validAuthority } from '../http1/target.js';
import { normalizePath, type PathNormalization } from '../path-normalization.js';
import { fieldValue } from './field-list.js';
import { isGrpc } from './grpc.js';

export interface Http2Request {
  readonly method: string;
  /** The normalized path and the query (what is judged and forwarded), or `*`. */
  readonly url: string;
  readonly authority: string;
  /** `http` or `https`, as the client said. */
  readonly scheme: string;
  /** Regular header lines (name, value...), `host` first (= the authority): the decider's view. */
  readonly headers: string[];
  /** The client sent `te: trailers` (gRPC does; forwarded to an HTTP/2 upstream). */
  readonly teTrailers: boolean;
  /** The client's content-length, when it sent one. */
  readonly contentLength: string | undefined;
  readonly grpc: boolean;
}

export interface Http2RequestError extends Omit<MessageError, 'status'> {
  readonly status: 400 | 431 | 501;
}

const bad = (reason: string): Http2RequestError => ({ status: 400, reason });
const LOWER = /[a-z]/;

/**
 * Fields defined as a single value (RFC 9110 singletons), which node:http2 refuses to send twice:
 * a request carrying one of them twice is refused (400) rather than judged on one reading (the
 * decider sees the values joined) and failed upstream; a response keeps the first.
 */
export const SINGLE_VALUE_FIELDS: ReadonlySet<string> = new Set([
  'access-control-allow-credentials', 'access-control-max-age', 'access-control-request-method', 'age', 'authorization',
  'content-encoding', 'content-language', 'content-length', 'content-location', 'content-md5', 'content-range', 'content-type',
  'date', 'dnt', 'etag', 'expires', 'from', 'host', 'if-match', 'if-modified-since', 'if-none-match', 'if-range',
  'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'range', 'referer', 'retry-after',
  'tk', 'upgrade-insecure-requests', 'user-agent', 'x-content-type-options',
]);
const VISIBLE_ASCII = /^[\x21-\x7e]*$/;

/** Whether `name` is the name of a line before line `at` (no set per request: few lines take one value). */
function namedBefore(raw: readonly string[], name: string, at: number): boolean {
  for (let i = 0; i < at; i += 2) if (raw[i] === name) return true;
  return false;
}

/** The request a header block (`raw`: name, value... as received, pseudo-headers first) stands for, or why it is refused. */
export function http2Request(raw: readonly string[], normalization: PathNormalization, maxLines = Infinity): Http2Request | Http2RequestError {
  // The size of the list was capped as it was decoded (SETTINGS_MAX_HEADER_LIST_SIZE); its lines, as on the HTTP/1 path, here.
  if (raw.length > 2 * maxLines && regularLines(raw) > maxLines) return { status: 431, reason: 'too many header lines' };
  let method: string | undefined;
  let path: string | undefined;
  let scheme = 'http';
  let authority: string | undefined;
  let host: string | undefined;
  let protocol = false;
  let teTrailers = false;
  let contentLength: string | undefined;
  let contentType: string | undefined;
  const headers: string[] = ['host', ''];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    if (name.charCodeAt(0) === 0x3a /* : */) {
      switch (name) {
        case ':method': method = value; break;
        case ':path': path = value; break;
        case ':scheme': scheme = value; break;
        case ':authority': authority = value; break;
        case ':protocol': protocol = true; break;
        default: return bad(`pseudo-header ${name}`);
      }
      continue;
    }
    if (lookalike(name)) return bad(`header ${JSON.stringify(name)} (an underscore spelling of a framing header)`);
    if (SINGLE_VALUE_FIELDS.has(name) && namedBefore(raw, name, i)) return bad(`${name} repeated (a single-value field)`);
    switch (name) {
      case 'host':
        host = value;
        continue;
      case 'te': teTrailers = value.trim().toLowerCase() === 'trailers'; continue;
      case 'content-length': contentLength = value; continue;
      case 'content-type': contentType = value; break;
      default:
        if (isHopByHop(name) || isProxyOwned(name)) continue; // nghttp2 refuses most; `expect` and `trailer` are dropped
    }
    headers.push(name, value);
  }
  if (method === undefined) return bad('no :method');
  // As on the HTTP/1 path: methods are case-sensitive, and an HTTP/1.1 leg (node:http) would upper-case
  // `get` after a policy judged it; a target byte outside visible ASCII is one a strict server refuses.
  if (LOWER.test(method)) return bad(`method ${JSON.stringify(method)} (methods are upper-case)`);
  if (path !== undefined && !VISIBLE_ASCII.test(path)) return bad(':path has a byte outside visible ASCII');
  if (method === 'CONNECT' || protocol) return { status: 501, reason: 'CONNECT over HTTP/2 is not supported' };
  if (authority !== undefined && host !== undefined && authority !== host) return bad(':authority and host differ');
  const theAuthority = authority ?? host;
  if (theAuthority === undefined || theAuthority === '' || !validAuthority(theAuthority)) return bad(theAuthority === undefined ? 'no :authority' : ':authority');
  if (path === undefined) return bad('no :path');
  const target = parseTarget(method, path);
  if (typeof target === 'string' || (target.form !== 'origin' && target.form !== 'asterisk')) {
    return bad(`:path ${typeof target === 'string' ? target : 'not an origin-form path'}`);
  }
  let url = '*';
  if (target.form === 'origin') {
    const normalized = normalizePath(target.path, normalization);
    if (normalized === undefined) return bad(`path ${JSON.stringify(target.path)} cannot be normalized`);
    url = normalized + target.query;
  }
  headers[1] = theAuthority;
  return { method, url, authority: theAuthority, scheme, headers, teTrailers, contentLength, grpc: isGrpc(contentType) };
}

function regularLines(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.charCodeAt(0) !== 0x3a) n++;
  return n;
}

export function isHttp2RequestError(r: Http2Request | Http2RequestError): r is Http2RequestError {
  return (r as Http2RequestError).reason !== undefined;
}

/**
 * The header lines forwarded with the decider's edits applied (as http1/message.ts applies them: a
 * name removed or set goes in its underscore spelling too; proxy-owned names are never edited; set
 * values go out as UTF-8). `host` comes first: the authority, or the edit that replaced it.
 */
export function editedLines(req: Http2Request, edits: UpstreamEdits | undefined): string[] {
  const remove = edits?.removeHeaders;
  const set = edits?.setHeaders;
  const add = edits?.addHeaders;
  if ((remove === undefined || remove.length === 0) && (set === undefined || set.length === 0) && (add === undefined || add.length === 0)) return req.headers;
  const out: string[] = [];
  const raw = req.headers;
  for (let i = 0; i < raw.length; i += 2) {
    const l = cgiName(raw[i]!);
    if (remove?.includes(l) && l !== 'host') continue;
    if (set?.some(([n]) => n.toLowerCase() === l)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  for (const [n, v] of set ?? []) {
    const l = n.toLowerCase();
    if (isProxyOwned(l)) continue;
    if (l === 'host') out.unshift('host', wireText(v));
    else out.push(l, wireText(v));
  }
  for (const [n, v] of add ?? []) {
    const l = n.toLowerCase();
    if (!isProxyOwned(l) && l !== 'host') out.push(l, wireText(v));
  }
  return out;
}

/** Adds a header line to a node header object (repeated names become arrays; `__proto__` is an ordinary name). */
function addLine(out: OutgoingHttpHeaders, name: string, value: string): void {
  const prev = out[name];
  if (prev === undefined) out[name] = value;
  else if (Array.isArray(prev)) prev.push(value);
  else out[name] = [String(prev), value];
}

/**
 * The field list for an HTTP/2 upstream: the pseudo-headers, then `lines` after the host's (the
 * request's own, edited), then the client's `te: trailers` and content-length, stated again.
 */
export function upstreamHttp2Fields(req: Http2Request, lines: readonly string[], path: string, scheme: string): string[] {
  const out = [':method', req.method, ':scheme', scheme, ':authority', lines[1]!, ':path', path];
  const te = req.teTrailers;
  const length = req.contentLength;
  for (let i = 2; i < lines.length; i += 2) {
    const name = lines[i]!;
    if ((te && name === 'te') || (length !== undefined && name === 'content-length')) continue;
    out.push(name, lines[i + 1]!);
  }
  if (te) out.push('te', 'trailers');
  if (length !== undefined) out.push('content-length', length);
  return out;
}

/**
 * The header object for an HTTP/1.1 upstream, with the framing stated: the client's content-length
 * (nghttp2 held the DATA to it), else chunked for a request with a body. Never node:http's default,
 * which sends a GET's or a DELETE's body unframed: bytes the application would read as a next request.
 */
export function upstreamHttp1Headers(req: Http2Request, lines: readonly string[], hasBody: boolean): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = Object.create(null) as OutgoingHttpHeaders;
  for (let i = 0; i < lines.length; i += 2) addLine(out, lines[i]!, lines[i + 1]!);
  if (req.contentLength !== undefined) out['content-length'] = req.contentLength;
  else if (hasBody) out['transfer-encoding'] = 'chunked';
  return out;
}

const RESPONSE_DROPPED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'http2-settings']);

/**
 * A response's header lines for the HTTP/2 client: `:status` and the regular ones, without what is
 * connection-specific (and what an HTTP/1.1 response's `Connection` names).
 */
export function downstreamResponseFields(status: number, raw: readonly string[], from = 0): string[] {
  const out = [':status', String(status)];
  let named: string[] | undefined;
  for (let i = from; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') (named ??= []).push(...raw[i + 1]!.toLowerCase().split(',').map((t) => t.trim()));
  }
  for (let i = from; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name.charCodeAt(0) === 0x3a || RESPONSE_DROPPED.has(name) || named?.includes(name)) continue;
    if (SINGLE_VALUE_FIELDS.has(name) && fieldValue(out, name) !== undefined) continue; // node:http2 sent one: the first
    out.push(name, raw[i + 1]!);
  }
  return out;
}

/**
 * downstreamResponseFields() for an HTTP/2 upstream's response as our frame layer decoded it
 * (`:status` first, the only pseudo-header; names in lower case; nothing connection-specific, which
 * it refuses): the list itself, to be edited in place, unless a field must go (te, trailer, a
 * single-value field repeated), as is rare.
 */
export function downstreamHttp2ResponseFields(fields: string[]): string[] {
  for (let i = 2; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (RESPONSE_DROPPED.has(name) || (SINGLE_VALUE_FIELDS.has(name) && namedBefore(fields, name, i))) {
      return downstreamResponseFields(Number(fields[1]), fields, 2);
    }
  }
  return fields;
}
