import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RequestParseError, RequestParser, type RequestHead } from '../../../src/proxy/http1/request-parser.js';

interface Seen {
  heads: Omit<RequestHead, 'rawHeaders'>[];
  headers: string[][];
  bodies: string[];
  error?: { status: number; reason: string };
  /** Where execute stopped, when a callback asked it to. */
  stoppedAt?: number;
}

/** Feeds `input` cut at `cuts`; `stopAfter`: onEnd answers true after that many messages. */
function run(input: string, cuts: number[] = [], o: { stopAfter?: number; maxHeadBytes?: number } = {}): Seen {
  const seen: Seen = { heads: [], headers: [], bodies: [] };
  let body = '';
  const p = new RequestParser({
    onHead: ({ rawHeaders, ...head }) => {
      seen.heads.push(head);
      seen.headers.push(rawHeaders);
      return false;
    },
    onBody: (chunk) => { body += chunk.toString('latin1'); },
    onEnd: () => {
      seen.bodies.push(body);
      body = '';
      return o.stopAfter !== undefined && seen.bodies.length >= o.stopAfter;
    },
  }, { maxHeadBytes: o.maxHeadBytes ?? 60 * 1024, maxHeaders: 100 });
  const bytes = Buffer.from(input, 'latin1');
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    // Each read its own buffer, reused after: the parser must not keep views across reads.
    const read = Buffer.from(bytes.subarray(from, cut));
    const r = p.execute(read);
    read.fill(0x7e);
    if (r instanceof RequestParseError) {
      seen.error = { status: r.status, reason: r.reason };
      return seen;
    }
    if (r < read.length) {
      seen.stoppedAt = from + r;
      return seen;
    }
    from = cut;
  }
  return seen;
}

/** The same outcome whatever the reads: whole, cut once anywhere, byte by byte. */
function everySplit(input: string, o: { stopAfter?: number } = {}): Seen {
  const whole = run(input, [], o);
  for (let i = 1; i < input.length; i++) assert.deepEqual(run(input, [i], o), whole, `cut at ${i}`);
  assert.deepEqual(run(input, [...Array(input.length).keys()].slice(1), o), whole, 'byte by byte');
  return whole;
}

const GET = 'GET /a HTTP/1.1\r\nHost: h\r\n\r\n';

