// Header rules of the HTTP/1.1 path, pure: which names are hop-by-hop, the decider's header edits
// and their checks, the `headers` object deciders read, and header values written as bytes.
import type { IncomingHttpHeaders } from 'node:http';

/** Header edits a ForwardTarget carries. */
export interface HeaderEdits {
  /** Lower-case names. */
  readonly removeHeaders?: readonly string[];
  readonly setHeaders?: readonly (readonly [string, string])[];
  /** Lines appended after the forwarded ones (the client's of the same name stay). */
  readonly addHeaders?: readonly (readonly [string, string])[];
}

/** Hop-by-hop names (RFC 9110 7.6.1), tested by length first: most names cost one switch (the hot path). */
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

/**
 * Names whose lines only the proxy writes: the framing (it states the bytes it sends), the
 * connection's own headers and Expect. A decider's edit naming one is ignored, and `Connection`
 * cannot make the proxy drop them.
 */
const PROXY_OWNED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'expect']);

export function isProxyOwned(lowerName: string): boolean {
  return PROXY_OWNED.has(lowerName);
}

/**
 * `Content_Length`, `Transfer_Encoding`, `Host` with `_` for `-`: servers behind CGI-style header
 * mapping read them as the real thing, so a second framing would hide behind the spelling. Refused.
 */
export function lookalike(name: string): boolean {
  const l = name.length;
  if ((l !== 14 && l !== 17) || !name.includes('_')) return false;
  const dashed = name.toLowerCase().replaceAll('_', '-');
  return dashed === 'content-length' || dashed === 'transfer-encoding';
}

/** A header name as CGI-style servers read it: lower-case, `_` as `-` (`X_Jwt_Sub` is `x-jwt-sub`). */
export function cgiName(name: string): string {
  const l = name.toLowerCase();
  return l.includes('_') ? l.replaceAll('_', '-') : l;
}

// What node:http checks before it writes a header or a path (ERR_INVALID_CHAR, ERR_UNESCAPED_CHARACTERS);
// values are text here (they go out as UTF-8), so any character but the controls passes.
const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;
const INVALID_VALUE = /[\0-\x08\x0a-\x1f\x7f]/;
const INVALID_PATH = /[^\u0021-\u007e]/;

/** Whether `value` can be written as a header value (no CR, LF, NUL...). */
export function validHeaderValue(value: string): boolean {
  return !INVALID_VALUE.test(value);
}

/** Why an edit cannot go on the wire (a name that is not a token, a value or path with CR/LF...), or undefined. */
export function invalidEdit(edits: HeaderEdits & { readonly path?: string }): string | undefined {
  if (edits.path !== undefined && (edits.path === '' || edits.path[0] !== '/' || INVALID_PATH.test(edits.path))) return `path ${JSON.stringify(edits.path)}`;
  for (const list of [edits.setHeaders, edits.addHeaders]) {
    for (const [n, v] of list ?? []) {
      if (!TOKEN.test(n)) return `header name ${JSON.stringify(n)}`;
      if (INVALID_VALUE.test(v)) return `value of header ${n}`;
    }
  }
  for (const [n] of edits.addHeaders ?? []) if (n.toLowerCase() === 'host') return 'added header host (a request has one Host)';
  return undefined;
}

const ASCII = /^[\x00-\x7f]*$/;

/**
 * A text value (a claim, a route's header) as the latin1 string of its UTF-8 bytes, so a head
 * written as latin1 carries UTF-8 (as Envoy writes it). Values read off the wire are bytes already.
 */
export function wireText(value: string): string {
  return ASCII.test(value) ? value : Buffer.from(value, 'utf8').toString('latin1');
}

/**
 * The `headers` object deciders read: lower-case names; repeated lines joined (`, `, or `; ` for
 * cookie), every one of them: a policy must see each value the application may read, so there is
 * no "first one wins" here (node:http keeps only the first Authorization, Host, User-Agent...).
 */
export function headersObject(raw: readonly string[]): IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const prev = Object.hasOwn(out, name) ? out[name] : undefined;
    // Assigning `__proto__` would set the prototype: that header is defined like any other.
    if (prev === undefined && name === '__proto__') Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
    else if (prev === undefined) out[name] = name === 'set-cookie' ? [value] : value;
    else if (name === 'set-cookie') (prev as string[]).push(value);
    else out[name] = `${prev as string}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  return out as IncomingHttpHeaders;
}
