// What a captured connection speaks, from its first bytes: HTTP/1.x gets L7 handling, a TLS
// ClientHello and everything else pass through as TCP. Pure.

export type Protocol = 'http1' | 'tls' | 'tcp';

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH', 'TRACE', 'CONNECT',
  'PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK', 'SEARCH', 'REPORT', 'PURGE'];
const LONGEST = Math.max(...METHODS.map((m) => m.length)) + 1;

/**
 * Classifies the first bytes; `undefined` means "too few bytes to tell yet". HTTP/1.x is a known
 * method followed by a space (the request line's end is left to the HTTP parser, which answers 400
 * to what does not parse). `PRI * HTTP/2.0` (h2 prior knowledge) passes through as TCP.
 */
export function sniff(head: Buffer): Protocol | undefined {
  if (head.length === 0) return undefined;
  if (head[0] === 0x16) return head.length < 2 ? undefined : head[1] === 0x03 ? 'tls' : 'tcp';
  const text = head.subarray(0, LONGEST).toString('latin1');
  if (METHODS.some((m) => text.startsWith(`${m} `))) return 'http1';
  const couldStillBe = METHODS.some((m) => `${m} `.startsWith(text));
  return couldStillBe && head.length < LONGEST ? undefined : 'tcp';
}
