// COMPLIANCE_POLICY=fips-140-2 at the gateway, with openssl s_client from inside the pod's namespace:
// Istio's restriction (TLS 1.2 only, the four ECDHE AES-GCM suites, P-256) over every HTTPS server,
// whatever the Gateway asked for; a client that offers only something else is refused in the
// handshake. The same policy is laid over mesh mTLS, DestinationRule TLS, the CA client and key set
// fetches (test/security/compliance.test.ts checks the contexts; this checks a running gateway).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { credentialDir, routeTo, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';

const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: fips, namespace: edge}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8443, name: https, protocol: HTTPS}
    hosts: [a.example.com]
    tls: {mode: SIMPLE, credentialName: a}
  - port: {number: 9443, name: https-13, protocol: HTTPS}
    hosts: [b.example.com]
    tls: {mode: SIMPLE, credentialName: b, minProtocolVersion: TLSV1_3}
---
${routeTo('a', ['a.example.com', 'b.example.com'], 'fips', 9080, 'edge')}`;

const FIPS_SUITES = ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384'];

describe('pilot-agent proxy router: COMPLIANCE_POLICY=fips-140-2', () => {
  let pod: GatewayPod;

  /** One `openssl s_client -brief` handshake from inside the namespace. */
  const handshake = (port: number, args: string[]): { ok: boolean; protocol?: string; cipher?: string; text: string } => {
    const r = spawnSync('ip', ['netns', 'exec', pod.ns.name, 'openssl', 's_client', '-brief', '-connect', `127.0.0.1:${port}`, ...args],
      { input: '', encoding: 'utf8', timeout: 10_000 });
    const text = `${r.stdout}${r.stderr}`;
    const field = (name: string): string | undefined => new RegExp(`^${name}: (.*)$`, 'm').exec(text)?.[1]?.trim();
    return {
      ok: /CONNECTION ESTABLISHED/.test(text), text,
      ...(field('Protocol version') ? { protocol: field('Protocol version')! } : {}),
      ...(field('Ciphersuite') ? { cipher: field('Ciphersuite')! } : {}),
    };
  };

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'edge.yaml': RESOURCES },
      namespace: 'edge',
      apps: { 9080: 'a' },
      env: { COMPLIANCE_POLICY: 'fips-140-2' },
      prepare: (p) => {
        for (const name of ['a', 'b']) {
          const dir = credentialDir(p.dir, name);
          const cn = `${name}.example.com`;
          const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${cn}`,
            '-addext', `subjectAltName=DNS:${cn}`, '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt')], { encoding: 'utf8' });
          assert.equal(r.status, 0, r.stderr);
        }
      },
    });
  });
  after(() => pod?.close());

  it('says at start what the policy restricts, and which Gateway setting it overrides', () => {
    assert.match(pod.output(), /COMPLIANCE_POLICY=fips-140-2: every TLS context of the agent .* negotiates TLS 1\.2 only/);
    assert.match(pod.output(), /gateway: port 9443: server .*b\.example\.com.*COMPLIANCE_POLICY=fips-140-2 overrides TLS 1\.3 as the minimum/);
  });

  it('a client offering everything gets TLS 1.2 with a FIPS suite (TLS 1.3 is what it would get without the policy)', () => {
    const h = handshake(8443, ['-servername', 'a.example.com']);
    assert.ok(h.ok, h.text);
    assert.equal(h.protocol, 'TLSv1.2', h.text);
    assert.ok(FIPS_SUITES.includes(h.cipher ?? ''), h.text);
    const b = handshake(9443, ['-servername', 'b.example.com']);
    assert.equal(b.protocol, 'TLSv1.2', `a server asking TLSV1_3 is held to TLS 1.2 too: ${b.text}`);
    assert.equal(pod.send([{ url: 'https://127.0.0.1:8443/x', headers: { host: 'a.example.com' }, servername: 'a.example.com' }])[0]!.status, 200);
  });

  it('refuses a client that offers only TLS 1.3, only a non-FIPS suite, or only a non-FIPS curve', () => {
    const sni = ['-servername', 'a.example.com'];
    for (const args of [['-tls1_3'], ['-tls1_2', '-cipher', 'ECDHE-RSA-CHACHA20-POLY1305'], ['-tls1_2', '-cipher', 'AES128-GCM-SHA256'],
      ['-tls1_2', '-cipher', 'ECDHE-RSA-AES128-SHA'], ['-tls1_2', '-curves', 'X25519']]) {
      const h = handshake(8443, [...sni, ...args]);
      assert.equal(h.ok, false, `${args.join(' ')} was accepted: ${h.text}`);
    }
    for (const [args, cipher] of [[['-tls1_2', '-cipher', 'ECDHE-RSA-AES256-GCM-SHA384'], 'ECDHE-RSA-AES256-GCM-SHA384'], [['-curves', 'P-256'], undefined]] as const) {
      const h = handshake(8443, [...sni, ...args]);
      assert.ok(h.ok, `${args.join(' ')} refused: ${h.text}`);
      if (cipher) assert.equal(h.cipher, cipher);
    }
  });
});
