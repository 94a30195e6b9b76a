// The differential test's corpus: seeded, generated client connections. Each case is the bytes of
// one connection, one or more pipelined requests drawn from a grammar of variants (methods, target
// forms, Host, Content-Length and Transfer-Encoding in their valid and smuggling shapes, Connection
// lists, Upgrade, Expect, obs-fold, bare LF and CR, control bytes, chunk extensions and trailers,
// HTTP/1.0, leading empty lines), or such a connection with byte-level mutations. Every request
// carries a marker in its path, `/d/<case>/<n>` (`/u/...` when the app is to switch protocols on
// an upgrade), so the app's records say which client request each one was; smuggling payloads in
// bodies use `/smuggled/<case>`, which no client request has. For a generated case the generator
// also says what each request means and whether a strict server serves it, refuses it or stops
// reading at it; the test holds the reference reader (strict-http.ts) to that before it trusts it.
// Case `i` of seed `s` is the same whatever the corpus size. Pure.

/** What a strict server does with a generated request. */
export type Fate = 'served' | 'refused' | 'stop';

export interface Intended {
  readonly method: string;
  readonly target: string;
  /** The content (framing removed). */
  readonly body: Buffer;
  readonly fate: Fate;
  /** The connection ends after it (`Connection: close`, HTTP/1.0 without keep-alive). */
  readonly closes: boolean;
}

export interface CorpusCase {
  /** Unique in a run; the `<case>` of the markers. */
  readonly id: string;
  /** The variants drawn, for reports. */
  readonly label: string;
  readonly bytes: Buffer;
  /** Offsets where the client pauses between writes (none: one write). */
  readonly splits: readonly number[];
  /** The client ends its side once it has written (else it reads until a quiet time passes). */
  readonly halfClose: boolean;
  /** Its upgrade requests go to the app that switches (`/u/` markers; a sidecar case connects to that app's port). */
  readonly switching: boolean;
  /** Generated (not mutated): each request as the generator meant it, up to the one reading stops at. */
  readonly intended?: readonly Intended[];
}

/** Markers in a URL or in raw bytes: `/d/<case>/<n>`, `/u/<case>/<n>`, `/smuggled/<case>`. */
export const MARKER = /\/([du])\/([A-Za-z0-9_]+)\/([0-9]+)(?=[/?#\s]|$)/;
export const SMUGGLED = /\/smuggled\/([A-Za-z0-9_]+)/;
/** `OPTIONS *` has no path: its marker is this header (`<case>/<n>`). */
export const CASE_HEADER = 'x-case';

// ---- a seeded random source (mulberry32), one stream per case

export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }

  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** One of `[weight, value]` pairs. */
  weighted<T>(items: readonly (readonly [number, T])[]): T {
    let r = this.next() * items.reduce((s, [w]) => s + w, 0);
    for (const [w, v] of items) {
      r -= w;
      if (r < 0) return v;
    }
    return items[items.length - 1]![1];
  }
}

/** The stream of case `index` under `seed` (independent of the other cases). */
export function caseRng(seed: number, index: number): Rng {
  let h = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return new Rng((h ^ (h >>> 16)) >>> 0);
}

// ---- one request, drawn

const HOST = 'h.example';
const SAFE_METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'] as const;
/** Tokens beyond the usual: node:http knows some (M-SEARCH, PROPFIND, QUERY) and refuses the others itself. */
const ODD_METHODS = ['FOO', 'BREW', 'X-CUSTOM', 'M-SEARCH', 'PROPFIND', 'QUERY'] as const;

interface Line {
  text: string;
  end: string;
}

/** A request being drawn: head lines, framing, what it means and what a strict server does. */
class Draft {
  method = 'GET';
  version = 'HTTP/1.1';
  target = '';
  leading = '';
  readonly lines: Line[] = [];
  framed: Buffer = Buffer.alloc(0);
  content: Buffer = Buffer.alloc(0);
  readonly variants: string[] = [];
  stop = false;
  refused = false;
  closes = false;
  absolute = false;

