// The malformed HTTP/2 messages of the sidecar's and the gateway's tests (RFC 9113 8.1.1), as field
// lists the tests turn into raw HPACK (literals without indexing, no Huffman) for
// test/fixtures/h2-malformed.mjs to send, and what that client prints.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { repoRoot } from './repo.js';

export const H2_MALFORMED = join(repoRoot, 'test', 'fixtures', 'h2-malformed.mjs');
export const PROTOCOL_ERROR = 1;

export type Field = readonly [string, string];

/** What h2-malformed.mjs `send` prints: the response's :status, stream 1's RST_STREAM code, a GOAWAY's code. */
export interface Sent {
  readonly status: number | null;
  readonly reset: number | null;
  readonly goaway: number | null;
}

/** A literal field without indexing, with a new name, no Huffman (RFC 7541 6.2.2). */
function literal(name: string, value: string): Buffer {
  const n = Buffer.from(name, 'latin1');
  const v = Buffer.from(value, 'latin1');
  assert.ok(n.length < 127 && v.length < 127);
  return Buffer.concat([Buffer.from([0x00, n.length]), n, Buffer.from([v.length]), Buffer.from(v)]);
}

/** The HPACK block of `fields`, as hex (the client's argument). */
export const blockHex = (fields: readonly Field[]): string => Buffer.concat(fields.map(([n, v]) => literal(n, v))).toString('hex');

/** A GET (or `method`) for `path` at `authority`. */
export const requestFields = (path: string, authority: string, method = 'GET'): Field[] =>
  [[':method', method], [':scheme', 'http'], [':path', path], [':authority', authority]];

/** Malformed requests nghttp2 refuses itself (8.2.2, 8.3, an upper-case name): the request's fields → the malformed ones. */
export const REFUSED: ReadonlyArray<readonly [string, (base: Field[]) => Field[]]> = [
  ['connection: close (8.2.2)', (b) => [...b, ['connection', 'close']]],
  ['keep-alive (8.2.2)', (b) => [...b, ['keep-alive', 'timeout=5']]],
  ['proxy-connection (8.2.2)', (b) => [...b, ['proxy-connection', 'keep-alive']]],
  ['transfer-encoding (8.2.2)', (b) => [...b, ['transfer-encoding', 'chunked']]],
  ['upgrade (8.2.2)', (b) => [...b, ['upgrade', 'websocket']]],
  ['te other than trailers (8.2.2)', (b) => [...b, ['te', 'gzip']]],
  ['an upper-case name (8.2.1)', (b) => [...b, ['X-Upper', 'v']]],
  [':method twice (8.3)', (b) => [[':method', 'GET'], ...b]],
  ['an unknown pseudo-header (8.3)', (b) => [...b.slice(0, 3), [':foo', 'bar'], b[3]!]],
  ['a pseudo-header after a regular field (8.3)', (b) => [...b.slice(0, 3), ['x-a', '1'], b[3]!]],
  [':status in a request (8.3)', (b) => [...b, [':status', '200']]],
  ['no :method (8.3.1)', (b) => b.filter(([n]) => n !== ':method')],
  ['no :scheme (8.3.1)', (b) => b.filter(([n]) => n !== ':scheme')],
];

/**
 * Fields RFC 9113 8.2.1 makes a request malformed with (nghttp2 drops them silently; our frame layer
 * refuses the request): each is added to a valid request with `x-after: kept` behind it.
 */
export const FIELD_FAULTS: ReadonlyArray<readonly [string, Field]> = [
  ['a value holding CR LF', ['x-inject', 'a\r\nx-evil: 1']],
  ['a value holding LF', ['x-inject', 'a\nb']],
  ['a value holding NUL', ['x-inject', 'a\0b']],
  ['a value holding a control byte', ['x-inject', 'a\x01b']],
  ['a value holding DEL', ['x-inject', 'a\x7fb']],
  ['a value with a leading space', ['x-inject', ' ab']],
  ['a value with a trailing tab', ['x-inject', 'ab\t']],
  ['a name holding a space', ['x inject', 'v']],
  ['a name holding a colon', ['x:inject', 'v']],
  ['a name holding a non-token character', ['x(inject)', 'v']],
  ['an empty name', ['', 'v']],
  ['a host holding a space', ['host', 'a b']],
];


/**
 * Responses an HTTP/2 upstream sends, each malformed (the client gets 503): ones nghttp2 refused
 * too, and (FIELD_RESPONSES) ones with an 8.2.1 field nghttp2 drops silently, which the upstream
 * sessions on our own frame layer refuse.
 */
export const BAD_RESPONSES: readonly Field[][] = [
  [[':status', '200'], ['connection', 'close']],
  [[':status', '200'], ['X-Upper', 'v']],
  [['x-a', '1'], [':status', '200']],
];
export const FIELD_RESPONSES: readonly Field[][] = [
  [[':status', '200'], ['x-a', 'a\r\nb']],
  [[':status', '200'], ['x a', 'v']],
  [[':status', '200'], ['x-a', ' v']],
];

/** The requests an app of h2-malformed.mjs printed for `path` (their header lists), from its output so far. */
export function seenAt(printed: string, path: string): string[][] {
  return printed.split('\n').filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { seen: { path: string; headers: string[] } }).seen)
    .filter((s) => s.path === path).map((s) => s.headers);
}
