import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { ResourceStore } from '../../../src/config/resources/store.js';
import type { Workload } from '../../../src/config/resources/types.js';
import {
  appliesToWorkload, authorizationPoliciesFor, gatewaysFor, parseLabels, readWorkload, requestAuthenticationsFor, selects,
  serviceEntriesFor, virtualServicesFor,
} from '../../../src/config/resources/workload.js';

const root = mkdtempSync(join(tmpdir(), 'workload-'));
after(() => rmSync(root, { recursive: true, force: true }));

it('parses the downward-API labels file, Go-quoted values included', () => {
  const text = [
    'app="reviews"',
    'mesh="ingressgateway"',
    'pod-template-hash="7f9d8c"',
    'quoted="say \\"hi\\" \\\\ there"',
    'escapes="tab\\there\\nnewline \\u00e9 \\xc3\\xa9 \\101"',
    'empty=""',
    'spaced = "kept"',
    'bare=unquoted',
    '',
    'no-equals-sign',
    'broken="unterminated',
    'trailing="x" junk',
    '__proto__="polluted?"',
    'crlf="yes"\r',
  ].join('\n');
  const labels = parseLabels(text);
  assert.deepEqual(labels, Object.fromEntries(Object.entries({
    app: 'reviews',
    mesh: 'ingressgateway',
    'pod-template-hash': '7f9d8c',
    quoted: 'say "hi" \\ there',
    escapes: 'tab\there\nnewline é é A',
    empty: '',
    spaced: 'kept',
    bare: 'unquoted',
    crlf: 'yes',
  }).concat([['__proto__', 'polluted?']])));
  assert.equal(Object.getPrototypeOf(labels), Object.prototype, 'a __proto__ label is a plain label');
  assert.deepEqual(parseLabels(''), {});
});

it('reads the workload from ./etc/mesh/pod/labels; no file, no labels (or the caller\'s defaults)', () => {
  assert.deepEqual(readWorkload(root, 'ns1'), { namespace: 'ns1', labels: {} });
  assert.deepEqual(readWorkload(root, 'ns1', { mesh: 'ingressgateway' }), { namespace: 'ns1', labels: { mesh: 'ingressgateway' } });
  mkdirSync(join(root, 'etc/mesh/pod'), { recursive: true });
  writeFileSync(join(root, 'etc/mesh/pod/labels'), 'mesh="ingressgateway"\napp="gw"\n');
  assert.deepEqual(readWorkload(root, 'mesh-system'), { namespace: 'mesh-system', labels: { mesh: 'ingressgateway', app: 'gw' } });
  assert.deepEqual(readWorkload(root, 'mesh-system', { other: 'x' }).labels, { mesh: 'ingressgateway', app: 'gw' }, 'the file wins over defaults');
});

it('selects by matchLabels; absent or {} selects every workload', () => {
  const labels = { app: 'a', version: 'v1' };
  assert.equal(selects(undefined, labels), true);
  assert.equal(selects({}, labels), true);
  assert.equal(selects({ app: 'a' }, labels), true);
  assert.equal(selects({ app: 'a', version: 'v2' }, labels), false);
  assert.equal(selects({ tier: 'x' }, labels), false);
  assert.equal(selects({ toString: 'x' }, {}), false, 'inherited properties are not labels');
});

it('scopes policies as Istio: own namespace, or every namespace from the root namespace; the selector filters both', () => {
  const w: Workload = { namespace: 'shop', labels: { app: 'cart' } };
  const p = (namespace: string, selector?: Record<string, string>) => ({ meta: { namespace }, ...(selector ? { selector } : {}) });
  assert.equal(appliesToWorkload(p('shop'), w), true);
  assert.equal(appliesToWorkload(p('shop', { app: 'cart' }), w), true);
  assert.equal(appliesToWorkload(p('shop', { app: 'other' }), w), false);
  assert.equal(appliesToWorkload(p('other'), w), false);
  assert.equal(appliesToWorkload(p('mesh-system'), w), true);
  assert.equal(appliesToWorkload(p('mesh-system', { app: 'other' }), w), false);
});

it('picks the resources for a gateway workload from a snapshot', () => {
  const store = new ResourceStore({ defaultNamespace: 'mesh-system' });
  store.update('r.yaml', `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: ingressgateway, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers: [{port: {number: 80, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: team-gw, namespace: team}
spec:
  selector: {mesh: ingressgateway}
  servers: [{port: {number: 8080, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: egress, namespace: mesh-system}
spec:
  selector: {mesh: egressgateway}
  servers: [{port: {number: 80, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: httpbin, namespace: foo}
spec:
  hosts: ["*"]
  gateways: [mesh-system/ingressgateway]
  http: [{route: [{destination: {host: httpbin}}]}]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: internal, namespace: foo}
spec:
  hosts: [internal.foo]
  http: [{route: [{destination: {host: internal}}]}]
---
apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  jwtRules: [{issuer: "testing@secure.mesh.io", jwksUri: "https://example.com/jwks.json"}]
---
apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: other-ns, namespace: foo}
spec:
  jwtRules: [{issuer: other, jwksUri: "https://example.com/jwks.json"}]
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules: [{from: [{source: {notRequestPrincipals: ["*"]}}]}]
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: for-egress, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: egressgateway}}
`);
  const snapshot = store.snapshot();
  const w: Workload = { namespace: 'mesh-system', labels: { mesh: 'ingressgateway' } };
  const gateways = gatewaysFor(snapshot, w);
  assert.deepEqual(gateways.map((g) => `${g.meta.namespace}/${g.meta.name}`), ['mesh-system/ingressgateway', 'team/team-gw'], 'any namespace');
  assert.deepEqual(virtualServicesFor(snapshot, gateways).map((v) => v.meta.name), ['httpbin']);
  assert.deepEqual(requestAuthenticationsFor(snapshot, w).map((r) => r.meta.name), ['jwt']);
  assert.deepEqual(authorizationPoliciesFor(snapshot, w).map((p) => p.meta.name), ['require-jwt']);
});

it('sees the ServiceEntries exported to the workload\'s namespace (exportTo: absent, "*", ".", namespaces, "~")', () => {
  const store = new ResourceStore({ defaultNamespace: 'shop' });
  const entry = (name: string, ns: string, exportTo: string): string => `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: ${ns}}
spec: {hosts: [${name}.example.com], ports: [{number: 80, name: http, protocol: HTTP}]${exportTo}}`;
  const rejections = store.update('r.yaml', [
    entry('all', 'db', ''), entry('star', 'db', ', exportTo: ["*"]'), entry('own', 'db', ', exportTo: ["."]'), entry('mine', 'shop', ', exportTo: ["."]'),
    entry('named', 'db', ', exportTo: [other, shop]'), entry('elsewhere', 'db', ', exportTo: [other]'), entry('none', 'shop', ', exportTo: ["~"]'),
  ].join('\n---\n'));
  assert.deepEqual(rejections, []);
  const names = (ns: string): string[] => serviceEntriesFor(store.snapshot().serviceEntries, ns).map((se) => se.meta.name);
  assert.deepEqual(names('shop'), ['all', 'star', 'mine', 'named']);
  assert.deepEqual(names('db'), ['all', 'star', 'own']);
  assert.deepEqual(names('other'), ['all', 'star', 'named', 'elsewhere']);
});
