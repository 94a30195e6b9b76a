// The engine hook a decider uses to judge a request by its body (ext_authz `includeRequestBodyInCheck`):
// the request's body is held back, not forwarded, until more than `limit` bytes are known or it is
// whole; the decider then gets the bytes and decides. Whatever it forwards afterwards is exactly the
// bytes held, then the rest as it comes, in the request's own framing. Requests no decider asks this
// of pay nothing: the engines only look at their wait when one was made.

/** What a body wait came to. */
export interface HeldBody {
  /** The whole body, or its first `limit` bytes when `over`. */
  readonly bytes: Buffer;
  /** More than `limit` bytes: declared by the request's Content-Length, or read. */
  readonly over: boolean;
}

/** Offered by the proxy's engines on their request views (RequestView.body). */
export interface BodySource {
  /**
   * Holds the body back until more than `limit` bytes are known or it is whole. `partial`: a body
   * declared longer than `limit` is read up to `limit` bytes first (they are what is judged); else
   * the declaration alone ends the wait. Undefined: the request went away first (the client left,
   * the stream was reset).
   */
  awaitBody(limit: number, partial: boolean): Promise<HeldBody | undefined>;
  /**
   * Calls `gone` when the request goes away (its stream closed: reset, or the connection lost) before
   * it is given up; answers how to stop listening. Offered by the HTTP/2 engine, whose streams share a
   * connection (an HTTP/1.1 request's end is its connection's close).
   */
  whenGone?(gone: () => void): () => void;
}

/**
 * Whether a wait for `limit` bytes is over: the body is whole, more than `limit` bytes came, or the
 * declared length (-1: none) says more will come (with `partial`, once `limit` bytes are here).
 * Undefined: wait on. Pure.
 */
export function heldBodyReady(
  chunks: readonly Buffer[] | undefined, size: number, complete: boolean, limit: number, declared: number, partial: boolean,
): HeldBody | undefined {
  const over = size > limit || declared > limit;
  if (!complete && !(size > limit || (declared > limit && (!partial || size >= limit)))) return undefined;
  const all = chunks === undefined || chunks.length === 0 ? Buffer.alloc(0) : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
  return { bytes: over ? all.subarray(0, limit) : all, over };
}

/** A wait in progress: the limit and who is told. */
export interface BodyWait {
  readonly limit: number;
  readonly partial: boolean;
  readonly resolve: (held: HeldBody | undefined) => void;
}
