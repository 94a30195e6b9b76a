// Which mesh ALPN the inbound side selects, on real handshakes: the TCP metadata exchange when a
// client offers it, unless the client also offers an HTTP value (an HTTP client) or the exchange is
// turned off (PILOT_DISABLE_MX_ALPN: the list without it); `istio` otherwise.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { connect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { checkCertificateSet } from '../../../src/identity/check.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { acceptMeshTls } from '../../../src/proxy/tls/inbound-mtls.js';
import { MESH_ALPN_HTTP, MESH_ALPN_SERVER, MESH_ALPN_SERVER_NO_EXCHANGE, MESH_ALPN_TCP } from '../../../src/proxy/tls/mesh-alpn.js';
import { MeshCredentials } from '../../../src/proxy/tls/mesh-credentials.js';
import { createRootCa, issueWorkloadCert, type WorkloadCertSet } from '../../helpers/mesh-certs.js';

describe('the mesh ALPN the inbound side selects', () => {
  let server: Server;
  let port = 0;
  let client: WorkloadCertSet;
  const credentials = new MeshCredentials();
  const lists: (readonly string[])[] = [];

  before(async () => {
    const ca = await createRootCa();
    const own = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/default/sa/httpbin' });
    client = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/default/sa/sleep' });
    credentials.set(checkCertificateSet({ chainPem: own.chainPem, keyPem: own.keyPem, rootPem: own.rootPem },
      { names: { chain: 'chain', key: 'key', root: 'root' }, source: 'test', nowMs: Date.now() }));
    server = createServer((raw) => {
      raw.once('data', (head: Buffer) => {
        raw.pause();
        acceptMeshTls(raw, head, {
          contexts: credentials.current!, stats: new DirectionStats(), handshakeTimeoutMs: 5_000, alpn: lists.shift()!,
          onSecure: (tls) => tls.end(), onFailed: () => undefined,
        });
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });

  after(() => server?.close());

  const selected = (list: readonly string[], offer: readonly string[]): Promise<string | false | null> => new Promise((resolve) => {
    lists.push(list);
    const c = connect({
      port, host: '127.0.0.1', ALPNProtocols: [...offer], ca: client.rootPem, cert: client.chainPem, key: client.keyPem, checkServerIdentity: () => undefined,
    });
    c.on('secureConnect', () => { resolve(c.alpnProtocol); c.destroy(); });
    c.on('error', () => resolve(null));
  });

  const cases: [string, readonly string[], readonly string[], string][] = [
    ['an Envoy TCP client (istio-peer-exchange, istio)', MESH_ALPN_SERVER, ['istio-peer-exchange', 'istio'], 'istio-peer-exchange'],
    ['this agent\'s TCP offer', MESH_ALPN_SERVER, MESH_ALPN_TCP, 'istio-peer-exchange'],
    ['istio first, the exchange after it', MESH_ALPN_SERVER, ['istio', 'istio-peer-exchange'], 'istio-peer-exchange'],
    ['an HTTP client that also offers the exchange', MESH_ALPN_SERVER, ['istio-peer-exchange', 'istio-http/1.1', 'istio'], 'istio-http/1.1'],
    ['an HTTP client', MESH_ALPN_SERVER, MESH_ALPN_HTTP, 'istio-http/1.1'],
    ['the exchange turned off (PILOT_DISABLE_MX_ALPN)', MESH_ALPN_SERVER_NO_EXCHANGE, ['istio-peer-exchange', 'istio'], 'istio'],
  ];
  for (const [name, list, offer, want] of cases) {
    it(`${name}: ${want}`, async () => {
      assert.equal(await selected(list, offer), want);
    });
  }
});
