import assert from 'node:assert/strict';
import { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { forwardedHeaders, headersObject, invalidEdit, isHopByHop, requestHead, validHeaderValue } from '../../src/proxy/http-headers.js';

describe('isHopByHop', () => {
  const cases: [string, boolean][] = [
    ['Connection', true], ['keep-alive', true], ['Proxy-Connection', true], ['TE', true], ['Trailer', true],
    ['Transfer-Encoding', true], ['UPGRADE', true], ['Host', false], ['Content-Length', false], ['te-x', false],
    ['Connectionx', false], ['x-upgrade', false], ['', false],
  ];
  for (const [name, want] of cases) it(`${JSON.stringify(name)} → ${want}`, () => assert.equal(isHopByHop(name), want));
});

describe('forwardedHeaders', () => {
  const cases: {
    name: string; raw: string[]; edits?: Parameters<typeof forwardedHeaders>[1];
    text: string; flags?: Partial<Record<'contentLength' | 'chunked' | 'expect' | 'date', boolean>>;
  }[] = [
    { name: 'plain headers pass as they are, in order', raw: ['Host', 'a', 'X-B', 'c', 'x-b', 'd'], text: 'Host: a\r\nX-B: c\r\nx-b: d\r\n' },
    {
      name: 'hop-by-hop headers are dropped',
      raw: ['Host', 'a', 'Connection', 'keep-alive', 'Keep-Alive', 'timeout=5', 'TE', 'trailers', 'Trailer', 'x', 'Upgrade', 'h2c', 'Proxy-Connection', 'close'],
      text: 'Host: a\r\n',
    },
    {
      name: 'headers the Connection header names are dropped too',
      raw: ['Connection', 'close, X-Foo', 'x-foo', '1', 'X-Bar', '2', 'connection', ' x-bar ,keep-alive'],
      text: '',
    },
    { name: 'framing facts: content-length', raw: ['Content-Length', '3'], text: 'Content-Length: 3\r\n', flags: { contentLength: true } },
    { name: 'framing facts: chunked (not forwarded)', raw: ['Transfer-Encoding', 'chunked'], text: '', flags: { chunked: true } },
    { name: 'expect and date are seen', raw: ['Expect', '100-continue', 'DATE', 'x'], text: 'Expect: 100-continue\r\nDATE: x\r\n', flags: { expect: true, date: true } },
    {
      name: 'edits: removed and replaced names (any case), set ones appended',
      raw: ['Host', 'a', 'Authorization', 'Bearer t', 'X-Forwarded-For', '1.2.3.4', 'x-keep', 'k'],
      edits: { removeHeaders: ['authorization'], setHeaders: [['x-forwarded-for', '1.2.3.4, 5.6.7.8'], ['x-new', 'n']] },
      text: 'Host: a\r\nx-keep: k\r\nx-forwarded-for: 1.2.3.4, 5.6.7.8\r\nx-new: n\r\n',
    },
    {
      name: 'edits with a Connection-named header',
      raw: ['Connection', 'x-a', 'X-A', '1', 'X-B', '2', 'X-C', '3'],
      edits: { removeHeaders: ['x-b'], setHeaders: [['x-c', '4']] },
      text: 'x-c: 4\r\n',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const f = forwardedHeaders(c.raw, c.edits);
      assert.equal(f.text, c.text);
      const want = { contentLength: false, chunked: false, expect: false, date: false, ...c.flags };
      assert.deepEqual({ contentLength: f.contentLength, chunked: f.chunked, expect: f.expect, date: f.date }, want);
    });
  }
});

describe('headersObject', () => {
  const cases: [string, string[]][] = [
    ['single headers, names lower-cased', ['Host', 'a', 'X-Thing', 'b']],
    ['repeats joined with a comma', ['X-A', '1', 'x-a', '2', 'Via', 'v1', 'VIA', 'v2']],
    ['cookie joined with a semicolon, set-cookie a list', ['Cookie', 'a=1', 'cookie', 'b=2', 'Set-Cookie', 's1', 'set-cookie', 's2']],
    ['first wins for single-valued headers', ['Host', 'a', 'host', 'b', 'Authorization', 'A', 'authorization', 'B', 'Content-Type', 't1', 'content-type', 't2', 'Age', '1', 'age', '2']],
    ['empty', []],
  ];
  for (const [name, raw] of cases) {
    it(`${name}: as node:http builds it`, () => {
      const m = new IncomingMessage(null as never);
      (m as unknown as { _addHeaderLines(h: string[], n: number): void })._addHeaderLines(raw, raw.length);
      assert.deepEqual({ ...headersObject(raw) }, { ...m.headers });
    });
  }
});

describe('invalidEdit and validHeaderValue', () => {
  const cases: [string, Parameters<typeof invalidEdit>[0], string | undefined][] = [
    ['no edits', {}, undefined],
    ['a good path and headers', { path: '/a?b=c', setHeaders: [['x-a', 'v é']] }, undefined],
    ['a path with a space', { path: '/a b' }, 'path "/a b"'],
    ['an empty path', { path: '' }, 'path ""'],
    ['a header name that is not a token', { setHeaders: [['x a', 'v']] }, 'header name "x a"'],
    ['a value with CR LF', { setHeaders: [['x-a', 'v\r\nx-b: y']] }, 'value of header x-a'],
    ['a value past latin1', { setHeaders: [['x-a', '☃']] }, 'value of header x-a'],
  ];
  for (const [name, edits, want] of cases) it(name, () => assert.equal(invalidEdit(edits), want));
  it('validHeaderValue refuses control characters', () => {
    assert.equal(validHeaderValue('ok\tvalue'), true);
    assert.equal(validHeaderValue('no\nnewline'), false);
  });
});

describe('requestHead', () => {
  it('writes the request line and the raw headers back', () => {
    assert.equal(requestHead('GET', '/ws', 1, 1, ['Host', 'a', 'Upgrade', 'websocket']),
      'GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n');
    assert.equal(requestHead('GET', '/', 1, 0, []), 'GET / HTTP/1.0\r\n\r\n');
  });
});
