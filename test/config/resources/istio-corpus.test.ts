// Istio-shaped resources (test/fixtures/istio-corpus, written for these tests: every kind, Istio
// group and version this agent reads, and the fields issue 30 names) given to the sidecar's and the
// gateway's loaders, once as written and once with the spec's `*.mesh.io` groups: each document is
// accepted or refused the same way under both groups, an accepted one means the same (the resource,
// the sidecar's scoped view and outbound mode, the gateway's route table), and each has the outcome
// this agent promises (accepted, accepted with a named warning, or refused naming its field).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { formatRejection } from '../../../src/config/resources/format.js';
import { ResourceStore } from '../../../src/config/resources/store.js';
import type { Rejection, ResourceSnapshot, ResourceWarning } from '../../../src/config/resources/types.js';
import { gatewaysFor } from '../../../src/config/resources/workload.js';
import { buildRouteTable } from '../../../src/routing/index.js';
import { outboundTrafficMode, scopeSnapshot } from '../../../src/traffic/sidecar-scope.js';
import { repoRoot } from '../../helpers/repo.js';

const CORPUS = join(repoRoot, 'test', 'fixtures', 'istio-corpus');

/** Istio's group/version → the spec's (v1alpha3 has no counterpart there: v1). */
function toMeshGroups(text: string): string {
  return text.replace(/apiVersion: (networking|security|telemetry)\.istio\.io\/(v1alpha3|v1beta1|v1alpha1|v1)\b/g,
    (_m, group: string, version: string) => `apiVersion: ${group}.mesh.io/${version === 'v1alpha3' ? 'v1' : version}`);
}

/** What each document must come to: accepted (with these warnings), or refused at this field. */
const EXPECTED: Readonly<Record<string, { warnings?: RegExp[] } | { field: string; message: RegExp }>> = {
  'Gateway/mesh-system/public': { warnings: [/spec\.servers\[0\]\.tls\.caCertificates: has no effect with mode SIMPLE, as in Istio/] },
  'VirtualService/shop/shop': {},
  'ServiceEntry/shop/partners': {},
  'ServiceEntry/shop/vm-api': {},
  'WorkloadEntry/shop/vm-1': {},
  'DestinationRule/shop/api': {},
  'Sidecar/shop/default': {},
  'EnvoyFilter/shop/lua': { field: 'kind', message: /^EnvoyFilter is not supported by this agent: an EnvoyFilter patches the Envoy configuration/ },
  'Sidecar/blog/with-ingress': { field: 'spec.ingress', message: /is not supported yet/ },
  'AuthorizationPolicy/shop/api-callers': {},
  'AuthorizationPolicy/shop/deny-debug': {},
  'AuthorizationPolicy/shop/mysql-tables': { field: 'spec.rules[0].when[0].key', message: /is not supported by this agent: it matches the dynamic metadata an Envoy network filter/ },
  'RequestAuthentication/mesh-system/oidc': {},
  'PeerAuthentication/shop/default': {},
  'Telemetry/mesh-system/mesh-default': {},
  'Telemetry/shop/quiet-api': {},
  'Telemetry/shop/api': {},
  'Telemetry/shop/no-tags': { field: 'spec.metrics', message: /is not supported yet: metric overrides/ },
};

interface Loaded { snapshot: ResourceSnapshot; rejections: Rejection[]; warnings: ResourceWarning[] }

function load(defaultNamespace: string, files: Record<string, string>): Loaded {
  const warnings: ResourceWarning[] = [];
  const store = new ResourceStore({ defaultNamespace, onWarning: (w) => warnings.push(w) });
  const rejections = Object.entries(files).flatMap(([f, text]) => store.update(f, text));
  return { snapshot: store.snapshot(), rejections, warnings };
}

/** A snapshot's meaning: everything but the apiVersion each resource was written with. */
function meaning(value: unknown): string {
  return JSON.stringify(value, (k, v: unknown) => (k === 'apiVersion' || k === 'version' ? undefined : v instanceof RegExp ? v.source : v));
}

