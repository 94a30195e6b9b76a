import assert from 'node:assert/strict';
import { it } from 'node:test';
import { formatRejection } from '../../../src/config/resources/format.js';
import { validateDocument } from '../../../src/config/resources/validate.js';
import { assertRejections, reject, validateYaml } from './helpers.js';

const spec = {
  Gateway: 'spec: {selector: {}, servers: [{port: {number: 80, protocol: HTTP}, hosts: ["*"]}]}',
  VirtualService: 'spec: {hosts: [a.example.com], http: [{route: [{destination: {host: a}}]}]}',
  ServiceEntry: 'spec: {hosts: [a.example.com]}',
  DestinationRule: 'spec: {host: a.example.com}',
  RequestAuthentication: 'spec: {jwtRules: [{issuer: a, jwksUri: "https://a/jwks"}]}',
  AuthorizationPolicy: 'spec: {action: DENY, rules: [{}]}',
  PeerAuthentication: 'spec: {mtls: {mode: STRICT}}',
};
const groups = {
  Gateway: 'networking', VirtualService: 'networking', ServiceEntry: 'networking', DestinationRule: 'networking',
  RequestAuthentication: 'security', AuthorizationPolicy: 'security', PeerAuthentication: 'security',
};

it('dispatches every kind under v1 and the v1beta1 alias of its group', () => {
  for (const [kind, s] of Object.entries(spec)) {
    for (const version of ['v1', 'v1beta1']) {
      const apiVersion = `${groups[kind as keyof typeof groups]}.mesh.io/${version}`;
      const r = validateYaml(`apiVersion: ${apiVersion}\nkind: ${kind}\nmetadata: {name: x}\n${s}\n`, 'team-a');
      assert.ok(r.ok, `${kind} ${apiVersion}: ${r.ok ? '' : formatRejection(r.rejection)}`);
      assert.equal(r.value.kind, kind);
      assert.deepEqual(r.value.resource.meta, { kind, apiVersion, name: 'x', namespace: 'team-a', origin: { file: 'etc/mesh/resources/test.yaml', index: 0 } });
      assert.equal(r.key, `${kind}/team-a/x`);
    }
  }
});

it('reads every kind under Istio\'s group and every version Istio serves it, as the same resource', () => {
  const istioVersions = { networking: ['v1', 'v1beta1', 'v1alpha3'], security: ['v1', 'v1beta1'] };
  for (const [kind, s] of Object.entries(spec)) {
    const group = groups[kind as keyof typeof groups];
    const ours = validateYaml(`apiVersion: ${group}.mesh.io/v1\nkind: ${kind}\nmetadata: {name: x}\n${s}\n`, 'team-a');
    assert.ok(ours.ok);
    for (const version of istioVersions[group as keyof typeof istioVersions]) {
      const apiVersion = `${group}.istio.io/${version}`;
      const r = validateYaml(`apiVersion: ${apiVersion}\nkind: ${kind}\nmetadata: {name: x}\n${s}\n`, 'team-a');
      assert.ok(r.ok, `${kind} ${apiVersion}: ${r.ok ? '' : formatRejection(r.rejection)}`);
      assert.equal(r.key, ours.key);
      const { meta, ...rest } = r.value.resource as unknown as Record<string, unknown> & { meta: Record<string, unknown> };
      const { meta: oursMeta, ...oursRest } = ours.value.resource as unknown as Record<string, unknown> & { meta: Record<string, unknown> };
      assert.deepEqual({ ...meta, apiVersion: oursMeta['apiVersion'] }, oursMeta);
      assert.deepEqual(rest, oursRest, `${kind} ${apiVersion} means what the spec's group means`);
    }
  }
});

it('refuses Istio kinds this agent has no use for, with the reason', () => {
  assertRejections([
    { name: 'EnvoyFilter', yaml: 'apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: x}\nspec: {configPatches: []}\n',
      field: 'kind', message: /^EnvoyFilter is not supported by this agent: an EnvoyFilter patches the Envoy configuration .* this proxy has no Envoy configuration to patch/ },
    { name: 'WasmPlugin', yaml: 'apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: x}\nspec: {}\n',
      field: 'kind', message: /^WasmPlugin is not supported by this agent/ },
  ]);
});

