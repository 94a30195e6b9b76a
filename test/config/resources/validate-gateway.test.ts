import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Gateway } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

const head = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata:
  name: ingressgateway
  namespace: mesh-system
`;
const gw = (spec: string): string => `${head}spec:\n${indent(spec)}\n`;
/** One server under spec.servers[0], selector mesh=ingressgateway. */
const server = (s: string): string => gw(`selector:\n  mesh: ingressgateway\nservers:\n- ${indent(s).trimStart()}`);

it('reads an ingress Gateway with HTTP and HTTPS servers', () => {
  const g = accept(`${head}spec:
  selector:
    mesh: ingressgateway
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - "*"
    tls:
      httpsRedirect: true
  - port:
      number: 443
      name: https
      protocol: https
    hosts:
    - "./API.example.com"
    - "bookinfo/*.example.com"
    - "*/shop.example.com"
    tls:
      mode: SIMPLE
      serverCertificate: /etc/certs/tls.crt
      privateKey: /etc/certs/tls.key
`).resource as Gateway;
  assert.deepEqual(g.selector, { mesh: 'ingressgateway' });
  assert.deepEqual(g.servers[0], {
    port: { number: 80, name: 'http', protocol: 'HTTP' },
    hosts: [{ namespace: '*', host: '*' }],
    tls: { mode: 'PASSTHROUGH', httpsRedirect: true },
  });
  assert.equal(g.servers[1]!.port.protocol, 'HTTPS', 'protocol upper-cased');
  assert.deepEqual(g.servers[1]!.hosts, [
    { namespace: 'mesh-system', host: 'api.example.com' },
    { namespace: 'bookinfo', host: '*.example.com' },
    { namespace: '*', host: 'shop.example.com' },
  ]);
  assert.deepEqual(g.servers[1]!.tls, { mode: 'SIMPLE', httpsRedirect: false, serverCertificate: '/etc/certs/tls.crt', privateKey: '/etc/certs/tls.key' });
});

it('accepts selector {} (every gateway workload), credentialName, MUTUAL with a CA, and a default port name', () => {
  const g = accept(gw(`selector: {}
servers:
- port: {number: 8443, protocol: HTTPS}
  hosts: [a.example.com]
  tls: {mode: SIMPLE, credentialName: a-cert}
- port: {number: 9443, protocol: HTTPS}
  hosts: [b.example.com]
  tls: {mode: MUTUAL, serverCertificate: c.pem, privateKey: k.pem, caCertificates: ca.pem}
- port: {number: 9000, protocol: TCP}
  hosts: ["*"]
  bind: 0.0.0.0`)).resource as Gateway;
  assert.deepEqual(g.selector, {});
  assert.equal(g.servers[0]!.port.name, '');
  assert.deepEqual(g.servers[0]!.tls, { mode: 'SIMPLE', httpsRedirect: false, credentialName: 'a-cert' });
  assert.equal(g.servers[1]!.tls!.caCertificates, 'ca.pem');
  assert.equal(g.servers[2]!.tls, undefined);
});

it('reads the TLS parameters of a SIMPLE server (versions folded to upper case, cipher suites as written)', () => {
  const g = accept(server(`port: {number: 443, protocol: HTTPS}
