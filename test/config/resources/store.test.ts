import assert from 'node:assert/strict';
import { it } from 'node:test';
import { formatRejection } from '../../../src/config/resources/format.js';
import { ResourceStore } from '../../../src/config/resources/store.js';
import type { ResourceSnapshot } from '../../../src/config/resources/types.js';

/** A VirtualService `name` routing to `host` (so two versions of it differ). */
function vs(name: string, host = 'a', ns?: string): string {
  return `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata:
  name: ${name}${ns ? `\n  namespace: ${ns}` : ''}
spec:
  hosts: [${name}.example.com]
  gateways: [ingressgateway]
  http:
  - route:
    - destination: {host: ${host}}
`;
}

const badRegexVs = (name: string): string => vs(name).replace('  - route:', '  - match: [{uri: {regex: "a("}}]\n    route:');

const se = (name: string): string => `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: ${name}}
spec: {hosts: [${name}.example.com], addresses: [10.0.0.1]}
`;

/** name → destination host of every VirtualService, in snapshot order. */
function routes(s: ResourceSnapshot): string[] {
  return s.virtualServices.map((v) => `${v.meta.name}→${v.http[0]!.route[0]!.host}`);
}

it('loads every file, in path order then document order, with the agent\'s namespace as default', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  assert.equal(store.snapshot().version, 0);
  assert.deepEqual(store.update('r/b.yaml', `${vs('b1')}---\n${vs('b2')}`), []);
  assert.deepEqual(store.update('r/a.yaml', `${se('db')}---\n${vs('a1')}`), []);
  const s = store.snapshot();
  assert.deepEqual(routes(s), ['a1→a', 'b1→a', 'b2→a']);
  assert.deepEqual(s.serviceEntries.map((e) => `${e.meta.namespace}/${e.meta.name}`), ['default/db']);
  assert.deepEqual(s.virtualServices.map((v) => `${v.meta.origin.file}[${v.meta.origin.index}]`), ['r/a.yaml[1]', 'r/b.yaml[0]', 'r/b.yaml[1]']);
  assert.deepEqual(s.virtualServices[0]!.gateways, ['default/ingressgateway']);
  assert.equal(s.version, 2);
  assert.ok(Object.isFrozen(s) && Object.isFrozen(s.virtualServices));
});

it('a re-read of the same text, or of equivalent text, is not a change', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('a.yaml', vs('x'));
  const v = store.snapshot().version;
  assert.deepEqual(store.update('a.yaml', vs('x')), []);
  store.update('a.yaml', `# a comment now\n${vs('x')}`);
  assert.equal(store.snapshot().version, v);
  store.update('a.yaml', vs('x', 'b'));
  assert.equal(store.snapshot().version, v + 1);
});

it('a file with a YAML syntax error keeps its previous resources in force', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('a.yaml', `${vs('x')}---\n${vs('y')}`);
  store.update('b.yaml', vs('z'));
  const before = store.snapshot();
  const rejections = store.update('a.yaml', `${vs('x', 'new')}---\nspec: [\n`);
  assert.equal(rejections.length, 1);
  assert.match(formatRejection(rejections[0]!), /^a\.yaml\[1\]: not valid YAML: .+; the 2 resource\(s\) it held before stay in force$/);
  assert.equal(store.snapshot(), before, 'nothing changed: same snapshot, same version');
  assert.equal(store.rejectCounts.get('unknown'), 1);
  // Fixed: the new content applies.
  store.update('a.yaml', vs('x', 'new'));
  assert.deepEqual(routes(store.snapshot()), ['x→new', 'z→a']);
});

it('an invalid resource is rejected and its previous version stays in force; valid ones beside it apply', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('a.yaml', `${vs('x')}---\n${vs('y')}`);
  const rejections = store.update('a.yaml', `${badRegexVs('x')}---\n${vs('y', 'changed')}---\n${badRegexVs('fresh')}`);
  assert.deepEqual(rejections.map(formatRejection), [
    'a.yaml[0] VirtualService default/x: spec.http[0].match[0].uri.regex: "a(" is not a valid regular expression: unterminated group (the previous version stays in force)',
    'a.yaml[2] VirtualService default/fresh: spec.http[0].match[0].uri.regex: "a(" is not a valid regular expression: unterminated group',
  ]);
  assert.deepEqual(routes(store.snapshot()), ['x→a', 'y→changed']);
  assert.equal(store.rejectCounts.get('VirtualService'), 2);
  // Still invalid on the next edit: the last good version is still the one in force.
  store.update('a.yaml', `${badRegexVs('x')}\n# touched\n`);
  assert.deepEqual(routes(store.snapshot()), ['x→a'], 'y was removed from the file; x keeps its last good version');
  // Removed from the file altogether: gone.
  store.update('a.yaml', vs('y'));
  assert.deepEqual(routes(store.snapshot()), ['y→a']);
});

it('a deleted file removes its resources; the rest stay', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('a.yaml', vs('x'));
  store.update('b.yaml', `${vs('y')}---\n${se('db')}`);
  assert.deepEqual(store.update('b.yaml', undefined), []);
  assert.deepEqual(routes(store.snapshot()), ['x→a']);
  assert.equal(store.snapshot().serviceEntries.length, 0);
  const v = store.snapshot().version;
  assert.deepEqual(store.update('never-seen.yaml', undefined), []);
  assert.equal(store.snapshot().version, v);
  assert.deepEqual(store.files(), ['a.yaml']);
});

