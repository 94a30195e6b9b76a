// The differential test of the HTTP/2 path: for every generated (and mutated) HTTP/2 request, what
// the decider judged is exactly what the application received, or the proxy refused it and the
// application received nothing. An Http2Handler (src/proxy/http2/handler.ts) per path-normalization
// mode runs on a loopback listener, with a recording decider that also plans, per case, how it
// answers (forward plain, forward with header edits or a new path, asynchronously, a local 403, a
// throw). It forwards to one of two recording upstreams on loopback:
//   h2  a node:http2 server (prior knowledge): records :method, :path, :authority, :scheme, every
//       regular header line and the body;
//   h1  a strict HTTP/1.1 server (net.Server + test/helpers/strict-http.ts, the reference reader of
//       the HTTP/1 differential test): it answers the HTTP/2 preface with a 400 (as an HTTP/1.1
//       server does), so the proxy's pool marks it HTTP/1.1-only and the requests go over the
//       node:http fallback leg (http1-upstream.ts); records method, target, Host, every header line
//       and the body, and whatever a strict server refuses.
// Requests are sent with node:http2's client (header objects: any lower-case token name, repeated
// values, `host` beside or instead of `:authority`, values with obs-text, tabs, controls and edge
// whitespace, which RFC 9113 calls malformed) and, for a few, with `curl --http2-prior-knowledge`. Each carries
// `x-case: <id>` (never edited by the decider) to tie the decider's record, the upstream's record and
// the client's outcome together.
//
// What is compared, for a forwarded request (the upstream answered, its `x-upstream-seq` reached
// the client):
//   - method, path+query (the decider's path when it rewrote it), authority: exactly the decider's;
//   - header lines: the decider's view (its rawHeaders) with the decider's edits applied as
//     documented (a name removed or set goes in its underscore spelling too; a `host` edit replaces
//     the authority; proxy-owned names are never edited; set values go out as UTF-8 bytes), compared
//     per name, values in order, names all accounted for, except the documented proxy-owned lines:
//       h2: `te: trailers` (exactly when the client sent it: gRPC needs it end to end) and
//           `content-length` (exactly when the client sent one, the same value); `host` never
//           appears (the authority is `:authority`);
//       h1: `content-length` (the body's length, and the client's value when it sent one),
//           `transfer-encoding: chunked` (only when the client sent no content-length),
//           `connection: keep-alive` (node:http's keep-alive agent), exactly one `host` (the
//           authority); cookie crumbs joined with "; " into one line (RFC 9113 8.2.3 requires
//           it before a message leaves HTTP/2); values compared without surrounding whitespace
//           (an HTTP/1.1 field value does not hold its OWS: the strict reader trims it);
//   - the body, byte for byte (and on HTTP/1.1 no request hidden in it: a request the upstream
//     received under `x-case: smuggled-<id>` came out of case <id>'s body);
//   - the strict reader refuses nothing the proxy sent (but for its own BASE normalization of the
//     path: the handler's mode decides what is judged and sent, NONE included).
// What the decider judged is also held to what the client sent (a third reading): its method, the
// path normalized by the handler's mode (path-normalization.ts), `host` first = the authority, then
// the client's lines in order without the hop-by-hop and proxy-owned ones (te, content-length,
// expect, trailer...).
// A request refused by the proxy: a 4xx/5xx answer (for gRPC: `:status 200` with a non-zero
// grpc-status) or a reset; the upstream saw nothing of it. A request that any strict reading says
// must be refused before the decider (a field value RFC 9113 8.2.1 calls malformed: a control
// byte or whitespace at an end; `:authority` and `host` differ, no authority, content_length,
// `*` without OPTIONS, a path that cannot be normalized, CONNECT) must not reach the decider; one
// with nothing wrong must reach the upstream when the decider forwards it.
// Last: after the run, no upstream request is left half-sent (a stream the client reset must not
// hold the upstream connection open). Besides the seeded cases, named ones (`n_...`, namedCases())
// run on every seed: the shapes where the HTTP/1.1 leg has been seen to part from the decider.
// node:http2's client adds `:authority` (its session's) when a case has neither it nor `host`;
// the case is then judged as sent so.
//   DIFFERENTIAL_SEED    the corpus (default: a fresh one, printed)
//   DIFFERENTIAL_H2_CASES  how many (default 400)
//   DIFFERENTIAL_H2_ONLY   comma-separated case ids to run alone
//   DIFFERENTIAL_H2_FINDINGS  a file to write every finding to (JSON lines, with the case)
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import {
  connect as connectHttp2, constants, createServer as createHttp2Server, type ClientHttp2Session, type Http2Server, type IncomingHttpHeaders,
  type OutgoingHttpHeaders, type ServerHttp2Stream,
} from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { PathNormalization } from '../../../src/config/mesh-config.js';
import { setScopeLevel } from '../../../src/log/logger.js';
import type { RequestDecider, Verdict } from '../../../src/proxy/decider.js';
import { Http2Handler } from '../../../src/proxy/http2/handler.js';
import { normalizePath } from '../../../src/proxy/path-normalization.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { caseRng, type Rng } from '../../helpers/request-corpus.js';
import { readStrictly } from '../../helpers/strict-http.js';
import { envCount } from '../../helpers/env-count.js';
import { SINGLE_VALUE_FIELDS } from '../../../src/proxy/http2/request-headers.js';

const env = process.env;


const TOTAL = envCount('DIFFERENTIAL_H2_CASES', 400);
const SEED = envCount('DIFFERENTIAL_SEED', randomInt(1, 2 ** 31));
const ONLY = env['DIFFERENTIAL_H2_ONLY'] ? new Set(env['DIFFERENTIAL_H2_ONLY'].split(',')) : undefined;
const FINDINGS_FILE = env['DIFFERENTIAL_H2_FINDINGS'];
const MODES: readonly PathNormalization[] = ['NONE', 'BASE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'];
/** Cases in flight at once. */
const CONCURRENCY = 24;
/** A case whose stream has not closed after this long is a finding (a hang). */
const CASE_TIMEOUT_MS = 5_000;
/** After the last case: time for the upstreams' last records and for cut requests to be torn down. */
const SETTLE_MS = 400;
const replay = (ids: readonly string[]): string =>
  `DIFFERENTIAL_SEED=${SEED} DIFFERENTIAL_H2_CASES=${TOTAL}${ids.length > 0 ? ` DIFFERENTIAL_H2_ONLY=${ids.join(',')}` : ''} `
  + 'node --test --test-reporter=spec dist/test/integration/proxy/differential-http2.test.js';

console.log(`differential-http2: seed ${SEED}, ${TOTAL} cases (replay: ${replay([])})`);

// ---- the rules this test states on its own (the documented contract, not the proxy's code)

/** Names only the proxy writes: never in the decider's view, never edited (http1/headers.ts PROXY_OWNED + hop-by-hop). */
const PROXY_OWNED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'expect']);
/** A value nghttp2 keeps (it drops, silently, a field with a control byte or leading/trailing whitespace). */
/** A field value RFC 9113 8.2.1 allows (no control byte but HTAB, no whitespace at either end): any other refuses its request. */
const validValue = (v: string): boolean => /^[\t\x20-\x7e\x80-\xff]*$/.test(v) && !/^[ \t]|[ \t]$/.test(v);
/** RFC 3986 authority without userinfo (as strict-http.ts reads Host). */
const AUTHORITY = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/;
const cgi = (name: string): string => name.toLowerCase().replaceAll('_', '-');
const utf8Latin1 = (v: string): string => Buffer.from(v, 'utf8').toString('latin1');

