// Byte classes of HTTP/1.1 (RFC 9110, 9112) as lookup tables, shared by the request and response
// parsers: one array read per byte instead of a comparison chain. Pure.

export const CR = 13;
export const LF = 10;
export const SP = 0x20;
export const HTAB = 9;

/** tchar: the bytes of a token (method, header name, transfer coding). */
export const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TOKEN[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TOKEN[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TOKEN[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) TOKEN[c] = 1;

/** What a field value (or reason phrase) may hold: HTAB, SP, VCHAR, obs-text. Never CR, LF or NUL. */
export const FIELD = new Uint8Array(256);
FIELD[HTAB] = 1;
for (let c = 0x20; c <= 0x7e; c++) FIELD[c] = 1;
for (let c = 0x80; c <= 0xff; c++) FIELD[c] = 1;

/** Hex digit values, -1 for anything else. */
export const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 10; c++) HEX[0x30 + c] = c;
for (let c = 0; c < 6; c++) { HEX[0x41 + c] = 10 + c; HEX[0x61 + c] = 10 + c; }

/** `b[at..at+name.length)` is `name` (lower-case ASCII letters and '-') in any case. */
export function nameIs(b: Buffer, at: number, name: string): boolean {
  for (let i = 0; i < name.length; i++) if ((b[at + i]! | 0x20) !== name.charCodeAt(i)) return false;
  return true;
}