hosts: ["*"]
tls: {mode: SIMPLE, credentialName: c, minProtocolVersion: tlsv1_2, maxProtocolVersion: TLS_AUTO, cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256, AES128-SHA]}`)).resource as Gateway;
  assert.deepEqual(g.servers[0]!.tls, {
    mode: 'SIMPLE', httpsRedirect: false, credentialName: 'c', minProtocolVersion: 'TLSV1_2', maxProtocolVersion: 'TLS_AUTO',
    cipherSuites: ['ECDHE-RSA-AES128-GCM-SHA256', 'AES128-SHA'],
  });
});

it('rejects, naming field and value, what a TLS server cannot honour', () => {
  const https = (tls: string): string => server(`port: {number: 443, protocol: HTTPS}\nhosts: ["*"]\ntls: {mode: SIMPLE, credentialName: c, ${tls}}`);
  assertRejections([
    { name: 'an unknown version', yaml: https('minProtocolVersion: TLSV1_4'),
      field: 'spec.servers[0].tls.minProtocolVersion', message: /"TLSV1_4" is not one of TLS_AUTO, TLSV1_0, TLSV1_1, TLSV1_2, TLSV1_3/ },
    { name: 'TLS 1.0 as minimum', yaml: https('minProtocolVersion: TLSV1_0'),
      field: 'spec.servers[0].tls.minProtocolVersion', message: /TLSV1_0 cannot be negotiated by this agent's OpenSSL/ },
    { name: 'TLS 1.1 as maximum', yaml: https('maxProtocolVersion: TLSV1_1'),
      field: 'spec.servers[0].tls.maxProtocolVersion', message: /TLSV1_1 cannot be negotiated/ },
    { name: 'minimum above maximum', yaml: https('minProtocolVersion: TLSV1_3, maxProtocolVersion: TLSV1_2'),
      field: 'spec.servers[0].tls.maxProtocolVersion', message: /TLSV1_2 is below minProtocolVersion TLSV1_3/ },
    { name: 'an unknown cipher suite', yaml: https('cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA512]'),
      field: 'spec.servers[0].tls.cipherSuites[1]', message: /"ECDHE-RSA-AES128-GCM-SHA512" is not a cipher suite this gateway accepts; accepted: ECDHE-ECDSA-AES128-GCM-SHA256, / },
    { name: 'a suite this OpenSSL lacks', yaml: https('cipherSuites: [DES-CBC3-SHA]'),
      field: 'spec.servers[0].tls.cipherSuites[0]', message: /"DES-CBC3-SHA" is not offered by this agent's OpenSSL/ },
    { name: 'a TLS 1.3 suite', yaml: https('cipherSuites: [TLS_AES_256_GCM_SHA384]'),
      field: 'spec.servers[0].tls.cipherSuites[0]', message: /is a TLS 1\.3 suite; TLS 1\.3 suites are not configurable \(as in Envoy\)/ },
    { name: 'cipherSuites not a list', yaml: https('cipherSuites: ECDHE-RSA-AES128-GCM-SHA256'),
      field: 'spec.servers[0].tls.cipherSuites', message: /expected a list/ },
    { name: 'client-certificate checks on SIMPLE', yaml: https('subjectAltNames: [a.example.com]'),
      field: 'spec.servers[0].tls.subjectAltNames', message: /checks client certificates, which mode SIMPLE never asks for/ },
    { name: 'a CRL on SIMPLE', yaml: https('caCrl: crl.pem'),
      field: 'spec.servers[0].tls.caCrl', message: /mode SIMPLE never asks for/ },
    { name: 'several certificates', yaml: https('credentialNames: [a, b]'),
      field: 'spec.servers[0].tls.credentialNames', message: /is not supported by this agent/ },
    { name: 'several certificate files', yaml: https('tlsCertificates: [{serverCertificate: a, privateKey: b}]'),
      field: 'spec.servers[0].tls.tlsCertificates', message: /is not supported by this agent/ },
    { name: 'a credential and files', yaml: https('serverCertificate: c.pem, privateKey: k.pem'),
      field: 'spec.servers[0].tls.credentialName', message: /either credentialName or serverCertificate and privateKey, not both/ },
    { name: 'TLS parameters on a plain HTTP server', yaml: server(`port: {number: 80, protocol: HTTP}\nhosts: ["*"]\ntls: {minProtocolVersion: TLSV1_3}`),
      field: 'spec.servers[0].tls.minProtocolVersion', message: /a HTTP server takes only tls.httpsRedirect/ },
  ]);
});

it('rejects invalid Gateways with the field path', () => {
  assertRejections([
    { name: 'selector missing', yaml: gw(`servers: [{port: {number: 80, protocol: HTTP}, hosts: ["*"]}]`),
      field: 'spec.selector', message: /required/ },
    { name: 'selector value not a string', yaml: gw(`selector: {mesh: 1}\nservers: [{port: {number: 80, protocol: HTTP}, hosts: ["*"]}]`),
      field: 'spec.selector[mesh]', message: /expected a string, got the number 1/ },
    { name: 'servers missing', yaml: gw(`selector: {}`),
      field: 'spec.servers', message: /required/ },
    { name: 'servers empty', yaml: gw(`selector: {}\nservers: []`),
      field: 'spec.servers', message: /must not be empty/ },
    { name: 'port number missing', yaml: server(`port: {protocol: HTTP}\nhosts: ["*"]`),
      field: 'spec.servers[0].port.number', message: /required/ },
    { name: 'port number out of range', yaml: server(`port: {number: 0, protocol: HTTP}\nhosts: ["*"]`),
      field: 'spec.servers[0].port.number', message: /from 1 to 65535, got the number 0/ },
    { name: 'port number as a string', yaml: server(`port: {number: "80", protocol: HTTP}\nhosts: ["*"]`),
      field: 'spec.servers[0].port.number', message: /got the string "80"/ },
    { name: 'unknown protocol', yaml: server(`port: {number: 80, protocol: SMTP}\nhosts: ["*"]`),
      field: 'spec.servers[0].port.protocol', message: /"SMTP" is not one of HTTP, HTTPS, HTTP2, GRPC, TCP, TLS, MONGO, MYSQL, REDIS/ },
    { name: 'AUTO_PASSTHROUGH', yaml: server(`port: {number: 15443, protocol: TLS}\nhosts: ["*.local"]\ntls: {mode: AUTO_PASSTHROUGH}`),
      field: 'spec.servers[0].tls.mode', message: /^AUTO_PASSTHROUGH is not supported yet .* use PASSTHROUGH with VirtualService tls routes/ },
    { name: 'hosts empty', yaml: server(`port: {number: 80, protocol: HTTP}\nhosts: []`),
      field: 'spec.servers[0].hosts', message: /must not be empty/ },
    { name: 'bad host namespace', yaml: server(`port: {number: 80, protocol: HTTP}\nhosts: ["Bad_NS/a.com"]`),
      field: 'spec.servers[0].hosts[0]', message: /not a valid namespace/ },
    { name: 'HTTPS without tls', yaml: server(`port: {number: 443, protocol: HTTPS}\nhosts: ["*"]`),
      field: 'spec.servers[0].tls', message: /required for a HTTPS server/ },
    { name: 'SIMPLE without certificate', yaml: server(`port: {number: 443, protocol: HTTPS}\nhosts: ["*"]\ntls: {mode: SIMPLE, privateKey: k.pem}`),
      field: 'spec.servers[0].tls.serverCertificate', message: /required with mode SIMPLE \(or credentialName\)/ },
    { name: 'SIMPLE without key', yaml: server(`port: {number: 443, protocol: HTTPS}\nhosts: ["*"]\ntls: {mode: SIMPLE, serverCertificate: c.pem}`),
      field: 'spec.servers[0].tls.privateKey', message: /required with mode SIMPLE/ },
    { name: 'MUTUAL without CA', yaml: server(`port: {number: 443, protocol: HTTPS}\nhosts: ["*"]\ntls: {mode: MUTUAL, serverCertificate: c.pem, privateKey: k.pem}`),
      field: 'spec.servers[0].tls.caCertificates', message: /required with mode MUTUAL/ },
    { name: 'unknown tls mode', yaml: server(`port: {number: 443, protocol: HTTPS}\nhosts: ["*"]\ntls: {mode: STRICT}`),
      field: 'spec.servers[0].tls.mode', message: /"STRICT" is not one of/ },
    { name: 'certificates on a plain HTTP server', yaml: server(`port: {number: 80, protocol: HTTP}\nhosts: ["*"]\ntls: {mode: SIMPLE, credentialName: x}`),
      field: 'spec.servers[0].tls.mode', message: /a HTTP server takes only tls.httpsRedirect/ },
    { name: 'misspelt field', yaml: server(`port: {number: 80, protocol: HTTP}\nhost: ["*"]`),
      field: 'spec.servers[0].host', message: /unknown field "host"/ },
    { name: 'spec not a mapping', yaml: `${head}spec: [1]\n`,
      field: 'spec', message: /expected a mapping, got a list/ },
  ]);
});

it('honours bind (an IP address the server\'s listener binds), refuses a Unix socket as not supported yet and a bad address', () => {
  const v4 = acceptWarned(server('port: {number: 8080, protocol: HTTP}\nhosts: ["*"]\nbind: 127.0.0.1'));
  assert.equal((v4.value.resource as Gateway).servers[0]!.bind, '127.0.0.1');
  assert.deepEqual(v4.warnings, []);
  assert.equal((accept(server('port: {number: 8080, protocol: HTTP}\nhosts: ["*"]\nbind: "FD00::1"')).resource as Gateway).servers[0]!.bind, 'fd00::1');
  assert.equal((accept(server('port: {number: 8080, protocol: HTTP}\nhosts: ["*"]\nbind: ""')).resource as Gateway).servers[0]!.bind, undefined, '"": unset');
  assertRejections([
    { name: 'a Unix domain socket', yaml: server('port: {number: 8080, protocol: HTTP}\nhosts: ["*"]\nbind: unix:///var/run/gw.sock'),
      field: 'spec.servers[0].bind', message: /^is not supported yet for a Unix domain socket \("unix:\/\/\/var\/run\/gw\.sock"\)/ },
    { name: 'a name', yaml: server('port: {number: 8080, protocol: HTTP}\nhosts: ["*"]\nbind: gateway.local'),
      field: 'spec.servers[0].bind', message: /"gateway\.local" is not an IP address/ },
    { name: 'an address with a port', yaml: server('port: {number: 8080, protocol: HTTP}\nhosts: ["*"]\nbind: 127.0.0.1:8080'),
      field: 'spec.servers[0].bind', message: /is not an IP address/ },
  ]);
});

it('accepts defaultEndpoint and port.targetPort with a warning at load that they have no effect, as in Istio', () => {
  const { value, warnings } = acceptWarned(server('port: {number: 8080, protocol: HTTP, targetPort: 80}\nhosts: ["*"]\ndefaultEndpoint: 127.0.0.1:9080'));
  assert.equal(warnings.length, 2, warnings.join('; '));
  assert.match(warnings[0] ?? '', /^spec\.servers\[0\]\.defaultEndpoint: has no effect: Istio does not implement it/);
  assert.match(warnings[1] ?? '', /^spec\.servers\[0\]\.port\.targetPort: has no effect on a Gateway, as in Istio: the gateway listens on port\.number itself/);
  assert.deepEqual((value.resource as Gateway).servers[0]!.port, { number: 8080, name: '', protocol: 'HTTP' });
});

it('a CA on a SIMPLE server is accepted with a warning and not used, as in Istio', () => {
  const { value, warnings } = acceptWarned(server('port: {number: 443, protocol: HTTPS}\nhosts: ["*"]\ntls: {mode: SIMPLE, credentialName: c, caCertificates: ca.pem}'));
  assert.equal(value.kind, 'Gateway');
  assert.equal(value.kind === 'Gateway' ? value.resource.servers[0]!.tls!.caCertificates : 'x', undefined);
  assert.deepEqual(warnings, ['spec.servers[0].tls.caCertificates: has no effect with mode SIMPLE, as in Istio: the server asks for no client certificate, so nothing is verified against it']);
});

it('reads TCP-carried servers (TCP, MONGO, MYSQL, REDIS) and TLS PASSTHROUGH; what only a terminating server reads is warned about on a PASSTHROUGH one', () => {
  for (const p of ['TCP', 'MONGO', 'MYSQL', 'REDIS']) {
    assert.equal((accept(server(`port: {number: 27017, protocol: ${p.toLowerCase()}}\nhosts: ["*"]`)).resource as Gateway).servers[0]!.port.protocol, p);
  }
  const plain = acceptWarned(server('port: {number: 8443, protocol: TLS}\nhosts: ["*.example.com"]\ntls: {mode: PASSTHROUGH}'));
  assert.deepEqual(plain.warnings, []);
  // No HTTP to redirect on a server relayed as TCP or TLS.
  assert.match(acceptWarned(server('port: {number: 9000, protocol: TCP}\nhosts: ["*"]\ntls: {httpsRedirect: true}')).warnings[0]!,
    /^spec\.servers\[0\]\.tls\.httpsRedirect: has no effect on a TCP server/);
  assert.match(acceptWarned(server('port: {number: 8443, protocol: TLS}\nhosts: ["*"]\ntls: {mode: PASSTHROUGH, httpsRedirect: true}')).warnings[0]!,
    /^spec\.servers\[0\]\.tls\.httpsRedirect: has no effect on a PASSTHROUGH server/);
  const { warnings } = acceptWarned(server('port: {number: 8443, protocol: HTTPS}\nhosts: ["*"]\ntls: {mode: PASSTHROUGH, credentialName: c, minProtocolVersion: TLSV1_2}'));
  assert.deepEqual(warnings.map((w) => w.slice(0, w.indexOf(':'))), ['spec.servers[0].tls.credentialName', 'spec.servers[0].tls.minProtocolVersion']);
  assert.match(warnings[0]!, /has no effect with mode PASSTHROUGH: the client's TLS is relayed to the destination untouched/);
});
