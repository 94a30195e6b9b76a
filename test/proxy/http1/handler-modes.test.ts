// The HTTP/1.1 path over TLS client sockets (the gateway's HTTPS ports) and with every upstream
// mode of upstream.ts: direct (IPv4, IPv6), passthrough from 127.0.0.6, transparent from the
// client's own address (IPv4 and IPv6: the libc-made socket, IP_TRANSPARENT, SO_MARK; root only).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect, Server as TlsServer, type TLSSocket } from 'node:tls';
import { Http1Handler } from '../../../src/proxy/http1/handler.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { repoRoot } from '../../helpers/repo.js';
import { eventually, RawClient, startProxy, startUpstream, type Proxy, type Upstream } from './harness.js';

const GET = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: app\r\n\r\n`;
const urlOf = (body: Buffer): string => (JSON.parse(body.toString()) as { url: string }).url;
const root = process.getuid?.() === 0;

describe('Http1Handler over TLS client sockets', () => {
  let upstream: Upstream;
  let tls: TlsServer;
  let handler: Http1Handler;
  const clients: TLSSocket[] = [];

  before(async () => {
    upstream = await startUpstream();
    upstream.server.on('upgrade', (_req: IncomingMessage, socket: Socket) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      socket.pipe(socket);
    });
    handler = new Http1Handler({ stats: new DirectionStats(), upstream: { kind: 'direct' }, destinationOf: () => upstream.endpoint });
    tls = new TlsServer({
      cert: readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.crt')),
      key: readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.key')),
    });
    tls.on('secureConnection', (socket: TLSSocket) => handler.acceptSocket(socket));
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    for (const c of clients) c.destroy();
    handler.drain();
    await new Promise<void>((resolve) => tls.close(() => resolve()));
    await upstream.close();
  });

  const client = (): Promise<RawClient> => new Promise((resolve, reject) => {
    const port = (tls.address() as { port: number }).port;
    const s = tlsConnect({ port, host: '127.0.0.1', servername: 'localhost', rejectUnauthorized: false }, () => resolve(RawClient.wrap(s)));
    clients.push(s);
    s.once('error', reject);
  });

  it('serves keep-alive requests, then tunnels a confirmed Upgrade', async () => {
    const c = await client();
    c.write(GET('/a') + GET('/b'));
    assert.equal(urlOf((await c.response()).body), '/a');
    assert.equal(urlOf((await c.response()).body), '/b');
    c.write('GET /ws HTTP/1.1\r\nHost: app\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    assert.equal((await c.response()).status, 101);
    c.write('over tls');
    await eventually(() => c.buf.toString() === 'over tls');
    assert.equal(c.buf.toString(), 'over tls');
  });
});

describe('Http1Handler upstream modes', () => {
  const proxies: Proxy[] = [];
  const upstreams: Upstream[] = [];
  const clients: RawClient[] = [];
  after(async () => {
    for (const c of clients) c.destroy();
    for (const p of proxies) await p.close();
    for (const u of upstreams) await u.close();
  });

  const setup = async (mode: Parameters<typeof startProxy>[0]['upstream'], host: string): Promise<{ up: Upstream; p: Proxy }> => {
    const up = await startUpstream(undefined, host);
    upstreams.push(up);
    const p = await startProxy({ destination: up.endpoint, upstream: mode, host });
    proxies.push(p);
    return { up, p };
  };
  const request = async (p: Proxy, host: string, from?: string): Promise<string> => {
    const c = await RawClient.connect(p.port, host, from);
    clients.push(c);
    c.write(GET('/mode'));
    const r = await c.response();
    assert.equal(r.status, 200);
    return urlOf(r.body);
  };

  it('direct over IPv6', async () => {
    const { up, p } = await setup({ kind: 'direct' }, '::1');
    assert.equal(await request(p, '::1'), '/mode');
    assert.deepEqual(up.peers, ['::1']);
  });

  it('passthrough: from 127.0.0.6', async () => {
    const { up, p } = await setup({ kind: 'passthrough' }, '127.0.0.1');
    await request(p, '127.0.0.1');
    assert.deepEqual(up.peers, ['127.0.0.6']);
  });

  it('transparent over IPv4: from the client\'s own address, one pooled connection per client address', { skip: !root && 'needs root (IP_TRANSPARENT)' }, async () => {
    const { up, p } = await setup({ kind: 'transparent', mark: 1337 }, '127.0.0.1');
    await request(p, '127.0.0.1', '127.0.0.2');
    await request(p, '127.0.0.1', '127.0.0.3');
    await request(p, '127.0.0.1', '127.0.0.2');
    assert.deepEqual(up.peers, ['127.0.0.2', '127.0.0.3']);
  });

  it('transparent over IPv6: the libc-made socket', { skip: !root && 'needs root (IPV6_TRANSPARENT)' }, async () => {
    const { up, p } = await setup({ kind: 'transparent', mark: 1337 }, '::1');
    await request(p, '::1');
    await request(p, '::1');
    assert.deepEqual(up.peers, ['::1']);
    assert.equal(p.stats.upstreamCxTotal, 1);
  });
});
