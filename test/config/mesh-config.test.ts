import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DEFAULT_PROXY_CONFIG, loadMeshConfig } from '../../src/config/mesh-config.js';
import { AgentError } from '../../src/errors/agent-error.js';

it('uses the default mesh when the file does not exist', () => {
  const m = loadMeshConfig('./etc/mesh/config/mesh', undefined, '');
  assert.equal(m.source, 'defaults');
  assert.deepEqual(m.defaultConfig, DEFAULT_PROXY_CONFIG);
  assert.equal(m.defaultConfig.concurrency, 2, 'Istio\'s default mesh config runs 2 workers');
  assert.deepEqual(m.configSources, []);
  assert.equal(loadMeshConfig('x', 'defaultConfig:\n  concurrency: 0\n', '').defaultConfig.concurrency, 0, '0: MESH_CPU_LIMIT or the cores');
});

it('reads defaultConfig and configSources, and PROXY_CONFIG overrides the proxy settings', () => {
  const file = 'defaultConfig:\n  drainDuration: 30s\n  terminationDrainDuration: 10s\n  concurrency: 2\nconfigSources:\n  - address: fs://./etc/mesh/resources\n';
  const m = loadMeshConfig('mesh.yaml', file, '{"terminationDrainDuration": "1m30s", "statusPort": 15121}');
  assert.deepEqual(m.defaultConfig, { drainDurationMs: 30_000, terminationDrainDurationMs: 90_000, concurrency: 2, statusPort: 15121, numTrustedProxies: 0 });
  assert.deepEqual(m.configSources, ['fs://./etc/mesh/resources']);
  assert.equal(m.source, 'mesh.yaml');
});

it('reads pathNormalization (default BASE, DEFAULT meaning BASE) and gatewayTopology.numTrustedProxies', () => {
  assert.equal(loadMeshConfig('m', undefined, '').pathNormalization, 'BASE');
  assert.equal(loadMeshConfig('m', 'pathNormalization:\n  normalization: DEFAULT\n', '').pathNormalization, 'BASE');
  for (const n of ['NONE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'] as const) {
    assert.equal(loadMeshConfig('m', `pathNormalization: {normalization: ${n}}\n`, '').pathNormalization, n);
  }
  assert.equal(loadMeshConfig('m', 'defaultConfig:\n  gatewayTopology:\n    numTrustedProxies: 2\n', '').defaultConfig.numTrustedProxies, 2);
  assert.equal(loadMeshConfig('m', '', '{"gatewayTopology": {"numTrustedProxies": 1}}').defaultConfig.numTrustedProxies, 1);
});

it('names the file and the field of a bad value', () => {
  const cases: [string, string, RegExp][] = [
    ['defaultConfig:\n  drainDuration: 5\n', '', /mesh\.yaml: defaultConfig\.drainDuration: 5 is not a duration/],
    ['defaultConfig: [1]\n', '', /mesh\.yaml: defaultConfig: expected a mapping/],
    ['configSources:\n  - {}\n', '', /mesh\.yaml: configSources\[0\]\.address: expected a string/],
    ['a: [', '', /mesh\.yaml: not valid YAML or JSON/],
    ['', 'concurrency: -1', /PROXY_CONFIG: concurrency: -1 is not an integer from 0 to 1024/],
    ['pathNormalization: {normalization: STRICT}\n', '', /mesh\.yaml: pathNormalization\.normalization: "STRICT" is not one of DEFAULT, NONE, BASE/],
    ['pathNormalization: BASE\n', '', /mesh\.yaml: pathNormalization: expected a mapping/],
    ['defaultConfig:\n  gatewayTopology: {numTrustedProxies: -1}\n', '', /defaultConfig\.gatewayTopology\.numTrustedProxies: -1 is not an integer/],
    ['accessLogEncoding: XML\n', '', /mesh\.yaml: accessLogEncoding: "XML" is not TEXT or JSON/],
    ['accessLogFormat: "[%START_TIME%] %RESPONSE_CODES%"\n', '', /mesh\.yaml: accessLogFormat: unknown command operator %RESPONSE_CODES% at character 16/],
    ['accessLogFormat: "%REQ%"\n', '', /mesh\.yaml: accessLogFormat: %REQ% at character 1 needs an argument/],
    ['accessLogEncoding: JSON\naccessLogFormat: "%RESPONSE_CODE%"\n', '', /mesh\.yaml: accessLogFormat: with accessLogEncoding JSON, expected a JSON object/],
    ['accessLogEncoding: JSON\naccessLogFormat: \'{"code": "%CODE%"}\'\n', '', /mesh\.yaml: accessLogFormat: key "code": unknown command operator %CODE%/],
    ['accessLogFormat: {code: "%RESPONSE_CODE%"}\n', '', /mesh\.yaml: accessLogFormat: expected a string/],
    ['enableAutoMtls: "yes"\n', '', /mesh\.yaml: enableAutoMtls: "yes" is not true or false/],
    ['autoMtlsCidrs: 10.0.0.0/8\n', '', /mesh\.yaml: autoMtlsCidrs: expected a list of CIDR blocks/],
    ['autoMtlsCidrs: [10.0.0.0/8, 10.0.0.0/33]\n', '', /mesh\.yaml: autoMtlsCidrs\[1\]: "10\.0\.0\.0\/33" is not a CIDR block \(such as 10\.0\.0\.0\/8 or fd00::\/8\) or an IP address/],
    ['autoMtlsCidrs: [pods.local]\n', '', /mesh\.yaml: autoMtlsCidrs\[0\]: "pods\.local" is not a CIDR block/],
    ['autoMtlsCidrs: ["fd00::/129"]\n', '', /autoMtlsCidrs\[0\]: "fd00::\/129" is not a CIDR block/],
    ['trustDomain: "a/b"\n', '', /mesh\.yaml: trustDomain: "a\/b" is not a trust domain/],
  ];
  for (const [file, env, message] of cases) {
    assert.throws(() => loadMeshConfig('mesh.yaml', file, env), (e: unknown) => e instanceof AgentError && e.code === 'ERR_CONFIG' && message.test(e.message), file + env);
  }
});

