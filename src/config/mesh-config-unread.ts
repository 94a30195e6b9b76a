// The mesh config keys this agent does not act on. Istio's own parser keeps keys it does not know
// (version skew), and its default mesh config carries many fields a proxy never reads, so such a key
// never stops the start; but nothing is accepted without a word: each one gets a warning at load,
// naming its path. A key whose value asks for what this agent does anyway is honoured, not warned.
import { parseGoDuration } from './env/values.js';

type Doc = Readonly<Record<string, unknown>>;

/** Top-level keys mesh-config.ts reads (and checks). */
export const READ_MESH_KEYS: readonly string[] = [
  'defaultConfig', 'configSources', 'accessLogFile', 'accessLogEncoding', 'accessLogFormat', 'pathNormalization',
  'enableAutoMtls', 'autoMtlsCidrs', 'trustDomain', 'connectTimeout', 'outboundTrafficPolicy', 'localityLbSetting', 'extensionProviders', 'defaultProviders',
];
/** `defaultConfig` (and PROXY_CONFIG) keys mesh-config.ts reads. */
export const READ_PROXY_KEYS: readonly string[] = [
  'drainDuration', 'terminationDrainDuration', 'concurrency', 'statusPort', 'serviceCluster', 'gatewayTopology',
];

interface Unread {
  /** What this agent does instead, or why the key has no meaning here. */
  readonly why: string;
  /** True when the value asks for exactly what this agent does: honoured, nothing to say. */
  readonly same?: (value: unknown) => boolean;
}

const NO_ENVOY = 'this agent runs no Envoy process (no bootstrap file, no binary to start)';
const NO_TRACING = 'no traces are made or sent by this agent';
const NO_INGRESS = 'Kubernetes Ingress resources are not read by this agent';
const EVERY_NAMESPACE = 'a resource without exportTo is visible to every namespace ("*", Istio\'s default); another default is not applied';

const equalJson = (want: unknown) => (value: unknown): boolean => JSON.stringify(value) === JSON.stringify(want);
const durationMs = (want: number) => (value: unknown): boolean => {
  const parsed = typeof value === 'string' ? parseGoDuration(value) : undefined;
  return parsed?.ok === true && parsed.value === want;
};

/** Istio MeshConfig fields, what this agent does about them. */
const MESH: Readonly<Record<string, Unread>> = {
  inboundTrafficPolicy: { why: 'inbound connections always go to the address they were sent to (PASSTHROUGH)', same: equalJson({ mode: 'PASSTHROUGH' }) },
  rootNamespace: { why: 'the root namespace is fixed: mesh-system', same: (v) => v === 'mesh-system' },
  defaultHttpRetryPolicy: {
    why: 'an HTTP route without retries gets Istio\'s built-in default (2 attempts on connect-failure, refused-stream, unavailable, cancelled, '
      + 'retriable-status-codes), not a mesh-wide one',
  },
  h2UpgradePolicy: { why: 'HTTP/1.1 requests are never upgraded to HTTP/2 toward upstreams (DO_NOT_UPGRADE)', same: (v) => v === 'DO_NOT_UPGRADE' },
  tcpKeepalive: { why: 'no mesh-wide TCP keepalive is set on upstream connections; a DestinationRule\'s connectionPool.tcp.tcpKeepalive is honoured' },
  dnsRefreshRate: { why: 'DNS endpoints are resolved again at their TTL, else every 60s (Istio\'s default); another rate is not applied', same: durationMs(60_000) },
  defaultServiceExportTo: { why: EVERY_NAMESPACE, same: equalJson(['*']) },
  defaultVirtualServiceExportTo: { why: EVERY_NAMESPACE, same: equalJson(['*']) },
  defaultDestinationRuleExportTo: { why: EVERY_NAMESPACE, same: equalJson(['*']) },
  enableTracing: { why: NO_TRACING, same: (v) => v === false },
  enablePrometheusMerge: {
    why: 'Istio\'s injector reads it; here 15020 always merges the agent\'s, the proxy\'s and the application\'s metrics (MESH_METRICS_ANNOTATIONS)',
    same: (v) => v === true,
  },
  discoverySelectors: { why: 'every resource in the configSources directories is read, whatever its namespace' },
  trustDomainAliases: { why: 'identities of other trust domains are not taken as this mesh\'s' },
  caCertificates: { why: 'no extra trust roots are loaded: the CA\'s root (mounted certificates or CA_ROOT_CA) is trusted' },
  meshMTLS: { why: 'the TLS versions of mesh mTLS are not configurable here' },
  tlsDefaults: { why: 'the mesh-wide TLS defaults (ECDH curves, cipher suites) are not configurable here' },
  serviceSettings: { why: 'per-service settings (clusterLocal) are not applied: every ServiceEntry host is treated alike' },
  protocolDetectionTimeout: { why: 'the wait for a client\'s first bytes (protocol detection) is not configurable here' },
  ingressClass: { why: NO_INGRESS },
  ingressService: { why: NO_INGRESS },
  ingressControllerMode: { why: NO_INGRESS },
  ingressSelector: { why: NO_INGRESS },
  proxyListenPort: { why: 'the outbound capture port is fixed: 15001', same: (v) => v === 15001 },
  proxyInboundListenPort: { why: 'the inbound capture port is fixed: 15006', same: (v) => v === 15006 },
};

