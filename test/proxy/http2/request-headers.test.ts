// src/proxy/http2/request-headers.ts, pure: an HTTP/2 header block (name, value... as node:http2's
// `rawHeaders` hands it over, pseudo-headers first) → the request the decider judges, and the header
// blocks sent upstream (HTTP/2 and HTTP/1.1); the response's header block back to the client.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PathNormalization } from '../../../src/config/mesh-config.js';
import type { UpstreamEdits } from '../../../src/proxy/http1/message.js';
import {
  downstreamHttp2ResponseFields, downstreamResponseFields, editedLines, http2Request, isHttp2RequestError, upstreamHttp1Headers, upstreamHttp2Fields,
  type Http2Request,
} from '../../../src/proxy/http2/request-headers.js';

/** A header block: the usual pseudo-headers (overridable, `undefined` leaves one out), then `regular`. */
function block(pseudo: Record<string, string | undefined> = {}, regular: string[] = []): string[] {
  const p: Record<string, string | undefined> = { ':method': 'GET', ':scheme': 'http', ':authority': 'app:8080', ':path': '/', ...pseudo };
  const out: string[] = [];
  for (const [n, v] of Object.entries(p)) if (v !== undefined) out.push(n, v);
  return [...out, ...regular];
}

function request(raw: string[], normalization: PathNormalization = 'BASE'): Http2Request {
  const r = http2Request(raw, normalization);
  if (isHttp2RequestError(r)) throw new Error(`refused: ${r.status} ${r.reason}`);
  return r;
}

/** The status a block is refused with, or undefined when it is accepted. */
function refused(raw: string[], normalization: PathNormalization = 'BASE'): number | undefined {
  const r = http2Request(raw, normalization);
  return isHttp2RequestError(r) ? r.status : undefined;
}

/** A null-prototype header object (what the module builds) as a plain one, for deepEqual. */
const plain = (h: object): Record<string, unknown> => ({ ...h });

describe('http2Request: the authority', () => {
  it(':authority alone: host first in the view, carrying it', () => {
    const r = request(block({}, ['x-a', '1']));
    assert.equal(r.authority, 'app:8080');
    assert.deepEqual(r.headers, ['host', 'app:8080', 'x-a', '1']);
  });

  it(':authority and host that agree: one host line in the view', () => {
    const r = request(block({}, ['x-a', '1', 'host', 'app:8080', 'x-b', '2']));
    assert.equal(r.authority, 'app:8080');
    assert.deepEqual(r.headers, ['host', 'app:8080', 'x-a', '1', 'x-b', '2']);
  });

  it(':authority and host that differ: 400 (either could be what the application routes by)', () => {
    assert.equal(refused(block({}, ['host', 'admin:8080'])), 400);
    assert.equal(refused(block({}, ['host', 'APP:8080'])), 400, 'compared exactly');
    assert.equal(refused(block({ ':authority': '' }, ['host', 'app'])), 400, 'an empty :authority beside a host');
  });

  it('host alone stands for the authority', () => {
    const r = request(block({ ':authority': undefined }, ['host', 'h.example', 'x-a', '1']));
    assert.equal(r.authority, 'h.example');
    assert.deepEqual(r.headers, ['host', 'h.example', 'x-a', '1']);
  });

  it('neither, or an empty or invalid one: 400', () => {
    assert.equal(refused(block({ ':authority': undefined })), 400, 'none');
    assert.equal(refused(block({ ':authority': '' })), 400, 'empty');
    assert.equal(refused(block({ ':authority': undefined }, ['host', ''])), 400, 'empty host');
    for (const bad of ['a b', 'a/b', 'u@a', 'a"b', 'a?b', '[::1']) assert.equal(refused(block({ ':authority': bad })), 400, bad);
    for (const good of ['a', 'a.b:8080', '[::1]:80', '10.0.0.1']) assert.equal(refused(block({ ':authority': good })), undefined, good);
  });

  it('host repeated: 400', () => {
    assert.equal(refused(block({ ':authority': undefined }, ['host', 'a', 'host', 'a'])), 400);
  });
});

