import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PathNormalization } from '../../../src/config/mesh-config.js';
import { invalidEdit } from '../../../src/proxy/http1/headers.js';
import { isMessageError, requestMessage, upstreamHead, type RequestMessage } from '../../../src/proxy/http1/message.js';
import type { RequestHead } from '../../../src/proxy/http1/request-parser.js';

function head(method: string, target: string, raw: string[], o: Partial<RequestHead> = {}): RequestHead {
  return { method, target, minor: 1, rawHeaders: raw, framing: 'none', contentLength: 0, ...o };
}

function message(h: RequestHead, normalization: PathNormalization = 'BASE'): RequestMessage {
  const m = requestMessage(h, { normalization });
  if (isMessageError(m)) throw new Error(`refused: ${m.status} ${m.reason}`);
  return m;
}

function refused(h: RequestHead): number | undefined {
  const m = requestMessage(h, { normalization: 'BASE' });
  return isMessageError(m) ? m.status : undefined;
}

describe('requestMessage', () => {
  it('origin-form: the normalized path is what is judged and forwarded, the query kept, the fragment cut', () => {
    const m = message(head('GET', '/public/../admin?x=%2e#frag', ['Host', 'app']));
    assert.equal(m.url, '/admin?x=%2e');
    assert.equal(m.authority, 'app');
    assert.deepEqual(m.headers, ['Host', 'app']);
  });

  it('absolute-form: path and authority from the URI; its authority replaces Host', () => {
    const m = message(head('GET', 'http://g/admin/x?q', ['Host', 'other', 'X-A', '1']));
    assert.equal(m.url, '/admin/x?q');
    assert.equal(m.authority, 'g');
    assert.deepEqual(m.headers, ['Host', 'g', 'X-A', '1']);
    const noHost = message(head('GET', 'HTTPS://g:8443', []));
    assert.equal(noHost.url, '/');
    assert.deepEqual(noHost.headers, ['host', 'g:8443']);
  });

  it('Host: exactly one valid line on HTTP/1.1', () => {
    assert.equal(refused(head('GET', '/', [])), 400, 'none');
    assert.equal(refused(head('GET', '/', ['Host', 'a', 'host', 'b'])), 400, 'two');
    assert.equal(refused(head('GET', '/', ['Host', 'a', 'Host', 'a'])), 400, 'two equal ones');
    for (const bad of ['a b', 'a/b', 'u@a', 'a"b', 'a\\b', 'a?b', '[::1']) assert.equal(refused(head('GET', '/', ['Host', bad])), 400, bad);
    for (const good of ['a', 'a.b:8080', '[::1]:80', '10.0.0.1', 'A-b_c~.d']) assert.equal(refused(head('GET', '/', ['Host', good])), undefined, good);
    assert.equal(message(head('GET', '/', [], { minor: 0 })).authority, '', 'HTTP/1.0 may send none');
  });

  it('refuses targets that are not one of the four forms, or not for their method', () => {
    for (const t of ['admin', 'ftp://g/a', 'http://', 'http://u@g/a', 'http://:80/a', '*']) assert.equal(refused(head('GET', t, ['Host', 'h'])), 400, t);
    assert.equal(refused(head('OPTIONS', '*', ['Host', 'h'])), undefined);
    assert.equal(refused(head('CONNECT', 'g', ['Host', 'g'])), 400, 'CONNECT needs a port');
    assert.equal(refused(head('CONNECT', '/a', ['Host', 'g'])), 400);
    assert.equal(refused(head('CONNECT', 'g:443', ['Host', 'g'], { framing: 'length', contentLength: 3 })), 400, 'with a body');
  });

  it('a path that cannot be normalized is 400', () => {
    for (const t of ['/a%00b', '/%zz', '/public/..;/admin']) assert.equal(refused(head('GET', t, ['Host', 'h'])), 400, t);
  });

  it('Connection can name ordinary headers away, never the framing, Host or what the proxy adds', () => {
    const m = message(head('POST', '/', ['Host', 'h', 'Connection', 'close, Content-Length, HOST, transfer-encoding, X-Hop', 'Content-Length', '3', 'X-Hop', '1', 'X-Kept', '2'],
      { framing: 'length', contentLength: 3 }));
    assert.deepEqual(m.headers, ['Host', 'h', 'X-Kept', '2']);
    assert.equal(m.keepAlive, false);
    assert.equal(upstreamHead(m, undefined, true), 'POST / HTTP/1.1\r\nHost: h\r\nX-Kept: 2\r\ncontent-length: 3\r\n\r\n');
  });

  it('the forwarded framing is the proxy\'s own: chunked restated, hop-by-hop lines out', () => {
    const m = message(head('POST', '/', ['Host', 'h', 'Transfer-Encoding', 'chunked', 'TE', 'trailers', 'Keep-Alive', '5', 'Proxy-Connection', 'x', 'Trailer', 't'], { framing: 'chunked' }));
    assert.equal(upstreamHead(m, undefined, true), 'POST / HTTP/1.1\r\nHost: h\r\ntransfer-encoding: chunked\r\n\r\n');
  });

  it('Upgrade passes with Connection: upgrade on HTTP/1.1, never for h2c', () => {
    const ws = message(head('GET', '/ws', ['Host', 'h', 'Connection', 'Upgrade', 'Upgrade', 'websocket', 'Sec-WebSocket-Key', 'k']));
    assert.deepEqual(ws.tunnel, { kind: 'upgrade', protocols: 'websocket' });
    assert.equal(upstreamHead(ws, undefined, true), 'GET /ws HTTP/1.1\r\nHost: h\r\nSec-WebSocket-Key: k\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n');
    assert.equal(message(head('GET', '/', ['Host', 'h', 'Upgrade', 'websocket'])).tunnel, undefined, 'no Connection: upgrade');
    const h2c = message(head('GET', '/', ['Host', 'h', 'Connection', 'Upgrade, HTTP2-Settings', 'Upgrade', 'h2c', 'HTTP2-Settings', 'AAA']));
    assert.equal(h2c.tunnel, undefined);
    assert.deepEqual(h2c.headers, ['Host', 'h']);
    assert.equal(message(head('GET', '/', ['Connection', 'upgrade', 'Upgrade', 'websocket'], { minor: 0 })).tunnel, undefined, 'not on HTTP/1.0');
    const withBody = message(head('POST', '/u', ['Host', 'h', 'Connection', 'upgrade', 'Upgrade', 'websocket', 'Content-Length', '4'], { framing: 'length', contentLength: 4 }));
    assert.equal(withBody.tunnel, undefined, 'not with content: servers disagree on what those bytes are');
    assert.equal(upstreamHead(withBody, undefined, true), 'POST /u HTTP/1.1\r\nHost: h\r\ncontent-length: 4\r\n\r\n');
    assert.equal(message(head('POST', '/u', ['Host', 'h', 'Connection', 'upgrade', 'Upgrade', 'websocket'], { framing: 'chunked' })).tunnel, undefined);
    assert.deepEqual(message(head('GET', '/u', ['Host', 'h', 'Connection', 'upgrade', 'Upgrade', 'websocket', 'Content-Length', '0'], { framing: 'length' })).tunnel,
      { kind: 'upgrade', protocols: 'websocket' }, 'Content-Length: 0 is no content');
    assert.deepEqual(message(head('CONNECT', 'g:443', ['Host', 'g:443'])).tunnel, { kind: 'connect' });
  });

  it('Expect: 100-continue is the proxy\'s to answer or pass on; anything else is 417', () => {
    const m = message(head('POST', '/', ['Host', 'h', 'Expect', '100-Continue', 'Content-Length', '1'], { framing: 'length', contentLength: 1 }));
    assert.equal(m.expectContinue, true);
    assert.equal(upstreamHead(m, undefined, false), 'POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 1\r\n\r\n');
    assert.equal(upstreamHead(m, undefined, true), 'POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 1\r\nexpect: 100-continue\r\n\r\n');
    assert.equal(refused(head('POST', '/', ['Host', 'h', 'Expect', 'tea'])), 417);
    assert.equal(message(head('POST', '/', ['Expect', 'tea'], { minor: 0 })).expectContinue, false, 'ignored on HTTP/1.0');
  });

  it('edits: removed and replaced names in any case, set values written as UTF-8, proxy-owned names untouched', () => {
    const m = message(head('GET', '/a', ['Host', 'h', 'Authorization', 'Bearer t', 'X-Keep', 'k', 'X-Jwt-Sub', 'forged']));
    const text = upstreamHead(m, {
      path: '/b',
      removeHeaders: ['authorization', 'x-jwt-sub'],
      setHeaders: [['x-claim', 'José Ωmega'], ['host', 'rewritten'], ['content-length', '99'], ['connection', 'close']],
    }, true);
    assert.equal(text, `GET /b HTTP/1.1\r\nX-Keep: k\r\nx-claim: ${Buffer.from('José Ωmega', 'utf8').toString('latin1')}\r\nhost: rewritten\r\n\r\n`);
  });

  it('addHeaders: appended after the forwarded lines, the client\'s of the same name kept; never a proxy-owned name', () => {
    const m = message(head('GET', '/a', ['Host', 'h', 'X-Tag', 'client', 'X-Set', 'client']));
    assert.equal(upstreamHead(m, { setHeaders: [['x-set', 'route']], addHeaders: [['x-tag', 'route'], ['x-new', 'n'], ['content-length', '9']] }, true),
      'GET /a HTTP/1.1\r\nHost: h\r\nX-Tag: client\r\nx-set: route\r\nx-tag: route\r\nx-new: n\r\n\r\n');
    assert.match(invalidEdit({ addHeaders: [['Host', 'other']] }) ?? '', /added header host/);
    assert.match(invalidEdit({ addHeaders: [['x-a', 'a\r\nx-b: b']] }) ?? '', /value of header x-a/);
  });

  it('an underscore spelling of a framing header is refused; one of an edited header goes with it', () => {
    assert.equal(refused(head('POST', '/', ['Host', 'h', 'Transfer_Encoding', 'chunked'])), 400);
    assert.equal(refused(head('POST', '/', ['Host', 'h', 'content_length', '5'])), 400);
    const m = message(head('GET', '/', ['Host', 'h', 'X_Jwt_Sub', 'forged', 'x_forwarded_for', '1.2.3.4', 'X_Other', 'k']));
    assert.equal(upstreamHead(m, { removeHeaders: ['x-jwt-sub'], setHeaders: [['x-forwarded-for', '5.6.7.8']] }, true),
      'GET / HTTP/1.1\r\nHost: h\r\nX_Other: k\r\nx-forwarded-for: 5.6.7.8\r\n\r\n');
  });

  it('HTTP/1.0 goes on as HTTP/1.0, never kept alive', () => {
    const m = message(head('GET', '/old', ['Connection', 'keep-alive'], { minor: 0 }));
    assert.equal(m.keepAlive, false);
    assert.equal(upstreamHead(m, undefined, true), 'GET /old HTTP/1.0\r\n\r\n');
  });

  it('path normalization follows the mesh config', () => {
    const t = '/a//b/%2e%2e/c%2Fd';
    assert.equal(message(head('GET', t, ['Host', 'h']), 'NONE').url, t);
    assert.equal(message(head('GET', t, ['Host', 'h']), 'BASE').url, '/a//c%2Fd');
    assert.equal(message(head('GET', t, ['Host', 'h']), 'MERGE_SLASHES').url, '/a/c%2Fd');
    assert.equal(message(head('GET', t, ['Host', 'h']), 'DECODE_AND_MERGE_SLASHES').url, '/a/c/d');
  });
});
