import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DEFAULT_EXT_AUTHZ_TIMEOUT_MS, matchesHeader, readExtAuthzProviders } from '../../src/config/ext-authz-providers.js';
import { loadMeshConfig } from '../../src/config/mesh-config.js';
import { AgentError } from '../../src/errors/agent-error.js';

const mesh = (providers: string): string => `extensionProviders:\n${providers}`;

it('reads Istio\'s HTTP and gRPC authorizers with their defaults (10 min, fail closed with 403)', () => {
  const m = loadMeshConfig('mesh', mesh(`- name: http
  envoyExtAuthzHttp:
    service: ns1/authz.ns1.svc.cluster.local
    port: 8000
    timeout: 250ms
    pathPrefix: /check
    failOpen: true
    statusOnError: "503"
    includeRequestHeadersInCheck: [X-Custom, "x-pre*", "*-suffix"]
    includeAdditionalHeadersInCheck: {X-Added: "v"}
    headersToUpstreamOnAllow: [x-user]
    headersToDownstreamOnAllow: [x-note]
    headersToDownstreamOnDeny: [x-why]
- name: grpc
  envoyExtAuthzGrpc: {service: authz-grpc.ns1.svc.cluster.local, port: 9000}
`), '');
  assert.deepEqual(m.warnings, []);
  const [http, grpc] = m.extAuthzProviders;
  assert.deepEqual(http, {
    name: 'http', kind: 'http', host: 'authz.ns1.svc.cluster.local', port: 8000, timeoutMs: 250, failOpen: true, statusOnError: 503, pathPrefix: '/check',
    includeRequestHeaders: [{ kind: 'exact', text: 'x-custom' }, { kind: 'prefix', text: 'x-pre' }, { kind: 'suffix', text: '-suffix' }],
    additionalHeaders: [['x-added', 'v']], headersToUpstreamOnAllow: [{ kind: 'exact', text: 'x-user' }],
    headersToDownstreamOnAllow: [{ kind: 'exact', text: 'x-note' }], headersToDownstreamOnDeny: [{ kind: 'exact', text: 'x-why' }],
  });
  assert.deepEqual(grpc, { name: 'grpc', kind: 'grpc', host: 'authz-grpc.ns1.svc.cluster.local', port: 9000, timeoutMs: DEFAULT_EXT_AUTHZ_TIMEOUT_MS, failOpen: false, statusOnError: 403 });
});

it('includeRequestBodyInCheck: maxRequestBytes, allowPartialMessage and packAsBytes (both kinds; false unless set)', () => {
  const { providers } = readExtAuthzProviders([
    { name: 'h', envoyExtAuthzHttp: { service: 'a', port: 1, includeRequestBodyInCheck: { maxRequestBytes: 4096 } } },
    { name: 'g', envoyExtAuthzGrpc: { service: 'a', port: 1, includeRequestBodyInCheck: { maxRequestBytes: 10, allowPartialMessage: true, packAsBytes: true } } },
    { name: 'n', envoyExtAuthzGrpc: { service: 'a', port: 1 } },
  ]);
  assert.deepEqual(providers.map((p) => p.body), [
    { maxBytes: 4096, allowPartial: false, asBytes: false }, { maxBytes: 10, allowPartial: true, asBytes: true }, undefined,
  ]);
});

it('packAsBytes on an HTTP authorizer is accepted with a warning naming it (it only changes a gRPC CheckRequest, as in Envoy)', () => {
  const { providers, warnings } = readExtAuthzProviders([
    { name: 'h', envoyExtAuthzHttp: { service: 'a', port: 1, includeRequestBodyInCheck: { maxRequestBytes: 64, packAsBytes: true } } },
    { name: 'g', envoyExtAuthzGrpc: { service: 'a', port: 1, includeRequestBodyInCheck: { maxRequestBytes: 64, packAsBytes: true } } },
  ]);
  assert.equal(providers.length, 2);
  assert.deepEqual(warnings.map((w) => w.slice(0, w.indexOf(': '))), ['meshConfig.extensionProviders[0].envoyExtAuthzHttp.includeRequestBodyInCheck.packAsBytes']);
  assert.match(warnings[0]!, /has no effect on an HTTP authorizer/);
});

it('the deprecated includeHeadersInCheck is read as includeRequestHeadersInCheck', () => {
  const [p] = readExtAuthzProviders([{ name: 'a', envoyExtAuthzHttp: { service: 'a', port: 1, includeHeadersInCheck: ['x-a'] } }]).providers;
  assert.deepEqual(p?.kind === 'http' && p.includeRequestHeaders, [{ kind: 'exact', text: 'x-a' }]);
});

it('header patterns: exact in any case, prefix*, *suffix, * for every header', () => {
  const [p] = readExtAuthzProviders([{ name: 'a', envoyExtAuthzHttp: { service: 'a', port: 1, includeRequestHeadersInCheck: ['X-A', 'b-*', '*-c'] } }]).providers;
  const list = p?.kind === 'http' ? p.includeRequestHeaders : [];
  assert.deepEqual(['x-a', 'x-ab', 'b-1', 'a-b-1', '1-c', '1-cd'].map((n) => matchesHeader(list, n)), [true, false, true, false, true, false]);
  assert.equal(matchesHeader([{ kind: 'prefix', text: '' }], 'anything'), true);
});

