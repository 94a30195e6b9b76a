// The Kubernetes manifests stay loadable and speak our command line: the init container's
// arguments parse as mesh-iptables flags, the sidecar runs as 1337 with readiness on 15021.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { optionsFromArgs } from '../helpers/iptables-options.js';
import { repoRoot } from '../helpers/repo.js';
import { ResourceStore } from '../../src/config/resources/store.js';
import { gatewaysFor, requestAuthenticationsFor } from '../../src/config/resources/workload.js';

interface Container {
  name: string;
  args: string[];
  securityContext: { runAsUser: number; runAsGroup: number; capabilities: { add?: string[]; drop?: string[] } };
  readinessProbe?: { httpGet: { path: string; port: number } };
}
type Pod = { spec: { initContainers: Container[]; containers: Container[] } };

const pod = parseAllDocuments(readFileSync(join(repoRoot, 'docker', 'kubernetes', 'pod.yaml'), 'utf8'))[0]!.toJS() as Pod;

it('the init container runs mesh-iptables as root with NET_ADMIN and NET_RAW, with valid flags', () => {
  const init = pod.spec.initContainers.find((c) => c.name === 'mesh-init')!;
  assert.equal(init.args[0], 'mesh-iptables');
  assert.equal(init.securityContext.runAsUser, 0);
  assert.deepEqual(init.securityContext.capabilities.add, ['NET_ADMIN', 'NET_RAW']);
  const o = optionsFromArgs(init.args.filter((a) => !a.startsWith('--log_')));
  assert.deepEqual(o.serviceCidrs, { all: true });
  assert.deepEqual(o.localExcludePorts, [15090, 15021, 15020]);
  assert.deepEqual(o.proxyUids, ['1337']);
});

it('the sidecar runs proxy as uid/gid 1337 with readiness on 15021', () => {
  const sidecar = pod.spec.containers.find((c) => c.name === 'mesh-proxy')!;
  assert.deepEqual(sidecar.args.slice(0, 2), ['proxy', 'sidecar']);
  assert.equal(sidecar.securityContext.runAsUser, 1337);
  assert.equal(sidecar.securityContext.runAsGroup, 1337);
  assert.deepEqual(sidecar.readinessProbe?.httpGet, { path: '/healthz/ready', port: 15021 });
});

it('the ingress gateway manifest: its resources validate, its Gateway selects its labels, it runs proxy router as 1337', () => {
  const docs = parseAllDocuments(readFileSync(join(repoRoot, 'docker', 'kubernetes', 'ingressgateway.yaml'), 'utf8')).map((d) => d.toJS() as Record<string, any>);
  const configMap = docs.find((d) => d['kind'] === 'ConfigMap')!;
  const store = new ResourceStore({ defaultNamespace: 'mesh-system' });
  const rejections = Object.entries(configMap['data'] as Record<string, string>).flatMap(([file, text]) => store.update(file, text));
  assert.deepEqual(rejections, []);
  const deployment = docs.find((d) => d['kind'] === 'Deployment')!;
  const labels = deployment['spec']['template']['metadata']['labels'] as Record<string, string>;
  const snapshot = store.snapshot();
  assert.equal(gatewaysFor(snapshot, { namespace: 'mesh-system', labels }).length, 1);
  assert.equal(requestAuthenticationsFor(snapshot, { namespace: 'mesh-system', labels }).length, 1);
  const container = deployment['spec']['template']['spec']['containers'][0];
  assert.deepEqual(container['args'].slice(0, 2), ['proxy', 'router']);
  assert.equal(deployment['spec']['template']['spec']['securityContext']['runAsUser'], 1337);
  assert.equal(container['readinessProbe']['httpGet']['port'], 15021);
});