describe('http2Request: the path', () => {
  it('is normalized once, per mode; the query kept, a fragment cut', () => {
    const cases: [string, PathNormalization, string][] = [
      ['/public/../admin?x=%2e', 'BASE', '/admin?x=%2e'],
      ['/a/./b/%2e%2e/c', 'BASE', '/a/c'],
      ['/%61dmin', 'BASE', '/admin'],
      ['/a\\b', 'BASE', '/a/b'],
      ['/a//b', 'BASE', '/a//b'],
      ['/a//b', 'MERGE_SLASHES', '/a/b'],
      ['/a%2Fb//c', 'MERGE_SLASHES', '/a%2Fb/c'],
      ['/a%2fb//c', 'DECODE_AND_MERGE_SLASHES', '/a/b/c'],
      ['/a%5c..%2fadmin', 'DECODE_AND_MERGE_SLASHES', '/admin'],
      ['/public/../admin', 'NONE', '/public/../admin'],
      ['/a?b#frag', 'BASE', '/a?b'],
    ];
    for (const [path, mode, url] of cases) assert.equal(request(block({ ':path': path }), mode).url, url, `${mode} ${path}`);
  });

  it('a path that cannot be normalized, or is not origin-form: 400', () => {
    for (const p of ['/a%00b', '/%zz', '/public/..;/admin', 'admin', 'http://g/admin', '']) assert.equal(refused(block({ ':path': p })), 400, JSON.stringify(p));
    assert.equal(refused(block({ ':path': '/a%00' }), 'NONE'), 400, '%00 even with NONE');
    assert.equal(refused(block({ ':path': undefined })), 400, 'no :path');
  });

  it('`*` only with OPTIONS', () => {
    assert.equal(request(block({ ':method': 'OPTIONS', ':path': '*' })).url, '*');
    for (const m of ['GET', 'POST', 'HEAD']) assert.equal(refused(block({ ':method': m, ':path': '*' })), 400, m);
  });
});

describe('http2Request: what is refused before the decider', () => {
  it('CONNECT, plain or extended, and any :protocol: 501', () => {
    assert.equal(refused(block({ ':method': 'CONNECT', ':path': undefined, ':scheme': undefined, ':authority': 'g:443' })), 501);
    assert.equal(refused(block({ ':method': 'CONNECT', ':protocol': 'websocket' })), 501);
    assert.equal(refused(block({ ':protocol': 'websocket' })), 501, ':protocol on another method');
  });

  it('no :method, or an unknown pseudo-header: 400', () => {
    assert.equal(refused(block({ ':method': undefined })), 400);
    assert.equal(refused(block({ ':status': '200' })), 400);
  });

  it('a method with lower-case letters: 400 (an HTTP/1.1 leg would upper-case it after the judgement); CONNECT in any case never passes', () => {
    for (const m of ['get', 'Get', 'gET', 'connect', 'pOST']) assert.equal(refused(block({ ':method': m })), 400, m);
    assert.equal(refused(block({ ':method': 'PURGE' })), undefined);
  });

  it('a :path byte outside visible ASCII: 400, as the HTTP/1 parser refuses it', () => {
    for (const p of ['/café', '/a b', '/\x7f', '/x\x80']) assert.equal(refused(block({ ':path': p })), 400, JSON.stringify(p));
    assert.equal(refused(block({ ':path': '/caf%C3%A9?q=%20' })), undefined, 'percent-encoded bytes pass');
  });

  it('a single-value field repeated (authorization, content-type, user-agent...): 400; list fields may repeat', () => {
    for (const n of ['authorization', 'content-type', 'user-agent', 'host']) assert.equal(refused(block({}, [n, 'a', n, 'b'])), 400, n);
    assert.equal(refused(block({}, ['accept', 'a', 'accept', 'b', 'cookie', 'x=1', 'cookie', 'y=2'])), undefined);
  });

  it('more header lines than the limit: 431, as on the HTTP/1 path (the pseudo-headers not counted)', () => {
    const lines = (n: number): string[] => Array.from({ length: n }, (_, i) => [`x-h${i}`, 'v']).flat();
    const at = (n: number): number | undefined => {
      const r = http2Request(block({}, lines(n)), 'BASE', 100);
      return isHttp2RequestError(r) ? r.status : undefined;
    };
    assert.equal(at(100), undefined);
    assert.equal(at(101), 431);
    assert.equal(refused(block({}, lines(101))), undefined, 'no limit given: none');
  });

  it('an underscore spelling of a framing header: 400', () => {
    for (const n of ['content_length', 'Content_Length', 'transfer_encoding', 'TRANSFER_ENCODING']) {
      assert.equal(refused(block({}, ['x-a', '1', n, '5'])), 400, n);
    }
    assert.equal(refused(block({}, ['x_forwarded_for', '1.2.3.4', 'content_type', 'x'])), undefined, 'other underscore names pass');
  });
});

