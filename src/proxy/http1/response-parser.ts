// An HTTP/1.1 response parser for the upstream side, on bytes: no string per header, no copy of the
// body. It finds what a proxy needs (status, framing, reuse) and hands on the head as slices of
// what was read, hop-by-hop lines left out (RFC 9110 7.6.1), and the body as it goes on the wire to
// the client: a chunked body verbatim (trailers dropped), other bodies as they come. Strict: a
// malformed head, a bad chunk, Content-Length with Transfer-Encoding, or bytes after a response are
// errors (the connection is not reused). A protocol switch (101 to an Upgrade, 2xx to CONNECT)
// ends the parsing: what follows is the tunnel's.
import { CR, FIELD, HEX, LF, nameIs, TOKEN } from './bytes.js';

/** How the response body is delimited; 'tunnel': the connection switched protocols, bytes follow raw. */
export type Framing = 'none' | 'length' | 'chunked' | 'close' | 'tunnel';

/** The protocol switch the request asked for, which alone makes a 101 (or a 2xx to CONNECT) valid. */
export type SwitchRequest = 'upgrade' | 'connect' | undefined;

export interface ResponseHead {
  readonly status: number;
  readonly framing: Framing;
  /** The connection may carry another request after this response. */
  readonly keepAlive: boolean;
  /** `Keep-Alive: timeout=N` (RFC 9112 appendix; what node's and Apache's servers send): the upstream closes the idle connection after N s. */
  readonly keepAliveTimeoutMs?: number | undefined;
  /** A Date header is there. */
  readonly hasDate: boolean;
  /** A 101's Upgrade value (the hop-by-hop lines are not in `parts`). */
  readonly upgrade?: string | undefined;
  /**
   * The head as forwarded, from the status code on (`200 OK\r\nName: value\r\n...`): slices of the
   * bytes read, valid during the callback only. Without the final empty line.
   */
  readonly parts: readonly Buffer[];
}

/**
 * A response head's parts (as ResponseHead carries them: the status line's rest first) without the
 * header lines named in `lowerNames`; slices of the same bytes, nothing copied. Used for the names
 * `Connection` lists, a route's response header edits, and the lines CORS sets in place of the app's.
 */
export function withoutHeaderLines(parts: readonly Buffer[], lowerNames: readonly string[]): Buffer[] {
  const kept: Buffer[] = [];
  for (const part of parts) {
    let runFrom = 0;
    let at = 0;
    // The first part starts with the status line's rest: no header there to drop.
    if (part === parts[0]) at = part.indexOf(CRLF) + 2;
    while (at < part.length) {
      const le = part.indexOf(CRLF, at);
      const name = part.toString('latin1', at, part.indexOf(0x3a, at)).toLowerCase();
      if (lowerNames.includes(name)) {
        if (at > runFrom) kept.push(part.subarray(runFrom, at));
        runFrom = le + 2;
      }
      at = le + 2;
    }
    if (part.length > runFrom) kept.push(part.subarray(runFrom));
  }
  return kept;
}

export interface ResponseEvents {
  /** A head: a 1xx one (another head follows) or the final one. */
  onHead(head: ResponseHead): void;
  /**
   * Body bytes as they go to the client (a view of the bytes read, valid during the call only);
   * `payload`: how many of them are content (without chunk framing).
   */
  onBody(bytes: Buffer, payload: number): void;
  onEnd(): void;
}

/** The largest response head taken by default (Envoy's `max_response_headers_kb`, as for requests). */
export const MAX_HEAD_BYTES = 60 * 1024;
/** A chunk size line (with its extensions) longer than this is refused. */
const MAX_CHUNK_LINE = 4096;
const MAX_CHUNK_SIZE = 2 ** 48;

const CRLF = Buffer.from('\r\n', 'latin1');
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');

const enum State { Head, Length, Close, Tunnel, Size, SizeExt, SizeLf, Data, DataCr, DataLf, Trailer, TrailerLine, TrailerLf, TrailerEndLf, Done }

export class ResponseError extends Error {
  readonly code = 'HPE_INVALID_RESPONSE';
  /** `cut`: the bytes were fine, the upstream closed before the response was complete (not malformed). */
  constructor(message: string, readonly cut = false) {
    super(`invalid upstream response: ${message}`);
    this.name = 'ResponseError';
  }
}

export class ResponseParser {
  /** The request was HEAD: the response has no body whatever its headers say. */
  noBody = false;
  private switching: SwitchRequest;
  private state = State.Head;
  /** Part of a head that did not come in one read. */
  private pending: Buffer | undefined;
  private remaining = 0;
  private chunkLine = 0;
  private sawDigit = false;
  private final = false;

