// node:http2, loaded only for the HTTP/2 and gRPC health probes (the proxy's own HTTP/2, both ways,
// runs on codec/): a sidecar that never probes over HTTP/2 never loads it (~2 MiB of private memory
// and as much of the node binary's pages). The error codes and flags the proxy uses are the
// protocol's own numbers (RFC 9113 7, 6.1), so using them loads nothing.
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

/** What endedWhole reads of a stream (a body source typed as a plain Readable is one underneath). */
export interface EndedStream { readonly rstCode?: number | undefined; readonly aborted?: boolean }

/**
 * An HTTP/2 stream's readable side ended with END_STREAM, not with a reset or a closed connection
 * (our streams, codec-stream.ts, end it for those too, the code set first and `aborted` marked, as
 * node's do: a RST_STREAM NO_ERROR before END_STREAM leaves the code at NO_ERROR).
 */
export function endedWhole(s: EndedStream): boolean {
  return (s.rstCode === undefined || s.rstCode === H2.NO_ERROR) && s.aborted !== true;
}