  constructor(readonly caseId: string, readonly n: number, readonly switching: boolean) {}

  get minor(): 0 | 1 {
    return this.version === 'HTTP/1.0' ? 0 : 1;
  }

  header(name: string, value: string, end = '\r\n'): void {
    this.lines.push({ text: `${name}: ${value}`, end });
  }

  raw(text: string, end = '\r\n'): void {
    this.lines.push({ text, end });
  }

  bytes(): Buffer {
    let head = `${this.leading}${this.method} ${this.target} ${this.version}\r\n`;
    for (const l of this.lines) head += l.text + l.end;
    return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), this.framed]);
  }
}

const alnum = (rng: Rng, n: number): string => {
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += chars[rng.int(chars.length)];
  return s;
};

/** A request line + Host a lenient reader would find inside a body. */
const smuggled = (caseId: string): string => `GET /smuggled/${caseId} HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`;

function drawMethod(rng: Rng, d: Draft): void {
  d.method = rng.weighted<string>([
    [60, rng.pick(SAFE_METHODS)], [6, 'OPTIONS'], [5, rng.pick(ODD_METHODS)],
    [3, 'get'], [2, 'Post'],
  ]);
  if (d.method !== 'GET') d.variants.push(`method ${d.method}`);
}

function drawVersion(rng: Rng, d: Draft): void {
  d.version = rng.weighted([[88, 'HTTP/1.1'], [9, 'HTTP/1.0'], [2, 'HTTP/2.0'], [1, 'HTTP/1.2']] as const);
  if (d.version === 'HTTP/1.1') return;
  d.variants.push(d.version);
  if (d.version === 'HTTP/2.0') d.stop = true;
  if (d.version === 'HTTP/1.0') d.closes = true; // unless keep-alive (drawConnection)
}

/** The path: marker, then maybe dot segments, escapes, backslashes, a query or a fragment (never touching the marker). */
function drawTarget(rng: Rng, d: Draft): void {
  const marker = `/${d.switching ? 'u' : 'd'}/${d.caseId}/${d.n}`;
  const [suffix, fate] = rng.weighted<readonly [string, Fate]>([
    [50, ['', 'served']], [8, ['?q=1&r=%20x', 'served']], [4, ['/a/../b', 'served']], [4, ['/./c/.', 'served']],
    [4, ['/%61%62%7e', 'served']], [3, ['/e\\f', 'served']], [3, ['//g', 'served']], [3, ['/%2Fh%2f', 'served']],
    [2, ['#frag', 'served']], [2, ['/x?y#z', 'served']], [2, ['/%zz', 'refused']], [2, ['/%00', 'refused']],
    [1, ['/a/..;/b', 'refused']], [1, ['/\xe9', 'stop']], [1, ['/a b', 'stop']],
  ]);
  const form = rng.weighted([[78, 'origin'], [8, 'absolute'], [2, 'absolute-upper'], [2, 'https'], [2, 'asterisk'],
    [1, 'userinfo'], [1, 'empty-authority'], [1, 'ftp'], [1, 'relative'], [1, 'authority-port']] as const);
  switch (form) {
    case 'origin': d.target = marker + suffix; break;
    case 'absolute': d.target = `http://${HOST}${marker}${suffix}`; break;
    case 'absolute-upper': d.target = `HTTP://H.Example:80${marker}${suffix}`; break;
    case 'https': d.target = `https://${HOST}${marker}${suffix}`; break;
    case 'authority-port': d.target = `http://[2001:db8::1]:8080${marker}${suffix}`; break;
    case 'userinfo': d.target = `http://u:p@${HOST}${marker}${suffix}`; d.refused = true; break;
    case 'empty-authority': d.target = `http://${marker}${suffix}`; d.refused = true; break;
    case 'ftp': d.target = `ftp://${HOST}${marker}${suffix}`; d.refused = true; break;
    case 'relative': d.target = `${marker.slice(1)}${suffix}`; d.refused = true; break;
    case 'asterisk':
      d.target = '*';
      if (d.method !== 'OPTIONS') d.refused = true;
      d.header(CASE_HEADER, `${d.caseId}/${d.n}`);
      break;
  }
  d.absolute = d.target.includes('://');
  if (form !== 'origin') d.variants.push(`target ${form}`);
  if (form === 'asterisk') return; // no path
  if (suffix !== '') d.variants.push(`path ${JSON.stringify(suffix)}`);
  if (fate === 'refused') d.refused = true;
  if (fate === 'stop') d.stop = true;
}

