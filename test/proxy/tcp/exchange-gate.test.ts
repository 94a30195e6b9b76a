// The relay of an outbound connection that offered the TCP metadata exchange (loopback, real TLS):
// this side's frame goes first and the client's bytes follow at once, without waiting for the
// server's frame; the server's bytes reach the client only without its frame; a server that selects
// `istio` gets no frame and the relay is the plain one.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, connect as connectTcp, type AddressInfo, type Server, type Socket } from 'node:net';
import { connect as connectTls, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { after, describe, it } from 'node:test';
import { metadataOfHeader } from '../../../src/metrics/peer-metadata.js';
import { encodeExchangeFrame } from '../../../src/metrics/tcp-exchange-frame.js';
import { upstreamExchangeGate } from '../../../src/proxy/tcp/metadata-exchange.js';
import { relay } from '../../../src/proxy/tcp/relay.js';
import { envoyFrame, sidecarFields } from '../../helpers/exchange-frames.js';
import { repoRoot } from '../../helpers/repo.js';

const CERT = readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.crt'));
const KEY = readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.key'));
const OURS = encodeExchangeFrame({ NAME: 'sleep-0', NAMESPACE: 'default', WORKLOAD_NAME: 'sleep' }, 'sidecar~10.0.0.1~sleep-0.default~default.svc.cluster.local');
const THEIRS = envoyFrame(sidecarFields({ pod: 'ratings-v1-7dc98c7588-kx2l9', namespace: 'default', workload: 'ratings-v1', app: 'ratings', version: 'v1', ip: '10.0.0.9' }));

const servers: Server[] = [];
const sockets: Socket[] = [];
after(() => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
});

async function listening(server: Server): Promise<number> {
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

/** Client → relay (with the gate) → TLS server selecting from `alpn`, which answers `answer` 300 ms after the handshake. */
async function run(alpn: string[], answer: Buffer): Promise<{ toServer: Buffer; sentBeforeAnswer: Buffer; toClient: string; learnt: string }> {
  let resolveServer: (b: { all: Buffer; before: Buffer }) => void;
  const atServer = new Promise<{ all: Buffer; before: Buffer }>((resolve) => { resolveServer = resolve; });
  const tlsPort = await listening(createTlsServer({ cert: CERT, key: KEY, ALPNProtocols: alpn }, (s) => {
    sockets.push(s);
    const got: Buffer[] = [];
    let before = Buffer.alloc(0);
    s.on('data', (d: Buffer) => got.push(d));
    s.on('error', () => undefined);
    setTimeout(() => { before = Buffer.concat(got); s.end(answer); }, 300);
    s.on('close', () => resolveServer({ all: Buffer.concat(got), before }));
  }));
  let learnt: (k: string) => void;
  const told = new Promise<string>((resolve) => { learnt = resolve; });
  const proxyPort = await listening(createServer({ allowHalfOpen: true, pauseOnConnect: true }, (downstream) => {
    sockets.push(downstream);
    const upstream: TLSSocket = connectTls({ port: tlsPort, host: '127.0.0.1', ALPNProtocols: ['istio-peer-exchange', 'istio'], rejectUnauthorized: false });
    sockets.push(upstream);
    relay(downstream, upstream, undefined, () => undefined, upstreamExchangeGate(upstream, OURS, 2_000, (k) => learnt(k)));
  }));
  const client = connectTcp({ port: proxyPort, host: '127.0.0.1', allowHalfOpen: true });
  sockets.push(client);
  client.on('error', () => undefined);
  let toClient = '';
  client.on('data', (d: Buffer) => { toClient += d.toString('latin1'); });
  client.write('client-bytes');
  await once(client, 'end');
  client.end();
  const server = await atServer;
  return { toServer: server.all, sentBeforeAnswer: server.before, toClient, learnt: await told };
}

describe('the outbound relay with the TCP metadata exchange', () => {
  it('sends this side\'s frame, then the client\'s bytes at once; takes the server\'s frame off its bytes', async () => {
    const r = await run(['istio-peer-exchange', 'istio'], Buffer.concat([THEIRS, Buffer.from('server-bytes')]));
    assert.deepEqual(r.sentBeforeAnswer, Buffer.concat([OURS, Buffer.from('client-bytes')]), 'the client\'s bytes did not wait for the server\'s frame');
    assert.equal(r.toClient, 'server-bytes');
    assert.equal(metadataOfHeader(r.learnt)?.workload, 'ratings-v1');
  });

  it('a server that selects istio: no frame either way, the bytes as they are', async () => {
    const r = await run(['istio'], Buffer.from('server-bytes'));
    assert.equal(r.toServer.toString('latin1'), 'client-bytes');
    assert.equal(r.toClient, 'server-bytes');
    assert.equal(r.learnt, '');
  });
});
