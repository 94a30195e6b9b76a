// How the handler lets a client's connection go once it ended it for an error: the session ends the
// socket, reading what the client still sends until its FIN, and the handler does not cut that
// short. Closing at once while the client still sends answers its next write with a TCP reset, and
// the client loses the GOAWAY that said why (seen in CI: a rapid-reset flood's client read nothing).
import assert from 'node:assert/strict';
import { constants } from 'node:http2';
import type { Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { RequestDecider } from '../../../src/proxy/decider.js';
import { Http2Handler } from '../../../src/proxy/http2/handler.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { rapidResetReadingLate } from '../../helpers/h2-flood.js';
import { listenFor } from '../../helpers/h2-handler-listener.js';

describe('the HTTP/2 handler, a connection it ends for an error', () => {
  let handler: Http2Handler;
  let server: Server;
  let port: number;
  before(async () => {
    // Nothing is forwarded: each stream is reset by the client before an answer could come.
    const decider: RequestDecider = { decide: () => ({ kind: 'forward', address: '127.0.0.1', port: 9 }) };
    handler = new Http2Handler({
      stats: new DirectionStats(), upstream: { kind: 'direct' }, destinationOf: () => ({ address: '127.0.0.1', port: 9 }), decider,
    });
    ({ server, port } = await listenFor(handler));
  });
  after(() => {
    handler.closeIdle();
    server.close();
  });

  it('a rapid-reset flood from a client still sending: the client reads its GOAWAY, then a FIN (no reset)', async () => {
    const seen = await rapidResetReadingLate(port);
    assert.equal(seen.error, undefined, 'the connection ended with a FIN, not a reset');
    assert.equal(seen.goaway, constants.NGHTTP2_ENHANCE_YOUR_CALM, 'the client read its GOAWAY');
    for (let waited = 0; handler.connections > 0 && waited < 3000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    assert.equal(handler.connections, 0, 'the handler holds the connection no more');
  });
});
