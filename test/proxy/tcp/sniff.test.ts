import assert from 'node:assert/strict';
import { it } from 'node:test';
import { MAX_METHOD, MAX_REQUEST_LINE, sniff } from '../../../src/proxy/tcp/sniff.js';

const b = (s: string | number[]): Buffer => (typeof s === 'string' ? Buffer.from(s, 'latin1') : Buffer.from(s));

it('recognises an HTTP/1 request line by its shape, whatever the method', () => {
  for (const m of ['GET', 'POST', 'CONNECT', 'PURGE', 'FOO', 'M-SEARCH', 'X_1']) {
    assert.equal(sniff(b(`${m} /x HTTP/1.1\r\n`)), 'http1', m);
  }
  assert.equal(sniff(b('GET http://g/admin HTTP/1.1\r\n')), 'http1', 'absolute-form');
  assert.equal(sniff(b('OPTIONS * HTTP/1.1\r\n')), 'http1', 'asterisk-form');
  assert.equal(sniff(b('CONNECT g:443 HTTP/1.1\r\n')), 'http1', 'authority-form');
});

it('leading empty lines are part of HTTP (RFC 9112 2.2), not a way around it', () => {
  assert.equal(sniff(b('\r\nGET /admin HTTP/1.1\r\n')), 'http1');
  assert.equal(sniff(b('\r\n\r\n\r\nGET /admin HTTP/1.1\r\n')), 'http1');
  assert.equal(sniff(b('\r\n')), undefined);
});

it('an upper-case method, a space and a path are HTTP at once, whatever follows (HTTP/0.9 lines included)', () => {
  for (const s of ['GET /', 'GET /headers\r\nHost: x\r\n\r\n', 'GET /b(HTTP/1.1\r\n', 'FOO /x', '\r\nPOST /a', 'POST *  HTTP/1.0\r\n', 'OPTIONS *']) {
    assert.equal(sniff(b(s)), 'http1', JSON.stringify(s));
  }
  assert.equal(sniff(b('GET  /headers HTTP/1.1\r\n')), 'http1', 'two spaces: node reads it, so the parser answers it (400)');
  assert.equal(sniff(b('get /x')), undefined, 'lower-case: only a whole request line makes it HTTP');
  assert.equal(sniff(b('get key\r\n')), 'tcp', 'memcached');
  assert.equal(sniff(b('GET key\r\n')), 'tcp', 'Redis inline');
  assert.equal(sniff(b('OPTIONS rtsp://cam/1 RTSP/1.0\r\n')), 'tcp', 'RTSP');
  // Absolute-form without a version: node:http reads it as a request (seed 699617195 of the differential test).
  assert.equal(sniff(b('PATCH http://h.example/d/x`HTTP/1.1\nContent-Length: 0\r\n')), 'http1');
  assert.equal(sniff(b('GET https://h/admin\r\n')), 'http1');
  assert.equal(sniff(b('DESCRIBE rtsp://cam/1\r\n')), 'http1', 'no version: read as HTTP by lenient servers, so the parser answers it');
  // node:http takes `CONNECT h:443` without a version as a CONNECT (HTTP/0.9): the app's tunnel, past the policy.
  assert.equal(sniff(b('CONNECT h.example:443\r\n\r\n')), 'http1');
  assert.equal(sniff(b('CONNECT h.example:443\n')), 'http1');
  assert.equal(sniff(b('OPTIONS h:80\r\n')), 'tcp', 'authority-form is CONNECT\'s only (node refuses it for others)');
});

it('takes what the parser refuses as HTTP too, so it is answered, not relayed', () => {
  assert.equal(sniff(b('get /admin HTTP/1.1\r\n')), 'http1', 'lower-case method: the parser answers 400');
  assert.equal(sniff(b('GET /admin HTTP/1.1\n')), 'http1', 'bare LF: 400');
  assert.equal(sniff(b('GET /admin HTTP/3.0\r\n')), 'http1', 'another version: 505');
  assert.equal(sniff(b(`GET /${'a'.repeat(MAX_REQUEST_LINE)}`)), 'http1', 'too long to be anything else: 414');
});

it('waits while the bytes could still become a request line or the HTTP/2 preface', () => {
  for (const s of ['', 'G', 'GET', 'GET ', 'GET h', 'GET http:/', 'get /admin HTTP/1.1', 'PRI * HTTP/2.0\r\n', 'CONNECT g:443 HT']) {
    assert.equal(sniff(b(s)), undefined, JSON.stringify(s));
  }
});

it('the HTTP/2 preface is h2, a TLS ClientHello tls, everything else tcp', () => {
  assert.equal(sniff(b('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')), 'h2');
  assert.equal(sniff(b([0x16, 0x03, 0x01, 0x02, 0x00])), 'tls');
  assert.equal(sniff(b([0x16])), undefined);
  for (const s of ['SSH-2.0-OpenSSH\r\n', '*1\r\n$4\r\nPING\r\n', 'GE@T / HTTP/1.1\r\n', 'get  / HTTP/1.1\r\n', 'get / HTTP/1.1x', 'get / FTP/1.1\r\n', ' GET / HTTP/1.1\r\n', 'GET\t/ HTTP/1.1\r\n']) {
    assert.equal(sniff(b(s)), 'tcp', JSON.stringify(s));
  }
  assert.equal(sniff(b([0x00, 0x00, 0x00, 0x01])), 'tcp');
  assert.equal(sniff(b('a'.repeat(256 * 1024))), 'tcp', 'a long run of token bytes is no method');
  assert.equal(sniff(b('A'.repeat(MAX_METHOD + 1))), 'tcp');
  assert.equal(sniff(b('A'.repeat(MAX_METHOD - 1))), undefined, 'a long method may still come');
  assert.equal(sniff(b([0x16, 0x01])), 'tcp');
});