describe('http2Request: the decider\'s view', () => {
  it('hop-by-hop and proxy-owned lines are not in it; the others are, in order, duplicates and cookie crumbs kept', () => {
    const r = request(block({}, [
      'x-a', '1', 'te', 'trailers', 'content-length', '3', 'connection', 'close', 'keep-alive', 'x', 'proxy-connection', 'x',
      'transfer-encoding', 'chunked', 'upgrade', 'h2c', 'trailer', 'x-t', 'expect', '100-continue',
      'cookie', 'a=1', 'x-a', '2', 'cookie', 'b=2', 'x_forwarded_for', '9.9.9.9', 'content-type', 'text/plain',
    ]));
    assert.deepEqual(r.headers, ['host', 'app:8080', 'x-a', '1', 'cookie', 'a=1', 'x-a', '2', 'cookie', 'b=2', 'x_forwarded_for', '9.9.9.9', 'content-type', 'text/plain']);
  });

  it('method, scheme and gRPC are read', () => {
    const r = request(block({ ':method': 'BREW', ':scheme': 'https' }, ['content-type', 'application/grpc+proto']));
    assert.equal(r.method, 'BREW');
    assert.equal(r.scheme, 'https');
    assert.equal(r.grpc, true);
    assert.equal(request(block()).grpc, false);
  });

  it('te: trailers and content-length are noted (not in the view)', () => {
    const r = request(block({}, ['te', 'trailers', 'content-length', '5']));
    assert.equal(r.teTrailers, true);
    assert.equal(r.contentLength, '5');
    assert.equal(request(block({}, ['te', ' Trailers '])).teTrailers, true);
    const none = request(block());
    assert.equal(none.teTrailers, false);
    assert.equal(none.contentLength, undefined);
  });
});

describe('upstream header blocks', () => {
  it('HTTP/2: pseudo-headers from the request (:authority = the view\'s host), the lines, te: trailers kept, content-length carried', () => {
    const r = request(block({ ':method': 'POST' }, ['x-a', '1', 'x-a', '2', 'te', 'trailers', 'content-length', '5', 'cookie', 'a=1', 'cookie', 'b=2']));
    const f = upstreamHttp2Fields(r, editedLines(r, undefined), r.url, 'http');
    assert.deepEqual(f, [
      ':method', 'POST', ':scheme', 'http', ':authority', 'app:8080', ':path', '/',
      'x-a', '1', 'x-a', '2', 'cookie', 'a=1', 'cookie', 'b=2', 'te', 'trailers', 'content-length', '5',
    ], 'in order, no host line beside :authority');
  });

  it('HTTP/2: no te without te: trailers; the path and scheme given win', () => {
    const r = request(block({}, ['x-a', '1']));
    const f = upstreamHttp2Fields(r, editedLines(r, undefined), '/rewritten?q', 'https');
    assert.deepEqual(f, [':method', 'GET', ':scheme', 'https', ':authority', 'app:8080', ':path', '/rewritten?q', 'x-a', '1']);
  });

  it('HTTP/1.1: host first, the lines, content-length carried, never te', () => {
    const r = request(block({ ':method': 'PUT' }, ['x-a', '1', 'te', 'trailers', 'content-length', '5']));
    const h = upstreamHttp1Headers(r, editedLines(r, undefined), true);
    assert.deepEqual(Object.keys(h), ['host', 'x-a', 'content-length']);
    assert.deepEqual(plain(h), { host: 'app:8080', 'x-a': '1', 'content-length': '5' });
  });

  it('HTTP/1.1: a body without content-length is chunked, whatever the method (node:http would send a GET\'s raw)', () => {
    for (const method of ['GET', 'DELETE', 'OPTIONS', 'POST']) {
      const r = request(block({ ':method': method }, ['x-a', '1']));
      assert.equal(upstreamHttp1Headers(r, editedLines(r, undefined), true)['transfer-encoding'], 'chunked', method);
      assert.equal(upstreamHttp1Headers(r, editedLines(r, undefined), false)['transfer-encoding'], undefined, method);
    }
  });

  it('`__proto__` is an ordinary header name', () => {
    const r = request(block({}, ['__proto__', 'x', '__proto__', 'y']));
    const h = upstreamHttp1Headers(r, editedLines(r, undefined), true);
    assert.deepEqual(Object.getOwnPropertyDescriptor(h, '__proto__')?.value, ['x', 'y']);
  });
});

