// The differential test's named connections, run on every path besides the generated corpus: the
// finding of the security issue (`Connection: content-length` made the proxy drop the framing and
// forward the body, which the app read as a second request) and the classic shapes of request
// smuggling and of upgrades, each a fixed set of bytes. Same markers as the corpus
// (request-corpus.ts): `/d/<name>/<n>`, `/u/<name>/<n>` for the app that switches, `/smuggled/<name>`.
import type { CorpusCase } from './request-corpus.js';

const H = 'Host: h.example\r\n';

/** A request line and Host a lenient reader would find inside a body. */
const smuggled = (id: string): string => `GET /smuggled/${id} HTTP/1.1\r\n${H}\r\n`;

interface Named {
  readonly id: string;
  readonly label: string;
  readonly text: (id: string) => string;
  readonly switching?: boolean;
  /** Pause after these byte offsets (of the text made for the case). */
  readonly splits?: readonly number[] | ((text: string) => number[]);
}

const post = (id: string, n: number, lines: string, body: string): string =>
  `POST /d/${id}/${n} HTTP/1.1\r\n${H}${lines}\r\n${body}`;
const get = (id: string, n: number, lines = ''): string => `GET /d/${id}/${n} HTTP/1.1\r\n${H}${lines}\r\n`;
const chunk = (data: string): string => `${data.length.toString(16)}\r\n${data}\r\n`;

