// The differential test's reference: how a strict HTTP/1.1 server (RFC 9112, RFC 9110) reads the
// bytes of one client connection. Written apart from the proxy's parser on purpose (it imports
// nothing of src/proxy/http1): two readings of the same bytes are what the test compares.
// Where the RFCs let a recipient choose, this reader takes no leniency that could move a message
// boundary: a bare LF or bare CR, obs-fold, whitespace before a colon, a control byte, a
// Transfer-Encoding that does not end in exactly one `chunked`, Transfer-Encoding in HTTP/1.0 or
// beside Content-Length, Content-Length repeated or not plain digits, a chunk line outside the
// grammar (extensions included): reading stops there ('error'). A request whose end is known but
// that a strict server still refuses (Host missing or repeated, `*` for a method other than
// OPTIONS, a transfer coding other than chunked, an expectation other than 100-continue...) is
// read and carries its `problems`. Two choices that do not move a boundary are lenient and said
// here: the target may hold any visible ASCII (as llhttp and Envoy take it), its fragment is cut
// off as a URI parser does; and an absolute-form target needs no Host, its authority being the
// one a recipient must use (RFC 9112 3.2.2). Pure.
import { normalizePath } from '../../src/proxy/path-normalization.js';

export interface StrictRequest {
  /** Byte offsets of the message in the connection: [start, end). */
  readonly start: number;
  readonly end: number;
  readonly method: string;
  readonly target: string;
  readonly minor: 0 | 1;
  /** Field lines as received: [name, value without surrounding whitespace]. */
  readonly headers: readonly (readonly [string, string])[];
  /** The content, chunk framing removed. */
  readonly body: Buffer;
  /** What an application behind the proxy must see as the target: path (normalized, 'BASE') and query; undefined when the path cannot be normalized. */
  readonly url: string | undefined;
  /** The target's authority (absolute-form), else Host; undefined without either. */
  readonly authority: string | undefined;
  /** Why a strict server refuses this request although its end is known (empty: it is served). */
  readonly problems: readonly string[];
  /** Asks for a protocol switch (HTTP/1.1, Upgrade, `Connection: upgrade`). */
  readonly upgrade: boolean;
}

export type StopReason = 'end' | 'close' | 'incomplete' | 'error';

export interface StrictReading {
  readonly requests: readonly StrictRequest[];
  /** 'end': the input ended between messages; 'close': a request ended the connection; 'incomplete': it ended inside a message; 'error': a framing error. */
  readonly stop: StopReason;
  readonly reason?: string;
  /**
   * The message reading stopped in, when its request line was read: its method and target, and its
   * header lines once they were read whole (reading stopped in the body).
   */
  readonly partial?: { readonly method: string; readonly target: string; readonly url: string | undefined; readonly headers?: readonly [string, string][] };
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP\/([0-9])\.([0-9])$/;
const FIELD_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):(.*)$/s;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// RFC 3986 authority without userinfo: IP-literal / IPv4 / reg-name, then an optional port.
const AUTHORITY = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/;
const ABSOLUTE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/s;
const MAX_SAFE_HEX_DIGITS = 13; // 16^13 = 2^52

class Stop extends Error {
  constructor(readonly stop: 'incomplete' | 'error', reason: string) {
    super(reason);
  }
}

const incomplete = (what: string): Stop => new Stop('incomplete', what);
const invalid = (what: string): Stop => new Stop('error', what);

/** A cursor over the connection's bytes, reading CRLF-terminated lines strictly. */
class Input {
  pos = 0;
  constructor(readonly b: Buffer) {}

  get done(): boolean {
    return this.pos >= this.b.length;
  }

  /** The next line without its CRLF (latin1); a bare CR or LF is an error. */
  line(what: string): string {
    const lf = this.b.indexOf(0x0a, this.pos);
    const cr = this.b.indexOf(0x0d, this.pos);
    if (cr >= 0 && (lf < 0 || cr < lf - 1)) {
      if (cr === this.b.length - 1) throw incomplete(what);
      throw invalid(`${what}: bare CR`);
    }
    if (lf < 0) throw incomplete(what);
    if (cr !== lf - 1) throw invalid(`${what}: bare LF`);
    const text = this.b.toString('latin1', this.pos, cr);
    this.pos = lf + 1;
    return text;
  }

