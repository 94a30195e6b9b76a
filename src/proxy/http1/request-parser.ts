// The HTTP/1.1 request parser of the data plane: ours, strict, on bytes. A proxy that enforces policy
// must read a request exactly as the application behind it will, so where RFC 9112 lets a recipient
// choose, this parser takes the reading that leaves no second one: a bare LF, an obs-fold line,
// whitespace before a colon, a Transfer-Encoding other than a single `chunked`, Content-Length
// beside Transfer-Encoding or repeated, a method with lower-case letters, a byte outside the
// grammar: each is an error with the status to answer, never a guess. What it accepts, the
// connection writes out again in canonical form (the framing is the proxy's own), so the
// application sees one request where the policy judged one. Pure: bytes in, events out.
import { CR, HEX, HTAB, LF, SP, TOKEN } from './bytes.js';

export type BodyFraming = 'none' | 'length' | 'chunked';

export interface RequestHead {
  /** A token of upper-case letters, digits and token punctuation. */
  readonly method: string;
  /** The request-target as sent (its form is checked by target.ts). */
  readonly target: string;
  /** HTTP/1.0 or HTTP/1.1. */
  readonly minor: 0 | 1;
  /** name, value, name, value... as received; values without the whitespace around them. */
  readonly rawHeaders: string[];
  readonly framing: BodyFraming;
  /** The body's length, for framing 'length' (which may be 0: the client sent `Content-Length: 0`). */
  readonly contentLength: number;
}

/** 400 malformed, 414 request line too long, 431 head too large, 501 coding not implemented, 505 version. */
export type ParseStatus = 400 | 414 | 431 | 501 | 505;

export class RequestParseError extends Error {
  constructor(readonly status: ParseStatus, readonly reason: string) {
    super(`bad request (${status}): ${reason}`);
    this.name = 'RequestParseError';
  }
}

export interface RequestEvents {
  /** A head. True: parse nothing more (the caller answers and closes; `execute` returns at once). */
  onHead(head: RequestHead): boolean;
  /** Content bytes, chunk framing removed: a view of the input, valid during the call only. */
  onBody(chunk: Buffer): void;
  /** The message is complete. True: stop right after it (`execute` answers where the next begins). */
  onEnd(): boolean;
}

export interface RequestLimits {
  /** Bytes of a head: empty lines before it, request line, header lines. Envoy's default is 60 KiB. */
  readonly maxHeadBytes: number;
  /** Header lines of one head (Envoy's default: 100). */
  readonly maxHeaders: number;
}

export const DEFAULT_REQUEST_LIMITS: RequestLimits = { maxHeadBytes: 60 * 1024, maxHeaders: 100 };

/** A chunk-size line with its extensions; beyond this it is not a size line. */
const MAX_CHUNK_LINE = 4096;
const MAX_CHUNK_SIZE = 2 ** 48;
const MAX_LENGTH_DIGITS = 15;

const enum State { Start, Headers, Length, SizeLine, Data, DataCr, DataLf, Trailers, Broken }

const HTTP_SLASH = [0x48, 0x54, 0x54, 0x50, 0x2f]; // "HTTP/"

/** A byte outside FIELD (./bytes.ts): a control character other than HTAB, or DEL. */
const NOT_FIELD = /[\x00-\x08\x0a-\x1f\x7f]/;

/**
 * `b[s..e)` as a latin1 string, by Buffer's own latin1Slice: `toString('latin1', ...)` dispatches
 * through the encoding lookup and `slice` first (a tenth of a head's parse, profiled).
 */
const latin1 = (b: Buffer, s: number, e: number): string => (b as Buffer & { latin1Slice(start: number, end: number): string }).latin1Slice(s, e);

function lowerEquals(s: string, lower: string): boolean {
  return s.length === lower.length && s.toLowerCase() === lower;
}

const isWs = (c: number | undefined): boolean => c === SP || c === HTAB;

/** qdtext and the byte after a backslash (RFC 9110 5.6.4): HTAB, SP, VCHAR but `"` and `\`, obs-text. */
function qdtext(c: number): boolean {
  return c === HTAB || c === SP || c === 0x21 || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e) || c >= 0x80;
}

