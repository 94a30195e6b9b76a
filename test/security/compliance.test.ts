// COMPLIANCE_POLICY=fips-140-2 (Istio's: TLS 1.2 only, four ECDHE AES-GCM suites, P-256), first as
// options, then as what a real server and client made with them negotiate.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createServer as createNetServer, type Server } from 'node:net';
import { connect, createSecureContext, TLSSocket, type ConnectionOptions, type SecureContext } from 'node:tls';
import { complianceOverride, compliantTls, FIPS_CIPHER_SUITES } from '../../src/security/compliance.js';
import { MeshCredentials } from '../../src/proxy/tls/mesh-credentials.js';
import { nodeTlsSettings } from '../../src/config/resources/tls-parameters.js';
import { repoRoot } from '../helpers/repo.js';

const cert = readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.crt'));
const key = readFileSync(join(repoRoot, 'test', 'fixtures', 'localhost.key'));

/** A TLS server on a context, as the agent makes its servers (a TLSSocket over an accepted socket). */
async function serveTls(context: SecureContext, mutual = false): Promise<{ server: Server; port: number }> {
  const server = createNetServer((raw) => {
    const s = new TLSSocket(raw, { isServer: true, secureContext: context, requestCert: mutual, rejectUnauthorized: mutual });
    s.on('error', () => raw.destroy());
    s.on('secure', () => s.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

describe('compliantTls', () => {
  it('no policy: the options as they are (the same object)', () => {
    const o = { minVersion: 'TLSv1.3' as const, ciphers: 'ECDHE-RSA-CHACHA20-POLY1305' };
    assert.equal(compliantTls('', o), o);
  });

  it('fips-140-2: TLS 1.2 only, the FIPS suites asked for, else all four, P-256; the rest kept', () => {
    const asked = compliantTls('fips-140-2', { ca: 'x', minVersion: 'TLSv1.3' as const, ciphers: 'ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384:TLS_AES_128_GCM_SHA256' });
    assert.deepEqual(asked, { ca: 'x', minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES256-GCM-SHA384', ecdhCurve: 'P-256' });
    assert.equal(compliantTls('fips-140-2', {}).ciphers, FIPS_CIPHER_SUITES.join(':'));
    assert.equal(compliantTls('fips-140-2', { ciphers: 'AES128-SHA' }).ciphers, FIPS_CIPHER_SUITES.join(':'), 'none of them FIPS: the four');
    assert.throws(() => compliantTls('pqc', {}), /unknown COMPLIANCE_POLICY "pqc"/);
  });

  it('says what a Gateway server loses to the policy', () => {
    assert.equal(complianceOverride('', nodeTlsSettings({ minProtocolVersion: 'TLSV1_3' })), undefined);
    assert.equal(complianceOverride('fips-140-2', nodeTlsSettings({})), undefined, 'the defaults hold FIPS suites: nothing asked for is lost');
    assert.match(complianceOverride('fips-140-2', nodeTlsSettings({ minProtocolVersion: 'TLSV1_3' }))!, /overrides TLS 1\.3 as the minimum/);
    assert.match(complianceOverride('fips-140-2', nodeTlsSettings({ cipherSuites: ['ECDHE-RSA-CHACHA20-POLY1305'] }))!, /every suite asked for \(ECDHE-RSA-CHACHA20-POLY1305\)/);
  });
});

describe('a server and a client made under fips-140-2', () => {
  let server: Server;
  let port = 0;
  before(async () => {
    // A server that would take anything (TLS 1.3, ChaCha20, X25519) but for the policy.
    ({ server, port } = await serveTls(createSecureContext(compliantTls('fips-140-2', { cert, key, minVersion: 'TLSv1.2' as const, maxVersion: 'TLSv1.3' as const }))));
  });
  after(() => server.close());

  const handshake = (options: ConnectionOptions): Promise<{ protocol: string | null; cipher: string } | string> => new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, servername: 'localhost', ca: cert, ...options }, () => {
      const result = { protocol: socket.getProtocol(), cipher: socket.getCipher().name };
      socket.destroy();
      resolve(result);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });

  it('a default client gets TLS 1.2 with a FIPS suite', async () => {
    const r = await handshake({});
    assert.ok(typeof r !== 'string', String(r));
    assert.equal(r.protocol, 'TLSv1.2');
    assert.ok(FIPS_CIPHER_SUITES.includes(r.cipher), r.cipher);
  });

  it('refuses TLS 1.3 only, a non-FIPS suite only, and X25519 only', async () => {
    assert.equal(typeof await handshake({ minVersion: 'TLSv1.3' }), 'string', 'TLS 1.3 only');
    assert.equal(typeof await handshake({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-CHACHA20-POLY1305' }), 'string', 'ChaCha20 only');
    assert.equal(typeof await handshake({ maxVersion: 'TLSv1.2', ciphers: 'AES128-GCM-SHA256' }), 'string', 'RSA key exchange only');
    assert.equal(typeof await handshake({ ecdhCurve: 'X25519' }), 'string', 'X25519 only');
    assert.ok(typeof await handshake({ ecdhCurve: 'P-256' }) !== 'string', 'P-256 is taken');
  });

  it('a client context made under it does not offer what a server would prefer beyond it', async () => {
    const client = createSecureContext(compliantTls('fips-140-2', { ca: cert }));
    const r = await handshake({ secureContext: client });
    assert.ok(typeof r !== 'string' && r.protocol === 'TLSv1.2' && FIPS_CIPHER_SUITES.includes(r.cipher), JSON.stringify(r));
  });
});

describe('MeshCredentials', () => {
  it('makes the mesh context under the policy it is given', async () => {
    const { createRootCa, issueWorkloadCert } = await import('../helpers/mesh-certs.js');
    const root = await createRootCa();
    const leaf = await issueWorkloadCert(root, { spiffeId: 'spiffe://cluster.local/ns/default/sa/a' });
    const certificate = { certChainPem: leaf.chainPem, keyPem: leaf.keyPem, rootPem: leaf.rootPem, spiffeId: 'spiffe://cluster.local/ns/default/sa/a', serial: '1' };
    const negotiate = async (policy: string): Promise<string | null> => {
      const creds = new MeshCredentials(policy);
      creds.set(certificate as never);
      const context = creds.current!.context;
      const { server, port } = await serveTls(context, true);
      try {
        return await new Promise((resolve, reject) => {
          const s = connect({ host: '127.0.0.1', port, secureContext: context, checkServerIdentity: () => undefined }, () => {
            resolve(s.getProtocol());
            s.destroy();
          });
          s.once('error', reject);
        });
      } finally {
        server.close();
      }
    };
    assert.equal(await negotiate(''), 'TLSv1.3', 'mesh mTLS takes TLS 1.3 without a policy');
    assert.equal(await negotiate('fips-140-2'), 'TLSv1.2', 'and TLS 1.2 under fips-140-2');
  });
});