function drawHost(rng: Rng, d: Draft): void {
  const kind = rng.weighted([[82, 'plain'], [5, 'absent'], [3, 'twice'], [2, 'twice-different'], [2, 'empty'],
    [2, 'port'], [1, 'invalid'], [2, 'upper-name'], [1, 'space-before-colon']] as const);
  if (kind !== 'plain') d.variants.push(`host ${kind}`);
  switch (kind) {
    case 'plain': d.header('Host', HOST); break;
    case 'absent': if (d.minor === 1 && !d.absolute) d.refused = true; break;
    case 'twice': d.header('Host', HOST); d.header('Host', HOST); d.refused = true; break;
    case 'twice-different': d.header('Host', HOST); d.header('host', 'other.example'); d.refused = true; break;
    case 'empty': d.header('Host', ''); break;
    case 'port': d.header('Host', `${HOST}:8080`); break;
    case 'invalid': d.header('Host', 'h example/x'); d.refused = true; break;
    case 'upper-name': d.header('HOST', HOST); break;
    case 'space-before-colon': d.raw(`Host : ${HOST}`); d.stop = true; break;
  }
}

/** The content: nothing, text, bytes a reader could mistake for framing, or a request of its own. */
function drawContent(rng: Rng, d: Draft): Buffer {
  return Buffer.from(rng.weighted([
    [30, alnum(rng, 1 + rng.int(30))], [25, smuggled(d.caseId)], [10, `0\r\n\r\n${smuggled(d.caseId)}`],
    [5, `x\r\n\r\n\x00\xff\n\r`], [5, ''],
  ]), 'latin1');
}

/** A chunk-size line: the size in some spelling, maybe extensions (valid or not). */
function sizeLine(rng: Rng, d: Draft, size: number): string {
  const hex = size.toString(16);
  let s = rng.weighted([[70, hex], [15, hex.toUpperCase()], [10, `00${hex}`], [2, `0x${hex}`], [1, `+${hex}`]]);
  if (s.startsWith('0x') || s.startsWith('+')) d.stop = true;
  if (rng.chance(0.15)) {
    const [ext, fate] = rng.weighted<readonly [string, Fate]>([
      [4, [';a=b', 'served']], [3, [' ; a = b', 'served']], [3, [';a="q;\\"x"', 'served']], [2, [';a;b=c', 'served']],
      [2, [';a="unterminated', 'stop']], [1, [';', 'stop']], [1, [';a=b c', 'stop']], [1, [';a=\x01', 'stop']], [1, [' ', 'stop']],
    ]);
    s += ext;
    if (fate === 'stop') d.stop = true;
    d.variants.push(`chunk ext ${JSON.stringify(ext)}`);
  }
  return s;
}

