// node:http2, loaded the first time HTTP/2 is spoken (a connection's preface, an upstream session, an
// HTTP/2 or gRPC probe): a sidecar that carries HTTP/1.1 only never needs it, and loading it costs
// ~2 MiB of private memory and as much of the node binary's pages. The error codes and flags the
// proxy uses are the protocol's own numbers (RFC 9113 7, 6.1), so using them loads nothing.
export function http2(): typeof import('node:http2') {
  return process.getBuiltinModule('node:http2');
}

export const H2 = {
  NO_ERROR: 0x0,
  INTERNAL_ERROR: 0x2,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  ENHANCE_YOUR_CALM: 0xb,
  FLAG_END_STREAM: 0x1,
} as const;