// ---- cases

type Plan =
  | { readonly kind: 'forward'; readonly upstream: 'h2' | 'h1'; readonly async: boolean; readonly path?: string;
    readonly setHeaders?: readonly (readonly [string, string])[]; readonly removeHeaders?: readonly string[] }
  | { readonly kind: 'reply'; readonly status: number }
  | { readonly kind: 'throw' };

interface H2Case {
  readonly id: string;
  readonly variants: string[];
  client: 'node' | 'curl';
  readonly mode: PathNormalization;
  method: string;
  /** `:path` as sent. */
  path: string;
  /** `:authority` (undefined: not sent) and `host` (undefined: not sent). */
  authority: string | undefined;
  host: string | undefined;
  /** Regular lines in the order sent (lower-case names), `x-case` first. */
  lines: [string, string][];
  /** The body (undefined: END_STREAM on HEADERS). */
  body: Buffer | undefined;
  /**
   * The client resets its stream after half the body, without END_STREAM: RST_STREAM NO_ERROR
   * (node's `destroy()`) or INTERNAL_ERROR (`destroy(err)`). Not `close(CANCEL)`: node's client ends
   * its writable side first, so that sends END_STREAM before the RST_STREAM and the request is whole.
   */
  cancel: false | 'no-error' | 'internal-error';
  readonly plan: Plan;
}

const TOKEN_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789-';
const ODD_TOKEN_CHARS = "!#$%&'*+.^_`|~";
const AUTHORITIES = ['app.svc', 'app.svc:8080', 'shop.example', '10.1.2.3:80', '[::1]:80', 'a-b_c~.d'];
const SEGMENTS: readonly (readonly [number, string])[] = [
  [20, 'a'], [8, 'b'], [8, 'admin'], [6, 'public'], [6, '.'], [8, '..'], [3, '%2e'], [3, '%2E%2e'], [2, '.%2e'], [4, '%2f'], [2, '%2F'],
  [3, '%5c'], [3, ''], [2, '%41dmin'], [1, '%7e'], [2, 'x;y'], [1, '~u'], [1, '%25'], [1, '%zz'], [1, '..;'], [1, '%00'], [2, '\\'],
  [1, 'a%20b'], [1, '\u00e9'],
];

function token(rng: Rng, n: number, odd = false): string {
  let s = '';
  for (let i = 0; i < n; i++) s += odd && rng.chance(0.15) ? rng.pick([...ODD_TOKEN_CHARS]) : rng.pick([...TOKEN_CHARS]);
  return s;
}

function value(rng: Rng): string {
  return rng.weighted<string>([
    [40, token(rng, 1 + rng.int(12))],
    [10, `${token(rng, 3)} ${token(rng, 4)}, ${token(rng, 2)}`],
    [5, ''],
    [5, `caf\u00e9 \u00ff\u0080`], // obs-text: bytes 0x80-0xff, latin1 both ways
    [5, `a\tb`],
    [3, '"q;\\"x" =?&%2e/../'],
    [2, ` lead`], // malformed (RFC 9113 8.2.1): these three refuse their request
    [2, `trail `],
    [2, `ctl\x01x`],
  ]);
}

function drawMethod(rng: Rng, c: H2Case): void {
  c.method = rng.weighted<string>([
    [30, 'GET'], [14, 'POST'], [5, 'PUT'], [5, 'DELETE'], [5, 'HEAD'], [5, 'OPTIONS'], [3, 'PATCH'],
    [4, rng.pick(['BREW', 'X-CUSTOM', 'M-SEARCH', 'PROPFIND', 'QUERY', `X${token(rng, 4, true).toUpperCase()}`])],
    [3, rng.pick(['get', 'Post', 'brew', 'delete'])],
    [1, 'connect'],
  ]);
  if (c.method !== c.method.toUpperCase()) c.variants.push(`method ${c.method}`);
}

function drawPath(rng: Rng, c: H2Case): void {
  if (rng.chance(0.04)) {
    c.method = rng.chance(0.7) ? 'OPTIONS' : c.method;
    c.path = '*';
    c.variants.push('path *');
    return;
  }
  const n = 1 + rng.int(5);
  const segs: string[] = [];
  for (let i = 0; i < n; i++) segs.push(rng.weighted(SEGMENTS));
  let p = `/${segs.join('/')}`;
  if (rng.chance(0.15)) p += '/';
  if (rng.chance(0.1)) p = `/${p}`;
  const query = rng.weighted<string>([[60, ''], [15, '?q=1'], [6, '?a=%2e%2e/../x'], [5, '?x=/a//b&y'], [4, '?'], [3, '?%41=%00']]);
  const fragment = rng.chance(0.04) ? '#frag/../x' : '';
  c.path = p + query + fragment;
}

function drawAuthority(rng: Rng, c: H2Case): void {
  const a = rng.pick(AUTHORITIES);
  const kind = rng.weighted<string>([
    [55, 'authority'], [12, 'host-only'], [12, 'both-same'], [5, 'both-differ'], [3, 'both-case'], [2, 'authority-empty'],
    [2, 'host-empty'], [2, 'userinfo'], [2, 'bad-chars'],
  ]);
  if (kind !== 'authority') c.variants.push(`authority ${kind}`);
  switch (kind) {
    case 'authority': c.authority = a; break;
    case 'host-only': c.host = a; break;
    case 'both-same': c.authority = a; c.host = a; break;
    case 'both-differ': c.authority = a; c.host = 'admin.internal'; break;
    case 'both-case': c.authority = 'app.svc'; c.host = 'APP.svc'; break;
    case 'authority-empty': c.authority = ''; break;
    case 'host-empty': c.host = ''; break;
    case 'userinfo': c.authority = `u@${a}`; break;
    case 'bad-chars': c.host = 'a"b'; break;
  }
}