/** `content` in chunks (one to three), the last chunk, maybe trailers. */
function chunked(rng: Rng, d: Draft, content: Buffer): Buffer {
  const parts: string[] = [];
  let at = 0;
  const pieces = content.length === 0 ? 0 : 1 + rng.int(Math.min(3, content.length));
  for (let i = 0; i < pieces; i++) {
    const n = i === pieces - 1 ? content.length - at : 1 + rng.int(content.length - at - (pieces - 1 - i));
    parts.push(`${sizeLine(rng, d, n)}\r\n${content.toString('latin1', at, at + n)}\r\n`);
    at += n;
  }
  parts.push(`${rng.chance(0.9) ? '0' : '000'}\r\n`);
  const trailer = rng.weighted([[85, ''], [8, 'X-Trailer: 1\r\n'], [2, 'X-Trailer: 1\r\n folded\r\n'], [2, 'X-Trailer: 1\n'], [3, 'Content-Length: 99\r\n']] as const);
  if (trailer !== '') d.variants.push(`trailer ${JSON.stringify(trailer)}`);
  if (trailer.includes('folded') || trailer.endsWith('1\n')) d.stop = true;
  parts.push(`${trailer}\r\n`);
  return Buffer.from(parts.join(''), 'latin1');
}

function drawFraming(rng: Rng, d: Draft): void {
  const kind = rng.weighted([
    [34, 'none'], [24, 'length'], [3, 'length-zero'], [2, 'length-leading-zeros'], [2, 'length-ows'], [18, 'chunked'],
    [1, 'length-twice-equal'], [1, 'length-twice-different'], [1, 'length-list'], [1, 'length-plus'], [1, 'length-minus'],
    [1, 'length-huge'], [1, 'length-space-inside'], [1, 'length-hex'], [1, 'length-empty'],
    [1, 'te-Chunked'], [1, 'te-CHUNKED'], [1, 'te-ows'], [1, 'te-empty-element'], [1, 'te-gzip-chunked'],
    [1, 'te-chunked-gzip'], [1, 'te-twice'], [1, 'te-identity'], [1, 'te-with-length'], [1, 'te-then-identity-line'],
    [1, 'te-folded'],
  ] as const);
  if (kind !== 'none' && kind !== 'length' && kind !== 'chunked') d.variants.push(`framing ${kind}`);
  const content = kind === 'none' ? Buffer.alloc(0) : drawContent(rng, d);
  const length = (value: string): void => {
    d.header('Content-Length', value);
    d.framed = content;
    d.content = content;
  };
  const te = (...values: string[]): void => {
    for (const v of values) d.header('Transfer-Encoding', v);
    d.framed = chunked(rng, d, content);
    d.content = content;
    if (d.minor === 0) d.stop = true;
  };
  switch (kind) {
    case 'none': break;
    case 'length': length(String(content.length)); break;
    case 'length-zero': d.header('Content-Length', '0'); break;
    case 'length-leading-zeros': length(`000${content.length}`); break;
    case 'length-ows': d.raw(`Content-Length: \t ${content.length} \t`); d.framed = content; d.content = content; break;
    case 'length-twice-equal': length(String(content.length)); d.header('Content-Length', String(content.length)); d.stop = true; break;
    case 'length-twice-different': d.header('Content-Length', '0'); length(String(content.length)); d.stop = true; break;
    case 'length-list': length(`${content.length}, ${content.length}`); d.stop = true; break;
    case 'length-plus': length(`+${content.length}`); d.stop = true; break;
    case 'length-minus': length('-1'); d.stop = true; break;
    case 'length-huge': length('99999999999999999999999'); d.stop = true; break;
    case 'length-space-inside': length(`${content.length} 0`); d.stop = true; break;
    case 'length-hex': length(`0x${content.length.toString(16)}`); d.stop = true; break;
    case 'length-empty': length(''); d.stop = true; break;
    case 'chunked': te('chunked'); break;
    case 'te-Chunked': te('Chunked'); break;
    case 'te-CHUNKED': te('CHUNKED'); break;
    case 'te-ows': te(' \tchunked\t '); break;
    case 'te-empty-element': te(', chunked'); break;
    case 'te-gzip-chunked': te('gzip, chunked'); d.refused = true; break;
    case 'te-chunked-gzip': te('chunked, gzip'); d.stop = true; break;
    case 'te-twice': te('chunked', 'chunked'); d.stop = true; break;
    case 'te-identity': te('identity'); d.stop = true; break;
    case 'te-then-identity-line': te('chunked', 'identity'); d.stop = true; break;
    case 'te-with-length': { // TE.CL: a Content-Length reader takes the first size line as the body, then a request
      te('chunked');
      d.header('Content-Length', String(d.framed.indexOf('\r\n') + 2));
      d.stop = true;
      break;
    }
    case 'te-folded':
      d.raw('Transfer-Encoding:');
      d.raw(' chunked');
      d.framed = chunked(rng, d, content);
      d.stop = true;
      break;
  }
}

