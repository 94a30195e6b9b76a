import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ServiceEntry } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

const se = (spec: string): string => `apiVersion: networking.mesh.io/v1beta1
kind: ServiceEntry
metadata:
  name: external-db
spec:
${indent(spec)}
`;

it('reads a ServiceEntry, reducing single-address CIDRs, keeping blocks, and filling Istio defaults', () => {
  const r = accept(se(`hosts: [DB.Example.com]
addresses: [10.0.0.5, 10.0.0.6/32, "2001:db8::1/128", 10.1.0.0/16, "2001:DB8:1::/48"]
ports:
- number: 5432
  name: tcp-postgres
  protocol: tcp
  targetPort: 15432
resolution: STATIC
endpoints:
- address: 10.0.0.5`)).resource as ServiceEntry;
  assert.equal(r.meta.namespace, 'default', 'metadata.namespace defaults to the agent\'s namespace');
  assert.equal(r.meta.apiVersion, 'networking.mesh.io/v1beta1');
  assert.deepEqual(r.hosts, ['db.example.com']);
  assert.deepEqual(r.addresses, ['10.0.0.5', '10.0.0.6', '2001:db8::1', '10.1.0.0/16', '2001:db8:1::/48']);
  assert.deepEqual(r.ports, [{ number: 5432, name: 'tcp-postgres', protocol: 'TCP', targetPort: 15432 }]);
  assert.equal(r.location, 'MESH_EXTERNAL');
  assert.equal(r.resolution, 'STATIC');
  assert.deepEqual(r.endpoints, [{ address: '10.0.0.5', ports: {}, labels: {}, weight: 0 }]);
  assert.deepEqual(r.subjectAltNames, []);
  assert.deepEqual([r.exportTo, r.workloadSelector], [undefined, undefined]);
  const none = accept(se(`hosts: [db.example.com, "*.cache.example.com"]\naddresses: [10.2.0.0/24]\nports: [{number: 5432, name: tcp}]`)).resource as ServiceEntry;
  assert.equal(none.resolution, 'NONE', 'Istio\'s default; several hosts on a TCP port are fine with NONE');
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
- address: DB-1.Example.com`)).resource as ServiceEntry;
  assert.deepEqual(r.endpoints, [
    { address: '10.1.0.7', ports: { 'tcp-db': 15432 }, labels: { 'security.mesh.io/tlsMode': 'mesh', version: 'v1' }, weight: 3,
      network: 'net-1', locality: 'us-east/zone-a', serviceAccount: 'db' },
    { address: 'db-1.example.com', ports: {}, labels: {}, weight: 0 },
  ]);
  assert.deepEqual(r.subjectAltNames, ['spiffe://cluster.local/ns/db/sa/db']);
});

it('rejects invalid ServiceEntries with the field path', () => {
  assertRejections([
    { name: 'hosts missing', yaml: se(`addresses: [10.0.0.1]`), field: 'spec.hosts', message: /required/ },
    { name: 'host *', yaml: se(`hosts: ["*"]`), field: 'spec.hosts[0]', message: /cannot be \* alone/ },
    { name: 'host of the wrong type', yaml: se(`hosts: [42]`), field: 'spec.hosts[0]', message: /expected a string, got the number 42/ },
    { name: 'address not an IP', yaml: se(`hosts: [a.com]\naddresses: [db.local]`), field: 'spec.addresses[0]', message: /"db.local" is not an IP address or CIDR block/ },
    { name: 'bad prefix length', yaml: se(`hosts: [a.com]\naddresses: [10.0.0.0/33]`), field: 'spec.addresses[0]', message: /not an IP address or CIDR block/ },
    { name: 'CIDR with DNS resolution', yaml: se(`hosts: [a.com]\naddresses: [10.0.0.0/24]\nresolution: DNS`), field: 'spec.addresses[0]', message: /CIDR block, which Istio allows only with resolution NONE or STATIC \(not DNS\)/ },
    { name: 'port out of range', yaml: se(`hosts: [a.com]\nports: [{number: 65536, name: p}]`), field: 'spec.ports[0].number', message: /from 1 to 65535/ },
    { name: 'port without name', yaml: se(`hosts: [a.com]\nports: [{number: 80}]`), field: 'spec.ports[0].name', message: /required/ },
    { name: 'port name not a DNS label', yaml: se(`hosts: [a.com]\nports: [{number: 80, name: HTTP_1}]`), field: 'spec.ports[0].name', message: /not a valid port name/ },
    { name: 'port name twice', yaml: se(`hosts: [a.com]\nports: [{number: 80, name: http}, {number: 81, name: http}]`), field: 'spec.ports[1].name', message: /already the name of an earlier port/ },
    { name: 'port number twice', yaml: se(`hosts: [a.com]\nports: [{number: 80, name: a}, {number: 80, name: b}]`), field: 'spec.ports[1].number', message: /port 80 is already defined/ },
    { name: 'unknown protocol', yaml: se(`hosts: [a.com]\nports: [{number: 80, name: a, protocol: SPDY}]`), field: 'spec.ports[0].protocol', message: /"SPDY" is not a protocol Istio knows/ },
    { name: 'targetPort out of range', yaml: se(`hosts: [a.com]\nports: [{number: 80, name: a, targetPort: 0}]`), field: 'spec.ports[0].targetPort', message: /from 1 to 65535/ },
    { name: 'endpoints with resolution NONE', yaml: se(`hosts: [a.com]\nendpoints: [{address: 10.0.0.1}]`), field: 'spec.endpoints', message: /must be empty with resolution NONE/ },
    { name: 'endpoint name without DNS resolution', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{address: db.local}]`),
      field: 'spec.endpoints[0].address', message: /"db.local" is not an IP address; names need resolution DNS or DNS_ROUND_ROBIN/ },
    { name: 'unix endpoint', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{address: "unix:///run/a.sock"}]`),
      field: 'spec.endpoints[0].address', message: /^is not supported yet: endpoints on unix domain sockets$/ },
    { name: 'endpoint without address', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{labels: {a: b}}]`), field: 'spec.endpoints[0].address', message: /required/ },
    { name: 'endpoint port not in spec.ports', yaml: se(`hosts: [a.com]\nresolution: STATIC\nports: [{number: 80, name: http}]\nendpoints: [{address: 10.0.0.1, ports: {https: 8443}}]`),
      field: 'spec.endpoints[0].ports[https]', message: /"https" is not the name of a port in spec.ports/ },
    { name: 'endpoint port number', yaml: se(`hosts: [a.com]\nresolution: STATIC\nports: [{number: 80, name: http}]\nendpoints: [{address: 10.0.0.1, ports: {http: 0}}]`),
      field: 'spec.endpoints[0].ports[http]', message: /from 1 to 65535/ },
    { name: 'endpoint label value', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, labels: {a: 1}}]`), field: 'spec.endpoints[0].labels[a]', message: /expected a string/ },
    { name: 'endpoint label key', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, labels: {"a b": x}}]`), field: 'spec.endpoints[0].labels[a b]', message: /not a valid label key/ },
    { name: 'endpoint weight', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, weight: -1}]`), field: 'spec.endpoints[0].weight', message: /an integer from 0/ },
    { name: 'endpoint unknown field', yaml: se(`hosts: [a.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, lables: {}}]`), field: 'spec.endpoints[0].lables', message: /unknown field "lables"/ },
    { name: 'DNS without endpoints on a wildcard host', yaml: se(`hosts: ["*.a.com"]\nresolution: DNS`), field: 'spec.hosts[0]', message: /cannot be wildcards/ },
    { name: 'DNS_ROUND_ROBIN with two endpoints', yaml: se(`hosts: [a.com]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: a.example.com}, {address: b.example.com}]`),
      field: 'spec.endpoints', message: /at most one endpoint with resolution DNS_ROUND_ROBIN, got 2/ },
    { name: 'several hosts on a TCP port (STATIC)', yaml: se(`hosts: [a.com, b.com]\nresolution: STATIC\naddresses: [10.0.0.1]\nports: [{number: 5432, name: tcp, protocol: TCP}]`),
      field: 'spec.hosts', message: /several hosts need ports that name their host \(HTTP or TLS\); port 5432 is TCP/ },
    { name: 'workloadSelector and endpoints', yaml: se(`hosts: [a.com]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}\nendpoints: [{address: 10.0.0.1}]`),
      field: 'spec.workloadSelector', message: /either workloadSelector or endpoints/ },
    { name: 'workloadSelector with matchLabels (a DestinationRule\'s spelling)', yaml: se(`hosts: [a.com]\nresolution: STATIC\nworkloadSelector: {matchLabels: {app: a}}`),
      field: 'spec.workloadSelector.matchLabels', message: /unknown field "matchLabels"/ },
    { name: 'workloadSelector wildcard', yaml: se(`hosts: [a.com]\nresolution: STATIC\nworkloadSelector: {labels: {app: "*"}}`), field: 'spec.workloadSelector.labels[app]', message: /not a valid label value|wildcards/ },
    { name: 'exportTo ~ with others', yaml: se(`hosts: [a.com]\nexportTo: ["~", "."]`), field: 'spec.exportTo', message: /"~" exports to no namespace; give it alone/ },
    { name: 'exportTo bad namespace', yaml: se(`hosts: [a.com]\nexportTo: [Team_A]`), field: 'spec.exportTo[0]', message: /not a valid namespace/ },
    { name: 'subjectAltNames not a list', yaml: se(`hosts: [a.com]\nsubjectAltNames: spiffe://x`), field: 'spec.subjectAltNames', message: /expected a list/ },
    { name: 'bad resolution', yaml: se(`hosts: [a.com]\nresolution: dns`), field: 'spec.resolution', message: /"dns" is not one of NONE, STATIC, DNS, DNS_ROUND_ROBIN/ },
  ]);
});