function drawHeaders(rng: Rng, c: H2Case): void {
  const add = (n: string, v: string): void => { c.lines.push([n, v]); };
  const k = rng.int(8);
  for (let i = 0; i < k; i++) {
    const kind = rng.weighted<string>([
      [20, 'random'], [8, 'duplicate'], [6, 'cookie'], [8, 'underscore'], [10, 'decider-names'], [4, 'te'], [2, 'expect'], [2, 'trailer'],
      [3, 'grpc'], [1, 'proto'], [2, 'lookalike'], [2, 'many'], [1, 'long'],
    ]);
    switch (kind) {
      case 'random': add(`x-${token(rng, 1 + rng.int(10), true)}`, value(rng)); break;
      case 'duplicate': { const n = `x-dup-${token(rng, 2)}`; const m = 2 + rng.int(2); for (let j = 0; j < m; j++) add(n, value(rng)); break; }
      case 'cookie': { const m = 1 + rng.int(3); for (let j = 0; j < m; j++) add('cookie', `${token(rng, 2)}=${token(rng, 4)}`); break; }
      case 'underscore': add(rng.pick(['x_forwarded_for', 'x_jwt_sub', 'x_request_id', 'content_type', 'x_remove_me', 'X_Set_Me'.toLowerCase()]), value(rng)); break;
      case 'decider-names': add(rng.pick(['x-forwarded-for', 'authorization', 'x-jwt-sub', 'x-set-me', 'x-remove-me', 'user-agent']), value(rng)); break;
      case 'te': add('te', 'trailers'); break;
      case 'expect': add('expect', '100-continue'); break;
      case 'trailer': add('trailer', 'x-t'); break;
      case 'grpc': add('content-type', rng.pick(['application/grpc', 'application/grpc+proto', 'application/grpcx'])); break;
      case 'proto': add('__proto__', 'x'); break;
      case 'lookalike': add(rng.pick(['content_length', 'transfer_encoding']), '0'); break;
      case 'many': for (let j = 0; j < 30; j++) add(`x-h${j}`, String(j)); break;
      case 'long': add('x-long', 'v'.repeat(3000)); break;
    }
    if (kind !== 'random') c.variants.push(kind);
  }
}

function drawBody(rng: Rng, c: H2Case): void {
  const wants = ['POST', 'PUT', 'PATCH', 'Post'].includes(c.method) ? 0.8 : 0.15;
  if (!rng.chance(wants)) return;
  let body = Buffer.alloc(rng.int(300));
  for (let i = 0; i < body.length; i++) body[i] = rng.int(256);
  // A smuggling payload, a whole request of its own (or after a last-chunk) for a reader that takes
  // the body for the next message.
  if (rng.chance(0.25)) {
    const smuggled = `GET /smuggled HTTP/1.1\r\nHost: x\r\nx-case: smuggled-${c.id}\r\n\r\n`;
    body = Buffer.from(rng.chance(0.5) ? smuggled : `0\r\n\r\n${smuggled}`, 'latin1');
    c.variants.push('smuggling payload');
  }
  c.body = body;
  const cl = rng.weighted<string>([[60, 'right'], [30, 'none'], [4, 'smaller'], [4, 'larger'], [2, 'cancel']]);
  if (cl === 'right' || cl === 'cancel') c.lines.push(['content-length', String(body.length)]);
  if (cl === 'smaller' && body.length > 0) c.lines.push(['content-length', String(body.length - 1)]);
  if (cl === 'larger') c.lines.push(['content-length', String(body.length + 7)]);
  // A reset of an empty body cuts nothing: a length of 0 frames the request whole for an HTTP/1.1
  // upstream the moment its head is sent, whatever the client does next.
  if (cl === 'cancel') c.cancel = body.length === 0 ? false : rng.chance(0.5) ? 'no-error' : 'internal-error';
  if (cl !== 'right' && cl !== 'none') c.variants.push(`content-length ${cl}`);
}

function drawPlan(rng: Rng): Plan {
  const upstream = rng.chance(0.5) ? 'h2' : 'h1';
  return rng.weighted<Plan>([
    [55, { kind: 'forward', upstream, async: false }],
    [6, { kind: 'forward', upstream, async: true }],
    [24, {
      kind: 'forward', upstream, async: rng.chance(0.2),
      setHeaders: [['x-forwarded-for', '10.0.0.1'], ['Host', 'rewritten.svc:8080'], ['x-jwt-sub', 'sub-\u00fc-\u2713'], ['content-length', '0'],
        ['te', 'gzip'], ['transfer-encoding', 'chunked'], ['connection', 'close'], ['X-Set-Me', 'set'], ['user-agent', 'mesh']]
        .filter(() => rng.chance(0.3)) as [string, string][],
      removeHeaders: ['x-forwarded-for', 'authorization', 'x-jwt-sub', 'cookie', 'te', 'content-length', 'host', 'x-remove-me']
        .filter(() => rng.chance(0.3)),
      ...(rng.chance(0.2) ? { path: `/rewritten/${token(rng, 4)}?r=1` } : {}),
    }],
    [12, { kind: 'reply', status: rng.pick([401, 403, 404, 429]) }],
    [3, { kind: 'throw' }],
  ]);
}