function drawConnection(rng: Rng, d: Draft): void {
  if (!rng.chance(0.22)) return;
  const value = rng.pick(['close', 'keep-alive', 'content-length', 'transfer-encoding', 'host', 'x-foo', 'close, content-length',
    'Content-Length', ', ,keep-alive', 'te', 'upgrade', 'keep-alive, transfer-encoding, host', 'expect']);
  d.variants.push(`connection ${JSON.stringify(value)}`);
  if (value === 'x-foo') d.header('X-Foo', '1');
  if (value === 'te') d.header('TE', 'trailers');
  d.header('Connection', value);
  const tokens = value.toLowerCase().split(',').map((t) => t.trim());
  if (d.minor === 1 && tokens.includes('close')) d.closes = true;
  if (d.minor === 0 && tokens.includes('keep-alive')) d.closes = false;
}

function drawUpgrade(rng: Rng, d: Draft): void {
  if (!rng.chance(d.switching ? 0.6 : 0.1)) return;
  const kind = rng.weighted([[5, 'websocket'], [2, 'websocket-no-connection'], [2, 'h2c'], [1, 'h2c-no-connection']] as const);
  d.variants.push(`upgrade ${kind}`);
  if (kind.startsWith('websocket')) {
    d.header('Upgrade', 'websocket');
    d.header('Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ==');
    d.header('Sec-WebSocket-Version', '13');
  } else {
    d.header('Upgrade', 'h2c');
    d.header('HTTP2-Settings', 'AAMAAABkAARAAAAAAAIAAAAA');
  }
  if (!kind.endsWith('no-connection')) d.header('Connection', kind === 'h2c' ? 'Upgrade, HTTP2-Settings' : 'upgrade');
}

function drawExpect(rng: Rng, d: Draft): void {
  if (!rng.chance(0.05)) return;
  const value = rng.pick(['100-continue', '100-Continue', '200-ok']);
  d.variants.push(`expect ${value}`);
  d.header('Expect', value);
  if (value === '200-ok' && d.minor === 1) d.refused = true;
}

/** A header line of a shape a lenient reader reads otherwise (or a harmless oddity). */
function drawOddity(rng: Rng, d: Draft): void {
  if (!rng.chance(0.12)) return;
  const [name, fate, add] = rng.weighted<readonly [string, Fate, (d: Draft) => void]>([
    [3, ['obs-fold', 'stop', (x) => { x.header('X-A', '1'); x.raw(' folded'); }]],
    [3, ['bare LF', 'stop', (x) => x.header('X-A', '1', '\n')]],
    [2, ['bare CR in a value', 'stop', (x) => x.header('X-A', '1\r2')]],
    [2, ['bare CR line end', 'stop', (x) => x.header('X-A', '1', '\r')]],
    [2, ['NUL in a value', 'stop', (x) => x.header('X-A', '1\x002')]],
    [1, ['control byte in a value', 'stop', (x) => x.header('X-A', '1\x01')]],
    [1, ['DEL in a value', 'stop', (x) => x.header('X-A', '1\x7f')]],
    [2, ['space before colon', 'stop', (x) => x.raw('X-A : 1')]],
    [1, ['bad name byte', 'stop', (x) => x.raw('X(A): 1')]],
    [1, ['empty name', 'stop', (x) => x.raw(': 1')]],
    [1, ['folded Content-Length', 'stop', (x) => { x.raw('X-A: 1'); x.raw(' Content-Length: 0'); }]],
    [2, ['obs-text', 'served', (x) => x.header('X-A', 'caf\xe9')]],
    [2, ['trailing spaces', 'served', (x) => x.header('X-A', '1 \t ')]],
    [1, ['long value', 'served', (x) => x.header('X-Long', 'v'.repeat(3000))]],
    [1, ['many headers', 'served', (x) => { for (let i = 0; i < 40; i++) x.header(`X-H${i}`, String(i)); }]],
  ]);
  d.variants.push(name);
  add(d);
  if (fate === 'stop') d.stop = true;
}

