// An upstream HTTP/2 stream refused unprocessed (RST_STREAM REFUSED_STREAM, or above the last stream
// of a GOAWAY: RFC 9113 §8.7) is sent again once, whatever the retry policy, with its body: the
// HTTP/2 form of the keep-alive race. nginx sends GOAWAY after 1,000 requests on a connection, and
// the streams in flight past it were answered 503 (7 of 194,000 in a bench run). Through the
// Http2Handler with a passthrough decider, against a node:http2 upstream that refuses on request.
import assert from 'node:assert/strict';
import { connect, constants, createServer as createHttp2, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo, Server } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { RequestDecider } from '../../../src/proxy/decider.js';
import { Http2Handler } from '../../../src/proxy/http2/handler.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { listenFor } from '../../helpers/h2-handler-listener.js';

/** How the upstream treats the stream it is given: answer, refuse it, or GOAWAY below it. */
type Refusal = 'answer' | 'refuse' | 'goaway';

describe('the HTTP/2 handler, an upstream stream refused unprocessed', () => {
  let handler: Http2Handler;
  let listener: Server;
  let upstream: Http2Server;
  let port: number;
  /** What the upstream does with each stream in turn (then 'answer'). */
  let plan: Refusal[] = [];
  /** Each request the upstream saw: its method and body, and whether it was refused. */
  let seen: { method: string; body: string; refused: boolean }[] = [];
  let connections = 0;

  before(async () => {
    upstream = createHttp2();
    upstream.on('session', () => { connections++; });
    upstream.on('stream', (stream: ServerHttp2Stream, headers) => {
      stream.on('error', () => { /* a refused stream's own close */ });
      const what = plan.shift() ?? 'answer';
      const method = String(headers[':method']);
      if (what === 'refuse') {
        seen.push({ method, body: '', refused: true });
        stream.close(constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      if (what === 'goaway') {
        seen.push({ method, body: '', refused: true });
        // The stream is above the GOAWAY's last stream: never processed. The session ends after it.
        stream.session!.goaway(constants.NGHTTP2_NO_ERROR, stream.id! - 2);
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        seen.push({ method, body, refused: false });
        stream.respond({ ':status': 200 });
        stream.end(`got ${method} ${body}`);
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const upPort = (upstream.address() as AddressInfo).port;
    // Passthrough: no cluster, no retry policy; only the refused stream's re-send can save the request.
    const decider: RequestDecider = { decide: () => ({ kind: 'forward', address: '127.0.0.1', port: upPort }) };
    handler = new Http2Handler({
      stats: new DirectionStats(), upstream: { kind: 'direct' }, destinationOf: () => ({ address: '127.0.0.1', port: upPort }), decider,
    });
    ({ server: listener, port } = await listenFor(handler));
  });
  after(() => {
    handler.closeIdle();
    listener.close();
    upstream.close();
  });
  beforeEach(() => {
    plan = [];
    seen = [];
  });

  /** One request from a node:http2 client: its status and body. */
  async function request(method: string, body?: string): Promise<{ status: number; body: string }> {
    const client = connect(`http://127.0.0.1:${port}`);
    try {
      return await new Promise((resolve, reject) => {
        const req = client.request({ ':method': method, ':path': '/x' }, { endStream: body === undefined });
        let status = 0;
        const chunks: Buffer[] = [];
        req.on('response', (h) => { status = Number(h[':status']); });
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString() }));
        req.on('error', reject);
        if (body !== undefined) req.end(body);
      });
    } finally {
      client.close();
    }
  }

  it('a GET refused with RST_STREAM REFUSED_STREAM goes again and is answered', async () => {
    plan = ['refuse'];
    const r = await request('GET');
    assert.deepEqual(r, { status: 200, body: 'got GET ' });
    assert.deepEqual(seen.map((s) => s.refused), [true, false]);
  });

  it('a POST goes again with its whole body (a refused stream was never processed: no double delivery)', async () => {
    plan = ['refuse'];
    const r = await request('POST', 'hello body');
    assert.deepEqual(r, { status: 200, body: 'got POST hello body' });
    assert.deepEqual(seen.map((s) => [s.method, s.body, s.refused]), [['POST', '', true], ['POST', 'hello body', false]]);
  });

  it('a stream above the last stream of a GOAWAY goes again on another connection', async () => {
    // The GOAWAY takes the pool's session out of use: the second try needs a connection of its own.
    const before = connections;
    plan = ['goaway'];
    const r = await request('GET');
    assert.deepEqual(r, { status: 200, body: 'got GET ' });
    assert.deepEqual(seen.map((s) => s.refused), [true, false]);
    assert.ok(connections > before, 'a new upstream connection was opened');
  });

  it('only once: an upstream that refuses every stream gets two tries, the client a 503', async () => {
    plan = ['refuse', 'refuse', 'refuse'];
    const r = await request('GET');
    assert.equal(r.status, 503);
    assert.equal(seen.length, 2, 'the request went twice, not more');
  });
});
