// A VirtualService's tcp and tls routes: read as written, refused where Istio refuses them; bound to
// a gateway they are accepted, with a warning for what Istio's gateways do not read.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { VirtualService } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

/** A VirtualService for db.example.com with only the given spec lines (tcp / tls / gateways...). */
const vs = (spec: string, hosts = '[db.example.com, "*.tls.example.com"]'): string => `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: db, namespace: shop}
spec:
  hosts: ${hosts}
${indent(spec)}
`;
const read = (yaml: string): VirtualService => accept(yaml).resource as VirtualService;

it('reads tcp routes: matches (port, destinationSubnets, sourceLabels, sourceNamespace, gateways) and weighted destinations', () => {
  const v = read(vs(`tcp:
- match: [{port: 5432, destinationSubnets: [10.0.0.0/8, "fd00::1"], sourceLabels: {app: web}, sourceNamespace: shop, gateways: [mesh]}]
  route:
  - {destination: {host: db.example.com, subset: v1, port: {number: 5432}}, weight: 90}
  - {destination: {host: db.example.com, subset: v2}, weight: 10}
- route: [{destination: {host: db.example.com}}]`));
  assert.deepEqual(v.http, []);
  assert.deepEqual(v.tcp, [
    {
      match: [{ port: 5432, destinationSubnets: ['10.0.0.0/8', 'fd00::1'], sourceLabels: { app: 'web' }, sourceNamespace: 'shop', gateways: ['mesh'] }],
      route: [{ host: 'db.example.com', subset: 'v1', port: 5432, weight: 90 }, { host: 'db.example.com', subset: 'v2', weight: 10 }],
    },
    { match: [], route: [{ host: 'db.example.com', weight: 100 }] },
  ]);
  assert.equal(v.tls, undefined);
});

it('reads tls routes: sniHosts (lower-cased, within the hosts) and the L4 fields', () => {
  const v = read(vs(`tls:
- match: [{sniHosts: [A.tls.example.com, "*.tls.example.com"], port: 443, destinationSubnets: [192.0.2.0/24]}]
  route: [{destination: {host: db.example.com, port: {number: 443}}}]`));
  assert.deepEqual(v.tls, [{
    match: [{ sniHosts: ['a.tls.example.com', '*.tls.example.com'], port: 443, destinationSubnets: ['192.0.2.0/24'] }],
    route: [{ host: 'db.example.com', port: 443, weight: 100 }],
  }]);
  assert.equal(v.tcp, undefined);
});

it('accepts sourceSubnet with a warning: Istio never reads it', () => {
  const { warnings } = acceptWarned(vs('tcp: [{match: [{sourceSubnet: 10.0.0.0/8}], route: [{destination: {host: db.example.com}}]}]'));
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /^spec\.tcp\[0\]\.match\[0\]\.sourceSubnet: has no effect: Istio never reads/);
});

