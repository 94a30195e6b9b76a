// The mTLS resources as an operator ships them: one multi-document YAML file in a watched
// directory, read by the agent's own path (watcher → store → validators), then resolved.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { loadMeshConfig } from '../../../src/config/mesh-config.js';
import { formatRejection } from '../../../src/config/resources/format.js';
import { watchResources } from '../../../src/config/resources/watcher.js';
import { createDestinationTlsResolver } from '../../../src/security/mtls/destination-tls.js';
import { inboundMtls, inboundMtlsMode } from '../../../src/security/mtls/peer-authentication.js';

const root = mkdtempSync(join(tmpdir(), 'mtls-files-'));
after(() => rmSync(root, { recursive: true, force: true }));

const FILE = `# mTLS for the shop namespace
apiVersion: security.mesh.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: mesh-system}
spec:
  mtls: {mode: STRICT}
---
apiVersion: security.mesh.io/v1beta1
kind: PeerAuthentication
metadata: {name: web-metrics}
spec:
  selector:
    matchLabels: {app: web}
  portLevelMtls:
    9090: {mode: PERMISSIVE}
---
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: db}
spec:
  hosts: [db.shop.svc.cluster.local]
  ports: [{number: 5432, name: tcp-db}]
  location: MESH_INTERNAL
  resolution: STATIC
  endpoints:
  - address: 10.8.0.5
    labels: {security.mesh.io/tlsMode: mesh}
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: payments}
spec:
  host: payments.example.com
  trafficPolicy:
    tls: {mode: SIMPLE, caCertificates: certs/payments-ca.pem}
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: broken}
spec:
  host: x.example.com
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL, clientCertificate: /c.pem}
`;

it('loads PeerAuthentication, ServiceEntry and DestinationRule from a multi-document file and resolves with them', async () => {
  writeFileSync(join(root, 'mtls.yaml'), FILE);
  const w = await watchResources({ directories: [root], defaultNamespace: 'shop', debounceMs: 20, cwd: root, onChange: () => {} });
  try {
    assert.deepEqual(w.initialRejections.map(formatRejection), [
      'mtls.yaml[4] DestinationRule shop/broken: spec.trafficPolicy.tls.clientCertificate: must be empty with mode ISTIO_MUTUAL (it uses the mesh certificates of this workload)',
    ]);
    const s = w.snapshot();
    assert.deepEqual([s.peerAuthentications.length, s.serviceEntries.length, s.destinationRules.length], [2, 1, 1]);
    const workload = { namespace: 'shop', labels: { app: 'web' } };
    const inbound = inboundMtls(s.peerAuthentications, workload);
    assert.deepEqual([inboundMtlsMode(inbound, 8080), inboundMtlsMode(inbound, 9090), inbound.anyStrict], ['STRICT', 'PERMISSIVE', true]);

    const mesh = loadMeshConfig('mesh', 'autoMtlsCidrs: [10.8.0.0/16]\n', '');
    const plan = createDestinationTlsResolver({ workload, snapshot: s, mesh, cwd: root });
    assert.deepEqual(plan({ address: '10.8.0.5', port: 5432, hosts: ['db'] }), {
      kind: 'istio-mutual', sni: 'outbound_.5432_._.db.shop.svc.cluster.local', subjectAltNames: [], rule: 'auto mTLS: ServiceEntry shop/db endpoint label',
      key: '["istio-mutual","outbound_.5432_._.db.shop.svc.cluster.local",[],"","","",false]',
    });
    const payments = plan({ address: '203.0.113.9', port: 443, hosts: ['payments.example.com'] });
    assert.equal(payments.kind, 'simple');
    assert.ok(payments.kind === 'simple' && payments.caCertificates === join(root, 'certs/payments-ca.pem') && payments.sni === 'payments.example.com');
    assert.equal(plan({ address: '10.8.1.1', port: 80, hosts: [] }).kind, 'istio-mutual', 'inside autoMtlsCidrs');
  } finally {
    w.close();
  }
});
