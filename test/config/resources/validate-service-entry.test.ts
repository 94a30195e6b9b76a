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
  const s = accept(se(`hosts: [api.example.com]\nlocation: MESH_INTERNAL\nresolution: DNS`)).resource as ServiceEntry;
  assert.deepEqual([s.addresses, s.ports, s.location, s.resolution], [[], [], 'MESH_INTERNAL', 'DNS']);
});

it('rejects invalid ServiceEntries with the field path', () => {
  assertRejections([
    { name: 'hosts missing', yaml: se(`addresses: [10.0.0.1]`), field: 'spec.hosts', message: /required/ },
    { name: 'host *', yaml: se(`hosts: ["*"]`), field: 'spec.hosts[0]', message: /cannot be \* alone/ },
    { name: 'host of the wrong type', yaml: se(`hosts: [42]`), field: 'spec.hosts[0]', message: /expected a string, got the number 42/ },
    { name: 'address not an IP', yaml: se(`hosts: [a.com]\naddresses: [db.local]`), field: 'spec.addresses[0]', message: /"db.local" is not an IP address/ },
    { name: 'CIDR of several addresses', yaml: se(`hosts: [a.com]\naddresses: [10.0.0.0/24]`), field: 'spec.addresses[0]', message: /block of several addresses/ },
    { name: 'port out of range', yaml: se(`hosts: [a.com]\nports: [{number: 65536}]`), field: 'spec.ports[0].number', message: /from 1 to 65535/ },
    { name: 'bad resolution', yaml: se(`hosts: [a.com]\nresolution: dns`), field: 'spec.resolution', message: /"dns" is not one of NONE, STATIC, DNS, DNS_ROUND_ROBIN/ },
  ]);
});