/**
 * `b[i..e)` is exactly `*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )` (RFC 9112
 * 7.1.1). Strictly: a reader that took `2;a="` as the start of a quoted string would read the
 * next lines as part of it, and one that did not would read them as the body.
 */
function chunkExtensions(b: Buffer, i: number, e: number): boolean {
  while (i < e) {
    while (i < e && isWs(b[i])) i++;
    if (b[i] !== 0x3b /* ; */) return false;
    i++;
    while (i < e && isWs(b[i])) i++;
    const name = i;
    while (i < e && TOKEN[b[i]!] === 1) i++;
    if (i === name) return false;
    let j = i;
    while (j < e && isWs(b[j])) j++;
    if (j === e || b[j] !== 0x3d /* = */) continue;
    i = j + 1;
    while (i < e && isWs(b[i])) i++;
    if (b[i] === 0x22 /* " */) {
      for (i++; ; i++) {
        if (i >= e) return false; // unterminated
        const c = b[i]!;
        if (c === 0x22) break;
        if (c === 0x5c /* \ */) {
          i++;
          if (i >= e || !(qdtext(b[i]!) || b[i] === 0x22 || b[i] === 0x5c)) return false;
        } else if (!qdtext(c)) {
          return false;
        }
      }
      i++;
    } else {
      const value = i;
      while (i < e && TOKEN[b[i]!] === 1) i++;
      if (i === value) return false;
    }
  }
  return true;
}

export class RequestParser {
  private state = State.Start;
  /** The part of a line that arrived without its LF yet. */
  private line = Buffer.alloc(0);
  private lineLen = 0;
  /** Bytes of the current head so far (or of the trailer section). */
  private headBytes = 0;
  private method = '';
  private target = '';
  private minor: 0 | 1 = 1;
  private headers: string[] = [];
  private remaining = 0;
  private stop = false;

  constructor(private readonly on: RequestEvents, private readonly limits: RequestLimits = DEFAULT_REQUEST_LIMITS) {}

  /** Between messages with nothing of the next one received. */
  get idle(): boolean {
    return this.state === State.Start && this.headBytes === 0 && this.lineLen === 0;
  }

  /** Part of a head has arrived and not all of it. */
  get inHead(): boolean {
    return this.state === State.Headers || (this.state === State.Start && (this.headBytes > 0 || this.lineLen > 0));
  }

  /**
   * Parses `b` from `from`. Answers where it stopped: `b.length` when everything was taken (a
   * partial line is kept), earlier when `onEnd` asked to stop; or the error (the parser is then done).
   */
  execute(b: Buffer, from = 0): number | RequestParseError {
    if (this.state === State.Broken) return new RequestParseError(400, 'input after an error');
    let pos = from;
    const end = b.length;
    while (pos < end) {
      switch (this.state) {
        case State.Length: {
          const n = Math.min(this.remaining, end - pos);
          this.on.onBody(b.subarray(pos, pos + n));
          pos += n;
          this.remaining -= n;
          if (this.remaining === 0 && this.complete()) return pos;
          break;
        }
        case State.Data: {
          const n = Math.min(this.remaining, end - pos);
          this.on.onBody(b.subarray(pos, pos + n));
          pos += n;
          this.remaining -= n;
          if (this.remaining === 0) this.state = State.DataCr;
          break;
        }
        case State.DataCr:
          if (b[pos++] !== CR) return this.fail(400, 'chunk data longer than its size');
          this.state = State.DataLf;
          break;
        case State.DataLf:
          if (b[pos++] !== LF) return this.fail(400, 'chunk data not followed by CRLF');
          this.state = State.SizeLine;
          break;
        default: { // a line: request line, header, chunk size, trailer
          const lf = b.indexOf(LF, pos);
          if (lf < 0) {
            const err = this.keep(b, pos, end);
            return err ?? end;
          }
          let buf = b;
          let s = pos;
          let e = lf;
          if (this.lineLen > 0) { // the line began in an earlier read
            const err = this.keep(b, pos, lf);
            if (err) return err;
            buf = this.line;
            s = 0;
            e = this.lineLen;
            this.lineLen = 0;
          }
          const err = this.countLine(e - s + 1) ?? this.lineOf(buf, s, e);
          pos = lf + 1;
          if (err) return err;
          if (this.stop) {
            this.stop = false;
            return pos;
          }
        }
      }
    }
    return end;
  }