const files: Record<string, string> = Object.fromEntries(readdirSync(CORPUS).filter((f) => f.endsWith('.yaml')).sort().map((f) => [f, readFileSync(join(CORPUS, f), 'utf8')]));
const loaders: { name: string; namespace: string; labels: Record<string, string> }[] = [
  { name: 'the sidecar', namespace: 'shop', labels: { app: 'web' } },
  { name: 'the gateway', namespace: 'mesh-system', labels: { mesh: 'ingressgateway' } },
];

for (const loader of loaders) {
  it(`${loader.name}'s loader: every document as promised, and the same under Istio's groups and the spec's`, () => {
    const istio = load(loader.namespace, files);
    const mesh = load(loader.namespace, Object.fromEntries(Object.entries(files).map(([f, t]) => [f, toMeshGroups(t)])));
    // The corpus covers every group version this agent reads.
    const written: string[] = Object.values(files).join('\n').match(/apiVersion: \S+/g) ?? [];
    for (const v of ['networking.istio.io/v1', 'networking.istio.io/v1beta1', 'networking.istio.io/v1alpha3', 'security.istio.io/v1',
      'security.istio.io/v1beta1', 'telemetry.istio.io/v1', 'telemetry.istio.io/v1alpha1']) {
      assert.ok(written.includes(`apiVersion: ${v}`), `the corpus has no ${v} document`);
    }
    const seen = new Set<string>();
    for (const r of istio.rejections) {
      const key = `${r.kind}/${r.namespace}/${r.name}`;
      seen.add(key);
      const want = EXPECTED[key];
      assert.ok(want !== undefined && 'field' in want, `${key} refused unexpectedly: ${formatRejection(r)}`);
      assert.equal(r.field, want.field, formatRejection(r));
      assert.match(r.message, want.message, formatRejection(r));
    }
    // Refused alike under the spec's groups.
    assert.deepEqual(mesh.rejections.map((r) => `${r.file}[${r.index}] ${r.field}: ${r.message}`), istio.rejections.map((r) => `${r.file}[${r.index}] ${r.field}: ${r.message}`));
    const accepted = Object.entries(istio.snapshot).flatMap(([, list]) => (Array.isArray(list) ? list : []))
      .map((res: { meta: { kind: string; namespace: string; name: string } }) => `${res.meta.kind}/${res.meta.namespace}/${res.meta.name}`);
    for (const key of accepted) {
      seen.add(key);
      const want = EXPECTED[key];
      assert.ok(want !== undefined && !('field' in want), `${key} accepted, but it should be refused`);
      const lines = istio.warnings.filter((w) => `${w.kind}/${w.namespace}/${w.name}` === key).map((w) => `${w.field}: ${w.message}`);
      assert.equal(lines.length, want.warnings?.length ?? 0, `${key}'s warnings: ${lines.join('; ')}`);
      want.warnings?.forEach((re, i) => assert.match(lines[i]!, re));
    }
    assert.deepEqual([...seen].sort(), Object.keys(EXPECTED).sort(), 'every document was judged');
    // The same meaning: resources, warnings, the sidecar's view and mode, the gateway's routes.
    assert.equal(meaning(mesh.snapshot), meaning(istio.snapshot));
    assert.equal(meaning(mesh.warnings), meaning(istio.warnings));
    const workload = { namespace: loader.namespace, labels: loader.labels };
    assert.equal(meaning(scopeSnapshot(mesh.snapshot, workload)), meaning(scopeSnapshot(istio.snapshot, workload)));
    assert.equal(outboundTrafficMode(mesh.snapshot, workload, 'ALLOW_ANY'), outboundTrafficMode(istio.snapshot, workload, 'ALLOW_ANY'));
    const routes = (s: ResourceSnapshot): string => meaning(buildRouteTable(gatewaysFor(s, workload), s.virtualServices));
    assert.equal(routes(mesh.snapshot), routes(istio.snapshot));
  });
}

it('the sidecar\'s view of the corpus: its Sidecar scopes it and says REGISTRY_ONLY', () => {
  const { snapshot } = load('shop', files);
  const web = { namespace: 'shop', labels: { app: 'web' } };
  assert.equal(outboundTrafficMode(snapshot, web, 'ALLOW_ANY'), 'REGISTRY_ONLY');
  assert.deepEqual(scopeSnapshot(snapshot, web).serviceEntries.map((e) => e.meta.name), ['partners', 'vm-api']);
});
