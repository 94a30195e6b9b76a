import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Sidecar } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections } from './helpers.js';

const sc = (spec: string): string => `apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s, namespace: shop}\nspec:\n${spec}\n`;

it('reads egress hosts (namespace/dnsName, `.` resolved), the outbound mode and the selector', () => {
  const s = accept(sc(`  workloadSelector: {labels: {app: web}}
  egress: [{hosts: ["./*", "mesh-system/*", "*/API.example.com", "~/*"]}]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}`)).resource as Sidecar;
  assert.deepEqual(s.selector, { app: 'web' });
  assert.deepEqual(s.egressHosts, [
    { namespace: 'shop', host: '*' }, { namespace: 'mesh-system', host: '*' }, { namespace: '*', host: 'api.example.com' }, { namespace: '~', host: '*' },
  ]);
  assert.equal(s.outboundTrafficPolicy, 'REGISTRY_ONLY');
  // A policy without a mode is the enum's zero value, REGISTRY_ONLY; no policy: the mesh config's.
  assert.equal((accept(sc('  outboundTrafficPolicy: {}')).resource as Sidecar).outboundTrafficPolicy, 'REGISTRY_ONLY');
  assert.equal((accept('apiVersion: networking.mesh.io/v1\nkind: Sidecar\nmetadata: {name: s}\nspec: {}\n').resource as Sidecar).outboundTrafficPolicy, undefined);
});

it('refuses what it does not honour, naming the field', () => {
  assertRejections([
    { name: 'ingress', yaml: sc('  ingress: [{port: {number: 80, protocol: HTTP, name: http}, defaultEndpoint: "127.0.0.1:8080"}]'),
      field: 'spec.ingress', message: /is not supported yet: inbound listeners/ },
    { name: 'egress port', yaml: sc('  egress: [{port: {number: 80, protocol: HTTP, name: http}, hosts: ["./*"]}]'),
      field: 'spec.egress[0].port', message: /is not supported yet: egress listeners per port/ },
    { name: 'egressProxy', yaml: sc('  outboundTrafficPolicy: {mode: REGISTRY_ONLY, egressProxy: {host: e.example.com}}'),
      field: 'spec.outboundTrafficPolicy.egressProxy', message: /is not supported yet/ },
    { name: 'inboundConnectionPool', yaml: sc('  inboundConnectionPool: {http: {http1MaxPendingRequests: 1}}'),
      field: 'spec.inboundConnectionPool', message: /is not supported yet/ },
    { name: 'a host without namespace', yaml: sc('  egress: [{hosts: ["api.example.com"]}]'),
      field: 'spec.egress[0].hosts[0]', message: /expected namespace\/dnsName/ },
    { name: 'a bad host', yaml: sc('  egress: [{hosts: ["./a..b"]}]'),
      field: 'spec.egress[0].hosts[0]', message: /not a valid host/ },
    { name: 'two catch-all egress', yaml: sc('  egress: [{hosts: ["./*"]}, {hosts: ["*/*"]}]'),
      field: 'spec.egress[1]', message: /only one egress listener without a port/ },
    { name: 'unknown mode', yaml: sc('  outboundTrafficPolicy: {mode: BLOCK_ALL}'),
      field: 'spec.outboundTrafficPolicy.mode', message: /"BLOCK_ALL" is not one of ALLOW_ANY, REGISTRY_ONLY/ },
  ]);
});

it('a selector on a Sidecar of the root namespace is said to reach that namespace only', () => {
  const { warnings } = acceptWarned('apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s, namespace: mesh-system}\nspec: {workloadSelector: {labels: {app: x}}}\n');
  assert.deepEqual(warnings, ['spec.workloadSelector: makes this Sidecar apply to matching workloads of mesh-system only: the mesh-wide default Sidecar is one without a selector (Istio reads it so too)']);
});