describe('editedLines: the decider\'s edits', () => {
  const r = request(block({}, ['x-a', '1', 'X_A', 'u', 'x-b', '2', 'x_b', 'v', 'authorization', 'Bearer t', 'x-c', '3']));
  const edit = (e: UpstreamEdits): string[] => editedLines(r, e);

  it('none: the view itself', () => {
    assert.equal(editedLines(r, undefined), r.headers);
    assert.equal(editedLines(r, { removeHeaders: [], setHeaders: [] }), r.headers);
  });

  it('removeHeaders: the name and its underscore spelling', () => {
    assert.deepEqual(edit({ removeHeaders: ['x-a', 'authorization'] }), ['host', 'app:8080', 'x-b', '2', 'x_b', 'v', 'x-c', '3']);
  });

  it('setHeaders: replaces the name and its underscore spelling, appended (lower-case)', () => {
    assert.deepEqual(edit({ setHeaders: [['X-B', 'new'], ['x-new', 'n']] }),
      ['host', 'app:8080', 'x-a', '1', 'X_A', 'u', 'authorization', 'Bearer t', 'x-c', '3', 'x-b', 'new', 'x-new', 'n']);
  });

  it('addHeaders: appended (lower-case), the client\'s lines of that name kept; never host', () => {
    assert.deepEqual(edit({ addHeaders: [['X-A', 'route'], ['host', 'nope']] }),
      ['host', 'app:8080', 'x-a', '1', 'X_A', 'u', 'x-b', '2', 'x_b', 'v', 'authorization', 'Bearer t', 'x-c', '3', 'x-a', 'route']);
  });

  it('setHeaders host: replaces the authority (first), which becomes :authority upstream', () => {
    const lines = edit({ setHeaders: [['Host', 'other.svc:9090']] });
    assert.deepEqual(lines.slice(0, 2), ['host', 'other.svc:9090']);
    assert.equal(lines.filter((x, i) => i % 2 === 0 && x === 'host').length, 1);
    assert.deepEqual(upstreamHttp2Fields(r, lines, r.url, 'http').slice(4, 6), [':authority', 'other.svc:9090']);
    assert.equal(upstreamHttp1Headers(r, lines, false).host, 'other.svc:9090');
  });

  it('removeHeaders host: the authority stays (HTTP/2 needs one)', () => {
    assert.deepEqual(edit({ removeHeaders: ['host'] }).slice(0, 2), ['host', 'app:8080']);
  });

  it('proxy-owned names are never edited', () => {
    const withFraming = request(block({}, ['te', 'trailers', 'content-length', '4', 'x-a', '1']));
    const lines = editedLines(withFraming, {
      setHeaders: [['content-length', '99'], ['te', 'gzip'], ['connection', 'close'], ['transfer-encoding', 'chunked'], ['expect', '100-continue'], ['x-a', '2']],
      removeHeaders: ['te', 'content-length'],
    });
    assert.deepEqual(lines, ['host', 'app:8080', 'x-a', '2']);
    assert.deepEqual(upstreamHttp2Fields(withFraming, lines, withFraming.url, 'http').slice(8), ['x-a', '2', 'te', 'trailers', 'content-length', '4']);
    // A te or content-length line an edit might have let through is stated once, as the client sent it.
    const through = upstreamHttp2Fields(withFraming, ['host', 'app:8080', 'te', 'gzip', 'content-length', '99'], withFraming.url, 'http');
    assert.deepEqual(through.slice(8), ['te', 'trailers', 'content-length', '4']);
    const h1 = upstreamHttp1Headers(withFraming, lines, true);
    assert.equal(h1['content-length'], '4');
    assert.equal(h1.te, undefined);
    assert.equal(h1.connection, undefined);
    assert.equal(h1['transfer-encoding'], undefined);
  });

  it('a UTF-8 value goes out as the latin1 string of its UTF-8 bytes; ASCII unchanged', () => {
    const lines = edit({ setHeaders: [['x-name', 'café ✓'], ['x-ascii', 'plain']] });
    const v = lines[lines.indexOf('x-name') + 1]!;
    assert.equal(v, 'caf\u00c3\u00a9 \u00e2\u009c\u0093');
    assert.deepEqual(Buffer.from(v, 'latin1'), Buffer.from('café ✓', 'utf8'));
    assert.equal(lines[lines.indexOf('x-ascii') + 1], 'plain');
    const host = edit({ setHeaders: [['host', 'ü.example']] });
    assert.equal(host[1], Buffer.from('ü.example', 'utf8').toString('latin1'));
  });
});

