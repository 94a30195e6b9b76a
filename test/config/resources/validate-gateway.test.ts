import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Gateway } from '../../../src/config/resources/types.js';
import { accept, assertRejections, indent } from './helpers.js';

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
    { name: 'unknown protocol', yaml: server(`port: {number: 80, protocol: MONGO}\nhosts: ["*"]`),
      field: 'spec.servers[0].port.protocol', message: /"MONGO" is not one of HTTP, HTTPS, HTTP2, GRPC, TCP, TLS/ },
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