it('rejects unknown kinds and apiVersions, naming what is accepted', () => {
  const vsSpec = spec.VirtualService;
  assertRejections([
    { name: 'unknown kind', yaml: `apiVersion: networking.mesh.io/v1\nkind: Frobnicator\nmetadata: {name: x}\nspec: {}\n`,
      field: 'kind', message: /^unknown kind "Frobnicator"; accepted: Gateway, VirtualService, ServiceEntry, DestinationRule, WorkloadEntry, Sidecar \(networking.mesh.io\/v1 or v1beta1, or networking.istio.io\/v1, v1beta1, v1alpha3\); RequestAuthentication, AuthorizationPolicy, PeerAuthentication \(security.mesh.io\/v1 or v1beta1, or security.istio.io\/v1, v1beta1\); Telemetry \(telemetry.mesh.io\/v1 or v1alpha1, or telemetry.istio.io\/v1, v1alpha1\)$/ },
    { name: 'a version Istio does not serve', yaml: `apiVersion: networking.istio.io/v1alpha2\nkind: VirtualService\nmetadata: {name: x}\n${vsSpec}\n`,
      field: 'apiVersion', message: /"networking.istio.io\/v1alpha2" is not an accepted version of VirtualService; accepted: networking.mesh.io\/v1, networking.mesh.io\/v1beta1, networking.istio.io\/v1, networking.istio.io\/v1beta1, networking.istio.io\/v1alpha3$/ },
    { name: 'Istio group of another kind', yaml: `apiVersion: security.istio.io/v1\nkind: VirtualService\nmetadata: {name: x}\n${vsSpec}\n`,
      field: 'apiVersion', message: /not an accepted version of VirtualService/ },
    { name: 'wrong group for the kind', yaml: `apiVersion: security.mesh.io/v1\nkind: VirtualService\nmetadata: {name: x}\n${vsSpec}\n`,
      field: 'apiVersion', message: /not an accepted version of VirtualService/ },
    { name: 'v1alpha3', yaml: `apiVersion: networking.mesh.io/v1alpha3\nkind: VirtualService\nmetadata: {name: x}\n${vsSpec}\n`,
      field: 'apiVersion', message: /not an accepted version/ },
    { name: 'kind missing', yaml: `apiVersion: networking.mesh.io/v1\nmetadata: {name: x}\n`,
      field: 'kind', message: /required/ },
    { name: 'apiVersion missing', yaml: `kind: VirtualService\nmetadata: {name: x}\n${vsSpec}\n`,
      field: 'apiVersion', message: /required/ },
    { name: 'metadata missing', yaml: `apiVersion: networking.mesh.io/v1\nkind: VirtualService\n${vsSpec}\n`,
      field: 'metadata', message: /required/ },
    { name: 'name missing', yaml: `apiVersion: networking.mesh.io/v1\nkind: VirtualService\nmetadata: {namespace: a}\n${vsSpec}\n`,
      field: 'metadata.name', message: /required/ },
    { name: 'name not a name', yaml: `apiVersion: networking.mesh.io/v1\nkind: VirtualService\nmetadata: {name: My_VS}\n${vsSpec}\n`,
      field: 'metadata.name', message: /"My_VS" is not a valid name/ },
    { name: 'namespace of the wrong type', yaml: `apiVersion: networking.mesh.io/v1\nkind: VirtualService\nmetadata: {name: x, namespace: 5}\n${vsSpec}\n`,
      field: 'metadata.namespace', message: /expected a string, got the number 5/ },
    { name: 'spec missing', yaml: `apiVersion: networking.mesh.io/v1\nkind: VirtualService\nmetadata: {name: x}\n`,
      field: 'spec', message: /required/ },
    { name: 'unknown top-level field', yaml: `apiVersion: networking.mesh.io/v1\nkind: VirtualService\nmetadata: {name: x}\n${vsSpec}\nspecs: {}\n`,
      field: 'specs', message: /unknown field "specs" here; accepted: apiVersion, kind, metadata, spec, status/ },
    { name: 'a list, not a resource', yaml: `- a\n- b\n`,
      field: '', message: /expected a mapping with apiVersion, kind, metadata and spec, got a list/ },
  ]);
});

