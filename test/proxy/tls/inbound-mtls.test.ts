// The server side of a mesh handshake on real sockets: a peer with a certificate of the mesh root
// and this trust domain is accepted with its identity; an expired certificate, one of another root,
// another trust domain, or none is refused (OpenSSL's verdict is enforced: a TLS socket made outside
// a tls.Server does not enforce it by itself).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { connect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { checkCertificateSet } from '../../../src/identity/check.js';
import { DirectionStats } from '../../../src/proxy/stats.js';
import { acceptMeshTls } from '../../../src/proxy/tls/inbound-mtls.js';
import { MeshCredentials } from '../../../src/proxy/tls/mesh-credentials.js';
import type { PeerIdentity } from '../../../src/proxy/tls/peer-identity.js';
import { createRootCa, issueWorkloadCert, type TestCa, type WorkloadCertSet } from '../../helpers/mesh-certs.js';

const HOUR = 3_600_000;
type Outcome = { accepted: PeerIdentity } | { refused: string };

describe('acceptMeshTls', () => {
  let ca: TestCa;
  let server: Server;
  let port = 0;
  const stats = new DirectionStats();
  const credentials = new MeshCredentials();
  let outcomes: ((o: Outcome) => void)[] = [];

  before(async () => {
    ca = await createRootCa();
    const own = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/default/sa/httpbin' });
    credentials.set(checkCertificateSet({ chainPem: own.chainPem, keyPem: own.keyPem, rootPem: own.rootPem },
      { names: { chain: 'chain', key: 'key', root: 'root' }, source: 'test', nowMs: Date.now() }));
    server = createServer((raw) => {
      raw.once('data', (head: Buffer) => {
        raw.pause();
        const report = outcomes.shift()!;
        acceptMeshTls(raw, head, {
          contexts: credentials.current!, stats, handshakeTimeoutMs: 5_000,
          onSecure: (tls, peer) => { report({ accepted: peer }); tls.end('ok'); },
          onFailed: (reason) => report({ refused: reason }),
        });
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });

  after(() => server?.close());

  /** A client with `cert` (or none) offering a mesh ALPN; what the server made of it. */
  const handshake = (cert: WorkloadCertSet | undefined): Promise<Outcome> => new Promise((resolve) => {
    outcomes.push(resolve);
    const c = connect({
      port, host: '127.0.0.1', ALPNProtocols: ['istio-peer-exchange', 'istio'], ca: credentials.current!.certificate.rootPem,
      checkServerIdentity: () => undefined, ...(cert ? { cert: cert.chainPem, key: cert.keyPem } : {}),
    });
    c.on('error', () => undefined);
    c.on('data', () => c.end());
    setTimeout(() => c.destroy(), 3_000).unref();
  });

  it('accepts a peer of the mesh root and trust domain, with its identity', async () => {
    const before = stats.mtlsHandshakes;
    const o = await handshake(await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/default/sa/sleep' }));
    assert.ok('accepted' in o, JSON.stringify(o));
    assert.equal(o.accepted.principal, 'cluster.local/ns/default/sa/sleep');
    assert.equal(o.accepted.namespace, 'default');
    assert.match(o.accepted.certHash, /^[0-9a-f]{64}$/);
    assert.equal(stats.mtlsHandshakes, before + 1);
  });

  const refusals: [string, () => Promise<WorkloadCertSet | undefined>, RegExp][] = [
    ['an expired certificate', () => issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/default/sa/sleep',
      notBefore: new Date(Date.now() - 3 * HOUR), notAfter: new Date(Date.now() - HOUR) }), /CERT_HAS_EXPIRED/],
    ['a certificate not yet valid', () => issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/default/sa/sleep',
      notBefore: new Date(Date.now() + HOUR), notAfter: new Date(Date.now() + 3 * HOUR) }), /CERT_NOT_YET_VALID/],
    ['a certificate of another root', async () => issueWorkloadCert(await createRootCa(), { spiffeId: 'spiffe://cluster.local/ns/default/sa/sleep' }),
      /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER/],
    ['another trust domain', () => issueWorkloadCert(ca, { spiffeId: 'spiffe://other.example/ns/default/sa/sleep' }), /not in the trust domain cluster\.local/],
    ['no SPIFFE id', () => issueWorkloadCert(ca, { spiffeId: null }), /no spiffe:\/\/ URI SAN/],
    ['no certificate', () => Promise.resolve(undefined), /no client certificate|peer did not return a certificate/i],
  ];
  for (const [name, make, reason] of refusals) {
    it(`refuses ${name}`, async () => {
      const failures = stats.mtlsHandshakeFailures;
      const byCertificate = stats.mtlsFailuresByReason.get('peer_certificate') ?? 0;
      const o = await handshake(await make());
      assert.ok('refused' in o, `${name} was accepted`);
      assert.match(o.refused, reason);
      assert.equal(stats.mtlsHandshakeFailures, failures + 1);
      assert.equal(stats.mtlsFailuresByReason.get('peer_certificate'), byCertificate + 1, 'counted as a peer certificate refused');
    });
  }

  after(() => { outcomes = []; });
});
