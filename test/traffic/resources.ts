// Resources for the traffic tests, written as operators write them and read through the store.
import assert from 'node:assert/strict';
import { formatRejection } from '../../src/config/resources/format.js';
import { ResourceStore } from '../../src/config/resources/store.js';
import type { ResourceSnapshot } from '../../src/config/resources/types.js';

/** The documents, read as the agent of namespace `shop` reads them; any rejection fails the test. */
export function snapshotOf(...docs: string[]): ResourceSnapshot {
  const store = new ResourceStore({ defaultNamespace: 'shop' });
  const rejections = store.update('etc/mesh/resources/test.yaml', docs.join('\n---\n'));
  assert.deepEqual(rejections.map(formatRejection), []);
  return store.snapshot();
}

/** A networking resource: kind, `ns/name` (or a bare name in `shop`), spec (YAML flow or block). */
export function doc(kind: string, id: string, spec: string): string {
  const [ns, name] = id.includes('/') ? id.split('/') as [string, string] : ['shop', id];
  return `apiVersion: networking.mesh.io/v1\nkind: ${kind}\nmetadata: {name: ${name}, namespace: ${ns}}\nspec: ${spec}`;
}

export const se = (id: string, spec: string): string => doc('ServiceEntry', id, spec);
export const dr = (id: string, spec: string): string => doc('DestinationRule', id, spec);
export const vs = (id: string, spec: string): string => doc('VirtualService', id, spec);
export const we = (id: string, spec: string): string => doc('WorkloadEntry', id, spec);

export const SHOP = { namespace: 'shop', labels: { app: 'client' } } as const;