  constructor(private readonly on: ResponseEvents, private readonly maxHeadBytes = MAX_HEAD_BYTES) {}

  /** For the next response on this connection (the previous one complete). */
  reset(noBody: boolean, switching: SwitchRequest = undefined): void {
    this.noBody = noBody;
    this.switching = switching;
    this.state = State.Head;
    this.pending = undefined;
  }

  /** A response ended and nothing is pending. */
  get done(): boolean {
    return this.state === State.Done;
  }

  /** Parses `data[0..len)`; an error leaves the connection unusable. */
  execute(data: Buffer, len: number): ResponseError | undefined {
    let b = data;
    let end = len;
    let pos = 0;
    while (pos < end) {
      switch (this.state) {
        case State.Head: {
          if (this.pending) {
            b = Buffer.concat([this.pending, b.subarray(pos, end)]);
            this.pending = undefined;
            end = b.length;
            pos = 0;
          }
          const headEnd = b.indexOf(HEAD_END, pos);
          if (headEnd < 0 || headEnd > end - 4) {
            if (end - pos > this.maxHeadBytes) return new ResponseError('head too large');
            this.pending = Buffer.from(b.subarray(pos, end));
            return undefined;
          }
          if (headEnd + 4 - pos > this.maxHeadBytes) return new ResponseError('head too large');
          const err = this.head(b, pos, headEnd);
          if (err) return err;
          pos = headEnd + 4;
          break;
        }
        case State.Length: {
          const n = Math.min(this.remaining, end - pos);
          this.on.onBody(b.subarray(pos, pos + n), n);
          pos += n;
          this.remaining -= n;
          if (this.remaining === 0) this.complete();
          break;
        }
        case State.Close:
        case State.Tunnel:
          this.on.onBody(b.subarray(pos, end), end - pos);
          pos = end;
          break;
        case State.Done:
          return new ResponseError('bytes after the response');
        default: {
          const r = this.chunked(b, pos, end);
          if (typeof r !== 'number') return r;
          pos = r;
        }
      }
    }
    return undefined;
  }

  /** The upstream closed its side: ends a body delimited by the close; anything else was cut short. */
  finish(): ResponseError | undefined {
    if (this.state === State.Close || this.state === State.Tunnel) {
      this.complete();
      return undefined;
    }
    if (this.state === State.Done || (this.state === State.Head && !this.pending)) return undefined;
    return new ResponseError('the connection closed in the middle of a response', true);
  }

  private complete(): void {
    this.state = this.final ? State.Done : State.Head;
    this.on.onEnd();
  }

