import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { DestinationRule } from '../../../src/config/resources/types.js';
import { formatRejection } from '../../../src/config/resources/validate.js';
import { accept, assertRejections, indent, reject } from './helpers.js';

const dr = (spec: string): string => `apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata:
  name: db
  namespace: team-a
spec:
${indent(spec)}
`;
/** A rule for db.example.com whose trafficPolicy.tls is `tls`. */
const tls = (t: string): string => dr(`host: db.example.com\ntrafficPolicy:\n  tls:\n${indent(t, 4)}`);

it('reads a DestinationRule: host, tls, port-level tls, subsets, exportTo, workloadSelector', () => {
  const r = accept(dr(`host: DB.Example.com
workloadSelector:
  matchLabels: {app: api}
exportTo: ["."]
trafficPolicy:
  loadBalancer: {simple: ROUND_ROBIN}
  connectionPool: {tcp: {maxConnections: 10}}
  outlierDetection: {consecutive5xxErrors: 3}
  tls:
    mode: MUTUAL
    clientCertificate: certs/client.pem
    privateKey: certs/client.key
    caCertificates: /etc/ca.pem
    subjectAltNames: [spiffe://cluster.local/ns/db/sa/db]
    sni: DB.internal
  portLevelSettings:
  - port: {number: 5432}
    tls: {mode: ISTIO_MUTUAL, sni: db.mesh}
  - port: {number: 8080}
    loadBalancer: {simple: RANDOM}
subsets:
- name: v1
  labels: {version: v1}
  trafficPolicy: {loadBalancer: {simple: RANDOM}}`)).resource as DestinationRule;
  assert.equal(r.host, 'db.example.com');
  assert.deepEqual(r.tls, {
    mode: 'MUTUAL', clientCertificate: 'certs/client.pem', privateKey: 'certs/client.key', caCertificates: '/etc/ca.pem',
    subjectAltNames: ['spiffe://cluster.local/ns/db/sa/db'], sni: 'db.internal', insecureSkipVerify: false,
  });
  assert.deepEqual(r.portLevelTls, [{ port: 5432, tls: { mode: 'ISTIO_MUTUAL', subjectAltNames: [], sni: 'db.mesh', insecureSkipVerify: false } }],
    'a port setting without tls is tuning only');
  assert.deepEqual(r.subsets, [{ name: 'v1', labels: { version: 'v1' }, trafficPolicy: { loadBalancer: { kind: 'simple', simple: 'RANDOM' }, portLevelSettings: [] } }]);
  assert.deepEqual(r.exportTo, ['team-a'], '"." is the rule\'s namespace');
  assert.deepEqual(r.workloadSelector, { app: 'api' });
  assert.deepEqual(r.trafficPolicy?.loadBalancer, { kind: 'simple', simple: 'ROUND_ROBIN' });
  assert.deepEqual(r.trafficPolicy?.connectionPool, { tcp: { maxConnections: 10 } });
  assert.deepEqual(r.trafficPolicy?.outlierDetection, { consecutive5xxErrors: 3, splitExternalLocalOriginErrors: false });
  assert.deepEqual(r.trafficPolicy?.portLevelSettings.map((p) => p.port), [5432, 8080], 'every port setting is kept in the traffic policy');
  assert.deepEqual((accept(dr('host: a\nexportTo: [".", team-b]')).resource as DestinationRule).exportTo, ['team-a', 'team-b']);

  const plain = accept(dr('host: "*"')).resource as DestinationRule;
  assert.deepEqual([plain.tls, plain.portLevelTls, plain.subsets, plain.exportTo, plain.workloadSelector], [undefined, [], [], ['*'], undefined]);
  assert.equal((accept(dr('host: reviews')).resource as DestinationRule).host, 'reviews', 'a short name is kept as written');
  assert.equal((accept(dr('host: "*.local"\ntrafficPolicy: {tls: {}}')).resource as DestinationRule).tls?.mode, 'DISABLE', 'Istio\'s enum default');
  for (const ok of [
    'mode: MUTUAL\ncredentialName: client-cred',
    'mode: SIMPLE',
    'mode: SIMPLE\ncredentialName: ca-only',
    'mode: SIMPLE\ninsecureSkipVerify: true',
    'mode: MUTUAL\nclientCertificate: a\nprivateKey: b\ninsecureSkipVerify: true',
    'mode: ISTIO_MUTUAL\nsubjectAltNames: [spiffe://cluster.local/ns/a/sa/b]',
  ]) accept(tls(ok));
});

