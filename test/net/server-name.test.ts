// The SNI rule (RFC 6066: a DNS name, never an address) and the agent's TLS clients on real sockets:
// each one, sent to 127.0.0.1, offers no server name in its ClientHello (read on the wire by
// test/helpers/sni-recorder.ts), and the ones that verify still check the certificate's names. The
// CA client has its own file (test/identity/ca-credentials.test.ts).
import assert from 'node:assert/strict';
import { createSecureContext, createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { serverNameIndication } from '../../src/net/server-name.js';
import { connectTls, type UpstreamTls } from '../../src/proxy/tls/origination.js';
import { DirectionStats } from '../../src/proxy/stats.js';
import { nodeFetchText } from '../../src/security/jwt/jwks.js';
import type { HttpGetProbe } from '../../src/status/app-probers.js';
import { AppProber } from '../../src/status/probe.js';
import { createRootCa, generateTestKey, signCertificate, type TestCa } from '../helpers/mesh-certs.js';
import { startSniRecorder, type SniRecorder } from '../helpers/sni-recorder.js';

describe('serverNameIndication', () => {
  const cases: [string, string | undefined][] = [
    ['meshd.mesh-system.svc', 'meshd.mesh-system.svc'], ['example.com.', 'example.com'], ['localhost', 'localhost'],
    ['127.0.0.1', undefined], ['10.0.0.1', undefined], ['::1', undefined], ['[fd00::1]', undefined],
    ['::ffff:10.0.0.1', undefined], ['fe80::1%eth0', undefined], ['', undefined], ['.', undefined],
  ];
  for (const [name, expected] of cases) {
    it(`${JSON.stringify(name)} → ${String(expected)}`, () => assert.equal(serverNameIndication(name), expected));
  }
});

describe('TLS clients to an address send no SNI', () => {
  let root: TestCa;
  let server: TlsServer;
  let front: SniRecorder;
  const warnings: Error[] = [];
  const onWarning = (w: Error): void => { warnings.push(w); };

  before(async () => {
    process.on('warning', onWarning);
    root = await createRootCa();
    const key = await generateTestKey();
    const cert = await signCertificate(key.keys.publicKey, root, { subject: 'CN=app', ipAddresses: ['127.0.0.1'] });
    // An HTTPS server that answers every request with a small JSON document; h2 is not offered.
    server = createTlsServer({ cert: `${cert.toString('pem')}\n`, key: key.keyPem, ALPNProtocols: ['http/1.1'] }, (socket: TLSSocket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{"keys":[]}'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    front = await startSniRecorder({ host: '127.0.0.1', port: (server.address() as { port: number }).port });
  });
  after(async () => {
    process.off('warning', onWarning);
    await front?.close();
    await new Promise((resolve) => server?.close(resolve));
  });

  /** Runs `use` and returns the server names its connections sent. */
  async function sent(use: () => Promise<unknown>): Promise<(string | undefined)[]> {
    const from = front.serverNames.length;
    await use();
    const names = front.serverNames.slice(from);
    assert.ok(names.length >= 1, 'the client connected');
    return names;
  }

  function upstream(subjectAltNames: string[]): UpstreamTls {
    return {
      kind: 'tls', key: 'test', secureContext: createSecureContext({ ca: root.certPem }), servername: undefined, alpn: [],
      subjectAltNames, insecureSkipVerify: false, mesh: false, describe: 'SIMPLE (test)',
    };
  }

  /** connectTls to the front: resolves on a verified handshake, rejects with the handshake error. */
  const originate = (subjectAltNames: string[]): Promise<void> => new Promise((resolve, reject) => {
    const socket = connectTls({ address: '127.0.0.1', port: front.port }, upstream(subjectAltNames), new DirectionStats());
    socket.once('secureConnect', () => { socket.destroy(); resolve(); });
    socket.once('error', reject);
  });

  it('DestinationRule SIMPLE to an address: no SNI; subjectAltNames holding the address verify as an IP SAN', async () => {
    assert.deepEqual(await sent(() => originate([])), [undefined]);
    assert.deepEqual(await sent(() => originate(['127.0.0.1'])), [undefined]);
    assert.deepEqual(await sent(() => originate(['spiffe://other', '127.0.0.1'])), [undefined]);
  });

  it('DestinationRule SIMPLE: a certificate for another address fails, naming what it holds', async () => {
    await sent(() => assert.rejects(originate(['10.9.9.9']), (err: Error & { code?: string }) =>
      err.code === 'ERR_TLS_CERT_ALTNAME_INVALID' && /names 127\.0\.0\.1, none of 10\.9\.9\.9/.test(err.message)));
  });

  it('JWKS fetch (node:https) of https://127.0.0.1: no SNI', async () => {
    const fetchText = nodeFetchText({ insecureSkipVerify: true });
    const names = await sent(async () => {
      assert.equal(await fetchText(`https://127.0.0.1:${front.port}/jwks`, AbortSignal.timeout(3000)), '{"keys":[]}');
    });
    assert.deepEqual(names, [undefined]);
  });

  for (const http2Probing of [false, true]) {
    it(`HTTPS app probe to 127.0.0.1 (${http2Probing ? 'ALPN h2, http/1.1' : 'HTTP/1.1'}): no SNI`, async () => {
      const prober = new AppProber({ instanceIp: '', rewriteLegacyLocalhost: false, keepAlive: false, http2Probing });
      const probe: HttpGetProbe = {
        kind: 'httpGet', path: '/app-health/app/readyz', container: 'app', type: 'readyz', timeoutMs: 3000,
        scheme: 'HTTPS', host: '127.0.0.1', port: front.port, requestPath: '/ready', headers: [],
      };
      const names = await sent(async () => {
        const result = await prober.run(probe);
        assert.ok(result.ok, result.message);
      });
      prober.close();
      assert.deepEqual(names, [undefined]);
    });
  }

  it('printed no DEP0123 (nor any other) warning', () => {
    assert.deepEqual(warnings.map((w) => `${(w as Error & { code?: string }).code ?? w.name}: ${w.message}`), []);
  });
});