  take(n: number, what: string): Buffer {
    if (this.pos + n > this.b.length) throw incomplete(what);
    const out = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

/** `name: value` lines up to the empty line (a head's or a trailer section's). */
function fieldLines(input: Input, what: string): [string, string][] {
  const out: [string, string][] = [];
  for (;;) {
    const line = input.line(what);
    if (line === '') return out;
    if (line[0] === ' ' || line[0] === '\t') throw invalid(`${what}: obsolete line folding`);
    const m = FIELD_LINE.exec(line);
    if (!m) throw invalid(`${what}: not a field line: ${JSON.stringify(line)}`);
    const value = m[2]!;
    if (!FIELD_VALUE.test(value)) throw invalid(`${what}: a control byte in the value of ${m[1]}`);
    out.push([m[1]!, value.replace(/^[ \t]+|[ \t]+$/g, '')]);
  }
}

/** The elements of a comma-separated list field, empty ones dropped (RFC 9110 5.6.1). */
function listOf(values: readonly string[]): string[] {
  const out: string[] = [];
  for (const v of values) for (const e of v.split(',')) if (e.trim() !== '') out.push(e.trim());
  return out;
}

const skipBws = (s: string, i: number): number => {
  while (s[i] === ' ' || s[i] === '\t') i++;
  return i;
};

function tokenEnd(s: string, i: number): number {
  while (i < s.length && TOKEN.test(s[i]!)) i++;
  return i;
}

/** RFC 9112 7.1.1: `*( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] )`, ext-val a token or a quoted-string. */
function checkChunkExtensions(s: string): void {
  let i = 0;
  while (i < s.length) {
    i = skipBws(s, i);
    if (s[i] !== ';') throw invalid(`chunk extension: ${JSON.stringify(s)}`);
    i = skipBws(s, i + 1);
    const nameEnd = tokenEnd(s, i);
    if (nameEnd === i) throw invalid(`chunk extension name: ${JSON.stringify(s)}`);
    i = nameEnd;
    const j = skipBws(s, i);
    if (s[j] !== '=') {
      if (j < s.length && s[j] !== ';') throw invalid(`chunk extension: ${JSON.stringify(s)}`);
      if (j === s.length && j !== i) throw invalid(`chunk extension: whitespace at the end of ${JSON.stringify(s)}`);
      continue;
    }
    i = skipBws(s, j + 1);
    if (s[i] === '"') {
      i++;
      for (;;) {
        const c = s.charCodeAt(i);
        if (i >= s.length) throw invalid(`chunk extension: unterminated quoted-string in ${JSON.stringify(s)}`);
        if (c === 0x22) { i++; break; }
        if (c === 0x5c) {
          const q = s.charCodeAt(i + 1);
          if (!(q === 0x09 || (q >= 0x20 && q !== 0x7f && q <= 0xff))) throw invalid(`chunk extension: quoted-pair in ${JSON.stringify(s)}`);
          i += 2;
          continue;
        }
        if (!(c === 0x09 || c === 0x20 || c === 0x21 || (c >= 0x23 && c <= 0x7e) || c >= 0x80)) throw invalid(`chunk extension: byte in quoted-string ${JSON.stringify(s)}`);
        i++;
      }
    } else {
      const valueEnd = tokenEnd(s, i);
      if (valueEnd === i) throw invalid(`chunk extension value: ${JSON.stringify(s)}`);
      i = valueEnd;
    }
  }
}

/** A chunked body (RFC 9112 7.1): the content, the trailer section checked and dropped. */
function chunkedBody(input: Input): Buffer {
  const parts: Buffer[] = [];
  for (;;) {
    const line = input.line('chunk size line');
    const m = /^([0-9A-Fa-f]+)(.*)$/s.exec(line);
    if (!m) throw invalid(`chunk size: ${JSON.stringify(line)}`);
    const digits = m[1]!.replace(/^0+(?=.)/, '');
    if (digits.length > MAX_SAFE_HEX_DIGITS) throw invalid(`chunk size too large: ${m[1]}`);
    checkChunkExtensions(m[2]!);
    const size = parseInt(digits, 16);
    if (size === 0) {
      fieldLines(input, 'trailer section');
      return Buffer.concat(parts);
    }
    parts.push(input.take(size, 'chunk data'));
    const crlf = input.take(2, 'chunk data CRLF');
    if (crlf[0] !== 0x0d || crlf[1] !== 0x0a) throw invalid('chunk data not followed by CRLF');
  }
}

interface TargetReading {
  readonly url: string | undefined;
  readonly authority: string | undefined;
  readonly absolute: boolean;
  readonly problems: string[];
}

/** The request-target's form, the URL an application sees behind the proxy, and what makes it refused. */
function readTarget(method: string, target: string): TargetReading {
  const problems: string[] = [];
  const hash = target.indexOf('#');
  const noFragment = hash < 0 ? target : target.slice(0, hash);
  const urlOf = (pathAndQuery: string): string | undefined => {
    const q = pathAndQuery.indexOf('?');
    const path = q < 0 ? pathAndQuery : pathAndQuery.slice(0, q);
    const normalized = normalizePath(path === '' ? '/' : path, 'BASE');
    return normalized === undefined ? undefined : normalized + (q < 0 ? '' : pathAndQuery.slice(q));
  };
  if (target === '*') {
    if (method !== 'OPTIONS') problems.push('`*` is a target for OPTIONS only');
    return { url: '*', authority: undefined, absolute: false, problems };
  }
  if (noFragment.startsWith('/')) return { url: urlOf(noFragment), authority: undefined, absolute: false, problems };
  const m = ABSOLUTE.exec(noFragment);
  if (!m) {
    problems.push(`not an origin-form or absolute-form target: ${JSON.stringify(target)}`);
    return { url: undefined, authority: undefined, absolute: false, problems };
  }
  const scheme = m[1]!.toLowerCase();
  const authority = m[2]!;
  if (scheme !== 'http' && scheme !== 'https') problems.push(`scheme ${m[1]}`);
  if (authority.includes('@')) problems.push('userinfo in the target (RFC 9110 4.2.4)');
  else if (authority === '' || authority.startsWith(':') || !AUTHORITY.test(authority)) problems.push(`authority ${JSON.stringify(authority)}`);
  return { url: urlOf(m[3]!), authority, absolute: true, problems };
}

/** One request from the cursor (which is past any empty lines); throws Stop. */
function request(input: Input, start: number, partial: (p: StrictReading['partial']) => void): StrictRequest & { closes: boolean } {
  const line = input.line('request line');
  const m = REQUEST_LINE.exec(line);
  if (!m) throw invalid(`request line: ${JSON.stringify(line)}`);
  const [, method, target, major, minorDigit] = m as unknown as [string, string, string, string, string];
  if (major !== '1') throw invalid(`HTTP/${major}.${minorDigit} is not HTTP/1`);
  if (method === 'CONNECT') throw invalid('CONNECT is not read here (the corpus never sends it)');
  const minor: 0 | 1 = minorDigit === '0' ? 0 : 1; // HTTP/1.2 and up are read as 1.1 (RFC 9110 2.5)
  const t = readTarget(method, target);
  partial({ method, target, url: t.url });
  const headers = fieldLines(input, 'header section');
  partial({ method, target, url: t.url, headers });
  const problems = [...t.problems];
  const named = (name: string): string[] => headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);

  const hosts = named('host');
  if (hosts.length > 1) problems.push('Host repeated');
  if (hosts.length > 0 && !AUTHORITY.test(hosts[0]!)) problems.push(`Host ${JSON.stringify(hosts[0])}`);
  if (hosts.length === 0 && minor === 1 && !t.absolute) problems.push('no Host in an HTTP/1.1 request');
  if (t.url === undefined && t.problems.length === 0) problems.push(`path of ${JSON.stringify(target)} cannot be normalized`);
  const connection = listOf(named('connection')).map((s) => s.toLowerCase());
  const expect = named('expect');
  if (minor === 1 && expect.length > 0 && listOf(expect).join(',').toLowerCase() !== '100-continue') problems.push(`Expect ${JSON.stringify(expect.join(', '))}`);

  const te = named('transfer-encoding');
  const cl = named('content-length');
  let body: Buffer;
  if (te.length > 0) {
    if (minor === 0) throw invalid('Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1)');
    if (cl.length > 0) throw invalid('both Transfer-Encoding and Content-Length');
    const codings = listOf(te).map((c) => c.toLowerCase());
    if (codings.some((c) => !TOKEN.test(c))) throw invalid(`Transfer-Encoding ${JSON.stringify(te.join(', '))}`);
    if (codings.at(-1) !== 'chunked') throw invalid('chunked is not the final transfer coding');
    if (codings.filter((c) => c === 'chunked').length > 1) throw invalid('chunked applied more than once');
    if (codings.length > 1) problems.push(`transfer coding ${codings.slice(0, -1).join(', ')} not understood`);
    body = chunkedBody(input);
  } else if (cl.length > 0) {
    if (cl.length > 1) throw invalid('Content-Length repeated');
    if (!/^[0-9]+$/.test(cl[0]!)) throw invalid(`Content-Length ${JSON.stringify(cl[0])}`);
    const n = Number(cl[0]);
    if (!Number.isSafeInteger(n)) throw invalid(`Content-Length ${cl[0]} too large`);
    body = Buffer.from(input.take(n, 'content'));
  } else {
    body = Buffer.alloc(0);
  }
  const closes = minor === 0 ? !connection.includes('keep-alive') : connection.includes('close');
  return {
    start, end: input.pos, method, target, minor, headers, body, url: t.url,
    authority: t.absolute ? t.authority : hosts[0], problems,
    upgrade: minor === 1 && named('upgrade').length > 0 && connection.includes('upgrade'),
    closes,
  };
}

/** Reads every request of a connection's bytes until they end, a request closes it, or a framing error. */
export function readStrictly(bytes: Buffer): StrictReading {
  const input = new Input(bytes);
  const requests: StrictRequest[] = [];
  for (;;) {
    // Empty lines (CRLF) before a request line are ignored (RFC 9112 2.2).
    while (bytes[input.pos] === 0x0d && bytes[input.pos + 1] === 0x0a) input.pos += 2;
    if (input.done) return { requests, stop: 'end' };
    const start = input.pos;
    let partial: StrictReading['partial'];
    try {
      const r = request(input, start, (p) => { partial = p; });
      const { closes, ...req } = r;
      requests.push(req);
      if (closes) return { requests, stop: 'close' };
    } catch (err) {
      if (!(err instanceof Stop)) throw err;
      return { requests, stop: err.stop, reason: err.message, ...(partial ? { partial } : {}) };
    }
  }
}