it('the same kind/namespace/name twice: the first in file order wins, the later is rejected once', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('b.yaml', vs('x', 'from-b'));
  const rejections = store.update('a.yaml', vs('x', 'from-a'));
  assert.deepEqual(rejections.map(formatRejection), [
    'b.yaml[0] VirtualService default/x: metadata.name: VirtualService/default/x is already defined by a.yaml[0], which comes first in file order and stays in force; this one is ignored',
  ]);
  assert.deepEqual(routes(store.snapshot()), ['x→from-a']);
  // An unrelated change does not report the same duplicate again.
  assert.deepEqual(store.update('c.yaml', vs('z')), []);
  // Same name in another namespace, or of another kind: not a duplicate.
  assert.deepEqual(store.update('d.yaml', `${vs('x', 'other-ns', 'other')}---\n${se('x')}`), []);
  // Within one file, the later document loses.
  const inFile = store.update('e.yaml', `${vs('e')}---\n${vs('e', 'second')}`);
  assert.equal(inFile.length, 1);
  assert.match(formatRejection(inFile[0]!), /^e\.yaml\[1\] VirtualService default\/e: metadata\.name: .* already defined by e\.yaml\[0\]/);
  // The winner's file goes away: the other definition takes over.
  store.update('a.yaml', undefined);
  assert.deepEqual(routes(store.snapshot()).filter((r) => r.startsWith('x')), ['x→from-b', 'x→other-ns']);
  assert.equal(store.rejectCounts.get('VirtualService'), 2);
});

it('a resource under Istio\'s group and the spec\'s is one resource: the first in file order wins, the message names both groups', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('b.yaml', vs('x', 'from-b'));
  const rejections = store.update('a.yaml', vs('x', 'from-a').replace('networking.mesh.io/v1', 'networking.istio.io/v1alpha3'));
  assert.deepEqual(rejections.map(formatRejection), [
    'b.yaml[0] VirtualService default/x: metadata.name: VirtualService/default/x is already defined by a.yaml[0] (as networking.istio.io/v1alpha3; networking.mesh.io/v1 names the same resource: the group does not make it another one), which comes first in file order and stays in force; this one is ignored',
  ]);
  assert.deepEqual(routes(store.snapshot()), ['x→from-a']);
});

it('counts rejections per kind, and unknown kinds and unparsable files as unknown', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('a.yaml', `kind: Frobnicator\napiVersion: networking.mesh.io/v1\nmetadata: {name: s}\nspec: {}\n`);
  store.update('b.yaml', `apiVersion: security.mesh.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: p}\nspec: {action: NOPE}\n`);
  store.update('c.yaml', '{');
  assert.deepEqual(Object.fromEntries(store.rejectCounts), { unknown: 2, AuthorizationPolicy: 1 });
  assert.equal(store.readFailed('d.yaml', new Error('EACCES: permission denied')).message, 'cannot be read: EACCES: permission denied; what it held before stays in force');
  assert.equal(store.rejectCounts.get('unknown'), 3);
});

it('a resource whose apiVersion or kind-specific spec goes wrong keeps its last good version', () => {
  const store = new ResourceStore({ defaultNamespace: 'default' });
  store.update('a.yaml', vs('x'));
  const v = store.snapshot().version;
  const [r] = store.update('a.yaml', vs('x', 'b').replace('networking.mesh.io/v1', 'networking.istio.io/v2'));
  assert.match(r!.message, /not an accepted version of VirtualService.*\(the previous version stays in force\)$/);
  assert.deepEqual(routes(store.snapshot()), ['x→a']);
  assert.equal(store.snapshot().version, v);
  // A document that no longer names itself cannot be matched to what it was: its resource goes.
  store.update('a.yaml', vs('x').replace('metadata:\n  name: x', 'metadata: {}'));
  assert.deepEqual(routes(store.snapshot()), []);
});

it('holds WorkloadEntries, and reports warnings once per accepted resource (not at every re-read)', () => {
  const warned: string[] = [];
  const store = new ResourceStore({ defaultNamespace: 'default', onWarning: (w) => warned.push(formatRejection(w)) });
  const dr = (n: number): string => `apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: db}
spec: {host: db.example.com, trafficPolicy: {outlierDetection: {consecutiveErrors: 1, interval: ${n}s}}}
`;
  const we = 'apiVersion: networking.mesh.io/v1\nkind: WorkloadEntry\nmetadata: {name: vm}\nspec: {address: 10.0.0.9, labels: {app: db}}\n';
  assert.deepEqual(store.update('a.yaml', `${dr(1)}---\n${we}`), []);
  assert.deepEqual(store.snapshot().workloadEntries.map((w) => `${w.meta.name}@${w.address}`), ['vm@10.0.0.9']);
  const line = 'a.yaml[0] DestinationRule default/db: spec.trafficPolicy.outlierDetection.consecutiveErrors: is deprecated and Istio ignores it; use consecutive5xxErrors or consecutiveGatewayErrors';
  assert.deepEqual(warned, [line]);
  assert.deepEqual(store.warnings().map(formatRejection), [line], 'the warnings of what is in force');
  store.update('a.yaml', `${dr(1)}---\n${we.replace('10.0.0.9', '10.0.0.10')}`);
  assert.deepEqual(warned, [line], 'the rule did not change: no second warning');
  store.update('a.yaml', `${dr(2)}---\n${we}`);
  assert.equal(warned.length, 2, 'a changed rule is warned about again');
  store.update('a.yaml', undefined);
  assert.deepEqual([store.warnings(), store.snapshot().workloadEntries], [[], []]);
});
