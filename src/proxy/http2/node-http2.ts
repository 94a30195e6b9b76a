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

/** Node's name for the native stream under an Http2Stream (a symbol private to node, found by its description once). */
let handleSymbol: symbol | undefined;

interface NativeStream {
  rstStream(code: number): void;
}

/**
 * RST_STREAM with `code`, and never an END_STREAM before it. node's `close(code)` and `destroy()`
 * end the writable side first when it is still open: the peer reads DATA with END_STREAM (a whole
 * request body, a whole response) and then a reset of a stream that is already closed, which it
 * ignores. A proxy cutting a stream short must say so, so the reset goes to nghttp2 directly (what
 * node's own close does, minus the end), then node closes its side and the stream is destroyed.
 */
export function resetStream(stream: import('node:http2').Http2Stream, code: number): void {
  if (stream.closed || stream.destroyed) return;
  handleSymbol ??= Object.getOwnPropertySymbols(stream).find((s) => s.description === 'kHandle');
  const native = handleSymbol === undefined ? undefined : (stream as unknown as Record<symbol, NativeStream | undefined>)[handleSymbol];
  // A stream still pending (no id yet) has sent nothing: node's close is right for it.
  if (native === undefined || typeof native.rstStream !== 'function') {
    stream.close(code);
    return;
  }
  native.rstStream(code);
  stream.close(code);
  // While the session is writing, nghttp2 gets the reset only once that write is done, after
  // sending what is queued: the END_STREAM of the end close() just began among it. Destroying the
  // stream now hands the held reset to nghttp2 at once, ahead of any DATA.
  stream.destroy();
}

/** What endedWhole reads of a stream (a body source typed as a plain Readable is one underneath). */
export interface EndedStream { readonly rstCode?: number | undefined; readonly aborted?: boolean }

/**
 * An HTTP/2 stream's readable side ended with END_STREAM, not with a reset or a closed connection
 * (node ends it for those too, the code set first). A RST_STREAM NO_ERROR before END_STREAM leaves
 * the code at NO_ERROR and still ends the readable side: node marks that stream `aborted` (our
 * writable side was still open), which END_STREAM never does. Where our side had already ended (a
 * response stream after the request's END_STREAM), node leaves no trace of it.
 */
export function endedWhole(s: EndedStream): boolean {
  return (s.rstCode === undefined || s.rstCode === H2.NO_ERROR) && s.aborted !== true;
}