  private fail(status: ParseStatus, reason: string): RequestParseError {
    this.state = State.Broken;
    return new RequestParseError(status, reason);
  }

  /** Keeps `b[from..to)`, part of a line whose LF has not come, within the limits of its kind. */
  private keep(b: Buffer, from: number, to: number): RequestParseError | undefined {
    const n = to - from;
    const total = this.lineLen + n;
    if (this.state === State.SizeLine) {
      if (total > MAX_CHUNK_LINE) return this.fail(400, 'chunk size line too long');
    } else if (this.headBytes + total > this.limits.maxHeadBytes) {
      return this.tooLarge();
    }
    if (total > this.line.length) {
      const grown = Buffer.allocUnsafe(Math.max(total, this.line.length * 2, 256));
      this.line.copy(grown, 0, 0, this.lineLen);
      this.line = grown;
    }
    b.copy(this.line, this.lineLen, from, to);
    this.lineLen = total;
    return undefined;
  }

  private tooLarge(): RequestParseError {
    if (this.state === State.Trailers) return this.fail(400, 'trailer section too large');
    return this.state === State.Start ? this.fail(414, 'request line too long') : this.fail(431, 'request head too large');
  }

  private countLine(n: number): RequestParseError | undefined {
    if (this.state === State.SizeLine) return n > MAX_CHUNK_LINE ? this.fail(400, 'chunk size line too long') : undefined;
    this.headBytes += n;
    return this.headBytes > this.limits.maxHeadBytes ? this.tooLarge() : undefined;
  }

  /** One line, `b[s..e)` without its LF. */
  private lineOf(b: Buffer, s: number, e: number): RequestParseError | undefined {
    if (e === s || b[e - 1] !== CR) return this.fail(400, 'line ended by a bare LF');
    e--;
    switch (this.state) {
      case State.Start: return e === s ? undefined : this.requestLine(b, s, e); // empty lines before a request are ignored
      case State.Headers: return e === s ? this.headEnd() : this.field(b, s, e, true);
      case State.Trailers:
        if (e !== s) return this.field(b, s, e, false);
        this.stop = this.complete();
        return undefined;
      default: return this.sizeLine(b, s, e);
    }
  }

  private requestLine(b: Buffer, s: number, e: number): RequestParseError | undefined {
    let i = s;
    let lower = false;
    while (i < e && TOKEN[b[i]!] === 1) {
      if (b[i]! >= 0x61 && b[i]! <= 0x7a) lower = true;
      i++;
    }
    if (i === s || b[i] !== SP) return this.fail(400, 'request line: method');
    if (lower) return this.fail(400, 'request line: a method must be upper-case');
    let j = i + 1;
    while (j < e && b[j]! > 0x20 && b[j]! < 0x7f) j++;
    if (j === i + 1 || b[j] !== SP) return this.fail(400, 'request line: target');
    const v = j + 1;
    if (e - v !== 8) return this.fail(400, 'request line: version');
    for (let k = 0; k < 5; k++) if (b[v + k] !== HTTP_SLASH[k]) return this.fail(400, 'request line: version');
    const major = b[v + 5]! - 0x30;
    const minor = b[v + 7]! - 0x30;
    if (major < 0 || major > 9 || b[v + 6] !== 0x2e || minor < 0 || minor > 9) return this.fail(400, 'request line: version');
    if (major !== 1 || minor > 1) return this.fail(505, `HTTP/${major}.${minor} is not supported`);
    this.method = latin1(b, s, i);
    this.target = latin1(b, i + 1, j);
    this.minor = minor as 0 | 1;
    this.headers = [];
    this.state = State.Headers;
    return undefined;
  }