it('reads the access log settings: file, encoding, format (Envoy operators; a JSON object with JSON)', () => {
  const none = loadMeshConfig('m', undefined, '');
  assert.deepEqual([none.accessLogFile, none.accessLogEncoding, none.accessLogFormat], [undefined, 'TEXT', undefined]);
  const text = loadMeshConfig('m', 'accessLogFile: ./access.log\naccessLogFormat: "%REQ(:METHOD)% %RESPONSE_CODE% %RESPONSE_FLAGS%\\n"\n', '');
  assert.deepEqual([text.accessLogFile, text.accessLogEncoding, text.accessLogFormat], ['./access.log', 'TEXT', '%REQ(:METHOD)% %RESPONSE_CODE% %RESPONSE_FLAGS%\n']);
  const json = loadMeshConfig('m', 'accessLogFile: /dev/stdout\naccessLogEncoding: JSON\naccessLogFormat: |\n  {"code": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%"}\n', '');
  assert.equal(json.accessLogEncoding, 'JSON');
  assert.equal(json.accessLogFormat, '{"code": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%"}\n');
  assert.equal(loadMeshConfig('m', 'accessLogFile: ""\n', '').accessLogFile, '', '"" turns it off');
});

it('reads the auto mTLS settings and the trust domain (Istio defaults: on, no CIDRs, trust domain left to the agent)', () => {
  const none = loadMeshConfig('m', undefined, '');
  assert.deepEqual([none.enableAutoMtls, none.autoMtlsCidrs, none.trustDomain], [true, [], undefined]);
  const set = loadMeshConfig('m', 'enableAutoMtls: false\nautoMtlsCidrs: [10.0.0.0/8, "fd00::/8", 192.168.1.7]\ntrustDomain: Example.ORG\n', '');
  assert.deepEqual([set.enableAutoMtls, set.autoMtlsCidrs, set.trustDomain], [false, ['10.0.0.0/8', 'fd00::/8', '192.168.1.7'], 'example.org']);
  assert.equal(loadMeshConfig('m', 'trustDomain: ""\n', '').trustDomain, undefined, '"" is not set, as in Istio');
});