it('other provider kinds are accepted and named in a warning (nothing here uses them)', () => {
  const m = loadMeshConfig('mesh', mesh('- name: otel\n  opentelemetry: {service: otel.ns, port: 4317}\n'), '');
  assert.deepEqual(m.extAuthzProviders, []);
  assert.match(m.warnings.join('\n'), /^meshConfig\.extensionProviders\[0\]\.opentelemetry: not honoured by this agent: provider "otel"/m);
});

it('a bad provider stops the load naming the mesh config file and the field', () => {
  const cases: [string, string, RegExp][] = [
    ['- name: a\n  envoyExtAuthzHttp: {port: 1}\n', 'extensionProviders[0].envoyExtAuthzHttp.service', /is required/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s}\n', 'extensionProviders[0].envoyExtAuthzGrpc.port', /not a port number/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, timeout: 1x}\n', 'extensionProviders[0].envoyExtAuthzGrpc.timeout', /not a duration/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, statusOnError: "99"}\n', 'extensionProviders[0].envoyExtAuthzGrpc.statusOnError', /not an HTTP status/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, pathPrefix: /x}\n', 'extensionProviders[0].envoyExtAuthzGrpc.pathPrefix', /not a field of this provider/],
    ['- name: a\n  envoyExtAuthzHttp: {service: s, port: 1, pathPrefix: check}\n', 'extensionProviders[0].envoyExtAuthzHttp.pathPrefix', /starting with \//],
    ['- name: a\n  envoyExtAuthzHttp: {service: s, port: 1, includeRequestBodyInCheck: {}}\n',
      'extensionProviders[0].envoyExtAuthzHttp.includeRequestBodyInCheck.maxRequestBytes', /it is required/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, includeRequestBodyInCheck: {maxRequestBytes: 0}}\n',
      'extensionProviders[0].envoyExtAuthzGrpc.includeRequestBodyInCheck.maxRequestBytes', /from 1 to 16777216/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, includeRequestBodyInCheck: {maxRequestBytes: 16777217}}\n',
      'extensionProviders[0].envoyExtAuthzGrpc.includeRequestBodyInCheck.maxRequestBytes', /from 1 to 16777216/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, includeRequestBodyInCheck: {maxRequestBytes: 9, packAsBytes: "yes"}}\n',
      'extensionProviders[0].envoyExtAuthzGrpc.includeRequestBodyInCheck.packAsBytes', /not true or false/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, includeRequestBodyInCheck: {maxRequestBytes: 9, maxBytes: 1}}\n',
      'extensionProviders[0].envoyExtAuthzGrpc.includeRequestBodyInCheck.maxBytes', /not a field/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1, includeRequestBodyInCheck: 10}\n',
      'extensionProviders[0].envoyExtAuthzGrpc.includeRequestBodyInCheck', /expected a mapping/],
    ['- name: a\n  envoyExtAuthzHttp: {service: s, port: 1, includeAdditionalHeadersInCheck: {x-a: "%DOWNSTREAM_REMOTE_ADDRESS%"}}\n',
      'extensionProviders[0].envoyExtAuthzHttp.includeAdditionalHeadersInCheck.x-a', /substitutions are not supported yet/],
    ['- name: a\n  envoyExtAuthzHttp: {service: s, port: 1, includeHeadersInCheck: [a], includeRequestHeadersInCheck: [b]}\n',
      'extensionProviders[0].envoyExtAuthzHttp.includeHeadersInCheck', /set one of them/],
    ['- name: a\n  envoyExtAuthzHttp: {service: s, port: 1, headersToUpstreamOnAllow: ["x*y"]}\n', 'extensionProviders[0].envoyExtAuthzHttp.headersToUpstreamOnAllow[0]', /only at the start or the end/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1}\n- name: a\n  envoyExtAuthzGrpc: {service: s, port: 2}\n', 'extensionProviders[1].name', /must be unique/],
    ['- name: a\n  envoyExtAuthzGrpc: {service: s, port: 1}\n  envoyExtAuthzHttp: {service: s, port: 1}\n', 'extensionProviders[0]', /exactly one provider kind/],
    ['- name: a\n  envoyExtAuthz: {service: s, port: 1}\n', 'extensionProviders[0].envoyExtAuthz', /not a provider kind/],
  ];
  for (const [text, field, message] of cases) {
    assert.throws(() => loadMeshConfig('etc/mesh/config/mesh', mesh(text), ''), (err: unknown) => {
      assert.ok(err instanceof AgentError, String(err));
      assert.equal(err.code, 'ERR_CONFIG');
      assert.ok(err.message.startsWith(`etc/mesh/config/mesh: ${field}: `), `${field}: ${err.message}`);
      assert.match(err.message, message);
      return true;
    });
  }
});
