// A request answered locally while its body is still coming (here: 503, nothing listens upstream):
// the rest of the body is read and dropped, so the client's END_STREAM closes the stream and the
// request is counted and logged. Found when every request body went through the exchange's body
// pipe: the pipe held the body paused for an attempt that would never come, and the stream stayed
// open for as long as the client's connection.
import assert from 'node:assert/strict';
import { connect } from 'node:http2';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { RequestDecider } from '../../../src/proxy/decider.js';
import { Http2Handler } from '../../../src/proxy/http2/handler.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { listenFor } from '../../helpers/h2-handler-listener.js';

/** A port nothing listens on: one that was just given up. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

describe('the HTTP/2 handler, a local reply before the request body ended', () => {
  const stats = new DirectionStats();
  let handler: Http2Handler;
  let listener: Server;
  let port: number;
  before(async () => {
    const nowhere = await closedPort();
    const decider: RequestDecider = { decide: () => ({ kind: 'forward', address: '127.0.0.1', port: nowhere }) };
    handler = new Http2Handler({ stats, upstream: { kind: 'direct' }, destinationOf: () => ({ address: '127.0.0.1', port: nowhere }), decider });
    ({ server: listener, port } = await listenFor(handler));
  });
  after(() => {
    handler.closeIdle();
    listener.close();
  });

  it('the 503 goes out; the body sent after it is dropped and the stream closes at the client\'s end', async () => {
    const client = connect(`http://127.0.0.1:${port}`);
    try {
      const req = client.request({ ':method': 'POST', ':path': '/upload' }, { endStream: false });
      req.write('first part ');
      const status = await new Promise<number>((resolve, reject) => {
        req.once('response', (h) => resolve(Number(h[':status'])));
        req.once('error', reject);
      });
      assert.equal(status, 503);
      assert.equal(stats.rqActive, 1, 'the request is open while its body is');
      req.resume();
      req.end('and the rest');
      for (let waited = 0; stats.rqActive > 0 && waited < 2000; waited += 20) await new Promise((r) => setTimeout(r, 20));
      assert.equal(stats.rqActive, 0, 'the stream closed once the client ended its body');
    } finally {
      client.close();
    }
  });
});
