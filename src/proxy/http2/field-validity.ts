// RFC 9113 8.2.1 (field names and values) as nghttp2 applies it to a regular (not pseudo) field,
// for the fields nghttp2 drops without a word: node:http2 asks nghttp2 to ignore them, so the rest
// of the message would go on as if they had never been sent. Pure.
// nghttp2 already refuses the stream itself (PROTOCOL_ERROR) for a pseudo-header field that is not
// valid and for a name with an upper-case letter; those are left to it (undefined here), so that
// each malformed block is refused exactly once. What is judged here, matching nghttp2's tables:
//   name : empty, or a byte outside RFC 9110's token characters (lower case only);
//   value: NUL, CR, LF or another control byte, DEL, or SP/HTAB first or last;
//   host : on a server, a byte outside RFC 3986's authority characters (as nghttp2 checks it).
// The differential test (test/proxy/http2/field-validity.test.ts) holds this to what node drops.

/** Why a field makes its message malformed; undefined: nghttp2 keeps it, or refuses it itself. */
export type FieldFault = string | undefined;

const table = (chars: string, ranges: ReadonlyArray<readonly [number, number]> = []): Uint8Array => {
  const t = new Uint8Array(256);
  for (let i = 0; i < chars.length; i++) t[chars.charCodeAt(i)] = 1;
  for (const [from, to] of ranges) t.fill(1, from, to + 1);
  return t;
};
const DIGITS: [number, number] = [0x30, 0x39];
const LOWER: [number, number] = [0x61, 0x7a];
const UPPER: [number, number] = [0x41, 0x5a];

/** RFC 9110 tchar without upper case. */
const NAME_CHARS = table("!#$%&'*+-.^_`|~", [DIGITS, LOWER]);
/** HTAB, SP to `~`, and 0x80-0xff (obs-text). */
const VALUE_CHARS = table('\t', [[0x20, 0x7e], [0x80, 0xff]]);
/** RFC 3986 authority: unreserved, pct-encoded, sub-delims, ':', '@', and the brackets of an IPv6 literal. */
const AUTHORITY_CHARS = table("-._~%!$&'()*+,;=:@[]", [DIGITS, LOWER, UPPER]);

export const FAULT_NAME = 'a field name holding a character outside the token set (RFC 9110 5.1), or empty';
export const FAULT_VALUE_CHAR = 'a field value holding NUL, CR, LF or another control character';
export const FAULT_VALUE_SPACE = 'a field value beginning or ending with a space or tab';
export const FAULT_HOST = 'a host field holding a character that cannot be in an authority';

function hasUpper(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return true;
  }
  return false;
}

function valueFault(value: string): FieldFault {
  const n = value.length;
  if (n === 0) return undefined;
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(n - 1);
  if (first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09) return FAULT_VALUE_SPACE;
  for (let i = 0; i < n; i++) if (VALUE_CHARS[value.charCodeAt(i) & 0xff] === 0) return FAULT_VALUE_CHAR;
  return undefined;
}

/**
 * The fault of one decoded field (latin1 strings: one char per byte), on the side that receives it:
 * `server` for requests (client to proxy), not for responses (upstream to proxy).
 */
export function fieldFault(name: string, value: string, server: boolean): FieldFault {
  const n = name.length;
  if (n > 0 && name.charCodeAt(0) === 0x3a) return undefined; // a pseudo-header: nghttp2's own
  for (let i = 0; i < n; i++) {
    if (NAME_CHARS[name.charCodeAt(i) & 0xff] === 0) return hasUpper(name) ? undefined : FAULT_NAME;
  }
  if (n === 0) return FAULT_NAME;
  if (server && n === 4 && name === 'host') {
    for (let i = 0; i < value.length; i++) if (AUTHORITY_CHARS[value.charCodeAt(i) & 0xff] === 0) return FAULT_HOST;
    return undefined;
  }
  return valueFault(value);
}

/**
 * fieldFault, and a name with upper case too: the rule a frame layer of our own applies, where no
 * nghttp2 refuses those before (RFC 9113 8.2.1: names are lower case).
 */
export function strictFieldFault(name: string, value: string, server: boolean): FieldFault {
  const fault = fieldFault(name, value, server);
  if (fault !== undefined || name.charCodeAt(0) === 0x3a) return fault;
  return hasUpper(name) ? FAULT_NAME : undefined;
}
