import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Gateway, GatewayServer } from '../../src/config/resources/types.js';
import { planListeners } from '../../src/gateway/listener-plan.js';

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

  it('HTTPS SIMPLE: certificate files from the server, or from the credential name', () => {
    const plan = planListeners([gateway('a', [
      server(8443, 'HTTPS', { hosts: [{ namespace: '*', host: 'a.example.com' }], tls: { mode: 'SIMPLE', httpsRedirect: false, serverCertificate: 'certs/a.crt', privateKey: 'certs/a.key' } }),
      server(8443, 'HTTPS', { hosts: [{ namespace: '*', host: 'b.example.com' }], tls: { mode: 'SIMPLE', httpsRedirect: false, credentialName: 'b-cred' } }),
    ])], '/w');
    assert.deepEqual(plan.ports[0]?.certificates, [
      { cert: '/w/certs/a.crt', key: '/w/certs/a.key', hosts: ['a.example.com'] },
      { cert: '/w/etc/mesh/credentials/b-cred/tls.crt', key: '/w/etc/mesh/credentials/b-cred/tls.key', hosts: ['b.example.com'] },
    ]);
  });

  it('servers it cannot serve (TCP, TLS passthrough, a port taken by another protocol) are warnings, not listeners', () => {
    const plan = planListeners([gateway('a', [
      server(9000, 'TCP'),
      server(8443, 'TLS', { tls: { mode: 'PASSTHROUGH', httpsRedirect: false } }),
      server(8080, 'HTTP'),
      server(8080, 'HTTPS', { tls: { mode: 'SIMPLE', httpsRedirect: false, credentialName: 'x' } }),
    ])], '/w');
    assert.deepEqual(plan.ports.map((p) => p.port), [8080]);
    assert.equal(plan.warnings.length, 3);
    assert.match(plan.warnings[0]!, /port 9000 \(TCP\) is not served/);
    assert.match(plan.warnings[2]!, /port 8080 is already HTTP/);
  });

  it('tls.httpsRedirect on an HTTP server marks the port for redirects', () => {
    const plan = planListeners([gateway('a', [server(8080, 'HTTP', { tls: { mode: 'SIMPLE', httpsRedirect: true } })])], '/w');
    assert.equal(plan.ports[0]?.httpsRedirect, true);
  });
});
