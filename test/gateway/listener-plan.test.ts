import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Gateway, GatewayServer } from '../../src/config/resources/types.js';
import { planListeners, serverForName, sniIndex } from '../../src/gateway/listener-plan.js';

function gateway(name: string, servers: GatewayServer[], namespace = 'mesh-system'): Gateway {
  return { meta: { kind: 'Gateway', apiVersion: 'networking.mesh.io/v1', name, namespace, origin: { file: 'gw.yaml', index: 0 } }, selector: { mesh: 'ingressgateway' }, servers };
}
const server = (number: number, protocol: GatewayServer['port']['protocol'], extra: Partial<GatewayServer> = {}): GatewayServer => ({
  port: { number, name: `p${number}`, protocol }, hosts: [{ namespace: '*', host: '*' }], ...extra,
});

describe('planListeners', () => {
  it('one listener per port, sorted, with the gateways that use it', () => {
    const plan = planListeners([gateway('a', [server(8443, 'HTTP'), server(8080, 'HTTP')]), gateway('b', [server(8080, 'HTTP2')])], '/w');
    assert.deepEqual(plan.ports.map((p) => [p.port, p.protocol, p.gateways]), [[8080, 'HTTP', ['mesh-system/a', 'mesh-system/b']], [8443, 'HTTP', ['mesh-system/a']]]);
    assert.deepEqual(plan.warnings, []);
  });

  it('HTTPS SIMPLE: one TLS server each, certificate files from the server or the credential name, Istio\'s TLS defaults', () => {
    const plan = planListeners([gateway('a', [
      server(8443, 'HTTPS', { hosts: [{ namespace: '*', host: 'a.example.com' }], tls: { mode: 'SIMPLE', httpsRedirect: false, serverCertificate: 'certs/a.crt', privateKey: 'certs/a.key' } }),
      server(8443, 'HTTPS', { hosts: [{ namespace: 'shop', host: 'b.example.com' }], tls: { mode: 'SIMPLE', httpsRedirect: false, credentialName: 'b-cred', minProtocolVersion: 'TLSV1_3' } }),
    ])], '/w');
    assert.deepEqual(plan.ports[0]?.tlsServers.map(({ settings, ...files }) => [files, settings.minVersion, settings.maxVersion]), [
      [{ server: 'mesh-system/a#0', cert: '/w/certs/a.crt', key: '/w/certs/a.key', hosts: ['a.example.com'] }, 'TLSv1.2', 'TLSv1.3'],
      [{ server: 'mesh-system/a#1', cert: '/w/etc/mesh/credentials/b-cred/tls.crt', key: '/w/etc/mesh/credentials/b-cred/tls.key', hosts: ['b.example.com'] }, 'TLSv1.3', 'TLSv1.3'],
    ]);
    assert.match(plan.ports[0]!.tlsServers[0]!.settings.ciphers, /^ECDHE-ECDSA-AES128-GCM-SHA256:.*:TLS_CHACHA20_POLY1305_SHA256$/);
  });

  it('a TLS server naming a host another server of the port has already named is not served (Istio\'s rule)', () => {
    const tls = { mode: 'SIMPLE' as const, httpsRedirect: false, credentialName: 'c' };
    const plan = planListeners([
      gateway('a', [server(443, 'HTTPS', { hosts: [{ namespace: '*', host: 'a.example.com' }, { namespace: '*', host: '*.example.com' }], tls })]),
      gateway('b', [server(443, 'HTTPS', { hosts: [{ namespace: 'x', host: '*.example.com' }], tls }), server(443, 'HTTPS', { hosts: [{ namespace: '*', host: 'b.example.com' }], tls })]),
    ], '/w');
    assert.deepEqual(plan.ports[0]?.tlsServers.map((s) => s.server), ['mesh-system/a#0', 'mesh-system/b#1']);
    assert.deepEqual(plan.warnings, ['gateway mesh-system/b: server 0 on port 443 is not served: *.example.com already named by mesh-system/a#0']);
  });

  it('warns when cipherSuites cannot apply (TLS 1.3 only), as Istio does', () => {
    const plan = planListeners([gateway('a', [server(443, 'HTTPS', {
      tls: { mode: 'SIMPLE', httpsRedirect: false, credentialName: 'c', minProtocolVersion: 'TLSV1_3', cipherSuites: ['ECDHE-RSA-AES128-GCM-SHA256'] },
    })])], '/w');
    assert.match(plan.warnings[0]!, /server 0 on port 443: cipherSuites have no effect with minProtocolVersion TLSV1_3/);
  });

  it('TCP (MONGO, MYSQL, REDIS) and TLS / HTTPS PASSTHROUGH servers listen as TCP and TLS ports; what it cannot serve is a warning, not a listener', () => {
    const plan = planListeners([gateway('a', [
      server(9000, 'TCP'),
      server(27017, 'MONGO'),
      server(8443, 'TLS', { tls: { mode: 'PASSTHROUGH', httpsRedirect: false } }),
      server(9443, 'HTTPS', { tls: { mode: 'PASSTHROUGH', httpsRedirect: false } }),
      server(9444, 'TLS', { tls: { mode: 'MUTUAL', httpsRedirect: false, credentialName: 'x' } }),
      server(8080, 'HTTP'),
      server(8080, 'HTTPS', { tls: { mode: 'SIMPLE', httpsRedirect: false, credentialName: 'x' } }),
      server(9000, 'TLS', { tls: { mode: 'PASSTHROUGH', httpsRedirect: false } }),
    ])], '/w');
    assert.deepEqual(plan.ports.map((p) => [p.port, p.protocol]), [[8080, 'HTTP'], [8443, 'TLS'], [9000, 'TCP'], [9443, 'TLS'], [27017, 'TCP']]);
    assert.equal(plan.warnings.length, 3);
    assert.match(plan.warnings[0]!, /port 9444 \(TLS, tls MUTUAL\) is not served/);
    assert.match(plan.warnings[1]!, /port 8080 is already HTTP/);
    assert.match(plan.warnings[2]!, /port 9000 is already TCP/);
  });

  it('a port listens on its servers\' bind address; a server binding another address on the same port is not served (a warning)', () => {
    const plan = planListeners([
      gateway('a', [server(8080, 'HTTP', { bind: '127.0.0.1' }), server(8081, 'HTTP')]),
      gateway('b', [server(8080, 'HTTP', { bind: '127.0.0.1' }), server(8080, 'HTTP'), server(8081, 'HTTP', { bind: '10.0.0.7' })]),
    ], '/w');
    assert.deepEqual(plan.ports.map((p) => [p.port, p.bind, p.gateways]), [[8080, '127.0.0.1', ['mesh-system/a', 'mesh-system/b']], [8081, undefined, ['mesh-system/a']]]);
    assert.deepEqual(plan.warnings, [
      'gateway mesh-system/b: server 1 on port 8080 (bind every address) is not served: the port already listens on 127.0.0.1 for mesh-system/a, mesh-system/b',
      'gateway mesh-system/b: server 2 on port 8081 (bind 10.0.0.7) is not served: the port already listens on every address for mesh-system/a',
    ]);
  });

  it('tls.httpsRedirect on an HTTP server marks the port for redirects', () => {
    const plan = planListeners([gateway('a', [server(8080, 'HTTP', { tls: { mode: 'SIMPLE', httpsRedirect: true } })])], '/w');
    assert.equal(plan.ports[0]?.httpsRedirect, true);
  });
});

describe('serverForName: the TLS server for a client\'s SNI', () => {
  const servers = [{ name: 'exact', hosts: ['a.example.com'] }, { name: 'wild', hosts: ['*.example.com'] }, { name: 'deep', hosts: ['*.b.example.com'] }];
  const cases: [string, readonly { name: string; hosts: string[] }[], string | undefined, string | undefined][] = [
    ['the exact name first', servers, 'a.example.com', 'exact'],
    ['in any case', servers, 'A.Example.COM', 'exact'],
    ['then the longest wildcard', servers, 'x.b.example.com', 'deep'],
    ['a wildcard covers several labels', servers, 'x.y.example.com', 'wild'],
    ['a name no server lists: none (refused)', servers, 'example.org', undefined],
    ['no SNI without a * server: none (refused)', servers, undefined, undefined],
    ['a * server takes the rest', [...servers, { name: 'any', hosts: ['*'] }], 'example.org', 'any'],
    ['and a client without SNI', [...servers, { name: 'any', hosts: ['*'] }], undefined, 'any'],
  ];
  for (const [name, list, sni, expected] of cases) {
    it(name, () => assert.equal(serverForName(sniIndex(list), sni)?.name, expected));
  }
});
