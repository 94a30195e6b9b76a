// Header handling of the fast HTTP/1.1 path, pure: which headers are forwarded (hop-by-hop ones
// dropped, RFC 9110 7.6.1, with the ones `Connection` names), the decider's edits, the framing
// facts the proxy needs, the `headers` object node:http would build, and a head written back
// out for the node:http path.
import type { IncomingHttpHeaders } from 'node:http';

/** Header edits a ForwardTarget carries. */
export interface HeaderEdits {
  /** Lower-case names. */
  readonly removeHeaders?: readonly string[];
  readonly setHeaders?: readonly (readonly [string, string])[];
}

/** Forwarded header lines and what the proxy needs to know about the message. */
export interface ForwardedHeaders {
  /** `Name: value\r\n` for every forwarded header, edits applied. */
  readonly text: string;
  readonly contentLength: boolean;
  /** A Transfer-Encoding header (llhttp accepts only one ending in chunked). */
  readonly chunked: boolean;
  readonly expect: boolean;
  readonly date: boolean;
}

/** Hop-by-hop names, tested by length first: most names cost one switch (the hot path). */
export function isHopByHop(name: string): boolean {
  switch (name.length) {
    case 2: return name.toLowerCase() === 'te';
    case 7: {
      const l = name.toLowerCase();
      return l === 'trailer' || l === 'upgrade';
    }
    case 10: {
      const l = name.toLowerCase();
      return l === 'connection' || l === 'keep-alive';
    }
    case 16: return name.toLowerCase() === 'proxy-connection';
    case 17: return name.toLowerCase() === 'transfer-encoding';
    default: return false;
  }
}

const PLAIN_CONNECTION = /^\s*(?:keep-alive|close)\s*$/i;

function edited(name: string, edits: HeaderEdits): boolean {
  const l = name.toLowerCase();
  if (edits.removeHeaders?.includes(l)) return true;
  const set = edits.setHeaders;
  if (set) for (const [n] of set) if (n.toLowerCase() === l) return true;
  return false;
}

/** The names `Connection` lists (beyond close / keep-alive), lower-case; undefined when none. */
function connectionNamed(raw: readonly string[]): Set<string> | undefined {
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 10 || name.toLowerCase() !== 'connection') continue;
    for (const t of raw[i + 1]!.split(',')) {
      const token = t.trim().toLowerCase();
      if (token !== '' && token !== 'close' && token !== 'keep-alive') (named ??= new Set()).add(token);
    }
  }
  return named;
}

/** The headers of `raw` (name, value, name, value...) to send on, and the message's framing facts. */
export function forwardedHeaders(raw: readonly string[], edits?: HeaderEdits): ForwardedHeaders {
  let text = '';
  let contentLength = false;
  let chunked = false;
  let expect = false;
  let date = false;
  let connection = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (isHopByHop(name)) {
      if (name.length === 17) chunked = true;
      // 'c'onnection (not keep-alive) with a value beyond close / keep-alive: names more headers.
      else if (name.length === 10 && (name.charCodeAt(0) | 0x20) === 0x63 && !PLAIN_CONNECTION.test(raw[i + 1]!)) connection = true;
      continue;
    }
    switch (name.length) {
      case 4: if (name.toLowerCase() === 'date') date = true; break;
      case 6: if (name.toLowerCase() === 'expect') expect = true; break;
      case 14: if (name.toLowerCase() === 'content-length') contentLength = true; break;
      default: break;
    }
    if (edits && edited(name, edits)) continue;
    text += `${name}: ${raw[i + 1]!}\r\n`;
  }
  // Rare: `Connection: x-foo` makes x-foo hop-by-hop too; build the text again without them.
  const named = connection ? connectionNamed(raw) : undefined;
  if (named) {
    text = '';
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (isHopByHop(name) || named.has(name.toLowerCase()) || (edits && edited(name, edits))) continue;
      text += `${name}: ${raw[i + 1]!}\r\n`;
    }
  }
  if (edits?.setHeaders) for (const [n, v] of edits.setHeaders) text += `${n}: ${v}\r\n`;
  return { text, contentLength, chunked, expect, date };
}

// What node:http checks before it writes a header or a path (ERR_INVALID_CHAR, ERR_UNESCAPED_CHARACTERS).
const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const INVALID_PATH = /[^\u0021-\u00ff]/;

/** Whether `value` can be written as a header value (no CR, LF, NUL...). */
export function validHeaderValue(value: string): boolean {
  return !INVALID_VALUE.test(value);
}

/** Why an edit cannot go on the wire (a name that is not a token, a value or path with CR/LF...), or undefined. */
export function invalidEdit(edits: HeaderEdits & { readonly path?: string }): string | undefined {
  if (edits.path !== undefined && (edits.path === '' || INVALID_PATH.test(edits.path))) return `path ${JSON.stringify(edits.path)}`;
  for (const [n, v] of edits.setHeaders ?? []) {
    if (!TOKEN.test(n)) return `header name ${JSON.stringify(n)}`;
    if (INVALID_VALUE.test(v)) return `value of header ${n}`;
  }
  return undefined;
}

// node:http's rules for repeated request headers (IncomingMessage#headers): these keep the first.
const FIRST_WINS = new Set([
  'content-type', 'content-length', 'user-agent', 'referer', 'host', 'authorization', 'proxy-authorization',
  'if-modified-since', 'if-unmodified-since', 'from', 'location', 'max-forwards', 'retry-after', 'etag',
  'last-modified', 'server', 'age', 'expires',
]);

/** The `headers` object node:http builds from raw headers: lower-case names, repeats joined. */
export function headersObject(raw: readonly string[]): IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const prev = out[name];
    if (prev === undefined) {
      out[name] = name === 'set-cookie' ? [value] : value;
    } else if (name === 'set-cookie') {
      (prev as string[]).push(value);
    } else if (!FIRST_WINS.has(name)) {
      out[name] = `${prev as string}${name === 'cookie' ? '; ' : ', '}${value}`;
    }
  }
  return out as IncomingHttpHeaders;
}

/** A request head as text again (for the node:http path, which parses it anew). */
export function requestHead(method: string, url: string, major: number, minor: number, raw: readonly string[]): string {
  let head = `${method} ${url} HTTP/${major}.${minor}\r\n`;
  for (let i = 0; i < raw.length; i += 2) head += `${raw[i]!}: ${raw[i + 1]!}\r\n`;
  return `${head}\r\n`;
}
