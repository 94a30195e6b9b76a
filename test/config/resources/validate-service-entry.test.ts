import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ServiceEntry } from '../../../src/config/resources/types.js';
import { accept, assertRejections, indent } from './helpers.js';

const se = (spec: string): string => `apiVersion: networking.mesh.io/v1beta1
kind: ServiceEntry
metadata:
  name: external-db
spec:
${indent(spec)}
`;

it('reads a ServiceEntry, reducing single-address CIDRs and filling Istio defaults', () => {
  const r = accept(se(`hosts: [DB.Example.com, "*.cache.example.com"]
addresses: [10.0.0.5, 10.0.0.6/32, "2001:db8::1/128"]
ports:
- number: 5432
  name: tcp-postgres
  protocol: tcp
endpoints:
- address: 10.0.0.5`)).resource as ServiceEntry;
  assert.equal(r.meta.namespace, 'default', 'metadata.namespace defaults to the agent\'s namespace');
  assert.equal(r.meta.apiVersion, 'networking.mesh.io/v1beta1');
  assert.deepEqual(r.hosts, ['db.example.com', '*.cache.example.com']);
  assert.deepEqual(r.addresses, ['10.0.0.5', '10.0.0.6', '2001:db8::1']);
  assert.deepEqual(r.ports, [{ number: 5432, name: 'tcp-postgres', protocol: 'TCP' }]);
  assert.equal(r.location, 'MESH_EXTERNAL');
  assert.equal(r.resolution, 'NONE');
  assert.deepEqual(r.endpoints, [{ address: '10.0.0.5', ports: {}, labels: {}, weight: 0 }]);
  assert.deepEqual(r.subjectAltNames, []);
  const s = accept(se(`hosts: [api.example.com]\nlocation: MESH_INTERNAL\nresolution: DNS`)).resource as ServiceEntry;
  assert.deepEqual([s.addresses, s.ports, s.location, s.resolution], [[], [], 'MESH_INTERNAL', 'DNS']);
});

it('types endpoints (address, ports, labels, network, locality, weight, serviceAccount) and subjectAltNames', () => {
  const r = accept(se(`hosts: [db.example.com]
ports: [{number: 5432, name: tcp-db}]
resolution: DNS
subjectAltNames: [spiffe://cluster.local/ns/db/sa/db]
endpoints:
- address: 10.1.0.7
  ports: {tcp-db: 15432}
  labels: {security.mesh.io/tlsMode: mesh, version: v1}
  network: net-1
  locality: us-east/zone-a
  weight: 3
  serviceAccount: db
- address: DB-1.Example.com
- address: unix:///var/run/db.sock`)).resource as ServiceEntry;
  assert.deepEqual(r.endpoints, [
    { address: '10.1.0.7', ports: { 'tcp-db': 15432 }, labels: { 'security.mesh.io/tlsMode': 'mesh', version: 'v1' }, weight: 3,
      network: 'net-1', locality: 'us-east/zone-a', serviceAccount: 'db' },
    { address: 'db-1.example.com', ports: {}, labels: {}, weight: 0 },
    { address: 'unix:///var/run/db.sock', ports: {}, labels: {}, weight: 0 },
  ]);
  assert.deepEqual(r.subjectAltNames, ['spiffe://cluster.local/ns/db/sa/db']);
});

it('rejects invalid ServiceEntries with the field path', () => {
  assertRejections([
    { name: 'hosts missing', yaml: se(`addresses: [10.0.0.1]`), field: 'spec.hosts', message: /required/ },
    { name: 'host *', yaml: se(`hosts: ["*"]`), field: 'spec.hosts[0]', message: /cannot be \* alone/ },
    { name: 'host of the wrong type', yaml: se(`hosts: [42]`), field: 'spec.hosts[0]', message: /expected a string, got the number 42/ },
    { name: 'address not an IP', yaml: se(`hosts: [a.com]\naddresses: [db.local]`), field: 'spec.addresses[0]', message: /"db.local" is not an IP address/ },
    { name: 'CIDR of several addresses', yaml: se(`hosts: [a.com]\naddresses: [10.0.0.0/24]`), field: 'spec.addresses[0]', message: /block of several addresses/ },
    { name: 'port out of range', yaml: se(`hosts: [a.com]\nports: [{number: 65536}]`), field: 'spec.ports[0].number', message: /from 1 to 65535/ },
    { name: 'endpoint name without DNS resolution', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{address: db.local}]`),
      field: 'spec.endpoints[0].address', message: /"db.local" is not an IP address \(or unix:\/\/path\); names need resolution DNS or DNS_ROUND_ROBIN/ },
    { name: 'endpoint without address', yaml: se(`hosts: [a.com]\nendpoints: [{labels: {a: b}}]`), field: 'spec.endpoints[0].address', message: /required/ },
    { name: 'endpoint port not in spec.ports', yaml: se(`hosts: [a.com]\nports: [{number: 80, name: http}]\nendpoints: [{address: 10.0.0.1, ports: {https: 8443}}]`),
      field: 'spec.endpoints[0].ports[https]', message: /"https" is not the name of a port in spec.ports/ },
    { name: 'endpoint port number', yaml: se(`hosts: [a.com]\nports: [{number: 80, name: http}]\nendpoints: [{address: 10.0.0.1, ports: {http: 0}}]`),
      field: 'spec.endpoints[0].ports[http]', message: /from 1 to 65535/ },
    { name: 'endpoint label value', yaml: se(`hosts: [a.com]\nendpoints: [{address: 10.0.0.1, labels: {a: 1}}]`), field: 'spec.endpoints[0].labels[a]', message: /expected a string/ },
    { name: 'endpoint weight', yaml: se(`hosts: [a.com]\nendpoints: [{address: 10.0.0.1, weight: -1}]`), field: 'spec.endpoints[0].weight', message: /an integer from 0/ },
    { name: 'endpoint unknown field', yaml: se(`hosts: [a.com]\nendpoints: [{address: 10.0.0.1, lables: {}}]`), field: 'spec.endpoints[0].lables', message: /unknown field "lables"/ },
    { name: 'subjectAltNames not a list', yaml: se(`hosts: [a.com]\nsubjectAltNames: spiffe://x`), field: 'spec.subjectAltNames', message: /expected a list/ },
    { name: 'bad resolution', yaml: se(`hosts: [a.com]\nresolution: dns`), field: 'spec.resolution', message: /"dns" is not one of NONE, STATIC, DNS, DNS_ROUND_ROBIN/ },
  ]);
});
