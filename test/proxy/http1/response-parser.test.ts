import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ResponseParser, type Framing, type SwitchRequest } from '../../../src/proxy/http1/response-parser.js';

interface Seen {
  heads: { status: number; framing: Framing; keepAlive: boolean; hasDate: boolean; text: string }[];
  body: string;
  payload: number;
  ends: number;
  error?: string;
}

/** Feeds `input` in pieces cut at `cuts`, then (if `eof`) the connection's end. */
function run(input: string, cuts: number[], o: { noBody?: boolean; eof?: boolean; switching?: SwitchRequest } = {}): Seen {
  const seen: Seen = { heads: [], body: '', payload: 0, ends: 0 };
  const p = new ResponseParser({
    onHead: (h) => seen.heads.push({
      status: h.status, framing: h.framing, keepAlive: h.keepAlive, hasDate: h.hasDate,
      text: Buffer.concat(h.parts).toString('latin1'),
    }),
    onBody: (b, n) => { seen.body += b.toString('latin1'); seen.payload += n; },
    onEnd: () => { seen.ends++; },
  });
  p.reset(o.noBody ?? false, o.switching);
  const bytes = Buffer.from(input, 'latin1');
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    // A reused read buffer: the parser must not keep views of it across calls.
    const read = Buffer.alloc(65536, 0x7e);
    bytes.copy(read, 0, from, cut);
    const err = p.execute(read, cut - from);
    from = cut;
    if (err) { seen.error = err.message; return seen; }
  }
  if (o.eof) {
    const err = p.finish();
    if (err) seen.error = err.message;
  }
  return seen;
}

/** Every way to cut `input` in two, plus in single bytes: the result never depends on the reads. */
function everySplit(input: string, o: { noBody?: boolean; eof?: boolean; switching?: SwitchRequest } = {}): Seen {
  const whole = run(input, [], o);
  for (let i = 1; i < input.length; i++) assert.deepEqual(run(input, [i], o), whole, `cut at ${i}`);
  assert.deepEqual(run(input, [...Array(input.length).keys()].slice(1), o), whole, 'byte by byte');
  return whole;
}