  /** `name: value`; header lines are kept, trailer lines only checked. */
  private field(b: Buffer, s: number, e: number, keep: boolean): RequestParseError | undefined {
    const c0 = b[s]!;
    if (c0 === SP || c0 === HTAB) return this.fail(400, 'obsolete line folding');
    let colon = s;
    while (colon < e && TOKEN[b[colon]!] === 1) colon++;
    if (colon === s || b[colon] !== 0x3a) return this.fail(400, keep ? 'header name' : 'trailer name');
    let vs = colon + 1;
    let ve = e;
    while (vs < ve && (b[vs] === SP || b[vs] === HTAB)) vs++;
    while (ve > vs && (b[ve - 1] === SP || b[ve - 1] === HTAB)) ve--;
    // The value is checked as the string it becomes (what is trimmed is SP and HTAB, allowed): one
    // regular-expression scan of a one-byte string costs a fraction of a table read per byte.
    const value = latin1(b, vs, ve);
    if (NOT_FIELD.test(value)) return this.fail(400, keep ? 'header value' : 'trailer value');
    if (!keep) return undefined;
    if (this.headers.length >= this.limits.maxHeaders * 2) return this.fail(431, 'too many header lines');
    this.headers.push(latin1(b, s, colon), value);
    return undefined;
  }

  /** The empty line: the framing of the body, from the headers (RFC 9112 6.3, strictly). */
  private headEnd(): RequestParseError | undefined {
    const raw = this.headers;
    let codings: string[] | undefined;
    let lengths = 0;
    let length = '';
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === 17 && lowerEquals(name, 'transfer-encoding')) {
        for (const c of raw[i + 1]!.split(',')) {
          const t = c.trim();
          if (t !== '') (codings ??= []).push(t.toLowerCase());
        }
        codings ??= [];
      } else if (name.length === 14 && lowerEquals(name, 'content-length')) {
        lengths++;
        length = raw[i + 1]!;
      }
    }
    let framing: BodyFraming = 'none';
    let contentLength = 0;
    if (codings !== undefined) {
      if (this.minor === 0) return this.fail(400, 'Transfer-Encoding in an HTTP/1.0 request');
      if (lengths > 0) return this.fail(400, 'both Content-Length and Transfer-Encoding');
      if (codings.length === 0 || codings[codings.length - 1] !== 'chunked') return this.fail(400, 'chunked is not the final transfer coding');
      if (codings.length > 1) return this.fail(501, `transfer coding ${JSON.stringify(codings.join(', '))} is not implemented`);
      framing = 'chunked';
    } else if (lengths > 0) {
      if (lengths > 1) return this.fail(400, 'Content-Length repeated');
      if (length.length === 0 || length.length > MAX_LENGTH_DIGITS) return this.fail(400, 'Content-Length');
      for (let i = 0; i < length.length; i++) {
        const d = length.charCodeAt(i) - 0x30;
        if (d < 0 || d > 9) return this.fail(400, 'Content-Length');
      }
      contentLength = Number(length);
      framing = 'length'; // even 0: the line is forwarded, some servers want it on a POST
    }
    this.headers = [];
    if (this.on.onHead({ method: this.method, target: this.target, minor: this.minor, rawHeaders: raw, framing, contentLength })) {
      this.state = State.Broken;
      this.stop = true;
    } else if (framing === 'length' && contentLength > 0) {
      this.state = State.Length;
      this.remaining = contentLength;
    } else if (framing === 'chunked') {
      this.state = State.SizeLine;
    } else {
      this.stop = this.complete();
    }
    return undefined;
  }

  /** `1*HEXDIG [ ";" extensions ]`: extensions are read past (the proxy re-chunks without them). */
  private sizeLine(b: Buffer, s: number, e: number): RequestParseError | undefined {
    let size = 0;
    let i = s;
    while (i < e && HEX[b[i]!]! >= 0) {
      size = size * 16 + HEX[b[i]!]!;
      if (size > MAX_CHUNK_SIZE) return this.fail(400, 'chunk size');
      i++;
    }
    if (i === s) return this.fail(400, 'chunk size');
    if (i < e && !chunkExtensions(b, i, e)) return this.fail(400, 'chunk extension');
    if (size === 0) {
      this.state = State.Trailers;
      this.headBytes = 0;
    } else {
      this.state = State.Data;
      this.remaining = size;
    }
    return undefined;
  }

  /** The message ended: ready for the next one; true when the caller asked to stop here. */
  private complete(): boolean {
    this.state = State.Start;
    this.headBytes = 0;
    return this.on.onEnd();
  }
}
