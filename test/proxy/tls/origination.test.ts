// TLS origination against a real server: ENABLE_AUTO_SNI false sends no SNI, and the certificate is
// still checked against the destination's name (verifyName).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { createSecureContext, createServer, type Server, type TLSSocket } from 'node:tls';
import { connectTls, type UpstreamTls } from '../../../src/proxy/tls/origination.js';
import { ProxyStats } from '../../../src/proxy/stats.js';
import { repoRoot } from '../../helpers/repo.js';

const cert = readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.crt'));
const key = readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.key'));
let server: Server;
let port = 0;

before(async () => {
  // The server answers with the SNI it was sent ('-': none).
  server = createServer({ cert, key }, (s: TLSSocket) => s.end(typeof s.servername === 'string' ? s.servername : '-'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});
after(() => server.close());

const upstream = (over: Partial<UpstreamTls>): UpstreamTls => ({
  kind: 'tls', key: 'k', secureContext: createSecureContext({ ca: cert }), servername: undefined, alpn: [], subjectAltNames: [],
  insecureSkipVerify: false, mesh: false, describe: 'SIMPLE (test)', ...over,
});

/** `sni <what the server saw>` once connected, else the error's code. */
function handshake(t: UpstreamTls): Promise<string> {
  return new Promise((resolve) => {
    const socket = connectTls({ address: '127.0.0.1', port }, t, new ProxyStats().outbound);
    let text = '';
    socket.setEncoding('utf8').on('data', (d: string) => { text += d; });
    socket.once('end', () => resolve(`sni ${text}`));
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

it('with SNI: sent, and the certificate must hold it', async () => {
  assert.equal(await handshake(upstream({ servername: 'localhost', verifyName: 'localhost' })), 'sni localhost');
});

it('without SNI (ENABLE_AUTO_SNI false): none is sent, the name is still checked', async () => {
  assert.equal(await handshake(upstream({ verifyName: 'localhost' })), 'sni -', 'no SNI on the wire');
  assert.equal(await handshake(upstream({ verifyName: 'api.example.com' })), 'ERR_TLS_CERT_ALTNAME_INVALID');
});

it('no name known (an address only): the chain alone', async () => {
  assert.equal(await handshake(upstream({})), 'sni -');
});