function drawLeading(rng: Rng, d: Draft): void {
  if (!rng.chance(0.05)) return;
  d.leading = rng.weighted([[6, '\r\n'], [3, '\r\n\r\n'], [1, '\n']]);
  d.variants.push(`leading ${JSON.stringify(d.leading)}`);
  if (d.leading === '\n') d.stop = true;
}

/** One request of case `caseId`, drawn: its bytes and what it means. */
function drawRequest(rng: Rng, caseId: string, n: number, switching: boolean): { bytes: Buffer; intended: Intended; label: string } {
  const d = new Draft(caseId, n, switching);
  drawLeading(rng, d);
  drawMethod(rng, d);
  drawVersion(rng, d);
  drawTarget(rng, d);
  drawHost(rng, d);
  drawUpgrade(rng, d);
  drawConnection(rng, d);
  drawExpect(rng, d);
  drawOddity(rng, d);
  // The framing lines last but one, so a folded or odd line before them is where readers differ.
  const extra = d.lines.splice(rng.int(d.lines.length + 1));
  drawFraming(rng, d);
  d.lines.push(...extra);
  const fate: Fate = d.stop ? 'stop' : d.refused ? 'refused' : 'served';
  return {
    bytes: d.bytes(),
    intended: { method: d.method, target: d.target, body: d.content, fate, closes: d.closes },
    label: d.variants.length > 0 ? d.variants.join(', ') : 'plain',
  };
}

// ---- byte-level mutations of a generated connection

const SPECIAL = [0x0d, 0x0a, 0x00, 0x20, 0x09, 0x3a, 0x3b, 0x2c, 0x22, 0x7f, 0x80, 0x30, 0x2f, 0x5c, 0x01];

/** Spans a mutation must not touch: the markers (and the byte after each), so every record stays attributable. */
function protectedSpans(b: Buffer): [number, number][] {
  const text = b.toString('latin1');
  const spans: [number, number][] = [];
  for (const re of [new RegExp(MARKER.source, 'g'), new RegExp(SMUGGLED.source, 'g'), /x-case: [^\r\n]*/g]) {
    for (const m of text.matchAll(re)) spans.push([m.index, m.index + m[0].length]);
  }
  return spans;
}