it('names every key it does not honour, one warning each, its path under meshConfig. (never refusing the file)', () => {
  const file = `accessLogFile: /dev/stdout
outboundTrafficPolicy: {mode: REGISTRY_ONLY}
defaultHttpRetryPolicy: {attempts: 5}
h2UpgradePolicy: UPGRADE
tcpKeepalive: {time: 30s}
dnsRefreshRate: 5s
defaultServiceExportTo: ["."]
enableTracing: true
outboundTrafficPolicyy: {mode: ALLOW_ANY}
pathNormalization: {normalization: BASE, extra: 1}
configSources: [{address: fs://./r, subscribedResources: [SERVICE_REGISTRY]}]
defaultConfig:
  drainDuration: 10s
  serviceCluster: shop
  holdApplicationUntilProxyStarts: true
  proxyMetadata: {ISTIO_META_DNS_CAPTURE: "true"}
  gatewayTopology: {numTrustedProxies: 1, forwardClientCertDetails: SANITIZE}
`;
  const m = loadMeshConfig('mesh.yaml', file, '{"tracing": {"zipkin": {"address": "z:9411"}}, "concurrency": 1}');
  const want: [string, RegExp][] = [
    ['meshConfig.defaultHttpRetryPolicy', /: not honoured by this agent: an HTTP route without retries gets Istio's built-in default/],
    ['meshConfig.h2UpgradePolicy', /never upgraded/],
    ['meshConfig.tcpKeepalive', /DestinationRule's connectionPool\.tcp\.tcpKeepalive is honoured/],
    ['meshConfig.dnsRefreshRate', /every 60s/],
    ['meshConfig.defaultServiceExportTo', /visible to every namespace/],
    ['meshConfig.enableTracing', /no traces/],
    ['meshConfig.outboundTrafficPolicyy', /: not honoured by this agent: this agent does not read it \(it reads defaultConfig, configSources, accessLogFile/],
    ['meshConfig.defaultConfig.holdApplicationUntilProxyStarts', /injector.*pilot-agent wait/],
    ['meshConfig.defaultConfig.proxyMetadata', /environment/],
    ['meshConfig.defaultConfig.gatewayTopology.forwardClientCertDetails', /only numTrustedProxies is read in meshConfig\.defaultConfig\.gatewayTopology$/],
    ['meshConfig.pathNormalization.extra', /only normalization is read/],
    ['meshConfig.configSources[0].subscribedResources', /only address is read/],
    ['PROXY_CONFIG.tracing', /no traces/],
  ];
  assert.equal(m.warnings.length, want.length, m.warnings.join('\n'));
  for (const [path, message] of want) {
    const line = m.warnings.find((w) => w.startsWith(`${path}: `));
    assert.ok(line, `no warning for ${path}: ${m.warnings.join('\n')}`);
    assert.match(line, message);
  }
  assert.deepEqual([m.defaultConfig.drainDurationMs, m.defaultConfig.serviceCluster, m.defaultConfig.concurrency, m.defaultConfig.numTrustedProxies], [10_000, 'shop', 1, 1]);
});

it('says nothing of keys it honours, of values that ask for what it does anyway, or of null (unset) values', () => {
  const file = `accessLogFile: ""
accessLogEncoding: TEXT
connectTimeout: 5s
enableAutoMtls: true
autoMtlsCidrs: []
trustDomain: cluster.local
pathNormalization: {normalization: BASE}
configSources: [{address: fs://./r}]
rootNamespace: mesh-system
outboundTrafficPolicy: {mode: ALLOW_ANY}
inboundTrafficPolicy: {mode: PASSTHROUGH}
h2UpgradePolicy: DO_NOT_UPGRADE
dnsRefreshRate: 1m
defaultServiceExportTo: ["*"]
defaultVirtualServiceExportTo: ["*"]
defaultDestinationRuleExportTo: ["*"]
enableTracing: false
enablePrometheusMerge: true
localityLbSetting:
defaultConfig:
  drainDuration: 45s
  terminationDrainDuration: 5s
  concurrency: 2
  statusPort: 15020
  serviceCluster: mesh-proxy
  proxyAdminPort: 15000
  gatewayTopology: {numTrustedProxies: 0}
`;
  assert.deepEqual(loadMeshConfig('mesh.yaml', file, 'drainDuration: 1s\nproxyAdminPort: 15000\n').warnings, []);
  assert.deepEqual(loadMeshConfig('m', undefined, '').warnings, [], 'no file: the defaults, nothing to say');
  // The same keys asking for something else are named.
  const other = loadMeshConfig('m', 'rootNamespace: istio-system\nenablePrometheusMerge: false\n', 'proxyAdminPort: 15001\n').warnings;
  assert.deepEqual(other.map((w) => w.slice(0, w.indexOf(':'))), ['meshConfig.rootNamespace', 'meshConfig.enablePrometheusMerge', 'PROXY_CONFIG.proxyAdminPort']);
  assert.match(other[0] ?? '', /the root namespace is fixed: mesh-system/);
});

it('Istio\'s default mesh config loads, every field it does not act on named once', () => {
  const istio = `defaultConfig:
  discoveryAddress: istiod.istio-system.svc:15012
  tracing:
    zipkin:
      address: zipkin.istio-system:9411
defaultProviders:
  metrics:
  - prometheus
enablePrometheusMerge: true
rootNamespace: istio-system
trustDomain: cluster.local
`;
  const m = loadMeshConfig('mesh', istio, '');
  assert.deepEqual(m.warnings.map((w) => w.slice(0, w.indexOf(':'))).sort(),
    ['meshConfig.defaultConfig.discoveryAddress', 'meshConfig.defaultConfig.tracing', 'meshConfig.rootNamespace']);
  assert.equal(m.defaultAccessLog, false);
  assert.match(m.warnings.find((w) => w.includes('discoveryAddress')) ?? '', /no XDS.*set CA_ADDR/);
  assert.equal(m.trustDomain, 'cluster.local');
});

it('outboundTrafficPolicy.mode is read: ALLOW_ANY by default, REGISTRY_ONLY when asked (or when the policy names no mode: the enum\'s zero)', () => {
  assert.equal(loadMeshConfig('m', undefined, '').outboundTrafficPolicy, 'ALLOW_ANY');
  assert.equal(loadMeshConfig('m', 'outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n', '').outboundTrafficPolicy, 'REGISTRY_ONLY');
  assert.equal(loadMeshConfig('m', 'outboundTrafficPolicy: {mode: ALLOW_ANY}\n', '').outboundTrafficPolicy, 'ALLOW_ANY');
  assert.equal(loadMeshConfig('m', 'outboundTrafficPolicy: {}\n', '').outboundTrafficPolicy, 'REGISTRY_ONLY');
  assert.deepEqual(loadMeshConfig('m', 'outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n', '').warnings, []);
  assert.throws(() => loadMeshConfig('m', 'outboundTrafficPolicy: {mode: BLOCK}\n', ''), /outboundTrafficPolicy\.mode.*"BLOCK" is not ALLOW_ANY or REGISTRY_ONLY/);
  assert.throws(() => loadMeshConfig('m', 'outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: e}}\n', ''), /outboundTrafficPolicy\.egressProxy.*not supported yet/);
});

it('reads localityLbSetting (Istio\'s default: enabled), checked as a DestinationRule\'s, bad values naming the field', () => {
  assert.deepEqual(loadMeshConfig('m', undefined, '').localityLbSetting, { enabled: true, distribute: [], failover: [], failoverPriority: [] });
  const m = loadMeshConfig('mesh.yaml', 'localityLbSetting: {failover: [{from: us-east, to: eu-west}]}\n', '');
  assert.deepEqual(m.localityLbSetting, { distribute: [], failover: [{ from: 'us-east', to: 'eu-west' }], failoverPriority: [] });
  assert.deepEqual(m.warnings, [], 'failover in the mesh config: Istio checks it as if outlier detection were set');
  assert.deepEqual(loadMeshConfig('m', 'localityLbSetting: {enabled: false}\n', '').localityLbSetting.enabled, false);
  assert.throws(() => loadMeshConfig('mesh.yaml', 'localityLbSetting: {distribute: [{from: "*", to: {a: 50}}]}\n', ''),
    (e: unknown) => e instanceof AgentError && /^mesh\.yaml: localityLbSetting\.distribute\[0\]\.to: the weights sum to 50/.test(e.message));
});

it('defaultProviders: envoy for access logging is honoured; Prometheus metrics are what this agent does; other providers and tracing are named', () => {
  assert.equal(loadMeshConfig('m', undefined, '').defaultAccessLog, false);
  const on = loadMeshConfig('m', 'defaultProviders: {accessLogging: [envoy], metrics: [prometheus]}\n', '');
  assert.equal(on.defaultAccessLog, true);
  assert.deepEqual(on.warnings, []);
  const other = loadMeshConfig('m', 'defaultProviders: {accessLogging: [otel], metrics: [stackdriver], tracing: [zipkin], logging: []}\n', '');
  assert.equal(other.defaultAccessLog, false);
  assert.deepEqual(other.warnings.map((w) => w.slice(0, w.indexOf(':'))),
    ['meshConfig.defaultProviders.accessLogging', 'meshConfig.defaultProviders.metrics', 'meshConfig.defaultProviders.tracing', 'meshConfig.defaultProviders.logging']);
  assert.match(other.warnings[0] ?? '', /"otel" is not used: this agent's one access log provider is envoy/);
  assert.throws(() => loadMeshConfig('m', 'defaultProviders: {accessLogging: envoy}\n', ''), /defaultProviders\.accessLogging.*expected a list of provider names/);
  assert.throws(() => loadMeshConfig('m', 'defaultProviders: [envoy]\n', ''), /defaultProviders.*expected a mapping/);
});