  /** Parses the head in `b[start..headEnd)` (headEnd: the last line's CRLF). */
  private head(b: Buffer, start: number, headEnd: number): ResponseError | undefined {
    // Status line: HTTP/1.x SP 3DIGIT [SP reason]; one pass over the bytes, no search per line.
    if (headEnd - start < 12 || b[start] !== 0x48 || b[start + 1] !== 0x54 || b[start + 2] !== 0x54 || b[start + 3] !== 0x50
      || b[start + 4] !== 0x2f || b[start + 5] !== 0x31 || b[start + 6] !== 0x2e || b[start + 8] !== 0x20) return new ResponseError('status line');
    const minor = b[start + 7]! - 0x30;
    const d1 = b[start + 9]! - 0x30;
    const d2 = b[start + 10]! - 0x30;
    const d3 = b[start + 11]! - 0x30;
    if ((minor !== 0 && minor !== 1) || d1 < 1 || d1 > 5 || d2 < 0 || d2 > 9 || d3 < 0 || d3 > 9) return new ResponseError('status line');
    let lineEnd = start + 12;
    if (b[lineEnd] === 0x20) {
      lineEnd++;
      while (FIELD[b[lineEnd]!] === 1) lineEnd++;
    }
    if (b[lineEnd] !== CR || b[lineEnd + 1] !== LF) return new ResponseError('status line');
    const status = d1 * 100 + d2 * 10 + d3;

    const parts: Buffer[] = [];
    let keepFrom = start + 9; // the kept run starts at the status code
    let contentLength = -1;
    let transferEncoding = false;
    let chunked = false;
    let closeToken = false;
    let keepAliveToken = false;
    let hasDate = false;
    let keepAliveTimeoutMs: number | undefined;
    let upgrade: string | undefined;
    let named: string[] | undefined;
    let at = lineEnd + 2;
    while (at < headEnd + 2) {
      const c0 = b[at]!;
      if (c0 === 0x20 || c0 === 9) return new ResponseError('folded header line');
      let colon = at;
      while (TOKEN[b[colon]!] === 1) colon++;
      if (colon === at || b[colon] !== 0x3a) return new ResponseError('header name');
      let le = colon + 1;
      // A value ends at its CR (the head's last one at the latest): FIELD's bytes, by comparison
      // rather than a table read (the common bytes pass the first test).
      for (let c = b[le]!; (c >= 0x20 && c !== 0x7f) || c === 9; c = b[++le]!);
      if (b[le] !== CR || b[le + 1] !== LF) return new ResponseError('header value');
      let vs = colon + 1;
      let ve = le;
      while (vs < ve && (b[vs] === 0x20 || b[vs] === 9)) vs++;
      while (ve > vs && (b[ve - 1] === 0x20 || b[ve - 1] === 9)) ve--;
      let drop = false;
      switch (colon - at) {
        case 2: drop = nameIs(b, at, 'te'); break;
        case 4: if (nameIs(b, at, 'date')) hasDate = true; break;
        case 7:
          if (nameIs(b, at, 'upgrade')) {
            drop = true;
            upgrade = b.toString('latin1', vs, ve);
          } else {
            drop = nameIs(b, at, 'trailer');
          }
          break;
        case 10:
          if (nameIs(b, at, 'connection')) {
            drop = true;
            // The usual values, read on the bytes (no strings for them).
            if (ve - vs === 10 && nameIs(b, vs, 'keep-alive')) {
              keepAliveToken = true;
              break;
            }
            if (ve - vs === 5 && nameIs(b, vs, 'close')) {
              closeToken = true;
              break;
            }
            for (const t of b.toString('latin1', vs, ve).split(',')) {
              const token = t.trim().toLowerCase();
              if (token === 'close') closeToken = true;
              else if (token === 'keep-alive') keepAliveToken = true;
              else if (token !== '') (named ??= []).push(token);
            }
          } else if (nameIs(b, at, 'keep-alive')) {
            drop = true;
            keepAliveTimeoutMs = keepAliveTimeout(b.toString('latin1', vs, ve));
          }
          break;
        case 14:
          if (nameIs(b, at, 'content-length')) {
            if (contentLength >= 0 || ve === vs || ve - vs > 15) return new ResponseError('content-length');
            let n = 0;
            for (let i = vs; i < ve; i++) {
              const d = b[i]! - 0x30;
              if (d < 0 || d > 9) return new ResponseError('content-length');
              n = n * 10 + d;
            }
            contentLength = n;
          }
          break;
        case 16: drop = nameIs(b, at, 'proxy-connection'); break;
        case 17:
          if (nameIs(b, at, 'transfer-encoding')) {
            drop = true;
            transferEncoding = true;
            // Chunked when it is the last coding (of the last Transfer-Encoding line).
            const codings = b.toString('latin1', vs, ve).split(',');
            chunked = codings[codings.length - 1]!.trim().toLowerCase() === 'chunked';
          }
          break;
        default: break;
      }
      if (drop) {
        if (at > keepFrom) parts.push(b.subarray(keepFrom, at));
        keepFrom = le + 2;
      }
      at = le + 2;
    }
    if (headEnd + 2 > keepFrom) parts.push(b.subarray(keepFrom, headEnd + 2));
    if (named) this.dropNamed(parts, named);

    const switched = status === 101 || (this.switching === 'connect' && status >= 200 && status < 300);
    if (status === 101 && this.switching !== 'upgrade') return new ResponseError('101 to a request that asked for no upgrade');
    if (status === 101 && upgrade === undefined) return new ResponseError('101 without Upgrade');
    if (transferEncoding && contentLength >= 0 && !switched) return new ResponseError('both Transfer-Encoding and Content-Length');
    let framing: Framing;
    if (switched) framing = 'tunnel';
    else if (this.noBody || status < 200 || status === 204 || status === 304) framing = 'none';
    else if (transferEncoding) framing = chunked ? 'chunked' : 'close';
    else if (contentLength >= 0) framing = 'length';
    else framing = 'close';
    const keepAlive = framing !== 'close' && framing !== 'tunnel' && (minor === 1 ? !closeToken : keepAliveToken);
    this.final = status >= 200 || switched;
    // One shape for every head (no spreads): this runs for every response.
    this.on.onHead({ status, framing, keepAlive, hasDate, parts, upgrade: status === 101 ? upgrade : undefined, keepAliveTimeoutMs });
    switch (framing) {
      case 'none': this.complete(); break;
      case 'length':
        this.remaining = contentLength;
        if (contentLength === 0) this.complete();
        else this.state = State.Length;
        break;
      case 'chunked': this.startChunk(); break;
      case 'close': this.state = State.Close; break;
      case 'tunnel': this.state = State.Tunnel; break;
    }
    return undefined;
  }

