import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ResourceStore } from '../../../src/config/resources/store.js';
import { accessLogChoices, mergeAccessLogging } from '../../../src/config/resources/telemetry-scope.js';
import type { ResourceWarning } from '../../../src/config/resources/types.js';

const telemetry = (name: string, ns: string, spec: string): string =>
  `apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: ${name}, namespace: ${ns}}\nspec: ${spec}\n---\n`;

function telemetries(text: string, warnings: ResourceWarning[] = []) {
  const store = new ResourceStore({ defaultNamespace: 'shop', onWarning: (w) => warnings.push(w) });
  assert.deepEqual(store.update('t.yaml', text), []);
  return store.snapshot().telemetries;
}

const web = { namespace: 'shop', labels: { app: 'web' } };
const ON = '{accessLogging: [{providers: [{name: envoy}]}]}';
const OFF = '{accessLogging: [{providers: [{name: envoy}], disabled: true}]}';
const choices = (text: string, workload = web) => {
  const c = accessLogChoices(telemetries(text), workload);
  return { client: c.client, server: c.server };
};

it('no Telemetry, or none of this workload\'s: the mesh config decides both directions', () => {
  assert.deepEqual(accessLogChoices([], web), { client: 'mesh', server: 'mesh', from: [] });
  // Another workload's selector, another namespace, a root-namespace one with a selector (Istio reads
  // selectors in the workload's own namespace only).
  assert.deepEqual(choices(telemetry('db', 'shop', `{selector: {matchLabels: {app: db}}, ${ON.slice(1)}`)
    + telemetry('blog', 'blog', OFF) + telemetry('root-sel', 'mesh-system', `{selector: {matchLabels: {app: web}}, ${OFF.slice(1)}`)), { client: 'mesh', server: 'mesh' });
  // A Telemetry without accessLogging says nothing of the log.
  assert.deepEqual(choices(telemetry('sel', 'shop', '{selector: {matchLabels: {app: web}}}')), { client: 'mesh', server: 'mesh' });
});

it('turning it on and off per level and direction (root, namespace, workload selector)', () => {
  assert.deepEqual(choices(telemetry('mesh', 'mesh-system', ON)), { client: 'on', server: 'on' });
  assert.deepEqual(choices(telemetry('ns', 'shop', '{accessLogging: [{providers: [{name: envoy}], disabled: false, match: {mode: SERVER}}]}')), { client: 'mesh', server: 'on' });
  assert.deepEqual(choices(telemetry('sel', 'shop', '{selector: {matchLabels: {app: web}}, accessLogging: [{providers: [{name: envoy}], disabled: true, match: {mode: CLIENT}}]}')),
    { client: 'off', server: 'mesh' });
});

it('precedence: the workload\'s over its namespace\'s over the root\'s, whatever the file order', () => {
  const root = telemetry('mesh', 'mesh-system', ON);
  const ns = telemetry('ns', 'shop', '{accessLogging: [{providers: [{name: envoy}], disabled: true, match: {mode: CLIENT}}]}');
  const own = telemetry('own', 'shop', '{selector: {matchLabels: {app: web}}, accessLogging: [{providers: [{name: envoy}], match: {mode: CLIENT_AND_SERVER}}]}');
  assert.deepEqual(choices(root + ns), { client: 'off', server: 'on' });
  assert.deepEqual(choices(ns + root), { client: 'off', server: 'on' });
  assert.deepEqual(choices(own + ns + root), { client: 'on', server: 'on' });
  assert.deepEqual(accessLogChoices(telemetries(own + ns + root), web).from, ['mesh-system/mesh', 'shop/ns', 'shop/own']);
  // The root turns it off, a namespace turns it back on for SERVER only.
  assert.deepEqual(choices(telemetry('mesh', 'mesh-system', OFF) + telemetry('ns', 'shop', '{accessLogging: [{providers: [{name: envoy}], match: {mode: SERVER}}]}')),
    { client: 'off', server: 'on' });
  // Another workload of the namespace: the namespace's and the root's apply, not web's own.
  assert.deepEqual(choices(own + ns + root, { namespace: 'shop', labels: { app: 'db' } }), { client: 'off', server: 'on' });
});

it('one Telemetry per level: the first namespace-wide one, the first selecting one (Istio: the oldest; here file order)', () => {
  const first = telemetry('a', 'shop', OFF);
  const second = telemetry('b', 'shop', ON);
  assert.deepEqual(choices(first + second), { client: 'off', server: 'off' });
  assert.deepEqual(choices(second + first), { client: 'on', server: 'on' });
  const selA = telemetry('sel-a', 'shop', `{selector: {matchLabels: {app: web}}, ${ON.slice(1)}`);
  const selB = telemetry('sel-b', 'shop', `{selector: {matchLabels: {app: web}}, ${OFF.slice(1)}`);
  assert.deepEqual(choices(selA + selB), { client: 'on', server: 'on' });
  // The first namespace-wide one decides the level even when it says nothing of the log (Istio's pick).
  assert.deepEqual(choices(telemetry('quiet', 'shop', '{}') + second), { client: 'mesh', server: 'mesh' });
});

it('entries without providers take the provider of an entry before them; with none, they change nothing (Istio without defaultProviders)', () => {
  const warnings: ResourceWarning[] = [];
  assert.deepEqual(accessLogChoices(telemetries(telemetry('mesh', 'mesh-system', '{accessLogging: [{disabled: true}]}'), warnings), web),
    { client: 'mesh', server: 'mesh', from: ['mesh-system/mesh'] });
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0]!.field, 'spec.accessLogging[0]');
  assert.match(warnings[0]!.message, /names no provider: .*defaultProviders\.accessLogging; with neither it has no effect: add providers: \[\{name: envoy\}\]/);
  // Named at the root, inherited by the namespace's entry.
  assert.deepEqual(choices(telemetry('mesh', 'mesh-system', ON) + telemetry('ns', 'shop', '{accessLogging: [{disabled: true, match: {mode: SERVER}}]}')),
    { client: 'on', server: 'off' });
  // The pure merge: the order of entries is the order of precedence.
  const e = (namesProvider: boolean, disabled: boolean, client = true, server = true) => ({ namesProvider, disabled, client, server });
  assert.deepEqual(mergeAccessLogging([e(false, false), e(true, true, false, true), e(false, false, true, false)]), { client: 'on', server: 'off' });
  assert.deepEqual(mergeAccessLogging([e(false, true)]), { client: 'mesh', server: 'mesh' });
});

it('the mesh config\'s defaultProviders.accessLogging (envoy): both directions on with no Telemetry, and entries naming no provider count', () => {
  const e = (namesProvider: boolean, disabled: boolean, client = true, server = true) => ({ namesProvider, disabled, client, server });
  assert.deepEqual(mergeAccessLogging([], true), { client: 'on', server: 'on' });
  assert.deepEqual(mergeAccessLogging([e(false, true, false, true)], true), { client: 'on', server: 'off' });
  assert.deepEqual(mergeAccessLogging([e(false, true)], false), { client: 'mesh', server: 'mesh' }, 'without defaults the same entry changes nothing');
  const warnings: ResourceWarning[] = [];
  assert.deepEqual(accessLogChoices(telemetries(telemetry('mesh', 'mesh-system', '{accessLogging: [{disabled: true}]}'), warnings), web, true),
    { client: 'off', server: 'off', from: ['mesh-system/mesh'] });
});