/** A mutation of a drawn case: the shape-level edits a fuzzer of header blocks would make. */
function mutate(rng: Rng, c: H2Case): void {
  const m = 1 + rng.int(2);
  for (let i = 0; i < m; i++) {
    const kind = rng.weighted<string>([
      [3, 'dup-line'], [3, 'underscore-twin'], [2, 'dot-segment'], [2, 'lower-method'], [2, 'swap-host'], [1, 'drop-authority'],
      [2, 'value-edge'], [2, 'encoded-slash'], [1, 'double-slash'],
    ]);
    const regular = c.lines.slice(1);
    const at = regular.length > 0 ? 1 + rng.int(regular.length) : -1;
    switch (kind) {
      case 'dup-line': if (at > 0) c.lines.splice(at, 0, [c.lines[at]![0], value(rng)]); break;
      case 'underscore-twin': {
        const n = at > 0 ? c.lines[at]![0] : 'x-forwarded-for';
        c.lines.push([n.replaceAll('-', '_'), value(rng)]);
        break;
      }
      case 'dot-segment': if (c.path !== '*') c.path = c.path.replace(/^\//, rng.pick(['/public/../', '/./', '/%2e%2e/', '/a/..%2f', '/..;/'])); break;
      case 'lower-method': c.method = c.method.toLowerCase(); break;
      case 'swap-host': [c.authority, c.host] = [c.host, c.authority]; break;
      case 'drop-authority': c.authority = undefined; break;
      case 'value-edge': if (at > 0) c.lines[at] = [c.lines[at]![0], rng.pick([' x', 'x ', '\tx', 'x\x7f', ''])]; break;
      case 'encoded-slash': if (c.path !== '*') c.path = c.path.replace('/', '/admin%2F..%2F'); break;
      case 'double-slash': if (c.path !== '*') c.path = c.path.replace('/', '//'); break;
    }
    c.variants.push(`mutated ${kind}`);
  }
}

function generate(index: number, curl: boolean): H2Case {
  const rng = caseRng(SEED, index);
  const id = `h${index}`;
  const c: H2Case = {
    id, variants: [], client: 'node', mode: rng.pick(MODES), method: 'GET', path: '/', authority: undefined, host: undefined,
    lines: [['x-case', id]], body: undefined, cancel: false, plan: drawPlan(rng),
  };
  drawMethod(rng, c);
  drawPath(rng, c);
  drawAuthority(rng, c);
  drawHeaders(rng, c);
  drawBody(rng, c);
  if (rng.chance(0.3)) mutate(rng, c);
  if (curl) toCurlShape(rng, c);
  return c;
}

/**
 * A case curl can send: it folds a `Host` line into `:authority` (so no host beside it), writes
 * names lower-case, and is given no body here; it drops connection-specific lines itself (given
 * some here: the proxy never sees them). Names are given in mixed case.
 */
function toCurlShape(rng: Rng, c: H2Case): void {
  c.client = 'curl';
  c.variants.push('curl');
  if (c.method === 'connect') c.method = 'GET';
  c.authority = c.authority ?? c.host;
  c.host = undefined;
  if (c.authority === '' || c.authority === undefined) c.authority = 'app.svc';
  c.body = undefined;
  c.cancel = false;
  if (/[^\x21-\x7e]/.test(c.path)) c.path = '/curl/a/../b'; // argv is UTF-8: curl would send other bytes than the case says
  c.lines = c.lines.filter(([n, v]) => n !== 'content-length' && n !== 'te' && n !== 'expect' && n !== 'trailer' && n !== '__proto__' && /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(v));
  if (rng.chance(0.5)) c.lines.push(['connection', 'close'], ['transfer-encoding', 'chunked'], ['upgrade', 'h2c'], ['keep-alive', '1']);
}

// ---- what each side records

interface Judged {
  readonly method: string;
  readonly url: string;
  readonly lines: readonly string[];
}

interface Received {
  readonly seq: number;
  readonly via: 'h2' | 'h1';
  readonly method: string;
  readonly path: string;
  /** h2: `:authority`; h1: undefined (its Host lines are in `lines`). */
  readonly authority: string | undefined;
  readonly scheme: string | undefined;
  /** Regular lines as received. */
  readonly lines: readonly (readonly [string, string])[];
  body: Buffer;
  complete: boolean;
  /** h1: why a strict server refuses it. */
  readonly problems: readonly string[];
}

interface Outcome {
  status?: number;
  headers?: IncomingHttpHeaders;
  /** A stream error, a reset, a client that refused to send it, curl's error. */
  error?: string;
  clientRefused?: boolean;
  timedOut?: boolean;
}

interface Finding {
  readonly caseId: string;
  readonly kind: string;
  readonly detail: string;
}

const plans = new Map<string, Plan>();
const judged = new Map<string, Judged[]>();
const received = new Map<string, Received[]>();
const upstreamFindings: Finding[] = [];
let seq = 0;
let probes = 0;

function caseOfLines(lines: readonly (readonly [string, string])[]): string | undefined {
  return lines.find(([n]) => n.toLowerCase() === 'x-case')?.[1];
}

function record(id: string | undefined, r: Received): void {
  const key = id ?? '?';
  received.set(key, [...(received.get(key) ?? []), r]);
}

/** The recording decider: the view, then the case's plan. */
const decider: RequestDecider = {
  decide(req: IncomingMessage): Verdict | Promise<Verdict> {
    const raw = req.rawHeaders;
    const id = req.headers['x-case'] as string | undefined ?? '?';
    judged.set(id, [...(judged.get(id) ?? []), { method: req.method!, url: req.url!, lines: [...raw] }]);
    const plan = plans.get(id) ?? { kind: 'forward', upstream: 'h2', async: false };
    if (plan.kind === 'throw') throw new Error(`planned failure of ${id}`);
    if (plan.kind === 'reply') return { kind: 'reply', status: plan.status, body: `refused by plan (${id})\n` };
    const v: Verdict = {
      kind: 'forward', address: '127.0.0.1', port: plan.upstream === 'h2' ? upstreams.h2Port : upstreams.h1Port,
      ...(plan.path !== undefined ? { path: plan.path } : {}),
      ...(plan.setHeaders?.length ? { setHeaders: plan.setHeaders } : {}),
      ...(plan.removeHeaders?.length ? { removeHeaders: plan.removeHeaders } : {}),
    };
    return plan.async ? new Promise((resolve) => setImmediate(() => resolve(v))) : v;
  },
};

// ---- the upstreams

const upstreams = { h2Port: 0, h1Port: 0 };
/** Upstream streams still open, with their case. */
const h2Streams = new Map<ServerHttp2Stream, string>();
const h1Sockets = new Map<Socket, { pending: Buffer; probe: boolean }>();

function startH2Upstream(): Promise<Http2Server> {
  const server = createHttp2Server();
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, raw: string[]) => {
    stream.on('error', () => { /* a reset by the proxy: the record stays incomplete */ });
    const lines: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.charCodeAt(0) !== 0x3a) lines.push([raw[i]!, raw[i + 1]!]);
    h2Streams.set(stream, caseOfLines(lines) ?? '?');
    stream.once('close', () => h2Streams.delete(stream));
    const rec: Received = {
      seq: ++seq, via: 'h2', method: String(headers[':method']), path: String(headers[':path']), authority: headers[':authority'] as string | undefined,
      scheme: headers[':scheme'] as string | undefined, lines, body: Buffer.alloc(0), complete: false, problems: [],
    };
    record(caseOfLines(lines), rec);
    const parts: Buffer[] = [];
    let ended = false;
    stream.on('data', (b: Buffer) => parts.push(b));
    // node:http2 ends the readable side of a stream the peer reset too ('end', rstCode still 0): the
    // request is whole only when the stream then closes without a reset.
    stream.once('end', () => {
      ended = true;
      rec.body = Buffer.concat(parts);
      const head = rec.method === 'HEAD';
      try {
        stream.respond({ ':status': 200, 'content-type': 'text/plain', 'x-upstream-seq': String(rec.seq) }, { endStream: head });
        if (!head) stream.end('ok');
      } catch { /* reset meanwhile */ }
    });
    stream.once('close', () => { rec.complete = ended && stream.rstCode === constants.NGHTTP2_NO_ERROR; });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const PREFACE = 'PRI * HTTP/2.0';

/** One HTTP/1.1 connection, read strictly: complete requests recorded and answered, the rest kept. */
function onH1Data(socket: Socket, state: { pending: Buffer; probe: boolean }, chunk: Buffer): void {
  if (state.probe) return; // the rest of an HTTP/2 preface (SETTINGS) after the 400
  state.pending = Buffer.concat([state.pending, chunk]);
  if (state.pending.toString('latin1', 0, PREFACE.length) === PREFACE.slice(0, Math.min(PREFACE.length, state.pending.length))) {
    if (state.pending.length < PREFACE.length) return;
    probes++;
    state.probe = true;
    state.pending = Buffer.alloc(0);
    socket.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    return;
  }
  const reading = readStrictly(state.pending);
  let used = 0;
  for (const r of reading.requests) {
    used = r.end;
    const id = caseOfLines(r.headers);
    const rec: Received = {
      seq: ++seq, via: 'h1', method: r.method, path: r.target, authority: undefined, scheme: undefined,
      lines: r.headers, body: r.body, complete: true, problems: r.problems,
    };
    record(id, rec);
    const head = r.method === 'HEAD';
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-upstream-seq: ${rec.seq}\r\nconnection: keep-alive, x-hop\r\n`
      + `keep-alive: timeout=30\r\nx-hop: 1\r\ncontent-length: 2\r\n\r\n${head ? '' : 'ok'}`);
  }
  state.pending = state.pending.subarray(used);
  if (reading.stop === 'error') {
    const text = state.pending.toString('latin1');
    const id = /x-case: ?([^\r\n]*)/i.exec(text)?.[1] ?? '?';
    upstreamFindings.push({ caseId: id, kind: 'h1-unreadable', detail: `the strict HTTP/1.1 upstream cannot read what the proxy sent (${reading.reason}): ${JSON.stringify(text.slice(0, 300))}` });
    state.pending = Buffer.alloc(0);
    socket.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
  } else if (reading.stop === 'close') {
    socket.end();
  }
}

function startH1Upstream(): Promise<Server> {
  const server = createNetServer((socket) => {
    const state = { pending: Buffer.alloc(0), probe: false };
    h1Sockets.set(socket, state);
    socket.on('data', (b: Buffer) => onH1Data(socket, state, b));
    socket.on('error', () => { /* the proxy's reset */ });
    socket.once('close', () => h1Sockets.delete(socket));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// ---- the proxy and the clients

interface ProxyUnderTest {
  readonly handler: Http2Handler;
  readonly server: Server;
  readonly port: number;
  readonly sockets: Set<Socket>;
}

async function startProxy(mode: PathNormalization): Promise<ProxyUnderTest> {
  const handler = new Http2Handler({
    stats: new DirectionStats(), upstream: { kind: 'direct' }, destinationOf: () => ({ address: '127.0.0.1', port: upstreams.h2Port }),
    decider, settings: { normalization: mode },
  });
  const sockets = new Set<Socket>();
  // As the capture listener does (listener.ts): the first bytes read (the client preface), the
  // socket paused, then handed over with them. (Handing over a pauseOnConnect socket that was never
  // read, with no head, leaves the session waiting for bytes no one reads: see the report.)
  const server = createNetServer({ pauseOnConnect: true }, (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.once('data', (head: Buffer) => {
      s.pause();
      handler.accept(s, head);
    });
    s.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { handler, server, port: (server.address() as AddressInfo).port, sockets };
}

const sessions = new Map<number, ClientHttp2Session>();

function sessionFor(port: number): ClientHttp2Session {
  const s = sessions.get(port);
  if (s && !s.closed && !s.destroyed) return s;
  const next = connectHttp2(`http://127.0.0.1:${port}`, { maxSessionMemory: 64 });
  next.on('error', () => { /* a case's outcome says it */ });
  sessions.set(port, next);
  return next;
}

function nodeHeaders(c: H2Case): OutgoingHttpHeaders {
  // Null prototype: `__proto__` is a name like any other. Repeated names become arrays (node sends
  // one field per element, in place of the name's first appearance).
  const h = Object.create(null) as Record<string, string | string[]>;
  h[':method'] = c.method;
  h[':path'] = c.path;
  h[':scheme'] = 'http';
  if (c.authority !== undefined) h[':authority'] = c.authority;
  if (c.host !== undefined) h['host'] = c.host;
  for (const [n, v] of c.lines) {
    const prev = h[n];
    h[n] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return h;
}

/** The regular lines in the order node:http2 puts them on the wire (by first appearance of each name). */
function wireOrder(c: H2Case): [string, string][] {
  const names: string[] = [];
  const values = new Map<string, string[]>();
  const all: [string, string][] = c.host !== undefined ? [['host', c.host], ...c.lines] : c.lines;
  for (const [n, v] of all) {
    if (!values.has(n)) { names.push(n); values.set(n, []); }
    values.get(n)!.push(v);
  }
  return names.flatMap((n) => values.get(n)!.map((v): [string, string] => [n, v]));
}

function sendNode(c: H2Case, port: number): Promise<Outcome> {
  if (c.authority === undefined && c.host === undefined) {
    // node:http2's client cannot send neither: it adds its session's authority.
    c.authority = `127.0.0.1:${port}`;
    c.variants.push(':authority added by node');
  }
  return new Promise((resolve) => {
    const session = sessionFor(port);
    let req;
    try {
      req = session.request(nodeHeaders(c), { endStream: c.body === undefined });
    } catch (err) {
      resolve({ clientRefused: true, error: (err as Error).message });
      return;
    }
    const out: Outcome = {};
    const timer = setTimeout(() => {
      out.timedOut = true;
      req.close(constants.NGHTTP2_CANCEL);
    }, CASE_TIMEOUT_MS);
    req.on('response', (h) => {
      out.headers = h;
      out.status = Number(h[':status']);
    });
    req.on('error', (err: Error) => { out.error = err.message; });
    req.resume();
    req.once('close', () => {
      clearTimeout(timer);
      if (req.rstCode !== undefined && req.rstCode !== constants.NGHTTP2_NO_ERROR && out.error === undefined) out.error = `reset ${req.rstCode}`;
      if (c.cancel && out.error === undefined && out.status === undefined) out.error = `reset by the client (${c.cancel})`;
      resolve(out);
    });
    if (c.body !== undefined) {
      if (c.cancel) {
        req.write(c.body.subarray(0, c.body.length >> 1));
        const reset = c.cancel;
        setTimeout(() => (reset === 'no-error' ? req.destroy() : req.destroy(new Error('the test resets its stream'))), 30);
      } else {
        req.end(c.body);
      }
    }
  });
}

let curlMissing = false;

function sendCurl(c: H2Case, port: number): Promise<Outcome> {
  const args = ['-sS', '--http2-prior-knowledge', '--path-as-is', '-o', '/dev/null', '-D', '-', '--max-time', '5', ...(c.method === 'HEAD' ? ['-I'] : ['-X', c.method]),
    '-H', 'User-Agent:', '-H', 'Accept:', '-H', `Host: ${c.authority!}`];
  for (const [n, v] of c.lines) args.push('-H', `${n.replace(/^./, (x) => x.toUpperCase())}: ${v}`);
  if (c.path === '*') args.push('--request-target', '*', `http://127.0.0.1:${port}/`);
  else args.push(`http://127.0.0.1:${port}${c.path.replace(/#.*$/, '')}`);
  return new Promise((resolve) => {
    execFile('curl', args, { encoding: 'latin1' }, (err, stdout, stderr) => {
      const out: Outcome = {};
      const heads = stdout.split('\r\n\r\n').filter((s) => s.startsWith('HTTP/'));
      const last = heads[heads.length - 1];
      if (last) {
        const [statusLine, ...rest] = last.split('\r\n');
        out.status = Number(/^HTTP\/\S+ (\d{3})/.exec(statusLine!)?.[1]);
        const h: IncomingHttpHeaders = {};
        for (const line of rest) {
          const i = line.indexOf(':');
          if (i > 0) h[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
        }
        out.headers = h;
      }
      if (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') curlMissing = true;
        out.error = `curl: ${stderr.trim() || err.message}`;
      }
      resolve(out);
    });
  });
}

// ---- the judgement

/** The decider's view of what the client sent, as the contract says it is built. */
function expectedView(c: H2Case): string[] {
  const authority = c.authority ?? c.host ?? '';
  const sent = c.client === 'curl' ? c.lines : wireOrder(c);
  return ['host', authority, ...sent.filter(([n, v]) => n !== 'host' && !PROXY_OWNED.has(n) && validValue(v)).flat()];
}

/** The path+query the decider must judge: the fragment cut, the path normalized by the handler's mode. */
function expectedUrl(c: H2Case): string | undefined {
  if (c.path === '*') return '*';
  const noFragment = c.path.replace(/#.*$/s, '');
  const q = noFragment.indexOf('?');
  const path = q < 0 ? noFragment : noFragment.slice(0, q);
  const normalized = normalizePath(path, c.mode);
  return normalized === undefined ? undefined : normalized + (q < 0 ? '' : noFragment.slice(q));
}

/** Why the proxy must refuse the request before the decider (undefined: nothing requires it). */
function mustRefuse(c: H2Case): string | undefined {
  if (c.method === 'CONNECT') return 'CONNECT';
  if (c.lines.some(([, v]) => !validValue(v))) return 'a field value RFC 9113 8.2.1 calls malformed (a control byte, whitespace at an end)';
  if (c.authority !== undefined && c.host !== undefined && c.authority !== c.host) return ':authority and host differ';
  const a = c.authority ?? c.host;
  if (a === undefined || a === '' || !AUTHORITY.test(a)) return `authority ${JSON.stringify(a)}`;
  if (c.lines.some(([n, v]) => (n === 'content_length' || n === 'transfer_encoding') && validValue(v))) return 'an underscore spelling of a framing header';
  if (c.path === '*' && c.method !== 'OPTIONS') return '* without OPTIONS';
  if (expectedUrl(c) === undefined) return 'a path that cannot be normalized';
  const singles = c.lines.filter(([n, v]) => SINGLE_VALUE_FIELDS.has(n) && validValue(v)).map(([n]) => n);
  if (new Set(singles).size !== singles.length) return 'a single-value field repeated';
  return undefined;
}

/** Shapes where the test states no expectation of served-or-refused (only: if forwarded, exactly as judged). */
function undecided(c: H2Case): string | undefined {
  if (c.method !== c.method.toUpperCase()) return 'a lower-case method';
  if (/[^\x21-\x7e]/.test(c.path)) return 'a path with bytes outside visible ASCII';
  if (c.cancel) return 'the client resets its stream';
  const cl = c.lines.find(([n]) => n === 'content-length')?.[1];
  if (cl !== undefined && Number(cl) !== (c.body?.length ?? 0)) return 'a content-length the body contradicts';
  return undefined;
}

/** The decider's lines with its edits applied, as documented (ForwardTarget, request-headers.ts editedLines). */
function applyEdits(view: readonly string[], plan: Extract<Plan, { kind: 'forward' }>): string[] {
  const remove = plan.removeHeaders ?? [];
  const set = plan.setHeaders ?? [];
  if (remove.length === 0 && set.length === 0) return [...view];
  const out: string[] = [];
  for (let i = 0; i < view.length; i += 2) {
    const l = cgi(view[i]!);
    if (l !== 'host' && remove.includes(l)) continue;
    if (set.some(([n]) => n.toLowerCase() === l)) continue;
    out.push(view[i]!, view[i + 1]!);
  }
  for (const [n, v] of set) {
    const l = n.toLowerCase();
    if (PROXY_OWNED.has(l)) continue;
    if (l === 'host') out.unshift('host', utf8Latin1(v));
    else out.push(l, utf8Latin1(v));
  }
  return out;
}

function byName(lines: Iterable<readonly [string, string]>): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const [n, v] of lines) {
    const l = n.toLowerCase();
    m.set(l, [...(m.get(l) ?? []), v]);
  }
  return m;
}

const pairs = (flat: readonly string[]): [string, string][] => {
  const out: [string, string][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
};
const show = (x: unknown): string => JSON.stringify(x);

/** The upstream's copy against the decider's judgement and edits. */
function compareForwarded(c: H2Case, j: Judged, plan: Extract<Plan, { kind: 'forward' }>, r: Received, fail: (kind: string, detail: string) => void): void {
  if (r.via !== plan.upstream) fail('upstream', `sent to the ${r.via} upstream, the decider chose ${plan.upstream}`);
  const edited = applyEdits(j.lines, plan);
  const authority = edited[1]!;
  if (r.method !== j.method) fail('method', `the decider judged method ${show(j.method)}, the ${r.via} upstream received ${show(r.method)}`);
  const path = plan.path ?? j.url;
  if (r.path !== path) fail('path', `the decider judged ${show(j.url)}${plan.path ? ` and rewrote it to ${show(plan.path)}` : ''}, the upstream received ${show(r.path)}`);
  const got = byName(r.lines);
  const want = byName(pairs(edited.slice(2)));
  // What reached the proxy of the client's framing lines (nghttp2 drops a value with edge whitespace).
  const clientCl = c.lines.find(([n, v]) => n === 'content-length' && validValue(v))?.[1];
  const clientTe = c.lines.some(([n, v]) => n === 'te' && v === 'trailers');
  if (r.via === 'h2') {
    if (r.authority !== authority) fail('authority', `:authority ${show(r.authority)}, the decider judged ${show(authority)}`);
    if (r.scheme !== 'http') fail('scheme', `:scheme ${show(r.scheme)}`);
    if (got.has('host')) fail('authority', `a host line beside :authority: ${show(got.get('host'))}`);
    // Proxy-owned, h2: te: trailers exactly when the client sent it; content-length exactly the client's.
    const te = got.get('te');
    if (clientTe ? show(te) !== show(['trailers']) : te !== undefined) fail('te', `te ${show(te)}, the client ${clientTe ? 'sent' : 'did not send'} te: trailers`);
    const cl = got.get('content-length');
    if (clientCl !== undefined ? show(cl) !== show([clientCl]) : cl !== undefined) fail('content-length', `content-length ${show(cl)}, the client sent ${show(clientCl)}`);
    got.delete('te');
    got.delete('content-length');
  } else {
    const hosts = got.get('host') ?? [];
    if (hosts.length !== 1 || hosts[0] !== authority) fail('authority', `Host ${show(hosts)}, the decider judged ${show(authority)}`);
    // The strict reader's own normalization (BASE) is not the handler's mode: the mode decides what is judged and sent.
    const problems = r.problems.filter((p) => !/cannot be normalized/.test(p));
    if (problems.length > 0) fail('refusable-forwarded', `a strict HTTP/1.1 server refuses what the proxy sent: ${problems.join('; ')}`);
    // Proxy-owned, h1: the framing node:http writes, its keep-alive; cookie crumbs joined (RFC 9113 8.2.3).
    const conn = got.get('connection');
    if (conn !== undefined && show(conn) !== show(['keep-alive'])) fail('connection', `connection ${show(conn)}`);
    const cl = got.get('content-length');
    const te = got.get('transfer-encoding');
    if (cl !== undefined && (cl.length !== 1 || cl[0] !== String(r.body.length) || (clientCl !== undefined && cl[0] !== clientCl))) {
      fail('content-length', `content-length ${show(cl)} for a body of ${r.body.length}, the client sent ${show(clientCl)}`);
    }
    if (te !== undefined && (show(te) !== show(['chunked']) || clientCl !== undefined)) fail('transfer-encoding', `transfer-encoding ${show(te)}, the client's content-length ${show(clientCl)}`);
    if (clientCl !== undefined && cl === undefined) fail('content-length', `the client sent content-length ${clientCl}, the upstream got none`);
    for (const n of ['host', 'connection', 'content-length', 'transfer-encoding']) got.delete(n);
    const cookies = want.get('cookie');
    if (cookies && cookies.length > 1) want.set('cookie', [cookies.join('; ')]);
    // An HTTP/1.1 field value does not hold the whitespace around it (OWS): the strict reader trims it.
    for (const [n, vs] of want) want.set(n, vs.map((v) => v.replace(/^[ \t]+|[ \t]+$/g, '')));
  }
  want.delete('host');
  for (const [n, vs] of want) {
    const g = got.get(n);
    if (show(g) !== show(vs)) fail('header', `${n}: the decider judged (with its edits) ${show(vs)}, the upstream received ${show(g)}`);
    got.delete(n);
  }
  for (const [n, vs] of got) fail('header', `${n}: ${show(vs)} reached the upstream; the decider never judged it`);
  if (r.complete && !r.body.equals(c.body ?? Buffer.alloc(0))) {
    fail('body', `the upstream received a body of ${r.body.length} bytes ${show(r.body.toString('latin1').slice(0, 120))}, the client sent ${c.body?.length ?? 0}`);
  }
}

function judge(c: H2Case, o: Outcome): Finding[] {
  const findings: Finding[] = [];
  const fail = (kind: string, detail: string): void => { findings.push({ caseId: c.id, kind, detail }); };
  const js = judged.get(c.id) ?? [];
  const rs = received.get(c.id) ?? [];
  const j = js[0];
  const r = rs[0];
  if (js.length > 1) fail('judged-twice', `the decider saw it ${js.length} times`);
  if (rs.length > 1) fail('twice', `the upstream received it ${rs.length} times`);
  if (o.clientRefused) {
    if (j || r) fail('client-refused', `${c.client} refused to send it (${o.error}), yet the proxy got it`);
    return findings;
  }
  if (o.timedOut) fail('hang', `no end of the stream within ${CASE_TIMEOUT_MS} ms (status ${o.status ?? '-'})`);
  const refuse = mustRefuse(c);
  const open = undecided(c);
  // The third reading: the decider's view against what the client sent.
  if (j) {
    if (refuse) fail('judged-refusable', `must be refused before the decider (${refuse}), yet it was judged as ${j.method} ${j.url}`);
    if (j.method !== c.method) fail('view-method', `the client sent ${show(c.method)}, the decider saw ${show(j.method)}`);
    const url = expectedUrl(c);
    if (url !== undefined && j.url !== url) fail('view-url', `the client sent ${show(c.path)} (${c.mode}), the decider saw ${show(j.url)}, expected ${show(url)}`);
    const view = expectedView(c);
    if (show(j.lines) !== show(view)) fail('view-headers', `the decider saw ${show(j.lines)}, expected ${show(view)}`);
  }
  const seqAtClient = o.headers?.['x-upstream-seq'];
  if (o.headers && (o.headers['x-hop'] !== undefined || o.headers['keep-alive'] !== undefined)) {
    fail('response-headers', `the client got a line its upstream's Connection named, or keep-alive: ${show(o.headers)}`);
  }
  if (r) {
    if (!j) fail('not-judged', `the ${r.via} upstream received ${r.method} ${r.path}, which the decider never judged`);
    else if (c.plan.kind !== 'forward') fail('forwarded-after-reply', `the decider answered ${c.plan.kind}, yet the ${r.via} upstream received it`);
    else compareForwarded(c, j, c.plan, r, fail);
    if (r.complete && !c.cancel && seqAtClient !== String(r.seq)) {
      fail('lost-response', `the upstream received it whole (a body of ${r.body.length} bytes, the client sent ${c.body?.length ?? 0}) and answered seq ${r.seq}; `
        + `the client got status ${o.status ?? '-'}, seq ${show(seqAtClient)}, error ${show(o.error)}`);
    }
    if (r.complete && c.cancel) fail('cut-body-forwarded', 'the client reset the stream mid-body; the upstream received a complete request');
  } else {
    if (seqAtClient !== undefined) fail('unknown-response', `the client got upstream seq ${show(seqAtClient)}, the upstream recorded no request of this case`);
    const grpc = o.headers?.['grpc-status'];
    if (o.status !== undefined && o.status < 400 && !(o.status === 200 && grpc !== undefined && grpc !== '0')) {
      fail('proxy-success', `the proxy answered ${o.status} (grpc-status ${show(grpc)}) itself`);
    }
    if (o.status === undefined && o.error === undefined) fail('no-answer', 'neither an answer nor an error');
    if (!refuse && !open && c.plan.kind === 'forward') {
      fail('refused-unexpectedly', `nothing requires a refusal, the decider ${j ? 'forwarded it' : 'never saw it'}; the client got ${o.status ?? '-'} ${o.error ?? ''}`);
    }
    if (j && !refuse && c.plan.kind === 'reply' && o.status !== undefined && grpc === undefined && o.status !== c.plan.status) {
      fail('reply-status', `the decider answered ${c.plan.status}, the client got ${o.status}`);
    }
  }
  return findings;
}

// ---- the run

async function pool<T>(items: readonly T[], n: number, run: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) await run(items[next++]!);
  }));
}

