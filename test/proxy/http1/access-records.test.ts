// What the HTTP/1.1 path tells the access log of each request: one record per request (answered,
// refused, abandoned), with Envoy's response flags and details where the request's fate was decided,
// the bytes, the times and the addresses. Real sockets on loopback; the formatter is tested apart.
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { flagsText, type AccessRecord } from '../../../src/log/access-record.js';
import type { RequestDecider, Verdict } from '../../../src/proxy/decider.js';
import { RawClient, RecordedLog, sleep, startProxy, startRawServer, startUpstream, type Upstream } from './harness.js';

function routes(req: IncomingMessage, res: ServerResponse): void {
  if (req.url === '/hang') return;
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = `saw ${Buffer.concat(chunks).length} bytes`;
    res.writeHead(200, { 'content-type': 'text/plain', 'x-app': 'yes', 'content-length': Buffer.byteLength(body) }).end(body);
  });
}

/** A port nothing listens on (a server opened and closed). */
async function closedPort(): Promise<number> {
  const s = new Server();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

const flags = (r: AccessRecord | undefined): string | undefined => (r ? flagsText(r.flags) : 'no record');

describe('access log records of the HTTP/1.1 path', () => {
  let up: Upstream;
  before(async () => { up = await startUpstream(routes); });
  after(() => up.close());

  /** A proxy to `up` (or `destination`) with a recording log; `fn` gets a connected client. */
  async function withProxy(o: { decider?: RequestDecider; responseHeaders?: string[]; port?: number; headTimeoutMs?: number },
    fn: (client: RawClient, log: RecordedLog) => Promise<void>): Promise<void> {
    const log = new RecordedLog(o.responseHeaders ?? []);
    const proxy = await startProxy({
      destination: o.port === undefined ? up.endpoint : { address: '127.0.0.1', port: o.port }, accessLog: log,
      ...(o.decider ? { decider: o.decider } : {}), ...(o.headTimeoutMs ? { headTimeoutMs: o.headTimeoutMs } : {}),
    });
    const client = await RawClient.connect(proxy.port);
    try {
      await fn(client, log);
    } finally {
      client.destroy();
      await proxy.close();
    }
  }

  it('an answered request: via_upstream, body bytes both ways, times, addresses, the forwarded headers', async () => {
    await withProxy({ responseHeaders: ['x-app'] }, async (client, log) => {
      client.write('POST /upload?x=1 HTTP/1.1\r\nHost: shop\r\nUser-Agent: t/1\r\nContent-Length: 5\r\n\r\nhello');
      const res = await client.response();
      assert.equal(res.status, 200);
      const [r] = await log.waitFor(1);
      assert.ok(r);
      assert.deepEqual([r.kind, r.role, r.method, r.path, r.originalPath, r.protocol, r.status, r.flags, r.details],
        ['http', 'outbound', 'POST', '/upload?x=1', undefined, 'HTTP/1.1', 200, 0, 'via_upstream']);
      assert.deepEqual([r.bytesReceived, r.bytesSent, r.attempts], [5, res.body.length, 1]);
      assert.ok(r.upstreamServiceMs !== undefined && r.upstreamServiceMs >= 0 && r.responseMs! >= r.upstreamServiceMs && r.durationMs >= r.responseMs!);
      assert.ok(Math.abs(r.startMs - Date.now()) < 5_000, 'an epoch time');
      assert.equal(r.upstreamHost, `127.0.0.1:${up.endpoint.port}`);
      assert.match(r.upstreamLocal ?? '', /^127\.0\.0\.1:\d+$/);
      assert.equal(r.downstreamLocal, `127.0.0.1:${up.endpoint.port}`, 'the original destination');
      assert.equal(r.downstreamRemote, `127.0.0.1:${client.socket.localPort}`);
      assert.deepEqual([r.upstreamCluster, r.routeName, r.decision], ['PassthroughCluster', 'allow_any', undefined]);
      assert.deepEqual(r.requestHeaders?.raw.slice(0, 4), ['Host', 'shop', 'User-Agent', 't/1']);
      assert.deepEqual(r.responseHeaders, ['x-app', 'yes'], 'only the response headers the format reads');
    });
  });

  it('a log switched at run time (a Telemetry): nothing is written while it is off; a request is logged as the log was when it began', async () => {
    await withProxy({}, async (client, log) => {
      log.on = false;
      client.write('GET /a HTTP/1.1\r\nHost: shop\r\n\r\n');
      assert.equal((await client.response()).status, 200);
      // Begun while off, ended after the log is back on: not logged (its line would lack what was not measured).
      client.write('POST /b HTTP/1.1\r\nHost: shop\r\nContent-Length: 4\r\n\r\nab');
      await sleep(50);
      log.on = true;
      client.write('cd');
      assert.equal((await client.response()).status, 200);
      await sleep(50);
      assert.equal(log.records.length, 0, 'no record while the log was off');
      // The same keep-alive connection, now logged whole: its addresses are read for the first time.
      client.write('GET /c HTTP/1.1\r\nHost: shop\r\n\r\n');
      assert.equal((await client.response()).status, 200);
      const [r] = await log.waitFor(1);
      assert.equal(log.records.length, 1);
      assert.equal(r!.path, '/c');
      assert.equal(r!.details, 'via_upstream');
      assert.equal(r!.downstreamRemote, `127.0.0.1:${client.socket.localPort}`);
      assert.equal(r!.downstreamLocal, `127.0.0.1:${up.endpoint.port}`);
      assert.ok(r!.upstreamHost !== undefined && r!.responseMs !== undefined, 'measured for the log');
    });
  });

  it('one record per pipelined request, in order', async () => {
    await withProxy({}, async (client, log) => {
      client.write('GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n');
      await client.response();
      await client.response();
      assert.deepEqual((await log.waitFor(2)).map((r) => [r.path, r.status]), [['/a', 200], ['/b', 200]]);
    });
  });

  it('UF: the upstream refuses the connection (503)', async () => {
    await withProxy({ port: await closedPort() }, async (client, log) => {
      client.write('GET /x HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.equal((await client.response()).status, 503);
      const [r] = await log.waitFor(1);
      assert.equal(flags(r), 'UF');
      assert.equal(r!.details, 'upstream_reset_before_response_started{connection_failure,ECONNREFUSED}');
      assert.equal(r!.upstreamLocal, undefined);
      assert.ok(r!.bytesSent > 0, 'the 503 body');
    });
  });

  it('UC: the upstream closes before its response is complete', async () => {
    const raw = await startRawServer((s) => s.once('data', () => s.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc')));
    try {
      await withProxy({ port: raw.endpoint.port }, async (client, log) => {
        client.write('GET /x HTTP/1.1\r\nHost: x\r\n\r\n');
        await client.end();
        const [r] = await log.waitFor(1);
        assert.equal(flags(r), 'UC');
        assert.equal(r!.status, 200, 'the head had gone out');
        assert.equal(r!.details, 'upstream_reset_after_response_started{connection_termination}');
        assert.equal(r!.bytesSent, 3);
      });
    } finally {
      await raw.close();
    }
  });

  it('UPE: the upstream answers something that is not HTTP (503)', async () => {
    const raw = await startRawServer((s) => s.once('data', () => s.end('SMTP ready\r\n\r\n')));
    try {
      await withProxy({ port: raw.endpoint.port }, async (client, log) => {
        client.write('GET /x HTTP/1.1\r\nHost: x\r\n\r\n');
        assert.equal((await client.response()).status, 503);
        const [r] = await log.waitFor(1);
        assert.deepEqual([flags(r), r!.details], ['UPE', 'upstream_reset_before_response_started{protocol_error}']);
      });
    } finally {
      await raw.close();
    }
  });

  it('UT: the route\'s time-out (504)', async () => {
    const decider: RequestDecider = { decide: (_req, dst) => ({ kind: 'forward', address: dst!.address, port: dst!.port, timeoutMs: 50 }) };
    await withProxy({ decider }, async (client, log) => {
      client.write('GET /hang HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.equal((await client.response()).status, 504);
      const [r] = await log.waitFor(1);
      assert.deepEqual([flags(r), r!.details], ['UT', 'response_timeout']);
    });
  });

  it('DC: the client leaves before the answer (no status)', async () => {
    await withProxy({}, async (client, log) => {
      client.write('GET /hang HTTP/1.1\r\nHost: x\r\n\r\n');
      await sleep(50);
      client.socket.resetAndDestroy(); // a FIN alone would be a half-close: the answer is still owed
      const [r] = await log.waitFor(1);
      assert.deepEqual([flags(r), r!.status, r!.details], ['DC', 0, 'downstream_remote_disconnect']);
    });
  });

  it('DPE: a request line the parser refuses (400, no method known)', async () => {
    await withProxy({}, async (client, log) => {
      client.write('get / HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.equal((await client.response()).status, 400);
      const [r] = await log.waitFor(1);
      assert.deepEqual([flags(r), r!.status, r!.method, r!.path, r!.protocol], ['DPE', 400, undefined, undefined, 'HTTP/1.1']);
      assert.equal(r!.details, 'http1.codec_error{request_line:_a_method_must_be_upper-case}');
    });
  });

  it('DPE: a body the parser refuses is logged once, as the request it cut, with the 400', async () => {
    await withProxy({}, async (client, log) => {
      client.write('POST /cut HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
      assert.equal((await client.response()).status, 400);
      await sleep(50);
      const records = await log.waitFor(1);
      assert.equal(records.length, 1);
      assert.deepEqual([flags(records[0]), records[0]!.status, records[0]!.method, records[0]!.path], ['DPE', 400, 'POST', '/cut']);
      assert.match(records[0]!.details ?? '', /^http1\.codec_error\{chunk_size\}$/);
    });
  });

  it('DPE: a message the rules refuse before any decision (HTTP/1.0 by default: 426 low_version)', async () => {
    await withProxy({}, async (client, log) => {
      client.write('GET /old HTTP/1.0\r\nHost: x\r\n\r\n');
      assert.equal((await client.response()).status, 426);
      const [r] = await log.waitFor(1);
      assert.deepEqual([flags(r), r!.details, r!.protocol, r!.path], ['DPE', 'low_version', 'HTTP/1.0', '/old']);
    });
  });

  it('a head not complete in time: 408 request_header_timeout', async () => {
    await withProxy({ headTimeoutMs: 50 }, async (client, log) => {
      client.write('GET /slow HTTP/1.1\r\nHo');
      assert.equal((await client.response()).status, 408);
      const [r] = await log.waitFor(1);
      assert.deepEqual([r!.status, r!.details, r!.flags], [408, 'request_header_timeout', 0]);
    });
  });

  it('a local answer carries what the decider decided: its flag, details, fields, route name; and its headers', async () => {
    const denied: Verdict = { kind: 'reply', status: 403, body: 'RBAC: access denied', headers: { 'x-why': 'policy' } };
    const decider: RequestDecider = {
      decide: () => denied,
      completed: () => ({ jwt: 'absent', authz: 'denied: by DENY policy ns/p rule 0', flag: 'RBAC', details: 'rbac_access_denied_matched_policy[ns[ns]-policy[p]-rule[0]]', routeName: 'r1' }),
    };
    await withProxy({ decider, responseHeaders: ['x-why'] }, async (client, log) => {
      client.write('GET /secret HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.equal((await client.response()).status, 403);
      const [r] = await log.waitFor(1);
      assert.deepEqual([flags(r), r!.details, r!.decision?.authz, r!.routeName], ['RBAC', 'rbac_access_denied_matched_policy[ns[ns]-policy[p]-rule[0]]', 'denied: by DENY policy ns/p rule 0', 'r1']);
      assert.deepEqual([r!.upstreamHost, r!.upstreamCluster, r!.bytesSent, r!.responseHeaders],
        [undefined, 'PassthroughCluster', 'RBAC: access denied'.length, ['x-why', 'policy']], 'a sidecar\'s cluster is known without an upstream');
    });
  });

  it('a rewrite: :PATH is what went upstream, X-ENVOY-ORIGINAL-PATH what came; edited headers as forwarded', async () => {
    const decider: RequestDecider = {
      decide: (_req, dst) => ({ kind: 'forward', address: dst!.address, port: dst!.port, path: '/v2/x', setHeaders: [['x-forwarded-for', '9.9.9.9']], removeHeaders: ['authorization'] }),
    };
    await withProxy({ decider }, async (client, log) => {
      client.write('GET /x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n');
      await client.response();
      const [r] = await log.waitFor(1);
      assert.deepEqual([r!.path, r!.originalPath], ['/v2/x', '/x']);
      assert.deepEqual([r!.requestHeaders?.set, r!.requestHeaders?.remove], [[['x-forwarded-for', '9.9.9.9']], ['authorization']]);
    });
  });

  it('nothing is measured for a log when there is none', async () => {
    const proxy = await startProxy({ destination: up.endpoint });
    try {
      assert.equal(proxy.handler.accessLog, undefined);
      const client = await RawClient.connect(proxy.port);
      client.write('GET /a HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.equal((await client.response()).status, 200);
      client.destroy();
    } finally {
      await proxy.close();
    }
  });
});
