// What a captured connection speaks, from its first bytes. HTTP/1.x is recognised by the shape of a
// request line, not by a list of methods: a method outside a list, or a CRLF before the request
// line (RFC 9112 2.2), must not turn a request into opaque bytes that skip every HTTP policy. So,
// after any CR/LF: an upper-case method, a space and `/` or `*`; an absolute-form target (`scheme://`),
// or CONNECT's authority-form, whose line ends without a version; or a whole `token SP target SP
// HTTP/d.d` line → HTTP/1, and the parser answers what it refuses (a lower-case method, a missing version,
// two spaces, a bare LF...): lenient servers read `GET /admin` alone as HTTP/0.9, so such lines are
// never relayed as opaque bytes. The HTTP/2 client preface → h2; a TLS ClientHello → tls; anything
// else → tcp (text protocols such as memcached's `get key` stay TCP). Whatever is not HTTP/1 gets
// the TCP rules of policy. Pure.
import { CR, LF, SP, TOKEN } from '../http1/bytes.js';
import { prefaceKind } from '../http2/preface.js';

export type Protocol = 'http1' | 'tls' | 'h2' | 'tcp';

const HTTP_SLASH = Buffer.from('HTTP/', 'latin1');
const CONNECT = Buffer.from('CONNECT', 'latin1');

/** A request line longer than this (past its method) is HTTP/1 all the same: the parser answers it (414). */
export const MAX_REQUEST_LINE = 60 * 1024;
/** Methods are short words: a longer run of token bytes is something else (a stream of `aaaa...`). */
export const MAX_METHOD = 64;

const enum Part { Method, Target, Version }

/** Longest URI scheme looked for (`https`, `ws`... are short; a long run of letters is not one). */
const MAX_SCHEME = 32;

function isAlpha(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

/** Whether `head` holds `scheme://` at `at` (RFC 3986 3.1); undefined: too few bytes to tell. */
function schemeAt(head: Buffer, at: number): boolean | undefined {
  let i = at + 1;
  for (; i < head.length && i - at <= MAX_SCHEME; i++) {
    const c = head[i]!;
    if (isAlpha(c) || (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2d || c === 0x2e) continue;
    break;
  }
  for (const [k, want] of [[0, 0x3a], [1, 0x2f], [2, 0x2f]] as const) { // "://"
    if (i + k >= head.length) return i - at <= MAX_SCHEME ? undefined : false;
    if (head[i + k] !== want) return false;
  }
  return true;
}

/**
 * Classifies the first bytes; `undefined` means "too few bytes to tell yet" (they could still be
 * an HTTP/1 request line, or the HTTP/2 preface).
 */
export function sniff(head: Buffer): Protocol | undefined {
  if (head.length === 0) return undefined;
  if (head[0] === 0x16) return head.length < 2 ? undefined : head[1] === 0x03 ? 'tls' : 'tcp';
  const h2 = prefaceKind(head);
  if (h2 !== 'http1') return h2;
  let i = 0;
  while (i < head.length && (head[i] === CR || head[i] === LF)) i++;
  const start = i;
  let part = Part.Method;
  let versionAt = 0;
  let upper = true;
  /** The target is in absolute-form (`scheme://`), after an upper-case method. */
  let absolute = false;
  /** The method is CONNECT (its target: authority-form). */
  let connect = false;
  for (; i < head.length; i++) {
    const c = head[i]!;
    if (part === Part.Method) {
      if (TOKEN[c] === 1) {
        if (c >= 0x61 && c <= 0x7a) upper = false;
        if (i - start >= MAX_METHOD) return 'tcp';
        continue;
      }
      if (c !== SP || i === start) return 'tcp';
      connect = i - start === CONNECT.length && head.subarray(start, i).equals(CONNECT);
      part = Part.Target;
      versionAt = i + 1;
    } else if (part === Part.Target) {
      // A method and a path: an HTTP request whatever follows (the parser judges the rest, the
      // extra spaces lenient servers skip included).
      if (i === versionAt && upper && c === SP) {
        versionAt = i + 1;
        continue;
      }
      if (i === versionAt && upper && (c === 0x2f /* / */ || c === 0x2a /* * */)) return 'http1';
      if (i === versionAt && upper && isAlpha(c)) {
        const scheme = schemeAt(head, i);
        if (scheme === undefined) return undefined;
        absolute = scheme;
      }
      if (c > SP && c < 0x7f) continue;
      // Lenient servers read `PATCH http://h/x` and `CONNECT h:443` and their line's end as a request
      // too (node:http: HTTP/0.9); RTSP's `OPTIONS rtsp://cam/1 RTSP/1.0` has a version: it stays TCP.
      if ((absolute || connect) && (c === CR || c === LF)) return 'http1';
      if (c !== SP || i === versionAt) return 'tcp';
      part = Part.Version;
      versionAt = i + 1;
    } else {
      const k = i - versionAt; // HTTP/d.d then the line's end
      if (k < 5) {
        if (c !== HTTP_SLASH[k]) return 'tcp';
      } else if (k === 5 || k === 7) {
        if (c < 0x30 || c > 0x39) return 'tcp';
      } else if (k === 6) {
        if (c !== 0x2e) return 'tcp';
      } else {
        return c === CR || c === LF ? 'http1' : 'tcp';
      }
    }
  }
  return i - start > MAX_REQUEST_LINE ? 'http1' : undefined;
}