it('rejects invalid DestinationRules with the field path', () => {
  assertRejections([
    { name: 'host missing', yaml: dr('trafficPolicy: {}'), field: 'spec.host', message: /required/ },
    { name: 'bad host', yaml: dr('host: "a.*.com"'), field: 'spec.host', message: /is not a valid host/ },
    { name: 'unknown spec field', yaml: dr('host: a\ntraficPolicy: {}'), field: 'spec.traficPolicy', message: /unknown field "traficPolicy" in spec; accepted: host, trafficPolicy, subsets, exportTo, workloadSelector/ },
    { name: 'unknown tls mode', yaml: tls('mode: AUTO'), field: 'spec.trafficPolicy.tls.mode', message: /"AUTO" is not one of DISABLE, SIMPLE, MUTUAL, ISTIO_MUTUAL/ },
    { name: 'MUTUAL without certificate', yaml: tls('mode: MUTUAL\nprivateKey: k'), field: 'spec.trafficPolicy.tls.clientCertificate', message: /^required with mode MUTUAL \(or credentialName\)$/ },
    { name: 'MUTUAL without key', yaml: tls('mode: MUTUAL\nclientCertificate: c'), field: 'spec.trafficPolicy.tls.privateKey', message: /required with mode MUTUAL/ },
    { name: 'ISTIO_MUTUAL with a file', yaml: tls('mode: ISTIO_MUTUAL\ncaCertificates: /ca.pem'), field: 'spec.trafficPolicy.tls.caCertificates',
      message: /^must be empty with mode ISTIO_MUTUAL \(it uses the mesh certificates of this workload\)$/ },
    { name: 'ISTIO_MUTUAL with a credential', yaml: tls('mode: ISTIO_MUTUAL\ncredentialName: c'), field: 'spec.trafficPolicy.tls.credentialName', message: /must be empty with mode ISTIO_MUTUAL/ },
    { name: 'ISTIO_MUTUAL skipping verification', yaml: tls('mode: ISTIO_MUTUAL\ninsecureSkipVerify: true'), field: 'spec.trafficPolicy.tls.insecureSkipVerify', message: /cannot be used with mode ISTIO_MUTUAL/ },
    { name: 'credential and files', yaml: tls('mode: MUTUAL\ncredentialName: c\nclientCertificate: a\nprivateKey: b'), field: 'spec.trafficPolicy.tls.clientCertificate',
      message: /give either credentialName or certificate files, not both/ },
    { name: 'SIMPLE with a client certificate', yaml: tls('mode: SIMPLE\nclientCertificate: a'), field: 'spec.trafficPolicy.tls.clientCertificate', message: /mode SIMPLE presents no client certificate/ },
    { name: 'skip verify with a CA (SIMPLE)', yaml: tls('mode: SIMPLE\ninsecureSkipVerify: true\ncaCertificates: ca'), field: 'spec.trafficPolicy.tls.caCertificates', message: /insecureSkipVerify: true turns off/ },
    { name: 'skip verify with a credential (SIMPLE)', yaml: tls('mode: SIMPLE\ninsecureSkipVerify: true\ncredentialName: c'), field: 'spec.trafficPolicy.tls.credentialName', message: /insecureSkipVerify/ },
    { name: 'skip verify with SANs (MUTUAL)', yaml: tls('mode: MUTUAL\ncredentialName: c\ninsecureSkipVerify: true\nsubjectAltNames: [a]'), field: 'spec.trafficPolicy.tls.subjectAltNames', message: /insecureSkipVerify/ },
    { name: 'caCrl', yaml: tls('mode: SIMPLE\ncaCrl: /crl.pem'), field: 'spec.trafficPolicy.tls.caCrl', message: /^is not supported by this agent$/ },
    { name: 'unknown tls field', yaml: tls('mode: SIMPLE\ncaCertificate: ca'), field: 'spec.trafficPolicy.tls.caCertificate', message: /unknown field "caCertificate"/ },
    { name: 'SNI pattern', yaml: tls('mode: SIMPLE\nsni: "*.example.com"'), field: 'spec.trafficPolicy.tls.sni', message: /an SNI is a DNS name/ },
    { name: 'SNI address', yaml: tls('mode: SIMPLE\nsni: 10.0.0.1'), field: 'spec.trafficPolicy.tls.sni', message: /an SNI is a DNS name/ },
    { name: 'tunnel', yaml: dr('host: a\ntrafficPolicy: {tunnel: {targetHost: p, targetPort: 8080}}'), field: 'spec.trafficPolicy.tunnel', message: /^is not supported yet: tunnelling/ },
    { name: 'proxyProtocol', yaml: dr('host: a\ntrafficPolicy: {proxyProtocol: {version: V2}}'), field: 'spec.trafficPolicy.proxyProtocol', message: /^is not supported yet: sending a PROXY protocol header/ },
    { name: 'port setting without port', yaml: dr('host: a\ntrafficPolicy: {portLevelSettings: [{tls: {mode: SIMPLE}}]}'), field: 'spec.trafficPolicy.portLevelSettings[0].port', message: /required/ },
    { name: 'port by name', yaml: dr('host: a\ntrafficPolicy: {portLevelSettings: [{port: {name: http}}]}'), field: 'spec.trafficPolicy.portLevelSettings[0].port.name', message: /unknown field "name"/ },
    { name: 'port twice', yaml: dr('host: a\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}, tls: {}}, {port: {number: 80}, tls: {}}]}'),
      field: 'spec.trafficPolicy.portLevelSettings[1].port.number', message: /port 80 already has a setting earlier/ },
    { name: 'port-level tls checked', yaml: dr('host: a\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}, tls: {mode: MUTUAL}}]}'),
      field: 'spec.trafficPolicy.portLevelSettings[0].tls.clientCertificate', message: /required with mode MUTUAL/ },
    { name: 'subset tls checked', yaml: dr('host: a\nsubsets: [{name: v1, trafficPolicy: {tls: {mode: MUTUAL}}}]'), field: 'spec.subsets[0].trafficPolicy.tls.clientCertificate',
      message: /required with mode MUTUAL/ },
    { name: 'subset port-level setting without settings', yaml: dr('host: a\nsubsets: [{name: v1, trafficPolicy: {portLevelSettings: [{port: {number: 80}}]}}]'),
      field: 'spec.subsets[0].trafficPolicy.portLevelSettings[0]', message: /needs at least one of loadBalancer, connectionPool, outlierDetection, tls/ },
    { name: 'subset policy typo', yaml: dr('host: a\nsubsets: [{name: v1, trafficPolicy: {loadBalancr: {}}}]'), field: 'spec.subsets[0].trafficPolicy.loadBalancr', message: /unknown field/ },
    { name: 'subset without name', yaml: dr('host: a\nsubsets: [{labels: {v: "1"}}]'), field: 'spec.subsets[0].name', message: /required/ },
    { name: 'subset name twice', yaml: dr('host: a\nsubsets: [{name: v1}, {name: v1}]'), field: 'spec.subsets[1].name', message: /already the name of an earlier subset/ },
    { name: 'exportTo * with others', yaml: dr('host: a\nexportTo: ["*", team-b]'), field: 'spec.exportTo', message: /"\*" already exports to every namespace/ },
    { name: 'exportTo not a namespace', yaml: dr('host: a\nexportTo: ["~"]'), field: 'spec.exportTo[0]', message: /is not a valid namespace/ },
    { name: 'workloadSelector without matchLabels', yaml: dr('host: a\nworkloadSelector: {app: a}'), field: 'spec.workloadSelector.app', message: /unknown field/ },
  ]);
});

it('formats a rejection as file[doc] Kind ns/name: field: message', () => {
  assert.equal(formatRejection(reject(tls('mode: ISTIO_MUTUAL\nclientCertificate: /c.pem'))),
    'etc/mesh/resources/test.yaml[0] DestinationRule team-a/db: spec.trafficPolicy.tls.clientCertificate: '
    + 'must be empty with mode ISTIO_MUTUAL (it uses the mesh certificates of this workload)');
});
