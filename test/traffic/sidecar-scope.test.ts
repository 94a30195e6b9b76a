import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ResourceStore } from '../../src/config/resources/store.js';
import { outboundTrafficMode, scopeSnapshot, sidecarFor } from '../../src/traffic/sidecar-scope.js';

const se = (name: string, ns: string, host: string): string =>
  `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ${name}, namespace: ${ns}}\nspec: {hosts: [${host}], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}\n---\n`;
const vs = (name: string, ns: string, host: string, gateways = '[mesh]'): string =>
  `apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ${name}, namespace: ${ns}}\nspec: {hosts: [${host}], gateways: ${gateways}, http: [{route: [{destination: {host: ${host}}}]}]}\n---\n`;
const sidecar = (name: string, ns: string, spec: string): string =>
  `apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: ${name}, namespace: ${ns}}\nspec: ${spec}\n---\n`;

function snapshot(text: string) {
  const store = new ResourceStore({ defaultNamespace: 'shop' });
  assert.deepEqual(store.update('r.yaml', text), []);
  return store.snapshot();
}
const web = { namespace: 'shop', labels: { app: 'web' } };

it('the workload\'s Sidecar: its namespace\'s selecting one, else its namespace\'s default, else the root namespace\'s', () => {
  const s = snapshot(sidecar('root', 'mesh-system', '{}') + sidecar('ns', 'shop', '{}') + sidecar('sel', 'shop', '{workloadSelector: {labels: {app: web}}}')
    + sidecar('other', 'shop', '{workloadSelector: {labels: {app: db}}}'));
  assert.equal(sidecarFor(s.sidecars, web)?.meta.name, 'sel');
  assert.equal(sidecarFor(s.sidecars, { namespace: 'shop', labels: { app: 'api' } })?.meta.name, 'ns');
  assert.equal(sidecarFor(s.sidecars, { namespace: 'blog', labels: {} })?.meta.name, 'root');
  assert.equal(sidecarFor(snapshot(sidecar('sel', 'shop', '{workloadSelector: {labels: {app: web}}}')).sidecars, { namespace: 'blog', labels: { app: 'web' } }), undefined);
});

it('egress hosts scope the ServiceEntries and mesh VirtualServices the workload sees; gateway ones stay', () => {
  const base = se('a', 'shop', 'a.example.com') + se('b', 'blog', 'b.example.com') + se('c', 'blog', 'c.example.com')
    + vs('ra', 'shop', 'a.example.com') + vs('rb', 'blog', 'b.example.com') + vs('rshort', 'shop', 'reviews') + vs('gw', 'blog', 'b.example.com', '[ingress]');
  const none = snapshot(base);
  assert.equal(scopeSnapshot(none, web), none, 'no Sidecar: the snapshot itself');
  const scoped = scopeSnapshot(snapshot(base + sidecar('s', 'shop', '{egress: [{hosts: ["./*", "blog/c.example.com"]}]}')), web);
  assert.deepEqual(scoped.serviceEntries.map((e) => e.meta.name), ['a', 'c']);
  assert.deepEqual(scoped.virtualServices.map((v) => v.meta.name), ['ra', 'rshort', 'gw']);
  const byFqdn = scopeSnapshot(snapshot(base + sidecar('s', 'shop', '{egress: [{hosts: ["*/*.svc.cluster.local", "*/b.example.com"]}]}')), web);
  assert.deepEqual(byFqdn.serviceEntries.map((e) => e.meta.name), ['b']);
  assert.deepEqual(byFqdn.virtualServices.map((v) => v.meta.name), ['rb', 'rshort', 'gw']);
  assert.deepEqual(scopeSnapshot(snapshot(base + sidecar('s', 'shop', '{egress: [{hosts: ["~/*"]}]}')), web).serviceEntries, []);
});

it('the outbound mode: the Sidecar\'s, else the mesh config\'s', () => {
  assert.equal(outboundTrafficMode(snapshot(sidecar('s', 'shop', '{outboundTrafficPolicy: {mode: REGISTRY_ONLY}}')), web, 'ALLOW_ANY'), 'REGISTRY_ONLY');
  assert.equal(outboundTrafficMode(snapshot(sidecar('s', 'shop', '{outboundTrafficPolicy: {mode: ALLOW_ANY}}')), web, 'REGISTRY_ONLY'), 'ALLOW_ANY');
  assert.equal(outboundTrafficMode(snapshot(sidecar('s', 'shop', '{}')), web, 'REGISTRY_ONLY'), 'REGISTRY_ONLY');
  assert.equal(outboundTrafficMode(undefined, web, 'ALLOW_ANY'), 'ALLOW_ANY');
});