it('reads workloadSelector and exportTo, with Istio\'s warnings', () => {
  const { value, warnings } = acceptWarned(se(`hosts: [api.example.com]
addresses: [10.9.0.1]
ports: [{number: 80, name: http, protocol: HTTP}]
resolution: STATIC
workloadSelector: {labels: {app: api}}
exportTo: [".", other]`));
  const r = value.resource as ServiceEntry;
  assert.deepEqual(r.workloadSelector, { app: 'api' });
  assert.deepEqual(r.exportTo, ['default', 'other']);
  assert.deepEqual(warnings, []);
  assert.deepEqual((accept(se(`hosts: [a.com]\nexportTo: ["~"]`)).resource as ServiceEntry).exportTo, ['~']);

  const cases: { yaml: string; warnings: RegExp[] }[] = [
    { yaml: `hosts: [a.com]\nresolution: STATIC\nworkloadSelector: {}`, warnings: [/^spec\.endpoints: is empty|^spec\.workloadSelector\.labels: has no labels/] },
    { yaml: `hosts: [a.com]\nworkloadSelector: {labels: {app: a}}`, warnings: [/^spec\.workloadSelector: has no effect with resolution NONE/] },
    { yaml: `hosts: [a.com]\nresolution: DNS\nworkloadSelector: {labels: {app: a}}`, warnings: [/^spec\.workloadSelector: should not be set with resolution DNS/] },
    { yaml: `hosts: [a.com]\naddresses: [10.0.0.1]\nports: [{number: 80, name: a, targetPort: 8080}]`, warnings: [/^spec\.ports\[0\]\.targetPort: has no effect with resolution NONE/] },
    { yaml: `hosts: [a.com]\nports: [{number: 5432, name: pg}]`, warnings: [/^spec\.ports\[0\]: serves an unset protocol without spec\.addresses/] },
    { yaml: `hosts: [a.com]\naddresses: [10.0.0.1]\nports: [{number: 80, name: a, protocol: HTTP}, {number: 7070, name: b, protocol: grpc}]`,
      warnings: [/^spec\.ports\[1\]\.protocol: GRPC: an HTTP\/1\.1 client's requests go upstream as HTTP\/1\.1 here; Istio would send them as HTTP\/2/] },
    { yaml: `hosts: [a.com]\naddresses: [10.0.0.1]\nports: [{number: 81, name: a, protocol: HTTP2}, {number: 82, name: b, protocol: GRPC-WEB}]`,
      warnings: [/^spec\.ports\[0\]\.protocol: HTTP2: /, /^spec\.ports\[1\]\.protocol: GRPC-WEB: /] },
    { yaml: `hosts: [a.com]\naddresses: [10.0.0.1]\nresolution: STATIC`, warnings: [/^spec\.endpoints: is empty with resolution STATIC: the service has no endpoints, and requests to it fail with 503/] },
    { yaml: `hosts: [a.com]\naddresses: [10.0.0.1]\nresolution: STATIC\nendpoints: [{address: 10.1.0.1}, {address: 10.1.0.2, network: n2, locality: r/z}]`,
      warnings: [/^spec\.endpoints\[1\]\.network: has no effect here/] },
  ];
  for (const c of cases) {
    const got = acceptWarned(se(c.yaml)).warnings;
    for (const w of c.warnings) assert.ok(got.some((g) => w.test(g)), `${c.yaml}: ${got.join('; ')}`);
  }
});