const NAMED: readonly Named[] = [
  { id: 'conn_content_length', label: 'the issue: Connection: content-length with a body that is a request',
    text: (id) => post(id, 0, `Connection: content-length\r\nContent-Length: ${smuggled(id).length}\r\n`, smuggled(id)) },
  { id: 'conn_content_length_pipelined', label: 'Connection: content-length, then a second request on the same connection (pooled upstream)',
    text: (id) => post(id, 0, `Connection: Content-Length\r\nContent-Length: ${smuggled(id).length}\r\n`, smuggled(id)) + get(id, 1) },
  { id: 'conn_content_length_close', label: 'Connection: close, content-length',
    text: (id) => post(id, 0, `Connection: close, content-length\r\nContent-Length: ${smuggled(id).length}\r\n`, smuggled(id)) },
  { id: 'conn_transfer_encoding', label: 'Connection: transfer-encoding on a chunked request whose data is a request',
    text: (id) => post(id, 0, 'Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n', `${chunk(smuggled(id))}0\r\n\r\n`) + get(id, 1) },
  { id: 'conn_host', label: 'Connection: host',
    text: (id) => get(id, 0, 'Connection: host\r\n') + get(id, 1) },
  { id: 'cl_te', label: 'CL.TE: Content-Length before Transfer-Encoding',
    text: (id) => post(id, 0, 'Content-Length: 6\r\nTransfer-Encoding: chunked\r\n', `0\r\n\r\n${smuggled(id)}`) },
  { id: 'te_cl', label: 'TE.CL: Transfer-Encoding before Content-Length',
    text: (id) => post(id, 0, 'Transfer-Encoding: chunked\r\nContent-Length: 4\r\n', `${chunk(smuggled(id))}0\r\n\r\n`) },
  { id: 'te_space_before_colon', label: 'Transfer-Encoding : chunked',
    text: (id) => post(id, 0, 'Content-Length: 5\r\nTransfer-Encoding : chunked\r\n', `0\r\n\r\n${smuggled(id)}`) },
  { id: 'te_obs_fold', label: 'Transfer-Encoding folded onto a second line',
    text: (id) => post(id, 0, 'Transfer-Encoding:\r\n chunked\r\n', `${chunk(smuggled(id))}0\r\n\r\n`) },
  { id: 'te_chunked_then_identity', label: 'two Transfer-Encoding lines: chunked, identity',
    text: (id) => post(id, 0, 'Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n', `${chunk(smuggled(id))}0\r\n\r\n`) },
  { id: 'te_xchunked', label: 'Transfer-Encoding: xchunked',
    text: (id) => post(id, 0, 'Transfer-Encoding: xchunked\r\n', `${chunk(smuggled(id))}0\r\n\r\n`) },
  { id: 'cl_twice_different', label: 'Content-Length 0 and N',
    text: (id) => post(id, 0, `Content-Length: 0\r\nContent-Length: ${smuggled(id).length}\r\n`, smuggled(id)) },
  { id: 'cl_list', label: 'Content-Length: N, N',
    text: (id) => post(id, 0, `Content-Length: ${smuggled(id).length}, ${smuggled(id).length}\r\n`, smuggled(id)) },
  { id: 'bare_lf_before_length', label: 'a header line ended by a bare LF before Content-Length',
    text: (id) => post(id, 0, `X-A: 1\nContent-Length: ${smuggled(id).length}\r\n`, smuggled(id)) },
  { id: 'bare_cr_in_value', label: 'a bare CR in a value',
    text: (id) => post(id, 0, `X-A: 1\rContent-Length: 0\r\nContent-Length: ${smuggled(id).length}\r\n`, smuggled(id)) },
  { id: 'chunk_ext_unterminated_quote', label: 'a chunk extension whose quoted-string runs past the line end (refused: read either way, it would move the body\'s end)',
    text: (id) => post(id, 0, 'Transfer-Encoding: chunked\r\n', `2;a="\r\nxx\r\n0\r\n\r\n${smuggled(id)}"\r\n${chunk('yy')}0\r\n\r\n`) },
  { id: 'chunk_ext_bare_lf', label: 'a chunk size line ended by a bare LF',
    text: (id) => post(id, 0, 'Transfer-Encoding: chunked\r\n', `2;a=b\nxx\r\n0\r\n\r\n${smuggled(id)}`) },
  { id: 'chunk_ext_without_name', label: 'a chunk extension without a name (`2;`): outside the grammar, refused',
    text: (id) => post(id, 0, 'Transfer-Encoding: chunked\r\n', `2;\r\nxx\r\n0\r\n\r\n`) },
  { id: 'chunk_data_looks_like_end', label: 'chunk data that holds "0 CRLF CRLF" and a request (valid)',
    text: (id) => post(id, 0, 'Transfer-Encoding: chunked\r\n', `${chunk(`0\r\n\r\n${smuggled(id)}`)}0\r\n\r\n`) + get(id, 1) },
  { id: 'pipelined_four', label: 'four pipelined requests, split mid-head',
    text: (id) => get(id, 0) + post(id, 1, 'Content-Length: 3\r\n', 'abc') + get(id, 2) + get(id, 3), splits: [30, 70] },
  { id: 'absolute_form_other_host', label: 'absolute-form whose authority differs from Host',
    text: (id) => `GET http://a.example/d/${id}/0 HTTP/1.1\r\nHost: b.example\r\n\r\n` },
  { id: 'dot_segments', label: 'dot segments and escapes the proxy normalizes',
    text: (id) => `GET /d/${id}/0/a/../%62/./c HTTP/1.1\r\n${H}\r\n` },
  { id: 'leading_crlf', label: 'empty lines before the request line',
    text: (id) => `\r\n\r\n${get(id, 0)}` },
  { id: 'http09_request_line', label: 'a request line without a version (node:http serves it as HTTP/0.9): HTTP to the proxy, refused, never relayed as TCP',
    text: (id) => `GET /d/${id}/0\r\n${H}\r\n` },
  { id: 'http09_absolute_form', label: 'an absolute-form request line without a version (node:http serves it as HTTP/0.9): HTTP to the proxy, refused, never relayed as TCP',
    text: (id) => `PATCH http://h.example/d/${id}/0\r\n${H}\r\n` },
  { id: 'double_space_request_line', label: 'two spaces after the method (node:http serves it): HTTP to the proxy, refused',
    text: (id) => `GET  /d/${id}/0 HTTP/1.1\r\n${H}\r\n` },
  { id: 'lowercase_method', label: 'a lower-case method (a valid token; the proxy may refuse it)',
    text: (id) => `get /d/${id}/0 HTTP/1.1\r\n${H}\r\n` },
  { id: 'http10_keep_alive', label: 'HTTP/1.0 with keep-alive, then another request',
    text: (id) => `GET /d/${id}/0 HTTP/1.0\r\n${H}Connection: keep-alive\r\n\r\n${get(id, 1)}` },
  { id: 'expect_continue', label: 'Expect: 100-continue with the body sent at once',
    text: (id) => post(id, 0, 'Expect: 100-continue\r\nContent-Length: 5\r\n', 'hello') + get(id, 1) },
  { id: 'upgrade_declined_then_request', label: 'an Upgrade the app answers 200 (no switch), then a request the proxy must judge',
    text: (id) => get(id, 0, 'Connection: upgrade\r\nUpgrade: websocket\r\n') + get(id, 1) },
  { id: 'upgrade_switched_then_bytes', label: 'an Upgrade the app switches, then bytes that look like a request (tunnel data)',
    text: (id) => `GET /u/${id}/0 HTTP/1.1\r\n${H}Connection: upgrade\r\nUpgrade: websocket\r\n\r\n${smuggled(id)}`, switching: true },
  { id: 'upgrade_without_connection', label: 'Upgrade without Connection: upgrade (no switch), then a request',
    text: (id) => `GET /u/${id}/0 HTTP/1.1\r\n${H}Upgrade: websocket\r\n\r\n${get(id, 1)}`, switching: true },
  { id: 'h2c_upgrade', label: 'Upgrade: h2c (not passed on), then a request',
    text: (id) => `GET /u/${id}/0 HTTP/1.1\r\n${H}Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n${get(id, 1)}`, switching: true },
  { id: 'upgrade_with_body', label: 'an Upgrade request with a body (node:http would read the body as the new protocol\'s bytes): passed on as a plain request',
    text: (id) => `POST /u/${id}/0 HTTP/1.1\r\n${H}Connection: upgrade\r\nUpgrade: websocket\r\nContent-Length: ${smuggled(id).length}\r\n\r\n${smuggled(id)}`, switching: true },
  { id: 'upgrade_with_empty_chunked_body', label: 'an Upgrade request with an empty chunked body: passed on as a plain request, no last chunk in a tunnel',
    text: (id) => `GET /u/${id}/0 HTTP/1.1\r\n${H}Connection: upgrade\r\nUpgrade: websocket\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, switching: true },
  { id: 'upgrade_body_then_malformed_split', label: 'an Upgrade request with a body, then a malformed request, the body in a later piece (the proxy answers the first before refusing the second)',
    text: (id) => `POST /u/${id}/0 HTTP/1.1\r\n${H}Upgrade: websocket\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\no9PATCH /u/${id}/1 HTTP/1.1\r\nContent-Length: \r\n${H}\r\n`,
    splits: (text) => [text.indexOf('\r\n\r\n') + 4], switching: true },
  { id: 'incomplete_body_kept_open', label: 'a body shorter than its Content-Length, the connection left open',
    text: (id) => post(id, 0, 'Content-Length: 100\r\n', 'short') },
];

/**
 * The named connections, as corpus cases (the id is the name). The client keeps each open, as a
 * keep-alive client does (the generated corpus half-closes most of its connections).
 */
export function smugglingCases(): CorpusCase[] {
  return NAMED.map((n) => {
    const text = n.text(n.id);
    const splits = typeof n.splits === 'function' ? n.splits(text) : n.splits ?? [];
    return { id: n.id, label: n.label, bytes: Buffer.from(text, 'latin1'), splits, halfClose: false, switching: n.switching ?? false };
  });
}
