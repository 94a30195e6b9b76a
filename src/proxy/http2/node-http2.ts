// node:http2, loaded the first time HTTP/2 is spoken (a connection's preface, an upstream session, an
// HTTP/2 or gRPC probe): a sidecar that carries HTTP/1.1 only never needs it, and loading it costs
// ~2 MiB of private memory and as much of the node binary's pages. The error codes and flags the
// proxy uses are the protocol's own numbers (RFC 9113 7, 6.1), so using them loads nothing.
import { createRequire } from 'node:module';

type Http2 = typeof import('node:http2');
let loaded: Http2 | undefined;

export function http2(): Http2 {
  return (loaded ??= createRequire(import.meta.url)('node:http2') as Http2);
}

export const H2 = {
  NO_ERROR: 0x0,
  INTERNAL_ERROR: 0x2,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  ENHANCE_YOUR_CALM: 0xb,
  FLAG_END_STREAM: 0x1,
} as const;