  /** Leaves out of `parts` the header lines whose names `Connection` listed (rare). */
  private dropNamed(parts: Buffer[], named: readonly string[]): void {
    const kept = withoutHeaderLines(parts, named);
    parts.length = 0;
    parts.push(...kept);
  }

  private startChunk(): void {
    this.state = State.Size;
    this.remaining = 0;
    this.chunkLine = 0;
    this.sawDigit = false;
  }

  /**
   * Walks a chunked body from `pos`, handing on the bytes it passes (all of them but the trailer
   * section, for which a bare CRLF goes out). Returns where it stopped, or an error.
   */
  private chunked(b: Buffer, pos: number, end: number): number | ResponseError {
    let from = pos; // start of the run of bytes to hand on
    let payload = 0;
    const emit = (to: number): void => {
      if (to > from) this.on.onBody(b.subarray(from, to), payload);
      from = to;
      payload = 0;
    };
    while (pos < end) {
      const c = b[pos]!;
      switch (this.state) {
        case State.Size: {
          const h = HEX[c]!;
          if (h >= 0) {
            this.remaining = this.remaining * 16 + h;
            if (this.remaining > MAX_CHUNK_SIZE) return new ResponseError('chunk size');
            this.sawDigit = true;
          } else if (!this.sawDigit) {
            return new ResponseError('chunk size');
          } else if (c === CR) {
            this.state = State.SizeLf;
          } else if (c === 0x3b || c === 0x20 || c === 9) { // extensions (and the whitespace before them)
            this.state = State.SizeExt;
          } else {
            return new ResponseError('chunk size');
          }
          break;
        }
        case State.SizeExt:
          if (c === CR) this.state = State.SizeLf;
          else if (FIELD[c] === 0) return new ResponseError('chunk extension');
          break;
        case State.SizeLf:
          if (c !== LF) return new ResponseError('chunk size line');
          if (this.remaining === 0) { // the last chunk: what follows is the trailer section, not handed on
            emit(pos + 1);
            this.state = State.Trailer;
          } else {
            this.state = State.Data;
          }
          break;
        case State.Data: {
          const n = Math.min(this.remaining, end - pos);
          payload += n;
          this.remaining -= n;
          pos += n;
          if (this.remaining === 0) this.state = State.DataCr;
          continue;
        }
        case State.DataCr:
          if (c !== CR) return new ResponseError('chunk data longer than its size');
          this.state = State.DataLf;
          break;
        case State.DataLf:
          if (c !== LF) return new ResponseError('chunk data longer than its size');
          this.startChunk();
          pos++;
          continue;
        case State.Trailer: // at the start of a trailer line, or of the final empty line
          from = pos + 1;
          this.state = c === CR ? State.TrailerEndLf : State.TrailerLine;
          if (c !== CR && (c === LF || FIELD[c] === 0)) return new ResponseError('trailer');
          break;
        case State.TrailerLine:
          from = pos + 1;
          if (c === CR) this.state = State.TrailerLf;
          else if (FIELD[c] === 0) return new ResponseError('trailer');
          break;
        case State.TrailerLf:
          from = pos + 1;
          if (c !== LF) return new ResponseError('trailer');
          this.state = State.Trailer;
          break;
        case State.TrailerEndLf:
          if (c !== LF) return new ResponseError('trailer');
          this.on.onBody(CRLF, 0);
          this.complete();
          return pos + 1;
        default:
          return pos;
      }
      if (this.state === State.Size || this.state === State.SizeExt) {
        if (++this.chunkLine > MAX_CHUNK_LINE) return new ResponseError('chunk size line too long');
      }
      pos++;
    }
    if (this.state !== State.Trailer && this.state !== State.TrailerLine && this.state !== State.TrailerLf && this.state !== State.TrailerEndLf) emit(end);
    return end;
  }
}

/** The `timeout=N` of a Keep-Alive header value, in ms (undefined when absent or not a number). */
export function keepAliveTimeout(value: string): number | undefined {
  const m = /(?:^|[,;\s])timeout\s*=\s*(\d{1,6})(?:$|[,;\s])/i.exec(value);
  return m ? Number(m[1]) * 1000 : undefined;
}