/** Istio ProxyConfig fields (`defaultConfig`, PROXY_CONFIG), what this agent does about them. */
const PROXY: Readonly<Record<string, Unread>> = {
  discoveryAddress: {
    why: 'there is no XDS connection: configuration comes from the configSources files; Istio also takes it as the CA address '
      + 'when CA_ADDR is unset, this agent does not (set CA_ADDR)',
  },
  proxyMetadata: { why: 'Istio\'s injector turns these into environment variables of the proxy; set them in the agent\'s environment instead' },
  holdApplicationUntilProxyStarts: {
    why: 'Istio\'s injector reads it (the proxy container first, a postStart hook running `pilot-agent wait`); '
      + 'give the pod that order and hook (see `pilot-agent wait`)',
  },
  tracing: { why: NO_TRACING },
  zipkinAddress: { why: NO_TRACING },
  proxyAdminPort: { why: 'the admin port is fixed: 15000', same: (v) => v === 15000 },
  configPath: { why: NO_ENVOY },
  binaryPath: { why: NO_ENVOY },
  customConfigFile: { why: NO_ENVOY },
  proxyBootstrapTemplatePath: { why: NO_ENVOY },
  parentShutdownDuration: { why: 'there is no hot restart (Envoy\'s parent process) here' },
  controlPlaneAuthPolicy: { why: 'there is no control-plane connection' },
  interceptionMode: { why: 'the inbound capture mode is INBOUND_INTERCEPTION_MODE here (and mesh-iptables\' -m)' },
  proxyStatsMatcher: { why: 'the proxy\'s stats are a fixed set; none is added on request' },
  extraStatTags: { why: 'metric labels are a fixed set; none is added on request' },
  readinessProbe: { why: 'readiness is fixed: 15021 /healthz/ready' },
};

const GENERIC_MESH = `this agent does not read it (it reads ${READ_MESH_KEYS.join(', ')})`;
const GENERIC_PROXY = `this agent does not read it (it reads ${READ_PROXY_KEYS.join(', ')} of the proxy config)`;

function isDoc(v: unknown): v is Doc {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function lines(doc: Doc, prefix: string, read: readonly string[], known: Readonly<Record<string, Unread>>, generic: string): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(doc)) {
    // null is protobuf's "not set": nothing asked, nothing ignored.
    if (read.includes(key) || value === null || value === undefined) continue;
    const entry = Object.hasOwn(known, key) ? known[key] : undefined;
    if (entry?.same?.(value)) continue;
    out.push(`${prefix}${key}: not honoured by this agent: ${entry?.why ?? generic}`);
  }
  return out;
}

/** Keys of a section read in part (`only` are read there). */
function partial(section: unknown, path: string, only: readonly string[]): string[] {
  if (!isDoc(section)) return [];
  return Object.entries(section).filter(([k, v]) => !only.includes(k) && v !== null && v !== undefined)
    .map(([k]) => `${path}.${k}: not honoured by this agent: only ${only.join(', ')} is read in ${path}`);
}

/** The proxy config's unread keys (`prefix`: `meshConfig.defaultConfig.` or `PROXY_CONFIG.`). */
export function unreadProxyKeys(doc: Doc, prefix: string): string[] {
  return [
    ...lines(doc, prefix, READ_PROXY_KEYS, PROXY, GENERIC_PROXY),
    ...partial(doc['gatewayTopology'], `${prefix}gatewayTopology`, ['numTrustedProxies']),
  ];
}

/** One warning per key of the mesh config file this agent does not honour, its path under `meshConfig.`. */
export function unreadMeshKeys(doc: Doc): string[] {
  const sources = Array.isArray(doc['configSources']) ? doc['configSources'] as unknown[] : [];
  return [
    ...lines(doc, 'meshConfig.', READ_MESH_KEYS, MESH, GENERIC_MESH),
    ...(isDoc(doc['defaultConfig']) ? unreadProxyKeys(doc['defaultConfig'], 'meshConfig.defaultConfig.') : []),
    ...partial(doc['pathNormalization'], 'meshConfig.pathNormalization', ['normalization']),
    ...sources.flatMap((s, i) => partial(s, `meshConfig.configSources[${i}]`, ['address'])),
  ];
}
