import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { AuthorizationPolicy } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

const head = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata:
  name: require-jwt
  namespace: mesh-system
`;
const ap = (spec: string): string => `${head}spec:\n${indent(spec)}\n`;
/** spec.rules[0].when[0] = this condition. */
const when = (c: string): string => ap(`rules:\n- when:\n  - ${indent(c, 4).trimStart()}`);

it('reads the deny-without-JWT policy an operator writes', () => {
  const p = accept(`${head}spec:
  selector:
    matchLabels:
      mesh: ingressgateway
  action: DENY
  rules:
  - from:
    - source:
        notRequestPrincipals: ["*"]
    to:
    - operation:
        paths: ["/headers"]
        methods: [GET]
        ports: ["8080"]
    when:
    - key: request.auth.claims[groups]
      values: ["group1"]
    - key: request.headers[X-Tenant]
      notValues: ["blocked"]
    - key: source.ip
      values: ["10.0.0.0/8", "::1"]
`).resource as AuthorizationPolicy;
  assert.deepEqual(p.selector, { mesh: 'ingressgateway' });
  assert.equal(p.action, 'DENY');
  assert.deepEqual(p.rules, [{
    from: [{ notRequestPrincipals: ['*'] }],
    to: [{ paths: ['/headers'], methods: ['GET'], ports: ['8080'] }],
    when: [
      { key: 'request.auth.claims[groups]', claimPath: ['groups'], values: ['group1'] },
      { key: 'request.headers[X-Tenant]', header: 'x-tenant', notValues: ['blocked'] },
      { key: 'source.ip', values: ['10.0.0.0/8', '::1'] },
    ],
  }]);
});

it('AUDIT is accepted with a warning naming spec.action: it has no effect here (no audit provider); its rules are still checked', () => {
  const { value, warnings } = acceptWarned(ap(`action: AUDIT\nrules: [{to: [{operation: {paths: ["/audited"]}}]}]`));
  assert.equal((value.resource as AuthorizationPolicy).action, 'AUDIT');
  assert.deepEqual(warnings.length, 1);
  assert.match(warnings[0]!, /^spec\.action: AUDIT has no effect here: .*audit provider \(Stackdriver\), which this agent does not have/);
  for (const action of ['ALLOW', 'DENY']) assert.deepEqual(acceptWarned(ap(`action: ${action}\nrules: [{}]`)).warnings, [], action);
  assertRejections([{ name: 'AUDIT with a bad rule', yaml: ap(`action: AUDIT\nrules: [{from: []}]`), field: 'spec.rules[0].from', message: /must not be empty/ }]);
});

it('CUSTOM names its external authorizer (provider.name), checked against the mesh config when applied', () => {
  const { value, warnings } = acceptWarned(ap(`action: CUSTOM\nprovider: {name: ext-authz}\nrules: [{to: [{operation: {paths: ["/admin*"]}}]}]`));
  const p = value.resource as AuthorizationPolicy;
  assert.deepEqual([p.action, p.provider, p.rules[0]!.to], ['CUSTOM', 'ext-authz', [{ paths: ['/admin*'] }]]);
  assert.deepEqual(warnings, []);
});

it('defaults: action ALLOW; spec {} is allow-nothing; rules [{}] matches everything', () => {
  const nothing = accept(`${head}spec: {}\n`).resource as AuthorizationPolicy;
  assert.deepEqual([nothing.action, nothing.rules, nothing.selector], ['ALLOW', [], undefined]);
  const all = accept(ap(`rules: [{}]`)).resource as AuthorizationPolicy;
  assert.deepEqual(all.rules, [{ from: [], to: [], when: [] }]);
  const nested = accept(when(`key: request.auth.claims[name][givenName]\nvalues: [Jo]`)).resource as AuthorizationPolicy;
  assert.deepEqual(nested.rules[0]!.when[0]!.claimPath, ['name', 'givenName']);
  for (const key of ['remote.ip', 'source.namespace', 'source.principal', 'request.auth.principal', 'request.auth.audiences',
    'request.auth.presenter', 'destination.ip', 'destination.port', 'connection.sni']) {
    const value = key.endsWith('.ip') ? '10.1.2.3' : key === 'destination.port' ? '443' : 'x';
    accept(when(`key: ${key}\nvalues: ["${value}"]`));
  }
});

it('rejects invalid AuthorizationPolicies with the field path', () => {
  assertRejections([
    { name: 'unknown when key', yaml: when(`key: request.auth.claim[groups]\nvalues: [a]`),
      field: 'spec.rules[0].when[0].key', message: /"request.auth.claim\[groups\]" is not a supported key; accepted: request.auth.claims\[<claim>\], request.headers\[<name>\], source.ip/ },
    { name: 'claim key in dot form (brackets only, as Istio)', yaml: when(`key: request.auth.claims.groups\nvalues: [a]`),
      field: 'spec.rules[0].when[0].key', message: /not a valid claim key: expected request.auth.claims\[<claim>\]/ },
    { name: 'claim key with trailing text', yaml: when(`key: request.auth.claims[a]x\nvalues: [a]`),
      field: 'spec.rules[0].when[0].key', message: /not a valid claim key/ },
    { name: 'header key without brackets', yaml: when(`key: request.headers.x\nvalues: [a]`),
      field: 'spec.rules[0].when[0].key', message: /expected request.headers\[<name>\]/ },
    { name: 'condition without values', yaml: when(`key: source.namespace`),
      field: 'spec.rules[0].when[0]', message: /needs values or notValues for "source.namespace"/ },
    { name: 'condition with empty values', yaml: when(`key: source.namespace\nvalues: []`),
      field: 'spec.rules[0].when[0]', message: /needs values or notValues/ },
    { name: 'condition ip not an IP', yaml: when(`key: source.ip\nvalues: [here]`),
      field: 'spec.rules[0].when[0].values[0]', message: /not an IP address or CIDR/ },
    { name: 'condition port not a port', yaml: when(`key: destination.port\nvalues: ["http"]`),
      field: 'spec.rules[0].when[0].values[0]', message: /not a port number/ },
    { name: 'values of the wrong type', yaml: when(`key: source.namespace\nvalues: foo`),
      field: 'spec.rules[0].when[0].values', message: /expected a list, got the string "foo"/ },
    { name: 'unknown action', yaml: ap(`action: REJECT`),
      field: 'spec.action', message: /"REJECT" is not one of ALLOW, DENY, AUDIT, CUSTOM/ },
    { name: 'CUSTOM without a provider', yaml: ap(`action: CUSTOM`),
      field: 'spec.provider', message: /is required with action CUSTOM/ },
    { name: 'a provider with ALLOW', yaml: ap(`provider: {name: ext}\nrules: [{}]`),
      field: 'spec.provider', message: /is only for action CUSTOM \(this policy's action is ALLOW\)/ },
    { name: 'a provider without a name', yaml: ap(`action: CUSTOM\nprovider: {}`),
      field: 'spec.provider.name', message: /./ },
    { name: 'a misspelt provider field', yaml: ap(`action: CUSTOM\nprovider: {nmae: ext}`),
      field: 'spec.provider.nmae', message: /unknown field/ },
    { name: 'CUSTOM with a bad rule', yaml: ap(`action: CUSTOM\nprovider: {name: ext}\nrules: [{from: []}]`),
      field: 'spec.rules[0].from', message: /must not be empty/ },
    { name: 'from: []', yaml: ap(`rules: [{from: []}]`),
      field: 'spec.rules[0].from', message: /must not be empty/ },
    { name: 'empty source', yaml: ap(`rules: [{from: [{source: {}}]}]`),
      field: 'spec.rules[0].from[0].source', message: /must set at least one of principals/ },
    { name: 'operation port as a number', yaml: ap(`rules: [{to: [{operation: {ports: [8080]}}]}]`),
      field: 'spec.rules[0].to[0].operation.ports[0]', message: /expected a string, got the number 8080/ },
    { name: 'bad ipBlock', yaml: ap(`rules: [{from: [{source: {ipBlocks: ["10.0.0.0/33"]}}]}]`),
      field: 'spec.rules[0].from[0].source.ipBlocks[0]', message: /not an IP address or CIDR/ },
    { name: 'misspelt source field', yaml: ap(`rules: [{from: [{source: {requestPrincipal: ["*"]}}]}]`),
      field: 'spec.rules[0].from[0].source.requestPrincipal', message: /unknown field "requestPrincipal"/ },
    { name: 'rules wrong type', yaml: ap(`rules: {from: []}`),
      field: 'spec.rules', message: /expected a list, got a mapping/ },
  ]);
});

it('serviceAccounts: <ns>/<sa>, or a bare <sa> of the policy\'s namespace, resolved at load', () => {
  const p = accept(ap(`rules: [{from: [{source: {serviceAccounts: [shop/web, sleep], notServiceAccounts: [mesh-system/debug]}}]}]`)).resource as AuthorizationPolicy;
  assert.deepEqual(p.rules[0]!.from[0], { serviceAccounts: ['shop/web', 'mesh-system/sleep'], notServiceAccounts: ['mesh-system/debug'] });
  assertRejections([
    { name: 'a wildcard', yaml: ap(`rules: [{from: [{source: {serviceAccounts: ["shop/*"]}}]}]`),
      field: 'spec.rules[0].from[0].source.serviceAccounts[0]', message: /wildcards are not supported here/ },
    { name: 'too many parts', yaml: ap(`rules: [{from: [{source: {serviceAccounts: [td/shop/web]}}]}]`),
      field: 'spec.rules[0].from[0].source.serviceAccounts[0]', message: /expected <namespace>\/<service account> or <service account>/ },
    { name: 'not a name', yaml: ap(`rules: [{from: [{source: {notServiceAccounts: [Shop/web]}}]}]`),
      field: 'spec.rules[0].from[0].source.notServiceAccounts[0]', message: /"Shop" is not a Kubernetes name/ },
    { name: 'with principals', yaml: ap(`rules: [{from: [{source: {serviceAccounts: [a/b], principals: ["*"]}}]}]`),
      field: 'spec.rules[0].from[0].source.serviceAccounts', message: /cannot be set with principals/ },
    { name: 'not-form with notNamespaces', yaml: ap(`rules: [{from: [{source: {notServiceAccounts: [a/b], notNamespaces: [c]}}]}]`),
      field: 'spec.rules[0].from[0].source.notServiceAccounts', message: /cannot be set with notNamespaces/ },
  ]);
});

it('when: request.headers takes any name Istio takes; experimental.envoy.filters.* is refused with the reason', () => {
  const pseudo = accept(when(`key: "request.headers[:authority]"\nvalues: [a.example]`)).resource as AuthorizationPolicy;
  assert.equal(pseudo.rules[0]!.when[0]!.header, ':authority');
  const odd = acceptWarned(when(`key: "request.headers[x y]"\nnotValues: [a]`));
  assert.deepEqual(odd.warnings, ['spec.rules[0].when[0].key: "x y" is not an HTTP header name, so no request carries it: values never match and notValues always hold']);
  assertRejections([
    { name: 'mysql metadata', yaml: when(`key: "experimental.envoy.filters.network.mysql_proxy[db.table]"\nvalues: ["[update]"]`),
      field: 'spec.rules[0].when[0].key', message: /is not supported by this agent: it matches the dynamic metadata an Envoy network filter/ },
    { name: 'a pseudo-header not read', yaml: when(`key: "request.headers[:scheme]"\nvalues: [https]`),
      field: 'spec.rules[0].when[0].key', message: /":scheme" is not supported yet/ },
  ]);
});

it('trustDomains / notTrustDomains: trust domain patterns, lower-cased; anything else refused', () => {
  const p = accept(ap(`rules: [{from: [{source: {trustDomains: [Cluster.Local, "*.example.org"], notTrustDomains: [old.example]}}]}]`)).resource as AuthorizationPolicy;
  assert.deepEqual(p.rules[0]!.from[0], { trustDomains: ['cluster.local', '*.example.org'], notTrustDomains: ['old.example'] });
  assertRejections([
    { name: 'a path', yaml: ap(`rules: [{from: [{source: {trustDomains: ["cluster.local/ns/a"]}}]}]`),
      field: 'spec.rules[0].from[0].source.trustDomains[0]', message: /is not a trust domain/ },
  ]);
});