it('refuses what Istio refuses, naming the field', () => {
  const to = 'route: [{destination: {host: db.example.com}}]';
  assertRejections([
    { name: 'no route at all', yaml: vs('gateways: [mesh]'), field: 'spec.http', message: /at least one route \(http, tcp or tls\)/ },
    { name: 'tcp without route', yaml: vs('tcp: [{match: [{port: 1}]}]'), field: 'spec.tcp[0].route', message: /^required: a route needs at least one destination/ },
    { name: 'tcp with an empty route', yaml: vs('tcp: [{route: []}]'), field: 'spec.tcp[0].route', message: /^required/ },
    { name: 'tls without match', yaml: vs(`tls: [{${to}}]`), field: 'spec.tls[0].match', message: /^required: a TLS route needs at least one match/ },
    { name: 'tls with an empty match', yaml: vs(`tls: [{match: [], ${to}}]`), field: 'spec.tls[0].match', message: /must not be empty/ },
    { name: 'tls match without sniHosts', yaml: vs(`tls: [{match: [{port: 443}], ${to}}]`), field: 'spec.tls[0].match[0].sniHosts', message: /^required: a TLS match needs at least one SNI host/ },
    { name: 'tls match with empty sniHosts', yaml: vs(`tls: [{match: [{sniHosts: []}], ${to}}]`), field: 'spec.tls[0].match[0].sniHosts', message: /must not be empty/ },
    { name: 'an SNI host outside the hosts', yaml: vs(`tls: [{match: [{sniHosts: [other.example.com]}], ${to}}]`), field: 'spec.tls[0].match[0].sniHosts[0]',
      message: /"other\.example\.com" is not within any of the VirtualService's hosts/ },
    { name: 'an SNI wildcard wider than the host', yaml: vs(`tls: [{match: [{sniHosts: ["*.example.com"]}], ${to}}]`), field: 'spec.tls[0].match[0].sniHosts[0]', message: /is not within/ },
    { name: 'an SNI host that is no host', yaml: vs(`tls: [{match: [{sniHosts: ["a..b"]}], ${to}}]`), field: 'spec.tls[0].match[0].sniHosts[0]', message: /is not a valid host/ },
    { name: 'a bad subnet', yaml: vs(`tcp: [{match: [{destinationSubnets: [10.0.0.0/33]}], ${to}}]`), field: 'spec.tcp[0].match[0].destinationSubnets[0]', message: /is not an IP address or CIDR block/ },
    { name: 'port 0', yaml: vs(`tcp: [{match: [{port: 0}], ${to}}]`), field: 'spec.tcp[0].match[0].port', message: /an integer from 1 to 65535/ },
    { name: 'an HTTP field in a tcp match', yaml: vs(`tcp: [{match: [{uri: {prefix: /}}], ${to}}]`), field: 'spec.tcp[0].match[0].uri', message: /unknown field/ },
    { name: 'headers on a tcp destination', yaml: vs('tcp: [{route: [{destination: {host: db.example.com}, headers: {request: {set: {a: b}}}}]}]'),
      field: 'spec.tcp[0].route[0].headers', message: /unknown field/ },
    { name: 'weights adding up to 0', yaml: vs('tcp: [{route: [{destination: {host: a.example.com}, weight: 0}, {destination: {host: b.example.com}, weight: 0}]}]'),
      field: 'spec.tcp[0].route', message: /add up to 0/ },
    { name: 'a bad namespace', yaml: vs(`tcp: [{match: [{sourceNamespace: Not_A_Namespace}], ${to}}]`), field: 'spec.tcp[0].match[0].sourceNamespace', message: /./ },
  ]);
});

it('accepts tcp and tls routes bound to a gateway; what a gateway never reads of a match is warned about, naming it', () => {
  const to = 'route: [{destination: {host: db.example.com}}]';
  const tcp = read(vs(`gateways: [gw]\ntcp: [{${to}}]`));
  assert.deepEqual(tcp.gateways, ['shop/gw']);
  assert.deepEqual(read(vs(`tcp: [{match: [{gateways: [shop/gw]}], ${to}}]`)).tcp?.[0]?.match, [{ gateways: ['shop/gw'] }]);
  assert.equal(read(vs(`gateways: [mesh, gw]\ntls: [{match: [{sniHosts: [db.example.com]}], ${to}}]`)).tls?.length, 1);
  // Istio's gateways match on port and gateways only: a match bound to gateways alone gets a word on the rest.
  const gatewayOnly = acceptWarned(vs(`gateways: [gw]\ntcp: [{match: [{port: 9000, destinationSubnets: [10.0.0.0/8], sourceLabels: {app: a}, sourceNamespace: x}], ${to}}]`));
  assert.deepEqual(gatewayOnly.warnings.map((w) => w.slice(0, w.indexOf(':'))), [
    'spec.tcp[0].match[0].destinationSubnets', 'spec.tcp[0].match[0].sourceLabels', 'spec.tcp[0].match[0].sourceNamespace']);
  assert.match(gatewayOnly.warnings[0]!, /has no effect at a gateway: Istio matches a gateway's connections on port and gateways only/);
  // Bound to mesh too: the sidecars read them, nothing to say.
  assert.deepEqual(acceptWarned(vs(`gateways: [mesh, gw]\ntcp: [{match: [{destinationSubnets: [10.0.0.0/8]}], ${to}}]`)).warnings, []);
  // A match naming a gateway the VirtualService is not bound to never applies there (Istio accepts it): warned.
  assert.deepEqual(acceptWarned(vs(`gateways: [gw]\ntcp: [{match: [{gateways: [other]}], ${to}}]`)).warnings,
    ['spec.tcp[0].match[0].gateways: has no effect: the VirtualService is not bound to shop/other (spec.gateways), so no gateway uses this match; add it to spec.gateways']);
  // A match bound to mesh alone, in a VirtualService that is also on a gateway, is the sidecars'.
  const v = read(vs(`gateways: [mesh, gw]\ntcp: [{match: [{gateways: [mesh], port: 1}], ${to}}]`));
  assert.deepEqual(v.tcp?.[0]?.match, [{ gateways: ['mesh'], port: 1 }]);
  // A match bound to mesh in a VirtualService that is not: no sidecar uses it (Istio accepts it): warned.
  const { warnings } = acceptWarned(vs(`gateways: [shop/gw]\ntcp: [{match: [{gateways: [mesh]}], ${to}}]`));
  assert.deepEqual(warnings, ['spec.tcp[0].match[0].gateways: has no effect: the VirtualService is not bound to mesh (spec.gateways), so no sidecar uses this match; add mesh to spec.gateways']);
});