function mutate(rng: Rng, bytes: Buffer): { bytes: Buffer; label: string } {
  let b = bytes;
  const labels: string[] = [];
  const count = 1 + rng.int(3);
  for (let k = 0; k < count && b.length > 1; k++) {
    const spans = protectedSpans(b);
    const free = (at: number): boolean => spans.every(([s, e]) => at < s || at > e);
    let at = rng.int(b.length);
    for (let tries = 0; tries < 20 && !free(at); tries++) at = rng.int(b.length);
    if (!free(at)) continue;
    const kind = rng.weighted([[4, 'flip'], [3, 'insert'], [3, 'delete'], [2, 'duplicate-line'], [2, 'case'], [2, 'crlf-to-lf']] as const);
    const byte = rng.chance(0.7) ? rng.pick(SPECIAL) : b[at]! ^ (1 << rng.int(8));
    switch (kind) {
      case 'flip': b = Buffer.concat([b.subarray(0, at), Buffer.from([byte]), b.subarray(at + 1)]); break;
      case 'insert': b = Buffer.concat([b.subarray(0, at), Buffer.from([byte]), b.subarray(at)]); break;
      case 'delete': b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]); break;
      case 'duplicate-line': {
        const s = b.lastIndexOf(0x0a, at - 1) + 1;
        const e = b.indexOf(0x0a, at);
        if (e < 0) continue;
        b = Buffer.concat([b.subarray(0, e + 1), b.subarray(s, e + 1), b.subarray(e + 1)]);
        break;
      }
      case 'case': {
        let e = at;
        while (e < b.length && /[A-Za-z-]/.test(String.fromCharCode(b[e]!)) && free(e)) e++;
        if (e === at) continue;
        const run = b.toString('latin1', at, e);
        const flipped = [...run].map((c) => (rng.chance(0.5) ? c.toUpperCase() : c.toLowerCase())).join('');
        b = Buffer.concat([b.subarray(0, at), Buffer.from(flipped, 'latin1'), b.subarray(e)]);
        break;
      }
      case 'crlf-to-lf': {
        const cr = b.indexOf('\r\n', at, 'latin1');
        if (cr < 0 || !free(cr)) continue;
        b = Buffer.concat([b.subarray(0, cr), b.subarray(cr + 1)]);
        at = cr;
        break;
      }
    }
    labels.push(`${kind}@${at}`);
  }
  return { bytes: b, label: `mutated (${labels.join(' ')})` };
}

// ---- cases

/** Case `index` of the corpus of `seed`: 1 to 4 pipelined requests, mutated in about a third of cases. */
export function generateCase(seed: number, index: number): CorpusCase {
  const rng = caseRng(seed, index);
  const id = `c${index}`;
  const switching = rng.chance(0.15);
  const count = rng.weighted([[50, 1], [25, 2], [15, 3], [10, 4]] as const);
  const parts: Buffer[] = [];
  const intended: Intended[] = [];
  const labels: string[] = [];
  for (let n = 0; n < count; n++) {
    const r = drawRequest(rng, id, n, switching);
    parts.push(r.bytes);
    intended.push(r.intended);
    labels.push(`[${n}] ${r.label}`);
  }
  let bytes: Buffer = Buffer.concat(parts);
  let label = labels.join(' ');
  const mutated = rng.chance(0.3);
  if (mutated) {
    const m = mutate(rng, bytes);
    bytes = m.bytes;
    label = `${m.label} of ${label}`;
  }
  return { id, label, bytes, ...delivery(rng, bytes.length), switching, ...(mutated ? {} : { intended: upToStop(intended) }) };
}

/** How the client sends it: one write or a few, and whether it half-closes. */
function delivery(rng: Rng, length: number): { splits: number[]; halfClose: boolean } {
  const splits: number[] = [];
  if (length > 2 && rng.chance(0.3)) {
    const pieces = rng.chance(0.15) ? 2 + rng.int(4) : 1;
    for (let i = 0; i < pieces; i++) splits.push(1 + rng.int(length - 1));
  }
  return { splits: [...new Set(splits)].sort((a, b) => a - b), halfClose: rng.chance(0.85) };
}

/** The requests a strict reader reaches: up to the first that stops it or closes the connection. */
function upToStop(intended: readonly Intended[]): Intended[] {
  const out: Intended[] = [];
  for (const r of intended) {
    out.push(r);
    if (r.fate === 'stop' || r.closes) break;
  }
  return out;
}

/** The corpus cases `from`..`from+count-1` of `seed`. */
export function generateCorpus(seed: number, from: number, count: number): CorpusCase[] {
  return Array.from({ length: count }, (_, i) => generateCase(seed, from + i));
}