it('names as much of the resource as the document gives in the rejection line', () => {
  assert.equal(formatRejection(reject(`apiVersion: networking.mesh.io/v1\nkind: Frobnicator\nmetadata: {name: s, namespace: ns1}\nspec: {}\n`)).split(':')[0],
    'etc/mesh/resources/test.yaml[0] Frobnicator ns1/s');
  assert.match(formatRejection(reject(`just a string\n`)), /^etc\/mesh\/resources\/test\.yaml\[0\]: expected a mapping/);
  const r = validateDocument({ apiVersion: 'networking.mesh.io/v1', kind: 'Gateway', metadata: { name: 'gw' }, spec: { selector: {} } }, { file: 'f.json', index: 3, defaultNamespace: 'ns' });
  assert.ok(!r.ok);
  assert.equal(formatRejection(r.rejection), 'f.json[3] Gateway ns/gw: spec.servers: required (a list)');
  assert.equal(r.key, 'Gateway/ns/gw', 'an invalid spec still names its resource (for last-good)');
});

it('accepts metadata and status as kubectl writes them', () => {
  const r = validateYaml(`apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata:
  name: x
  namespace: ""
  labels: {app: x}
  annotations: {a: b}
  resourceVersion: "123"
${spec.ServiceEntry}
status: {}
`);
  assert.ok(r.ok);
  assert.equal(r.value.resource.meta.namespace, 'default');
});

it('Telemetry (telemetry.istio.io v1, v1alpha1): the access log turned on and off is read; any other override is refused, naming it', () => {
  const entries = (spec: string) => (validateYaml(`apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t}\nspec: ${spec}\n`) as { ok: true; value: { resource: { accessLogging?: unknown } } }).value.resource.accessLogging;
  assert.deepEqual(entries('{accessLogging: [{disabled: true}]}'), [{ namesProvider: false, disabled: true, client: true, server: true }]);
  assert.deepEqual(entries('{accessLogging: [{disabled: true, providers: [{name: envoy}], match: {mode: SERVER}}]}'), [{ namesProvider: true, disabled: true, client: false, server: true }]);
  assert.deepEqual(entries('{accessLogging: [{providers: [{name: envoy}]}, {disabled: false, match: {mode: CLIENT}}]}'),
    [{ namesProvider: true, disabled: false, client: true, server: true }, { namesProvider: false, disabled: false, client: true, server: false }]);
  assert.equal(entries('{}'), undefined);
  assert.equal(entries('{accessLogging: []}'), undefined);
  for (const v of ['telemetry.istio.io/v1', 'telemetry.istio.io/v1alpha1', 'telemetry.mesh.io/v1']) {
    const r = validateYaml(`apiVersion: ${v}\nkind: Telemetry\nmetadata: {name: t}\nspec: {selector: {matchLabels: {app: web}}}\n`);
    assert.ok(r.ok, v);
  }
  const t = (spec: string): string => `apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t}\nspec: ${spec}\n`;
  assertRejections([
    { name: 'disabled not a boolean', yaml: t('{accessLogging: [{disabled: sometimes}]}'), field: 'spec.accessLogging[0].disabled', message: /./ },
    { name: 'another provider', yaml: t('{accessLogging: [{providers: [{name: otel}], disabled: true}]}'), field: 'spec.accessLogging[0].providers[0].name', message: /"otel" is not supported by this agent: its one access log provider is envoy/ },
    { name: 'a filter', yaml: t('{accessLogging: [{disabled: true, filter: {expression: "response.code >= 400"}}]}'), field: 'spec.accessLogging[0].filter', message: /is not supported yet: filter expressions/ },
    { name: 'an unknown mode', yaml: t('{accessLogging: [{disabled: true, match: {mode: BOTH}}]}'), field: 'spec.accessLogging[0].match.mode', message: /"BOTH" is not one of CLIENT_AND_SERVER, CLIENT, SERVER/ },
    { name: 'metrics', yaml: t('{metrics: [{overrides: [{disabled: true}]}]}'), field: 'spec.metrics', message: /is not supported yet: metric overrides/ },
    { name: 'tracing', yaml: t('{tracing: [{randomSamplingPercentage: 10}]}'), field: 'spec.tracing', message: /is not supported by this agent/ },
    { name: 'telemetry.istio.io/v1beta1', yaml: 'apiVersion: telemetry.istio.io/v1beta1\nkind: Telemetry\nmetadata: {name: t}\nspec: {}\n', field: 'apiVersion', message: /not an accepted version of Telemetry/ },
  ]);
});
