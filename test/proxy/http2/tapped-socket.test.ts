// src/proxy/http2/tapped-socket.ts with header-check.ts over loopback: the measured experiment of
// docs/PERFORMANCE.md ("HTTP/2 strictness"), not in the data path. A node:http2 server session runs
// over the tapped socket (bytes the socket held already included), the inspector sees every byte
// node reads, and a request with a field nghttp2 would drop is reset with PROTOCOL_ERROR before any
// handler sees it, while a good request on the same connection is answered. Over mutual TLS the
// connection's identity stays on the TLS socket under the tap (peer certificate, ALPN, addresses),
// and the inspector sees the plaintext.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import { describe, it } from 'node:test';
import { connect as connectTls, TLSSocket } from 'node:tls';
import { HeaderCheck } from '../../../src/proxy/http2/header-check.js';
import { tapped } from '../../../src/proxy/http2/tapped-socket.js';
import { CLIENT_PREFACE } from '../../../src/proxy/http2/preface.js';
import { frame } from '../../helpers/h2-frame.js';
import { adoptTlsReads } from '../../../src/proxy/read-buffers.js';
import { uriSans } from '../../../src/proxy/tls/peer-identity.js';
import { createRootCa, issueWorkloadCert } from '../../helpers/mesh-certs.js';

describe('tapped (node:http2 over an inspected socket)', () => {
  it('serves a connection; a malformed request is reset with PROTOCOL_ERROR, the good one answered', async () => {
    let inspected = 0;
    const handled: string[] = [];
    const server = net.createServer((socket) => {
      socket.pause();
      // What a sniffer read first goes back into the socket, as the proxy's listeners do.
      socket.once('readable', () => {
        const head = socket.read(10) as Buffer | null;
        if (head) socket.unshift(head);
        const refused = new Set<number>();
        const check = new HeaderCheck(true, { malformed: (id) => refused.add(id), broken: () => socket.destroy() });
        const session = http2.performServerHandshake(tapped(socket, (b) => { inspected += b.length; check.feed(b); }));
        session.on('stream', (stream, headers) => {
          stream.on('error', () => {});
          if (refused.delete(stream.id!)) {
            stream.close(http2.constants.NGHTTP2_PROTOCOL_ERROR);
            return;
          }
          handled.push(String(headers[':path']));
          stream.respond({ ':status': 200 });
          stream.end('ok');
        });
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      // node's client refuses to send a bad value itself: write the request's block raw on a second
      // stream of a session whose first request is a normal one.
      const client = http2.connect(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
      const good = client.request({ ':path': '/good' });
      good.resume();
      const [goodHeaders] = await once(good, 'response') as [http2.IncomingHttpHeaders];
      assert.equal(goodHeaders[':status'], 200);
      client.close();

      const raw = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      await once(raw, 'connect');
      const lit = (n: string, v: string): Buffer => Buffer.concat([Buffer.from([0, n.length]), Buffer.from(n), Buffer.from([v.length]), Buffer.from(v, 'latin1')]);
      const base = Buffer.concat([Buffer.from([0x82, 0x86]), lit(':path', '/bad'), lit(':authority', 'a')]);
      raw.write(Buffer.concat([
        Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(0x4, 0, 0, Buffer.alloc(0)),
        frame(0x1, 0x5, 1, Buffer.concat([base, lit('x-a', 'a\r\nb')])),
        frame(0x1, 0x5, 3, Buffer.concat([Buffer.from([0x82, 0x86]), lit(':path', '/after'), lit(':authority', 'a')])),
      ]));
      const seen = { reset: -1, answered: [] as number[] };
      let buf: Buffer = Buffer.alloc(0);
      raw.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
          const len = buf.readUIntBE(0, 3);
          if (buf[3] === 0x3) seen.reset = buf.readUInt32BE(9);
          if (buf[3] === 0x1) seen.answered.push(buf.readUInt32BE(5));
          buf = buf.subarray(9 + len);
        }
      });
      for (let i = 0; i < 100 && !(seen.reset >= 0 && seen.answered.length > 0); i++) await new Promise((r) => setTimeout(r, 20));
      raw.destroy();
      assert.equal(seen.reset, http2.constants.NGHTTP2_PROTOCOL_ERROR);
      assert.deepEqual(seen.answered, [3]);
      assert.deepEqual(handled, ['/good', '/after']);
      assert.ok(inspected > 0);
    } finally {
      server.close();
    }
  });
});

describe('tapped over mutual TLS', () => {
  it('the session runs on the TLS socket\'s plaintext; the peer certificate and ALPN stay readable on that socket', async () => {
    const ca = await createRootCa();
    const serverCert = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/a/sa/server' });
    const clientCert = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/b/sa/client' });
    let first: Buffer | undefined;
    const facts: { peer?: string | undefined; alpn?: string | false | null; remote?: string | undefined } = {};
    const server = net.createServer((raw) => {
      // As the proxy terminates mesh TLS: a TLSSocket made around the accepted connection.
      const tls = new TLSSocket(raw, { isServer: true, cert: serverCert.chainPem, key: serverCert.keyPem, ca: serverCert.rootPem,
        requestCert: true, rejectUnauthorized: true, ALPNProtocols: ['h2'] });
      adoptTlsReads(tls);
      tls.on('error', () => {});
      tls.once('secure', () => {
        tls.pause();
        const session = http2.performServerHandshake(tapped(tls, (b) => { first ??= Buffer.from(b); }));
        session.on('stream', (stream) => {
          facts.peer = uriSans(tls.getPeerCertificate())[0];
          facts.alpn = tls.alpnProtocol;
          facts.remote = tls.remoteAddress;
          stream.respond({ ':status': 200 });
          stream.end('ok');
        });
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const port = (server.address() as net.AddressInfo).port;
      const client = http2.connect(`https://127.0.0.1:${port}`, {
        createConnection: () => connectTls({ host: '127.0.0.1', port, ca: clientCert.rootPem, cert: clientCert.chainPem, key: clientCert.keyPem,
          ALPNProtocols: ['h2'], checkServerIdentity: () => undefined }),
      });
      client.on('error', () => {});
      const req = client.request({ ':path': '/' });
      let body = '';
      req.setEncoding('utf8').on('data', (d: string) => { body += d; });
      const [headers] = await once(req, 'response') as [http2.IncomingHttpHeaders];
      await once(req, 'end');
      client.close();
      assert.equal(headers[':status'], 200);
      assert.equal(body, 'ok');
      assert.deepEqual(facts, { peer: 'spiffe://cluster.local/ns/b/sa/client', alpn: 'h2', remote: '127.0.0.1' });
      assert.ok(first?.subarray(0, CLIENT_PREFACE.length).equals(CLIENT_PREFACE), 'the inspector reads plaintext from the preface on');
    } finally {
      server.close();
    }
  });
});