describe('ResponseParser', () => {
  it('content-length: head without hop-by-hop lines, body as it is, reusable', () => {
    const s = everySplit('HTTP/1.1 200 OK\r\nServer: x\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\nDate: d\r\n\r\nhello');
    assert.deepEqual(s.heads, [{ status: 200, framing: 'length', keepAlive: true, hasDate: true, text: '200 OK\r\nServer: x\r\nContent-Length: 5\r\nDate: d\r\n' }]);
    assert.equal(s.body, 'hello');
    assert.equal(s.ends, 1);
  });

  it('chunked: the body verbatim, trailers dropped, Transfer-Encoding left to the proxy', () => {
    const s = everySplit('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n');
    assert.equal(s.heads[0]!.framing, 'chunked');
    assert.equal(s.heads[0]!.text, '200 OK\r\n');
    assert.equal(s.body, '5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\n\r\n');
    assert.equal(s.payload, 6);
    assert.equal(s.ends, 1);
  });

  it('delimited by the close: ends at the end of the connection, not reusable', () => {
    const s = everySplit('HTTP/1.1 200 OK\r\n\r\nuntil the end', { eof: true });
    assert.equal(s.heads[0]!.framing, 'close');
    assert.equal(s.heads[0]!.keepAlive, false);
    assert.equal(s.body, 'until the end');
    assert.equal(s.ends, 1);
  });

  it('no body: 204, 304, and any response to HEAD', () => {
    assert.equal(everySplit('HTTP/1.1 204 No Content\r\n\r\n').ends, 1);
    assert.equal(everySplit('HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n').heads[0]!.framing, 'none');
    const head = everySplit('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n', { noBody: true });
    assert.deepEqual([head.heads[0]!.framing, head.heads[0]!.text, head.ends], ['none', '200 OK\r\nContent-Length: 10\r\n', 1]);
  });

  it('1xx heads, then the final response', () => {
    const s = everySplit('HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    assert.deepEqual(s.heads.map((h) => [h.status, h.text]), [[103, '103 Early Hints\r\nLink: </a>\r\n'], [200, '200 OK\r\nContent-Length: 2\r\n']]);
    assert.equal(s.ends, 2);
  });

  it('reuse: HTTP/1.1 unless close; HTTP/1.0 only with keep-alive', () => {
    const cases: [string, boolean][] = [
      ['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', true],
      ['HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', false],
      ['HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n', false],
      ['HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n', true],
      // The usual values are read on the bytes; the others as a list of tokens, to the same effect.
      ['HTTP/1.1 200 OK\r\nConnection:   CLOSE \t\r\nContent-Length: 0\r\n\r\n', false],
      ['HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n', true],
      ['HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n', false],
      ['HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', false],
      ['HTTP/1.0 200 OK\r\nConnection: keep-alivE\r\nContent-Length: 0\r\n\r\n', true],
      ['HTTP/1.0 200 OK\r\nConnection: keep-alives\r\nContent-Length: 0\r\n\r\n', false],
      ['HTTP/1.0 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', false],
    ];
    for (const [input, want] of cases) assert.equal(run(input, []).heads[0]!.keepAlive, want, input);
  });

  it('drops the headers Connection names, and the other hop-by-hop ones', () => {
    const s = everySplit('HTTP/1.1 200 OK\r\nConnection: x-secret, close\r\nX-Secret: 1\r\nTE: t\r\nTrailer: x\r\nUpgrade: u\r\nProxy-Connection: p\r\nX-Kept: yes\r\nContent-Length: 0\r\n\r\n');
    assert.equal(s.heads[0]!.text, '200 OK\r\nX-Kept: yes\r\nContent-Length: 0\r\n');
  });

  it('a status line without a reason phrase', () => {
    assert.equal(run('HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n', []).heads[0]!.text, '200\r\nContent-Length: 0\r\n');
  });

  const errors: [string, string, { eof?: boolean }?][] = [
    ['not HTTP', 'SSH-2.0-OpenSSH\r\n\r\n'],
    ['a lower-case version', 'http/1.1 200 OK\r\n\r\n'],
    ['HTTP/2.0', 'HTTP/2.0 200 OK\r\n\r\n'],
    ['a two-digit status', 'HTTP/1.1 20 OK\r\n\r\n'],
    ['a folded header', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 0\r\n\r\n'],
    ['a space before the colon', 'HTTP/1.1 200 OK\r\nX-A : 1\r\n\r\n'],
    ['a bare LF in a value', 'HTTP/1.1 200 OK\r\nX-A: 1\nX-B: 2\r\nContent-Length: 0\r\n\r\n'],
    ['a bare CR in a value', 'HTTP/1.1 200 OK\r\nX-A: 1\rX-B: 2\r\nContent-Length: 0\r\n\r\n'],
    ['a NUL in a value', 'HTTP/1.1 200 OK\r\nX-A: 1\u0000\r\nContent-Length: 0\r\n\r\n'],
    ['Content-Length and Transfer-Encoding', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n'],
    ['two Content-Lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx'],
    ['a Content-Length that is not a number', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'],
    ['a 101 nobody asked for', 'HTTP/1.1 101 Switching Protocols\r\n\r\n'],
    ['a bad chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['chunk data longer than its size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n'],
    ['bytes after the response', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy'],
    ['a body cut short by the close', 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc', { eof: true }],
    ['a head cut short by the close', 'HTTP/1.1 200 OK\r\nContent-Le', { eof: true }],
  ];
  for (const [name, input, o] of errors) {
    it(`refuses ${name}`, () => {
      const s = run(input, [], o);
      assert.ok(s.error, `no error for ${JSON.stringify(input)}`);
      assert.match(s.error, /^invalid upstream response: /);
    });
  }

  it('takes a head of 59 KiB (Envoy\'s 60 KiB limit) and refuses one past 60 KiB', () => {
    assert.equal(run(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(59 * 1024)}\r\nContent-Length: 0\r\n\r\n`, [1000, 9000]).error, undefined);
    const s = run(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(61 * 1024)}\r\n\r\n`, [1000, 9000]);
    assert.match(s.error ?? '', /head too large/);
  });

  it('a 101 to an Upgrade: the head (Upgrade value kept aside), then raw bytes until the close', () => {
    const s = everySplit('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: k\r\n\r\n\x81\x05hello', { switching: 'upgrade', eof: true });
    assert.deepEqual(s.heads.map((h) => [h.status, h.framing, h.text]), [[101, 'tunnel', '101 Switching Protocols\r\nSec-WebSocket-Accept: k\r\n']]);
    assert.equal(s.body, '\x81\x05hello');
    assert.equal(s.ends, 1);
  });

  it('an Upgrade answered otherwise stays HTTP: the response is an ordinary one', () => {
    const s = everySplit('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok', { switching: 'upgrade' });
    assert.deepEqual(s.heads.map((h) => [h.status, h.framing, h.keepAlive]), [[200, 'length', true]]);
    assert.equal(s.body, 'ok');
  });

  it('a 2xx to CONNECT is a tunnel whatever its framing headers say; a 4xx is a response', () => {
    const s = everySplit('HTTP/1.1 200 Connection established\r\nContent-Length: 5\r\n\r\nbytes and more', { switching: 'connect', eof: true });
    assert.deepEqual(s.heads.map((h) => h.framing), ['tunnel']);
    assert.equal(s.body, 'bytes and more');
    const refused = everySplit('HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno', { switching: 'connect' });
    assert.deepEqual(refused.heads.map((h) => h.framing), ['length']);
  });

  it('refuses a 101 to CONNECT and a 101 without Upgrade', () => {
    assert.ok(run('HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n', [], { switching: 'connect' }).error);
    assert.ok(run('HTTP/1.1 101 Switching Protocols\r\n\r\n', [], { switching: 'upgrade' }).error);
  });
});