/**
 * Named shapes, run on every seed: where the HTTP/1.1 leg could read a request otherwise than the
 * decider judged it (a body on a method node:http frames by no length, a method's case, CONNECT in
 * lower case, a path byte outside visible ASCII, a stream reset mid-body, an empty body already ended
 * when the decision comes), and the same shapes to
 * the HTTP/2 upstream as controls.
 */
function namedCases(): H2Case[] {
  const base = (id: string, upstream: 'h2' | 'h1', o: Partial<H2Case>): H2Case => ({
    id, variants: ['named'], client: 'node', mode: 'BASE', method: 'GET', path: '/public', authority: 'app.svc', host: undefined,
    lines: [['x-case', id]], body: undefined, cancel: false, plan: { kind: 'forward', upstream, async: false }, ...o,
  });
  const smuggling = (id: string): Buffer => Buffer.from(`GET /smuggled HTTP/1.1\r\nHost: x\r\nx-case: smuggled-${id}\r\n\r\n`, 'latin1');
  const out: H2Case[] = [];
  for (const up of ['h1', 'h2'] as const) {
    out.push(
      // An HTTP/2 GET may carry a body (DATA frames) without content-length: framed by the stream's end.
      base(`n_get_body_${up}`, up, { body: smuggling(`n_get_body_${up}`) }),
      base(`n_delete_body_${up}`, up, { method: 'DELETE', body: smuggling(`n_delete_body_${up}`) }),
      // Methods are case-sensitive (RFC 9110 9.1): `get` is not GET to a policy matching GET.
      base(`n_lower_method_${up}`, up, { method: 'get', path: '/admin' }),
      // Not CONNECT (case-sensitive), so not refused as CONNECT; it must not become one upstream.
      base(`n_lower_connect_${up}`, up, { method: 'connect', path: '/x' }),
      // nghttp2 takes a :path byte above 0x7e; the HTTP/1.1 path refuses such a request line.
      base(`n_nonascii_path_${up}`, up, { path: '/caf\u00e9' }),
      // END_STREAM on an empty DATA frame, judged asynchronously: the body has ended before it is relayed.
      base(`n_empty_body_async_${up}`, up, { method: 'DELETE', body: Buffer.alloc(0), plan: { kind: 'forward', upstream: up, async: true } }),
      // The client resets its stream half-way through a body of a stated length.
      base(`n_reset_mid_body_${up}`, up, { method: 'POST', lines: [['x-case', `n_reset_mid_body_${up}`], ['content-length', '100']], body: Buffer.alloc(100, 0x61), cancel: 'internal-error' }),
      // The same with RST_STREAM NO_ERROR and no length: node ends the stream's readable side as for END_STREAM.
      base(`n_reset_no_error_mid_body_${up}`, up, { method: 'POST', body: Buffer.alloc(100, 0x61), cancel: 'no-error' }),
    );
  }
  return out;
}

