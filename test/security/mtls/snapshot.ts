// Resources for the mTLS resolver tests, written as operators write them (YAML through the store).
import assert from 'node:assert/strict';
import { formatRejection } from '../../../src/config/resources/format.js';
import { ResourceStore } from '../../../src/config/resources/store.js';
import type { ResourceSnapshot } from '../../../src/config/resources/types.js';

/** The documents (joined with `---`), read as the agent of namespace `shop` reads them; any rejection fails the test. */
export function snapshotOf(...docs: string[]): ResourceSnapshot {
  const store = new ResourceStore({ defaultNamespace: 'shop' });
  const rejections = store.update('etc/mesh/resources/test.yaml', docs.join('\n---\n'));
  assert.deepEqual(rejections.map(formatRejection), []);
  return store.snapshot();
}

/** A resource document: kind, `ns/name` (or a bare name in `shop`), spec (YAML flow or block). */
export function doc(kind: string, id: string, spec: string): string {
  const [ns, name] = id.includes('/') ? id.split('/') as [string, string] : ['shop', id];
  const group = kind === 'PeerAuthentication' ? 'security' : 'networking';
  return `apiVersion: ${group}.mesh.io/v1\nkind: ${kind}\nmetadata: {name: ${name}, namespace: ${ns}}\nspec: ${spec}`;
}
