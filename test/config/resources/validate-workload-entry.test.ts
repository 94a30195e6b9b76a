import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { WorkloadEntry } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

const we = (spec: string, apiVersion = 'networking.mesh.io/v1'): string => `apiVersion: ${apiVersion}
kind: WorkloadEntry
metadata: {name: vm-1, namespace: shop}
spec:
${indent(spec)}
`;

it('reads a WorkloadEntry: address, ports, labels, network, locality, weight, serviceAccount', () => {
  const r = accept(we(`address: 10.0.3.7
ports: {http: 8080, grpc: 9090}
labels: {app: reviews, version: v2}
network: vpc-1
locality: us-east1/us-east1-b
weight: 5
serviceAccount: reviews`)).resource as WorkloadEntry;
  assert.deepEqual({ ...r, meta: undefined }, {
    meta: undefined, address: '10.0.3.7', ports: { http: 8080, grpc: 9090 }, labels: { app: 'reviews', version: 'v2' },
    network: 'vpc-1', locality: 'us-east1/us-east1-b', weight: 5, serviceAccount: 'reviews',
  });
  assert.equal(r.meta.kind, 'WorkloadEntry');
  const named = accept(we('address: VM-1.Example.com', 'networking.mesh.io/v1beta1')).resource as WorkloadEntry;
  assert.deepEqual([named.address, named.ports, named.labels, named.weight], ['vm-1.example.com', {}, {}, 0], 'a name, for DNS entries; the v1beta1 alias');
});

it('says at load that network does not steer traffic here; locality is honoured, nothing said (never accepted and silently ignored)', () => {
  const { warnings } = acceptWarned(we('address: 10.0.3.7\nnetwork: vpc-1\nlocality: us-east1/us-east1-b'));
  assert.equal(warnings.length, 1, warnings.join('; '));
  assert.match(warnings[0] ?? '', /^spec\.network: has no effect here: .*multi-network meshes\) is not supported/);
  assert.deepEqual(acceptWarned(we('address: 10.0.3.7\nnetwork: ""\nlocality: ""')).warnings, [], 'empty: nothing said, nothing to ignore');
});

it('refuses what Istio refuses, and what is not supported yet', () => {
  assertRejections([
    { name: 'no address', yaml: we('labels: {app: a}'), field: 'spec.address', message: /^required/ },
    { name: 'network without address', yaml: we('network: vpc-2'), field: 'spec.address', message: /through its network's gateway .* is not supported yet/ },
    { name: 'unix address', yaml: we('address: "unix:///run/app.sock"'), field: 'spec.address', message: /^is not supported yet: endpoints on unix domain sockets$/ },
    { name: 'wildcard address', yaml: we('address: "*.example.com"'), field: 'spec.address', message: /cannot be a wildcard/ },
    { name: 'port name', yaml: we('address: 10.0.0.1\nports: {HTTP: 80}'), field: 'spec.ports[HTTP]', message: /not a valid port name/ },
    { name: 'port number', yaml: we('address: 10.0.0.1\nports: {http: 0}'), field: 'spec.ports[http]', message: /from 1 to 65535/ },
    { name: 'label value', yaml: we('address: 10.0.0.1\nlabels: {app: "a/b"}'), field: 'spec.labels[app]', message: /not a valid label value/ },
    { name: 'weight', yaml: we('address: 10.0.0.1\nweight: 4294967296'), field: 'spec.weight', message: /from 0 to 4294967295/ },
    { name: 'unknown field', yaml: we('address: 10.0.0.1\nport: {http: 80}'), field: 'spec.port', message: /unknown field "port"/ },
  ]);
});
