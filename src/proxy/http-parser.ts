// Node's own llhttp binding (the parser inside node:http), driven directly by the fast HTTP/1.1
// path: no IncomingMessage, no streams. A request parser can `consume` a socket's handle, so reads
// go from C++ straight into llhttp and JS runs only for the parser's callbacks. The binding is
// internal to Node (reached through `_http_common`, which node:http itself uses); this module is
// its only user, so a Node upgrade that changes it breaks in one place.
import { createRequire } from 'node:module';

/** The native parser object (node_http_parser.cc). Callbacks live on numbered slots. */
export interface NativeParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenientFlags: number): void;
  /** Bytes parsed, or an Error carrying `code` (`HPE_*`) and `bytesParsed`. */
  execute(data: Buffer): number | ParseError;
  /** End of input: completes a body delimited by the connection's close. */
  finish(): ParseError | undefined;
  consume(handle: object): void;
  unconsume(): void;
  /** A copy of what the handle's current read brought (consumed mode only). */
  getCurrentBuffer(): Buffer;
  close(): void;
  [slot: number]: unknown;
}

export interface ParseError extends Error {
  readonly code?: string;
  readonly bytesParsed?: number;
}

interface ParserModule {
  readonly HTTPParser: {
    new (): NativeParser;
    readonly REQUEST: number;
    readonly RESPONSE: number;
    readonly kOnHeaders: number;
    readonly kOnHeadersComplete: number;
    readonly kOnBody: number;
    readonly kOnMessageComplete: number;
    readonly kOnExecute: number;
  };
  readonly methods: readonly string[];
}

const { HTTPParser, methods } = createRequire(import.meta.url)('_http_common') as ParserModule;

/**
 * What `onHead` returns to llhttp: go on; the message has no body (a response to HEAD); or stop
 * right after this head, as for an Upgrade (the bytes after it are left to the caller).
 */
export const HEAD_CONTINUE = 0;
export const HEAD_NO_BODY = 1;
export const HEAD_STOP = 2;

/** The callbacks of one parser. `method` is undefined for responses, `status` 0 for requests. */
export interface ParserCallbacks {
  onHead(major: number, minor: number, rawHeaders: string[], method: string | undefined, url: string,
    status: number, statusMessage: string, upgrade: boolean, keepAlive: boolean): number;
  onBody(chunk: Buffer): void;
  onMessageComplete(): void;
  /** Consumed mode: after each read the parser executed (`ret` as `execute` returns it). */
  onExecute?(ret: number | ParseError): void;
}

/**
 * A parser of requests or responses with `cb` wired in. Heads longer than llhttp's batch (32 header
 * pairs) arrive in pieces first; they are joined here, as node:http does.
 */
export function createParser(kind: 'request' | 'response', cb: ParserCallbacks): NativeParser {
  const p = new HTTPParser();
  p.initialize(kind === 'request' ? HTTPParser.REQUEST : HTTPParser.RESPONSE, {}, 0, 0);
  let pending: string[] = [];
  let pendingUrl = '';
  p[HTTPParser.kOnHeaders] = (headers: string[], url: string): void => {
    for (const h of headers) pending.push(h);
    pendingUrl += url;
  };
  p[HTTPParser.kOnHeadersComplete] = (major: number, minor: number, headers: string[] | undefined, method: number | undefined,
    url: string | undefined, status: number | undefined, statusMessage: string | undefined, upgrade: boolean, keepAlive: boolean): number => {
    let raw = headers;
    let target = url;
    if (raw === undefined) {
      raw = pending;
      pending = [];
      target = pendingUrl + (url ?? '');
      pendingUrl = '';
    }
    return cb.onHead(major, minor, raw, method === undefined ? undefined : methods[method], target ?? '',
      status ?? 0, statusMessage ?? '', upgrade, keepAlive);
  };
  p[HTTPParser.kOnBody] = (chunk: Buffer): void => cb.onBody(chunk);
  p[HTTPParser.kOnMessageComplete] = (): void => cb.onMessageComplete();
  if (cb.onExecute) {
    const onExecute = cb.onExecute.bind(cb);
    p[HTTPParser.kOnExecute] = (ret: number | ParseError): void => onExecute(ret);
  }
  return p;
}

/** The stream handle behind a socket, when it is one llhttp can read from directly. */
export interface ConsumableHandle {
  readonly isStreamBase?: boolean;
  _consumed?: boolean;
  reading?: boolean;
  readStart(): number;
  readStop(): number;
}

export function consumableHandle(socket: object): ConsumableHandle | undefined {
  const handle = (socket as { _handle?: ConsumableHandle | null })._handle;
  // `_consumed`: node:http marks the handles it took; a handle is consumed at most once.
  return handle?.isStreamBase === true && handle._consumed !== true ? handle : undefined;
}

/**
 * Frees a parser's native half. Never from inside one of its callbacks (the C++ frame is still
 * running): after the current I/O turn.
 */
export function closeParserLater(p: NativeParser): void {
  setImmediate(() => p.close());
}
