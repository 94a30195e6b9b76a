// The status server on real sockets: readiness, and each kind of application probe against real
// little apps (HTTP, HTTPS with and without h2, TCP, gRPC health), then `pilot-agent wait` against it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createH2cServer, createSecureServer, type Http2Server, type Http2SecureServer } from 'node:http2';
import { createServer as createTcpServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startStatusServer, type Readiness, type StatusServer, type StatusServerOptions } from '../../../src/status/server.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';

const TLS = {
  cert: readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.crt')),
  key: readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.key')),
};
const LOCAL = '127.0.0.1';

type Closable = NetServer | Server | Http2Server | Http2SecureServer;

interface Reply { status: number; body: string }

function listen(server: Closable, host = LOCAL): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: LOCAL, port, path, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createTcpServer();
  const port = await listen(s);
  await new Promise((r) => s.close(r));
  return port;
}

/** One observed request of a test app. */
interface Seen { path: string; headers: IncomingHttpHeaders; remote: string; httpVersion: string }

/** Routes of the test apps: /ok 200, /fail 500, /redirect 302, /unavailable 503, /slow never answers. */
function appHandler(seen: Seen[]) {
  return (req: { url?: string; headers: IncomingHttpHeaders; socket: { remoteAddress?: string }; httpVersion: string },
    res: { writeHead(s: number, h?: Record<string, string>): unknown; end(body: string): unknown }): void => {
    seen.push({ path: req.url ?? '', headers: req.headers, remote: req.socket.remoteAddress ?? '', httpVersion: req.httpVersion });
    switch (req.url) {
      case '/ok': res.writeHead(200); res.end('fine'); break;
      case '/fail': res.writeHead(500); res.end('broken'); break;
      case '/unavailable': res.writeHead(503); res.end(''); break;
      case '/redirect': res.writeHead(302, { location: '/elsewhere' }); res.end(''); break;
      case '/slow': break; // never answers
      default: res.writeHead(404); res.end('');
    }
  };
}

// --- a grpc.health.v1 server, protobuf by hand (independently of the code under test) -----------

const SERVICES: Record<string, number> = { '': 1, 'my.Service': 1, 'down.Service': 2, 'quiet.Service': 0 };

function grpcHealthServer(requests: { path: string; contentType: string; service: string }[]): Http2Server {
  const server = createH2cServer();
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      const frame = Buffer.concat(chunks);
      const msg = frame.subarray(5, 5 + frame.readUInt32BE(1));
      // HealthCheckRequest: field 1 (tag 0x0a), a short string (one-byte length).
      const service = msg.length === 0 ? '' : msg.subarray(2, 2 + msg[1]!).toString('utf8');
      if (msg.length > 0) assert.equal(msg[0], 0x0a);
      requests.push({ path: String(headers[':path']), contentType: String(headers['content-type']), service });
      if (service === 'slow.Service') return; // never answers
      const status = SERVICES[service];
      if (status === undefined) {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'unknown%20service' }, { endStream: true });
        return;
      }
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      // HealthCheckResponse{status}: field 1 varint (tag 0x08); proto3 leaves 0 out.
      const body = status === 0 ? Buffer.alloc(0) : Buffer.from([0x08, status]);
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(body.length, 1);
      stream.end(Buffer.concat([prefix, body]));
    });
  });
  return server;
}

// ---------------------------------------------------------------------------------------------