const cases = [...namedCases(), ...Array.from({ length: TOTAL }, (_, i) => generate(i, i % 20 === 7))].filter((c) => ONLY === undefined || ONLY.has(c.id));

describe(`differential HTTP/2: the upstream sees exactly what the decider judged (seed ${SEED})`, () => {
  const proxies = new Map<PathNormalization, ProxyUnderTest>();
  const servers: { close(): unknown }[] = [];
  const outcomes = new Map<string, Outcome>();
  let h2Server: Http2Server;
  let h1Server: Server;
  let leftOpen: string[] = [];
  let ms = 0;

  before(async () => {
    if (!env['DIFFERENTIAL_H2_VERBOSE']) setScopeLevel('default', 'fatal'); // the planned throws log an error each
    h2Server = await startH2Upstream();
    h1Server = await startH1Upstream();
    upstreams.h2Port = (h2Server.address() as AddressInfo).port;
    upstreams.h1Port = (h1Server.address() as AddressInfo).port;
    for (const mode of MODES) proxies.set(mode, await startProxy(mode));
    for (const c of cases) plans.set(c.id, c.plan);
    const started = Date.now();
    await pool(cases, CONCURRENCY, async (c) => {
      const port = proxies.get(c.mode)!.port;
      const send = c.client === 'curl' && !curlMissing ? sendCurl : sendNode;
      outcomes.set(c.id, await send(c, port));
    });
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    ms = Date.now() - started;
    // Requests still half-sent upstream: a client's reset that did not reach the upstream leg.
    leftOpen = [
      ...[...h1Sockets.values()].filter((s) => s.pending.length > 0).map((s) => /x-case: ?([^\r\n]*)/i.exec(s.pending.toString('latin1'))?.[1] ?? '?'),
      ...h2Streams.values(),
    ];
  });

  after(async () => {
    for (const s of sessions.values()) s.destroy();
    for (const p of proxies.values()) {
      p.handler.closeIdle();
      p.handler.pool.closeAll();
      p.server.close();
      for (const s of p.sockets) s.destroy();
    }
    for (const s of h1Sockets.keys()) s.destroy();
    for (const s of h2Streams.keys()) s.close(constants.NGHTTP2_CANCEL);
    servers.push(h1Server, h2Server);
    for (const s of servers) s.close();
    setScopeLevel('default', 'info');
  });

  it('the corpus draws every shape: refused, forwarded to both upstreams, answered by the decider, curl', { skip: ONLY !== undefined || TOTAL < 200 ? 'a small or filtered corpus' : false }, () => {
    assert.ok(cases.some((c) => mustRefuse(c) !== undefined));
    assert.ok(cases.some((c) => c.plan.kind === 'forward' && c.plan.upstream === 'h1'));
    assert.ok(cases.some((c) => c.plan.kind === 'forward' && c.plan.upstream === 'h2'));
    assert.ok(cases.some((c) => c.plan.kind === 'reply'));
    assert.ok(cases.some((c) => c.client === 'curl'));
    assert.ok(cases.some((c) => c.variants.some((v) => v.startsWith('mutated'))));
  });

  it(`${cases.length} cases (seed ${SEED})`, (t) => {
    const findings: Finding[] = [];
    for (const c of cases) findings.push(...judge(c, outcomes.get(c.id)!));
    const ids = new Set(cases.map((c) => c.id));
    findings.push(...upstreamFindings.filter((f) => ids.has(f.caseId) || f.caseId === '?'));
    for (const id of received.keys()) {
      if (ids.has(id)) continue;
      const what = show(received.get(id)!.map((r) => `${r.method} ${r.path} (over ${r.via})`));
      // A request hidden in a case's body reached the upstream as a request of its own: never judged.
      if (id.startsWith('smuggled-')) findings.push({ caseId: id.slice('smuggled-'.length), kind: 'smuggled', detail: `the upstream received ${what}, a request inside this case's body` });
      else findings.push({ caseId: id, kind: 'unattributed', detail: `the upstream received ${what}, which no case sent` });
    }
    for (const id of leftOpen) findings.push({ caseId: id, kind: 'upstream-left-open', detail: `${SETTLE_MS} ms after the last case, an upstream request of this case is still half-sent (its client's stream is gone)` });

    const forwarded = cases.filter((c) => (received.get(c.id) ?? []).some((r) => r.complete)).length;
    const h1 = cases.filter((c) => (received.get(c.id) ?? []).some((r) => r.via === 'h1')).length;
    const byJudge = cases.filter((c) => judged.has(c.id)).length;
    const curl = cases.filter((c) => c.client === 'curl');
    const curlForwarded = curl.filter((c) => (received.get(c.id) ?? []).some((r) => r.complete)).length;
    t.diagnostic(`${cases.length} cases in ${ms} ms: ${byJudge} judged, ${forwarded} reached an upstream whole (${h1} over HTTP/1.1), `
      + `${cases.length - byJudge} refused before the decider; ${curl.length} sent by curl (${curlForwarded} forwarded); `
      + `${probes} HTTP/2 probe(s) of the HTTP/1.1 upstream (one per handler's pool)`);
    if (FINDINGS_FILE) {
      const byId = new Map(cases.map((c) => [c.id, c]));
      appendFileSync(FINDINGS_FILE, findings.map((f) => `${JSON.stringify({ seed: SEED, ...f, case: byId.get(f.caseId), outcome: outcomes.get(f.caseId), received: received.get(f.caseId) })}\n`).join(''));
    }
    if (findings.length > 0) {
      const kinds = new Map<string, number>();
      for (const f of findings) kinds.set(f.kind, (kinds.get(f.kind) ?? 0) + 1);
      const bad = [...new Set(findings.map((f) => f.caseId))];
      const byId = new Map(cases.map((c) => [c.id, c]));
      const lines = [
        `${findings.length} findings in ${bad.length} cases (seed ${SEED}); by kind: ${[...kinds].map(([k, n]) => `${k} ${n}`).join(', ')}`,
        `replay: ${replay(bad.filter((id) => byId.has(id)).slice(0, 20))}`,
      ];
      // The first few of each kind.
      for (const kind of kinds.keys()) {
        for (const f of findings.filter((x) => x.kind === kind).slice(0, 3)) {
          const c = byId.get(f.caseId);
          lines.push('', `${f.caseId} [${f.kind}] ${f.detail}`);
          if (c) {
            lines.push(`  ${c.client} ${c.mode} ${show(c.method)} ${show(c.path)} :authority ${show(c.authority)} host ${show(c.host)} `
              + `lines ${show(c.lines)}${c.body ? ` body ${c.body.length}` : ''}; plan ${show(c.plan)}; variants: ${c.variants.join(', ') || 'plain'}`);
            const o = outcomes.get(c.id);
            lines.push(`  outcome: ${o?.status ?? '-'} ${o?.error ?? ''} seq ${show(o?.headers?.['x-upstream-seq'])}`);
          }
        }
      }
      assert.fail(lines.join('\n'));
    }
  });
});