describe('downstreamResponseFields', () => {
  it(':status and the regular lines, names in lower case; connection-specific ones out', () => {
    const f = downstreamResponseFields(200, [
      'Content-Type', 'text/plain', 'Connection', 'keep-alive', 'Keep-Alive', 'timeout=5', 'Transfer-Encoding', 'chunked',
      'Proxy-Connection', 'x', 'Upgrade', 'h2c', 'TE', 'trailers', 'Trailer', 'grpc-status', 'HTTP2-Settings', 'x', ':status', '500',
      'Set-Cookie', 'a=1', 'set-cookie', 'b=2', 'Content-Length', '12',
    ]);
    assert.deepEqual(f, [':status', '200', 'content-type', 'text/plain', 'set-cookie', 'a=1', 'set-cookie', 'b=2', 'content-length', '12']);
  });

  it('names an HTTP/1.1 response\'s Connection lists are removed too (any case, any spacing)', () => {
    const f = downstreamResponseFields(503, ['Connection', 'X-Hop ,  x-other', 'connection', 'close', 'x-hop', '1', 'X-Other', '2', 'x-kept', '3']);
    assert.deepEqual(f, [':status', '503', 'x-kept', '3']);
  });

  it('a field that takes one value keeps its first; `from` skips the lines before it', () => {
    const f = downstreamResponseFields(200, [':status', '200', 'content-type', 'a/b', 'Content-Type', 'c/d', 'x-a', '1', 'x-a', '2'], 2);
    assert.deepEqual(f, [':status', '200', 'content-type', 'a/b', 'x-a', '1', 'x-a', '2']);
  });
});

describe('downstreamHttp2ResponseFields (an HTTP/2 upstream\'s decoded list)', () => {
  it('nothing to take out: the list itself, not a copy', () => {
    const decoded = [':status', '200', 'content-type', 'text/html', 'x-a', '1', 'x-a', '2', 'date', 'd'];
    assert.equal(downstreamHttp2ResponseFields(decoded), decoded);
    assert.deepEqual(decoded, [':status', '200', 'content-type', 'text/html', 'x-a', '1', 'x-a', '2', 'date', 'd']);
  });

  it('te, trailer, http2-settings or a single-value field repeated: a new list without them, as downstreamResponseFields makes', () => {
    for (const extra of [['te', 'trailers'], ['trailer', 'grpc-status'], ['http2-settings', 'x'], ['content-type', 'c/d']]) {
      const decoded = [':status', '204', 'content-type', 'a/b', ...extra, 'x-a', '1'];
      const f = downstreamHttp2ResponseFields(decoded);
      assert.notEqual(f, decoded);
      assert.deepEqual(f, [':status', '204', 'content-type', 'a/b', 'x-a', '1'], extra[0]);
    }
  });
});