describe('status server', () => {
  const closers: (() => Promise<unknown> | void)[] = [];
  const seenHttp: Seen[] = [];
  const seenTls: Seen[] = [];
  const seenTlsH1: Seen[] = [];
  const grpcRequests: { path: string; contentType: string; service: string }[] = [];
  const connections = { http: 0, tls: 0 };
  let appPort = 0;
  let tlsPort = 0;
  let tlsH1Port = 0;
  let grpcPort = 0;
  let downPort = 0;

  /** Starts a status server, closed in after(). */
  async function status(probers: Record<string, unknown> | string, opts: Partial<StatusServerOptions> = {}): Promise<StatusServer> {
    const server = await startStatusServer({
      port: 0, host: LOCAL, readiness: () => ({ ready: true }),
      probers: typeof probers === 'string' ? probers : JSON.stringify(probers),
      env: { instanceIp: LOCAL, rewriteLegacyLocalhost: false, keepAlive: false, http2Probing: true },
      ...opts,
    });
    closers.push(() => server.close());
    return server;
  }

  function closeServer(s: Closable): void {
    closers.push(() => new Promise((r) => {
      if ('closeAllConnections' in s) s.closeAllConnections();
      s.close(r);
    }));
  }

  before(async () => {
    const app = createServer(appHandler(seenHttp));
    app.on('connection', () => { connections.http++; });
    appPort = await listen(app);
    closeServer(app);

    const tls = createSecureServer({ ...TLS, allowHTTP1: true }, appHandler(seenTls));
    tls.on('secureConnection', () => { connections.tls++; });
    tlsPort = await listen(tls);
    closers.push(() => new Promise((r) => tls.close(r)));

    const tlsH1 = createHttpsServer(TLS, appHandler(seenTlsH1));
    tlsH1Port = await listen(tlsH1);
    closeServer(tlsH1);

    const grpc = grpcHealthServer(grpcRequests);
    grpcPort = await listen(grpc);
    closers.push(() => new Promise((r) => grpc.close(r)));

    downPort = await closedPort();
  });

  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  describe('/healthz/ready', () => {
    it('answers 503 with the reason until ready, then 200', async () => {
      let state: Readiness = { ready: false, reason: 'listeners not bound: 15001' };
      const s = await status('', { readiness: () => state });
      assert.deepEqual(await get(s.port, '/healthz/ready'), { status: 503, body: 'listeners not bound: 15001\n' });
      state = { ready: false };
      assert.deepEqual(await get(s.port, '/healthz/ready'), { status: 503, body: 'not ready\n' });
      state = { ready: true };
      assert.deepEqual(await get(s.port, '/healthz/ready?x=1'), { status: 200, body: '' });
      state = { ready: false, reason: 'draining' };
      assert.deepEqual(await get(s.port, '/healthz/ready'), { status: 503, body: 'draining\n' });
    });

    it('answers 500 when the readiness callback throws, and keeps serving', async () => {
      let calls = 0;
      const s = await status('', { readiness: () => { if (++calls === 1) throw new Error('boom'); return { ready: true }; } });
      assert.deepEqual(await get(s.port, '/healthz/ready'), { status: 500, body: 'internal error\n' });
      assert.deepEqual(await get(s.port, '/healthz/ready'), { status: 200, body: '' });
    });

    it('answers 404 for unknown paths and unconfigured probes', async () => {
      const s = await status({ '/app-health/web/livez': { tcpSocket: { port: appPort } } });
      assert.deepEqual(await get(s.port, '/'), { status: 404, body: '404 page not found\n' });
      assert.deepEqual(await get(s.port, '/healthz/readyz'), { status: 404, body: '404 page not found\n' });
      assert.deepEqual(await get(s.port, '/app-health/web/readyz'),
        { status: 404, body: 'no application probe configured for /app-health/web/readyz\n' });
      assert.deepEqual(await get(s.port, '/app-health/other/livez'),
        { status: 404, body: 'no application probe configured for /app-health/other/livez\n' });
    });

    it('starts with broken MESH_APP_PROBERS, keeping the valid entries', async () => {
      const bad = await status('{not json');
      assert.equal((await get(bad.port, '/healthz/ready')).status, 200);
      const mixed = await status({ '/app-health/a/livez': { tcpSocket: { port: 'http' } }, '/app-health/b/livez': { tcpSocket: { port: appPort } } });
      assert.equal((await get(mixed.port, '/app-health/a/livez')).status, 404);
      assert.equal((await get(mixed.port, '/app-health/b/livez')).status, 200);
    });
  });

  describe('HTTP probes', () => {
    let s: StatusServer;
    const httpProbe = (path: string, extra: Record<string, unknown> = {}, timeoutSeconds = 1): unknown =>
      ({ httpGet: { path, port: appPort, scheme: 'HTTP', ...extra }, timeoutSeconds });
    before(async () => {
      s = await status({
        '/app-health/ok/livez': httpProbe('/ok', { httpHeaders: [{ name: 'X-Custom', value: '1' }, { name: 'Host', value: 'web.example' }] }),
        '/app-health/fail/livez': httpProbe('/fail'),
        '/app-health/unavailable/readyz': httpProbe('/unavailable'),
        '/app-health/redirect/livez': httpProbe('/redirect'),
        '/app-health/slow/livez': httpProbe('/slow', {}, 1),
        '/app-health/down/livez': { httpGet: { path: '/ok', port: downPort }, timeoutSeconds: 1 },
        '/app-health/hosted/startupz': { httpGet: { path: '/ok', port: appPort, host: LOCAL } },
      }, { env: { instanceIp: '', rewriteLegacyLocalhost: false, keepAlive: false, http2Probing: true } });
    });

    it('answers 200 when the app answers 200, passing the probe\'s and the kubelet\'s headers', async () => {
      seenHttp.length = 0;
      const r = await get(s.port, '/app-health/ok/livez', { 'user-agent': 'kube-probe/1.30', 'x-custom': 'from-kubelet' });
      assert.deepEqual(r, { status: 200, body: 'HTTP probe succeeded with statuscode: 200\n' });
      assert.equal(seenHttp.length, 1);
      const seen = seenHttp[0]!;
      assert.equal(seen.path, '/ok');
      assert.equal(seen.headers['x-custom'], '1', 'the probe\'s header replaces the kubelet\'s');
      assert.equal(seen.headers['host'], 'web.example');
      assert.equal(seen.headers['user-agent'], 'kube-probe/1.30');
      assert.equal(seen.headers['connection'], 'close', 'no keep-alive by default');
      assert.equal(seen.remote, LOCAL, 'INSTANCE_IP empty: 127.0.0.1, not bound to 127.0.0.6');
    });

    it('answers 500 when the app answers 500 or 503', async () => {
      assert.deepEqual(await get(s.port, '/app-health/fail/livez'), { status: 500, body: 'HTTP probe failed with statuscode: 500\n' });
      assert.deepEqual(await get(s.port, '/app-health/unavailable/readyz'), { status: 500, body: 'HTTP probe failed with statuscode: 503\n' });
    });

    it('counts a redirect as success without following it', async () => {
      seenHttp.length = 0;
      assert.deepEqual(await get(s.port, '/app-health/redirect/livez'), { status: 200, body: 'HTTP probe succeeded with statuscode: 302\n' });
      assert.deepEqual(seenHttp.map((x) => x.path), ['/redirect']);
    });

    it('answers 500 when the app is down', async () => {
      assert.deepEqual(await get(s.port, '/app-health/down/livez'), {
        status: 500,
        body: `HTTP probe failed: GET http://127.0.0.1:${downPort}/ok: connect ECONNREFUSED 127.0.0.1:${downPort}\n`,
      });
    });

    it('honours timeoutSeconds', async () => {
      const started = Date.now();
      const r = await get(s.port, '/app-health/slow/livez');
      const took = Date.now() - started;
      assert.deepEqual(r, { status: 500, body: `HTTP probe failed: GET http://127.0.0.1:${appPort}/slow: no response within 1000ms\n` });
      assert.ok(took >= 950 && took < 2500, `took ${took}ms`);
    });

    it('goes to the httpGet host when one is set', async () => {
      assert.equal((await get(s.port, '/app-health/hosted/startupz')).status, 200);
    });
  });

  describe('destination', () => {
    it('REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION probes localhost instead of the pod IP', async () => {
      const probers = { '/app-health/web/livez': { tcpSocket: { port: appPort } }, '/app-health/web/readyz': { httpGet: { path: '/ok', port: appPort } } };
      // 192.0.2.0/24 (TEST-NET-1): the pod IP is unreachable from here, or at least has no app.
      const legacy = await status(probers, { env: { instanceIp: '192.0.2.250', rewriteLegacyLocalhost: true, keepAlive: false, http2Probing: true } });
      assert.equal((await get(legacy.port, '/app-health/web/livez')).status, 200);
      assert.equal((await get(legacy.port, '/app-health/web/readyz')).status, 200);
      const podIp = await status(probers, { env: { instanceIp: '192.0.2.250', rewriteLegacyLocalhost: false, keepAlive: false, http2Probing: true } });
      const r = await get(podIp.port, '/app-health/web/livez');
      assert.equal(r.status, 500);
      assert.match(r.body, /^TCP probe failed: 192\.0\.2\.250:\d+: /);
    });

    const podIp = Object.values(networkInterfaces()).flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    it('probes the pod IP from 127.0.0.6, so the inbound capture rules let them through', { skip: !podIp && 'no non-loopback IPv4 address here' }, async () => {
      const seen: Seen[] = [];
      const tcpPeers: string[] = [];
      const app = createServer(appHandler(seen));
      app.on('connection', (socket) => tcpPeers.push(socket.remoteAddress ?? ''));
      const port = await listen(app, '0.0.0.0');
      closeServer(app);
      const s = await status(
        { '/app-health/web/livez': { httpGet: { path: '/ok', port } }, '/app-health/web/readyz': { tcpSocket: { port } } },
        { env: { instanceIp: podIp!, rewriteLegacyLocalhost: false, keepAlive: false, http2Probing: true } });
      assert.deepEqual(await get(s.port, '/app-health/web/livez'), { status: 200, body: 'HTTP probe succeeded with statuscode: 200\n' });
      assert.deepEqual(await get(s.port, '/app-health/web/readyz'), { status: 200, body: `TCP probe succeeded: connected to ${podIp}:${port}\n` });
      assert.deepEqual(seen.map((x) => x.remote), ['127.0.0.6']);
      assert.deepEqual(tcpPeers, ['127.0.0.6', '127.0.0.6']);
    });
  });

  describe('keep-alive', () => {
    const probers = (): unknown => ({ '/app-health/web/livez': { httpGet: { path: '/ok', port: appPort } } });

    it('ENABLE_PROBE_KEEPALIVE_CONNECTIONS=false: a fresh connection per probe, Connection: close', async () => {
      const s = await status(probers() as Record<string, unknown>);
      seenHttp.length = 0;
      const before = connections.http;
      for (let i = 0; i < 3; i++) assert.equal((await get(s.port, '/app-health/web/livez')).status, 200);
      assert.equal(connections.http - before, 3);
      assert.deepEqual(seenHttp.map((x) => x.headers['connection']), ['close', 'close', 'close']);
    });

    it('ENABLE_PROBE_KEEPALIVE_CONNECTIONS=true: one connection reused', async () => {
      const s = await status(probers() as Record<string, unknown>, { env: { instanceIp: LOCAL, rewriteLegacyLocalhost: false, keepAlive: true, http2Probing: true } });
      seenHttp.length = 0;
      const before = connections.http;
      for (let i = 0; i < 3; i++) assert.equal((await get(s.port, '/app-health/web/livez')).status, 200);
      assert.equal(connections.http - before, 1);
      assert.deepEqual(seenHttp.map((x) => x.headers['connection']), ['keep-alive', 'keep-alive', 'keep-alive']);
    });
  });

  describe('HTTPS probes', () => {
    const https = (port: number, path: string): unknown => ({ httpGet: { path, port, scheme: 'HTTPS', httpHeaders: [{ name: 'X-Custom', value: 'tls' }] }, timeoutSeconds: 2 });
    const probers = (): Record<string, unknown> => ({
      '/app-health/h2/livez': https(tlsPort, '/ok'),
      '/app-health/h2/readyz': https(tlsPort, '/unavailable'),
      '/app-health/h1/livez': https(tlsH1Port, '/ok'),
      '/app-health/h1/readyz': https(tlsH1Port, '/fail'),
    });

    it('MESH_ENABLE_HTTP2_PROBING=true: HTTP/2 where the app offers h2, without verifying its certificate', async () => {
      const s = await status(probers());
      seenTls.length = 0;
      assert.deepEqual(await get(s.port, '/app-health/h2/livez'), { status: 200, body: 'HTTP probe succeeded with statuscode: 200\n' });
      assert.deepEqual(await get(s.port, '/app-health/h2/readyz'), { status: 500, body: 'HTTP probe failed with statuscode: 503\n' });
      assert.deepEqual(seenTls.map((x) => [x.path, x.httpVersion, x.headers['x-custom']]), [['/ok', '2.0', 'tls'], ['/unavailable', '2.0', 'tls']]);
    });

    it('MESH_ENABLE_HTTP2_PROBING=true: falls back to HTTP/1.1 where the app does not', async () => {
      const s = await status(probers());
      seenTlsH1.length = 0;
      assert.deepEqual(await get(s.port, '/app-health/h1/livez'), { status: 200, body: 'HTTP probe succeeded with statuscode: 200\n' });
      assert.deepEqual(await get(s.port, '/app-health/h1/readyz'), { status: 500, body: 'HTTP probe failed with statuscode: 500\n' });
      assert.deepEqual(seenTlsH1.map((x) => [x.path, x.httpVersion, x.headers['x-custom']]), [['/ok', '1.1', 'tls'], ['/fail', '1.1', 'tls']]);
    });

    it('MESH_ENABLE_HTTP2_PROBING=false: HTTP/1.1 even where the app offers h2', async () => {
      const s = await status(probers(), { env: { instanceIp: LOCAL, rewriteLegacyLocalhost: false, keepAlive: false, http2Probing: false } });
      seenTls.length = 0;
      assert.deepEqual(await get(s.port, '/app-health/h2/livez'), { status: 200, body: 'HTTP probe succeeded with statuscode: 200\n' });
      assert.deepEqual(seenTls.map((x) => [x.path, x.httpVersion]), [['/ok', '1.1']]);
    });

    it('with keep-alive, reuses one h2 connection and one HTTP/1.1 connection', async () => {
      const s = await status(probers(), { env: { instanceIp: LOCAL, rewriteLegacyLocalhost: false, keepAlive: true, http2Probing: true } });
      seenTls.length = 0;
      seenTlsH1.length = 0;
      const before = connections.tls;
      for (let i = 0; i < 3; i++) assert.equal((await get(s.port, '/app-health/h2/livez')).status, 200);
      assert.equal(connections.tls - before, 1);
      assert.deepEqual(seenTls.map((x) => x.httpVersion), ['2.0', '2.0', '2.0']);
      for (let i = 0; i < 3; i++) assert.equal((await get(s.port, '/app-health/h1/livez')).status, 200);
      assert.deepEqual(seenTlsH1.map((x) => x.httpVersion), ['1.1', '1.1', '1.1']);
    });
  });

  describe('TCP probes', () => {
    it('answers 200 when the port accepts, 500 when it is closed', async () => {
      const s = await status({
        '/app-health/up/readyz': { tcpSocket: { port: appPort }, timeoutSeconds: 2 },
        '/app-health/down/readyz': { tcpSocket: { port: downPort }, timeoutSeconds: 2 },
      });
      assert.deepEqual(await get(s.port, '/app-health/up/readyz'), { status: 200, body: `TCP probe succeeded: connected to 127.0.0.1:${appPort}\n` });
      assert.deepEqual(await get(s.port, '/app-health/down/readyz'), {
        status: 500, body: `TCP probe failed: 127.0.0.1:${downPort}: connect ECONNREFUSED 127.0.0.1:${downPort}\n`,
      });
    });
  });

  describe('gRPC probes', () => {
    let s: StatusServer;
    before(async () => {
      s = await status({
        '/app-health/grpc/livez': { grpc: { port: grpcPort, service: 'my.Service' }, timeoutSeconds: 1 },
        '/app-health/grpc/readyz': { grpc: { port: grpcPort, service: 'down.Service' }, timeoutSeconds: 1 },
        '/app-health/grpc/startupz': { grpc: { port: grpcPort } },
        '/app-health/quiet/livez': { grpc: { port: grpcPort, service: 'quiet.Service' } },
        '/app-health/unknown/livez': { grpc: { port: grpcPort, service: 'nope.Service' } },
        '/app-health/down/livez': { grpc: { port: downPort } },
        '/app-health/slow/livez': { grpc: { port: grpcPort, service: 'slow.Service' }, timeoutSeconds: 1 },
      });
    });

    it('answers 200 for SERVING, sending the service name', async () => {
      grpcRequests.length = 0;
      assert.deepEqual(await get(s.port, '/app-health/grpc/livez'), { status: 200, body: 'gRPC probe succeeded: SERVING\n' });
      assert.deepEqual(await get(s.port, '/app-health/grpc/startupz'), { status: 200, body: 'gRPC probe succeeded: SERVING\n' });
      assert.deepEqual(grpcRequests, [
        { path: '/grpc.health.v1.Health/Check', contentType: 'application/grpc', service: 'my.Service' },
        { path: '/grpc.health.v1.Health/Check', contentType: 'application/grpc', service: '' },
      ]);
    });

    it('answers 500 for NOT_SERVING and for a status left at its default (UNKNOWN)', async () => {
      assert.deepEqual(await get(s.port, '/app-health/grpc/readyz'),
        { status: 500, body: 'gRPC probe failed: service unhealthy (responded with "NOT_SERVING")\n' });
      assert.deepEqual(await get(s.port, '/app-health/quiet/livez'),
        { status: 500, body: 'gRPC probe failed: service unhealthy (responded with "UNKNOWN")\n' });
    });

    it('answers 500 with the RPC error, and when the app is down', async () => {
      assert.deepEqual(await get(s.port, '/app-health/unknown/livez'),
        { status: 500, body: `gRPC probe failed: 127.0.0.1:${grpcPort}: rpc error: code = NotFound desc = unknown service\n` });
      const down = await get(s.port, '/app-health/down/livez');
      assert.equal(down.status, 500);
      assert.equal(down.body, `gRPC probe failed: 127.0.0.1:${downPort}: connect ECONNREFUSED 127.0.0.1:${downPort}\n`);
    });

    it('honours timeoutSeconds', async () => {
      const started = Date.now();
      const r = await get(s.port, '/app-health/slow/livez');
      const took = Date.now() - started;
      assert.deepEqual(r, { status: 500, body: `gRPC probe failed: 127.0.0.1:${grpcPort}: no response within 1000ms\n` });
      assert.ok(took >= 950 && took < 2500, `took ${took}ms`);
    });
  });

  describe('listening', () => {
    it('listens on every address by default (:: dual stack, or 0.0.0.0 without IPv6)', async () => {
      const server = await startStatusServer({
        port: 0, readiness: () => ({ ready: true }), probers: '',
        env: { instanceIp: '', rewriteLegacyLocalhost: false, keepAlive: false, http2Probing: true },
      });
      closers.push(() => server.close());
      assert.deepEqual(await get(server.port, '/healthz/ready'), { status: 200, body: '' });
    });

    it('rejects when the port is taken', async () => {
      const taken = await status('');
      await assert.rejects(status('', { port: taken.port }), /EADDRINUSE/);
    });
  });

  describe('pilot-agent wait', () => {
    it('succeeds once the status server turns ready', async () => {
      // Not ready for the first two asks (not for a time: a loaded host may start the CLI late).
      let asked = 0;
      const s = await status('', { readiness: () => { asked++; return asked > 2 ? { ready: true } : { ready: false, reason: 'config not loaded' }; } });
      const r = await runCli(['wait', '--url', `http://127.0.0.1:${s.port}/healthz/ready`, '--periodMillis', '100', '--timeoutSeconds', '10']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /The proxy is ready!/);
      assert.ok(asked >= 3, `polled through the 503s (asked ${asked} times)`);
    });

    it('fails with the 503 as the last error while not ready', async () => {
      const s = await status('', { readiness: () => ({ ready: false, reason: 'draining' }) });
      const r = await runCli(['wait', '--url', `http://127.0.0.1:${s.port}/healthz/ready`, '--periodMillis', '100', '--timeoutSeconds', '1']);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /Last error: HTTP status code 503/);
    });
  });
});
