import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ResourceStore } from '../../../src/config/resources/store.js';
import { accessLogDirections } from '../../../src/config/resources/telemetry-scope.js';

const telemetry = (name: string, ns: string, spec: string): string =>
  `apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: ${name}, namespace: ${ns}}\nspec: ${spec}\n---\n`;

function telemetries(text: string) {
  const store = new ResourceStore({ defaultNamespace: 'shop' });
  assert.deepEqual(store.update('t.yaml', text), []);
  return store.snapshot().telemetries;
}

it('the access log per direction: off where an applicable Telemetry turns it off (root default, namespace, selecting)', () => {
  const web = { namespace: 'shop', labels: { app: 'web' } };
  assert.deepEqual(accessLogDirections([], web), { client: true, server: true });
  assert.deepEqual(accessLogDirections(telemetries(telemetry('mesh', 'mesh-system', '{accessLogging: [{disabled: true}]}')), web), { client: false, server: false });
  assert.deepEqual(accessLogDirections(telemetries(telemetry('ns', 'shop', '{accessLogging: [{disabled: true, match: {mode: SERVER}}]}')), web), { client: true, server: false });
  assert.deepEqual(accessLogDirections(telemetries(telemetry('sel', 'shop', '{selector: {matchLabels: {app: web}}, accessLogging: [{disabled: true, match: {mode: CLIENT}}]}')), web), { client: false, server: true });
  // Not this workload's: another one's selector, another namespace, a root-namespace one with a selector.
  const others = telemetries(telemetry('db', 'shop', '{selector: {matchLabels: {app: db}}, accessLogging: [{disabled: true}]}')
    + telemetry('blog', 'blog', '{accessLogging: [{disabled: true}]}') + telemetry('root-sel', 'mesh-system', '{selector: {matchLabels: {app: web}}, accessLogging: [{disabled: true}]}'));
  assert.deepEqual(accessLogDirections(others, web), { client: true, server: true });
});