describe('RequestParser', () => {
  it('a head: method, target, version, headers as sent with their values trimmed', () => {
    const s = everySplit('GET /a?b=c HTTP/1.1\r\nHost: h\r\nX-A:  1 \t\r\nx-a:2\r\n\r\n');
    assert.deepEqual(s.heads, [{ method: 'GET', target: '/a?b=c', minor: 1, framing: 'none', contentLength: 0 }]);
    assert.deepEqual(s.headers, [['Host', 'h', 'X-A', '1', 'x-a', '2']]);
    assert.deepEqual(s.bodies, ['']);
  });

  it('any upper-case token is a method; HTTP/1.0 too', () => {
    const s = everySplit('PURGE /x HTTP/1.1\r\nHost: h\r\n\r\nM-SEARCH * HTTP/1.1\r\nHost: h\r\n\r\nFOO_1 /y HTTP/1.0\r\n\r\n');
    assert.deepEqual(s.heads.map((h) => [h.method, h.target, h.minor]), [['PURGE', '/x', 1], ['M-SEARCH', '*', 1], ['FOO_1', '/y', 0]]);
  });

  it('empty lines before a request line are skipped (RFC 9112 2.2)', () => {
    const s = everySplit(`\r\n\r\n${GET}\r\n${GET}`);
    assert.equal(s.heads.length, 2);
  });

  it('Content-Length: exactly that many body bytes, then the next request', () => {
    const s = everySplit(`POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello${GET}`);
    assert.deepEqual(s.heads.map((h) => [h.framing, h.contentLength]), [['length', 5], ['none', 0]]);
    assert.deepEqual(s.bodies, ['hello', '']);
  });

  it('Content-Length: 0 is framing "length" with no body (the line is forwarded)', () => {
    const s = everySplit(`POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n${GET}`);
    assert.deepEqual(s.heads.map((h) => [h.framing, h.contentLength]), [['length', 0], ['none', 0]]);
  });

  it('chunked: the content without the framing, extensions and trailers read past', () => {
    const s = everySplit(`POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n5;ext="a b"\r\nhello\r\n00A\r\n0123456789\r\n0;last\r\nX-T: 1\r\n\r\n${GET}`);
    assert.deepEqual(s.heads.map((h) => h.framing), ['chunked', 'none']);
    assert.deepEqual(s.bodies, ['hello0123456789', '']);
  });

  it('chunk extensions in the grammar: several, spaced, quoted with escapes', () => {
    const s = everySplit(`POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2 ; a ; b = c ;d="x \\" y;"\r\nab\r\n0;e=f\r\n\r\n`);
    assert.deepEqual(s.bodies, ['ab']);
  });

  it('stops after a message when asked, answering where the next begins', () => {
    const input = `${GET}${GET}`;
    const s = run(input, [], { stopAfter: 1 });
    assert.equal(s.stoppedAt, GET.length);
    assert.equal(s.heads.length, 1);
  });

  it('a head may take 60 KiB; past it 431, a request line past it 414', () => {
    const big = `GET / HTTP/1.1\r\nHost: h\r\nX-Big: ${'a'.repeat(59 * 1024)}\r\n\r\n`;
    assert.equal(run(big, [7, 30000]).heads.length, 1);
    assert.equal(run(`GET / HTTP/1.1\r\nHost: h\r\nX-Big: ${'a'.repeat(61 * 1024)}\r\n\r\n`, [7, 30000]).error?.status, 431);
    assert.equal(run(`GET /${'a'.repeat(61 * 1024)} HTTP/1.1\r\n\r\n`, [100]).error?.status, 414);
    assert.equal(run(`${'\r\n'.repeat(31 * 1024)}${GET}`).error?.status, 414, 'empty lines count');
    assert.equal(run(`GET / HTTP/1.1\r\nHost: h\r\n${'X: 1\r\n'.repeat(101)}\r\n`).error?.status, 431, 'more than 100 lines');
  });

  const refused: [string, string, number][] = [
    ['a lower-case method', 'get /a HTTP/1.1\r\nHost: h\r\n\r\n', 400],
    ['a method with a lower-case letter', 'GeT /a HTTP/1.1\r\nHost: h\r\n\r\n', 400],
    ['a method that is not a token', 'G@T /a HTTP/1.1\r\nHost: h\r\n\r\n', 400],
    ['two spaces', 'GET  /a HTTP/1.1\r\nHost: h\r\n\r\n', 400],
    ['a control byte in the target', 'GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n', 400],
    ['a byte past ASCII in the target', 'GET /\xe9 HTTP/1.1\r\nHost: h\r\n\r\n', 400],
    ['a lower-case version', 'GET /a http/1.1\r\nHost: h\r\n\r\n', 400],
    ['HTTP/2.0 in a request line', 'GET /a HTTP/2.0\r\nHost: h\r\n\r\n', 505],
    ['HTTP/1.2', 'GET /a HTTP/1.2\r\nHost: h\r\n\r\n', 505],
    ['a bare LF ending the request line', 'GET /a HTTP/1.1\nHost: h\r\n\r\n', 400],
    ['a bare LF ending a header line', 'GET /a HTTP/1.1\r\nHost: h\nX: 1\r\n\r\n', 400],
    ['a bare LF as the empty line', 'GET /a HTTP/1.1\r\nHost: h\r\n\n', 400],
    ['a bare CR in a value', 'GET /a HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n', 400],
    ['a NUL in a value', 'GET /a HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n', 400],
    ['obs-fold', 'GET /a HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n', 400],
    ['whitespace before the colon', 'GET /a HTTP/1.1\r\nHost : h\r\n\r\n', 400],
    ['a header without a colon', 'GET /a HTTP/1.1\r\nHost h\r\n\r\n', 400],
    ['an empty header name', 'GET /a HTTP/1.1\r\n: h\r\n\r\n', 400],
    ['Content-Length and Transfer-Encoding', 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
    ['Content-Length repeated (same value)', 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc', 400],
    ['Content-Length as a list', 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc', 400],
    ['a signed Content-Length', 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc', 400],
    ['an empty Content-Length', 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n', 400],
    ['a huge Content-Length', 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1234567890123456\r\n\r\n', 400],
    ['chunked not last', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n', 400],
    ['gzip alone', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n', 400],
    ['an empty Transfer-Encoding', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n', 400],
    ['a coding before chunked', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 501],
    ['chunked twice over two lines', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', 501],
    ['chunked with a parameter', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;q=1\r\n\r\n', 400],
    ['Transfer-Encoding in HTTP/1.0', 'POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
    ['a chunk size that is not hex', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n', 400],
    ['a chunk size with a space', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n', 400],
    ['a chunk size line ended by a bare LF', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n', 400],
    ['a bare LF after chunk data', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n', 400],
    ['chunk data longer than its size', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n', 400],
    ['a chunk extension with an unterminated quote', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2;a="\r\nxx\r\n0\r\n\r\n', 400],
    ['a chunk extension without a name', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\nxx\r\n0\r\n\r\n', 400],
    ['a chunk extension value with a space', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;a=b c\r\nx\r\n0\r\n\r\n', 400],
    ['a chunk extension with an empty value', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;a=\r\nx\r\n0\r\n\r\n', 400],
    ['a chunk extension with a control byte in quotes', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;a="\x01"\r\nx\r\n0\r\n\r\n', 400],
    ['a chunk extension with a bare LF', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a\nb\r\nhello\r\n0\r\n\r\n', 400],
    ['a chunk size past 2^48', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFF\r\n', 400],
    ['a folded trailer', 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n 2\r\n\r\n', 400],
    ['a request line that is junk', 'HELLO\r\n\r\n', 400],
  ];
  for (const [name, input, status] of refused) {
    it(`refuses ${name} with ${status}`, () => {
      const whole = run(input);
      assert.equal(whole.error?.status, status, JSON.stringify(whole));
      // Wherever the reads are cut: the same refusal, and nothing of this message delivered as a body.
      for (let i = 1; i < input.length; i += 7) assert.equal(run(input, [i]).error?.status, status, `cut at ${i}`);
    });
  }

  it('nothing after an error: the parser stays refused', () => {
    const p = new RequestParser({ onHead: () => false, onBody: () => undefined, onEnd: () => false });
    assert.ok(p.execute(Buffer.from('get / HTTP/1.1\r\n\r\n')) instanceof RequestParseError);
    assert.ok(p.execute(Buffer.from(GET)) instanceof RequestParseError);
  });

  it('onHead answering true halts at once: the body and what follows are not read', () => {
    let bodies = 0;
    const p = new RequestParser({ onHead: () => true, onBody: () => { bodies++; }, onEnd: () => false });
    const input = Buffer.from(`POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc${GET}`);
    const r = p.execute(input);
    assert.equal(typeof r, 'number');
    assert.equal(bodies, 0);
    assert.ok((r as number) < input.length);
  });

  it('tells when a head is under way (for the head time-out)', () => {
    const p = new RequestParser({ onHead: () => false, onBody: () => undefined, onEnd: () => false });
    assert.equal(p.inHead, false);
    p.execute(Buffer.from('GE'));
    assert.equal(p.inHead, true);
    p.execute(Buffer.from('T / HTTP/1.1\r\nHost: h\r\n'));
    assert.equal(p.inHead, true);
    p.execute(Buffer.from('\r\n'));
    assert.equal(p.inHead, false);
    assert.equal(p.idle, true);
  });
});
