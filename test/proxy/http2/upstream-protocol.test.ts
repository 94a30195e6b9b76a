// The HTTP/2 upstream pool's choice of protocol: a cluster whose port declares HTTP speaks HTTP/1.1
// (no HTTP/2 connection is even tried), any other destination is asked for HTTP/2 first.
import assert from 'node:assert/strict';
import { createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Http2UpstreamPool, type UpstreamRoute, type UpstreamTarget } from '../../../src/proxy/http2/upstream-sessions.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import type { ClusterRuntime, Endpoint } from '../../../src/traffic/cluster.js';
import { ISTIO_POOL } from '../../traffic/support.js';

/** What acquire() gives, and how many connections the h2c server accepted meanwhile. */
function acquire(pool: Http2UpstreamPool, t: UpstreamTarget): Promise<UpstreamRoute> {
  return new Promise((resolve) => pool.acquire(t, resolve));
}

/** A stand-in cluster (only what acquire() reads before it connects). */
function cluster(http1Upstream: boolean): UpstreamTarget['cluster'] {
  const runtime = {
    spec: { http1Upstream: http1Upstream ? true : undefined, policy: { connectionPool: ISTIO_POOL } },
    tryAcquireConnection: () => true, releaseConnection: () => undefined,
  } as unknown as ClusterRuntime;
  return { runtime, endpoint: {} as Endpoint };
}

describe('HTTP/2 upstream pool: the protocol a cluster\'s port declares', () => {
  let server: Http2Server;
  let port = 0;
  let connections = 0;
  before(async () => {
    server = createServer((_req, res) => res.end('ok'));
    server.on('connection', () => { connections++; });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('a cluster of a port declared HTTP: HTTP/1.1 at once, no HTTP/2 connection tried', async () => {
    const pool = new Http2UpstreamPool({ kind: 'direct' }, new DirectionStats(), { maxHeaderListSize: 65536 });
    const route = await acquire(pool, { address: '127.0.0.1', port, cluster: cluster(true) });
    assert.equal(route.kind, 'http1');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(connections, 0);
  });

  it('any other destination: HTTP/2 asked for first (an h2c server gets a session)', async () => {
    const pool = new Http2UpstreamPool({ kind: 'direct' }, new DirectionStats(), { maxHeaderListSize: 65536 });
    for (const t of [{ address: '127.0.0.1', port, cluster: cluster(false) }, { address: '127.0.0.1', port }]) {
      const route = await acquire(pool, t);
      assert.equal(route.kind, 'h2');
      if (route.kind === 'h2') route.release();
    }
    assert.ok(connections >= 1);
    pool.closeAll();
  });
});
