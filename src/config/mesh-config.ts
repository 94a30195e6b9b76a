// The mesh configuration (`--meshConfig`, default ./etc/mesh/config/mesh) and the proxy settings in
// it (`defaultConfig`), with PROXY_CONFIG (YAML or JSON of the same fields) overriding them, as in
// Istio. Durations take protobuf's `5s` form or Go's (`1m30s`). Keys this agent does not act on are
// kept (Istio's parser keeps them too) and named in `warnings` (mesh-config-unread.ts).
import { yaml } from './yaml.js';
import { AgentError } from '../errors/agent-error.js';
import { AccessLogFormatError, compileAccessLogFormat } from '../log/access-format.js';
import { parseCidr } from './resources/addresses.js';
import { parseGoDuration } from './env/values.js';
import { unreadMeshKeys, unreadProxyKeys } from './mesh-config-unread.js';
import { FieldError } from './resources/fields.js';
import { parseLocalityLbSetting } from './resources/locality-lb-setting.js';
import type { LocalityLbSetting } from './resources/types.js';
import { ProviderFieldError, readExtAuthzProviders, type ExtAuthzProvider } from './ext-authz-providers.js';

/** Istio's `pathNormalization.normalization` values (what each does: proxy/path-normalization.ts). */
export const PATH_NORMALIZATIONS = ['NONE', 'BASE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'] as const;
export type PathNormalization = (typeof PATH_NORMALIZATIONS)[number];
export const DEFAULT_PATH_NORMALIZATION: PathNormalization = 'BASE';

export interface ProxyConfig {
  /**
   * Istio's drainDuration (Envoy's --drain-time-s): the time the connections of a gateway listener
   * that a configuration change closes or reopens get to finish; then they are closed.
   */
  readonly drainDurationMs: number;
  /** Time to drain on SIGTERM before exiting (Istio's terminationDrainDuration). */
  readonly terminationDrainDurationMs: number;
  /** Workers when --concurrency is 0; 0: MESH_CPU_LIMIT or the cores. */
  readonly concurrency?: number;
  readonly statusPort?: number;
  /** Istio's serviceCluster; when set (not ''), it wins over --serviceCluster, as in Istio. */
  readonly serviceCluster?: string;
  /**
   * `gatewayTopology.numTrustedProxies`: proxies in front of a gateway whose X-Forwarded-For entries
   * are trusted; the client address policies see (`remoteIpBlocks`, `remote.ip`) is the entry this
   * many from the right. 0 (default): the connection's peer.
   */
  readonly numTrustedProxies: number;
}

export interface MeshConfig {
  /** Where it was read from, or `defaults`. */
  readonly source: string;
  readonly defaultConfig: ProxyConfig;
  /** `configSources[].address` values (`fs://DIR`). */
  readonly configSources: readonly string[];
  /** Istio's `accessLogFile`: undefined when not set (the gateway then logs to /dev/stdout); '' turns it off. */
  readonly accessLogFile?: string;
  readonly accessLogEncoding: 'TEXT' | 'JSON';
  /**
   * Istio's `accessLogFormat` (checked here; compiled by each worker, as a config is plain data):
   * Envoy's command operators, a JSON object with JSON encoding; undefined or '': the default.
   */
  readonly accessLogFormat?: string;
  /** `pathNormalization.normalization`: how request paths are normalized before policy and routing. */
  readonly pathNormalization: PathNormalization;
  /**
   * Istio's `enableAutoMtls` (default true): without a DestinationRule tls, connections to mesh
   * endpoints (tlsMode label, or an address in autoMtlsCidrs) are originated with mesh mTLS.
   */
  readonly enableAutoMtls: boolean;
  /**
   * Ours (Istio learns it from its registry): addresses known to be mesh workloads for auto mTLS,
   * as CIDR blocks (IPv4 or IPv6; a bare address is one address). Empty by default.
   */
  readonly autoMtlsCidrs: readonly string[];
  /** Istio's `trustDomain` when the file sets it; the agent falls back to TRUST_DOMAIN, then cluster.local. */
  readonly trustDomain?: string;
  /** Istio's `connectTimeout`: a new upstream connection not made by then fails (a DestinationRule's tcp.connectTimeout wins); default 10 s. */
  readonly connectTimeoutMs: number;
  /**
   * Istio's `outboundTrafficPolicy.mode` (default ALLOW_ANY): what a sidecar does with a destination
   * no service it sees covers; a Sidecar resource's own mode wins.
   */
  readonly outboundTrafficPolicy: 'ALLOW_ANY' | 'REGISTRY_ONLY';
  /**
   * Istio's `localityLbSetting`: the locality balancing of clusters whose DestinationRule gives none.
   * Istio's default mesh config has `{enabled: true}`: locality failover wherever outlierDetection is set.
   */
  readonly localityLbSetting: LocalityLbSetting;
  /**
   * Istio's `defaultProviders.accessLogging` names `envoy` (the built-in provider: stdout, this
   * config's format): every workload logs both directions unless a Telemetry turns one off, and
   * a Telemetry entry naming no provider takes it.
   */
  readonly defaultAccessLog: boolean;
  /** `extensionProviders` of the external-authorizer kinds (AuthorizationPolicy CUSTOM names them). */
  readonly extAuthzProviders: readonly ExtAuthzProvider[];
  /** The whole document as read, for /config_dump. */
  readonly raw: Readonly<Record<string, unknown>>;
  /** One line per key read and not honoured (`meshConfig.x: not honoured by this agent: why`), logged at start. */
  readonly warnings: readonly string[];
}

/**
 * Istio's defaults. `concurrency: 2` as in Istio's default mesh config: `--concurrency 0` then means 2
 * workers, and MESH_CPU_LIMIT / the cores decide only where the config says `concurrency: 0` (a sidecar
 * on a 64-core node should not start 64 workers unasked).
 */
export const DEFAULT_PROXY_CONFIG: ProxyConfig = {
  drainDurationMs: 45_000,
  terminationDrainDurationMs: 5_000,
  concurrency: 2,
  numTrustedProxies: 0,
};

type Doc = Record<string, unknown>;

function bad(where: string, field: string, message: string): AgentError {
  return new AgentError('ERR_CONFIG', `${where}: ${field}: ${message}`);
}

function parseDoc(text: string, where: string): Doc {
  let doc: unknown;
  try {
    doc = text.trim() === '' ? {} : yaml().parse(text);
  } catch (err) {
    throw new AgentError('ERR_CONFIG', `${where}: not valid YAML or JSON: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new AgentError('ERR_CONFIG', `${where}: expected a mapping`);
  return doc as Doc;
}

function duration(value: unknown, where: string, field: string): number | undefined {
  if (value === undefined) return undefined;
  const parsed = typeof value === 'string' ? parseGoDuration(value) : { ok: false as const, expected: '' };
  if (!parsed.ok || parsed.value < 0) throw bad(where, field, `${JSON.stringify(value)} is not a duration such as 5s or 1m30s`);
  return parsed.value;
}

function integer(value: unknown, where: string, field: string, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
    throw bad(where, field, `${JSON.stringify(value)} is not an integer from 0 to ${max}`);
  }
  return value;
}

function proxyConfigOf(doc: Doc, where: string, prefix: string, base: ProxyConfig): ProxyConfig {
  const field = (name: string): string => `${prefix}${name}`;
  const drain = duration(doc['drainDuration'], where, field('drainDuration'));
  const termination = duration(doc['terminationDrainDuration'], where, field('terminationDrainDuration'));
  const concurrency = integer(doc['concurrency'], where, field('concurrency'), 1024);
  const statusPort = integer(doc['statusPort'], where, field('statusPort'), 65535);
  const cluster = doc['serviceCluster'];
  if (cluster !== undefined && typeof cluster !== 'string') throw bad(where, field('serviceCluster'), 'expected a string');
  const topology = doc['gatewayTopology'] ?? {};
  if (typeof topology !== 'object' || topology === null || Array.isArray(topology)) throw bad(where, field('gatewayTopology'), 'expected a mapping');
  const trusted = integer((topology as Doc)['numTrustedProxies'], where, field('gatewayTopology.numTrustedProxies'), 64);
  return {
    ...base,
    ...(drain !== undefined ? { drainDurationMs: drain } : {}),
    ...(termination !== undefined ? { terminationDrainDurationMs: termination } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(statusPort !== undefined ? { statusPort } : {}),
    ...(cluster !== undefined ? { serviceCluster: cluster } : {}),
    ...(trusted !== undefined ? { numTrustedProxies: trusted } : {}),
  };
}

function pathNormalizationOf(doc: Doc, path: string): PathNormalization {
  const section = doc['pathNormalization'] ?? {};
  if (typeof section !== 'object' || section === null || Array.isArray(section)) throw bad(path, 'pathNormalization', 'expected a mapping');
  const value = (section as Doc)['normalization'] ?? DEFAULT_PATH_NORMALIZATION;
  // Istio's enum also takes DEFAULT (= BASE).
  if (value === 'DEFAULT') return 'BASE';
  if (typeof value !== 'string' || !(PATH_NORMALIZATIONS as readonly string[]).includes(value)) {
    throw bad(path, 'pathNormalization.normalization', `${JSON.stringify(value)} is not one of DEFAULT, ${PATH_NORMALIZATIONS.join(', ')}`);
  }
  return value as PathNormalization;
}

function autoMtlsOf(doc: Doc, path: string): { enableAutoMtls: boolean; autoMtlsCidrs: string[]; trustDomain?: string } {
  const enable = doc['enableAutoMtls'] ?? true;
  if (typeof enable !== 'boolean') throw bad(path, 'enableAutoMtls', `${JSON.stringify(enable)} is not true or false`);
  const cidrs = doc['autoMtlsCidrs'] ?? [];
  if (!Array.isArray(cidrs)) throw bad(path, 'autoMtlsCidrs', 'expected a list of CIDR blocks such as 10.0.0.0/8 or fd00::/8');
  const autoMtlsCidrs = cidrs.map((c: unknown, i) => {
    if (typeof c !== 'string' || parseCidr(c) === undefined) {
      throw bad(path, `autoMtlsCidrs[${i}]`, `${JSON.stringify(c)} is not a CIDR block (such as 10.0.0.0/8 or fd00::/8) or an IP address`);
    }
    return c;
  });
  const trustDomain = doc['trustDomain'];
  // SPIFFE's trust-domain characters; an empty value means "not set" (Istio's proto default).
  if (trustDomain !== undefined && (typeof trustDomain !== 'string' || !/^[A-Za-z0-9._-]*$/.test(trustDomain))) {
    throw bad(path, 'trustDomain', `${JSON.stringify(trustDomain)} is not a trust domain (letters, digits, '.', '-' and '_', such as cluster.local)`);
  }
  return { enableAutoMtls: enable, autoMtlsCidrs, ...(typeof trustDomain === 'string' && trustDomain !== '' ? { trustDomain: trustDomain.toLowerCase() } : {}) };
}

/** Istio's mesh-wide connectTimeout (10 s by default); 0 and negative durations are refused, as Istio's validation does. */
function connectTimeoutOf(doc: Doc, path: string): number {
  const ms = duration(doc['connectTimeout'], path, 'connectTimeout');
  if (ms === undefined) return DEFAULT_CONNECT_TIMEOUT_MS;
  if (ms < 1) throw bad(path, 'connectTimeout', `${JSON.stringify(doc['connectTimeout'])} is too short: at least 1ms`);
  return ms;
}

/** `outboundTrafficPolicy: {mode: ALLOW_ANY | REGISTRY_ONLY}`; absent: ALLOW_ANY (Istio's default mesh config). */
function outboundTrafficPolicyOf(doc: Doc, path: string): 'ALLOW_ANY' | 'REGISTRY_ONLY' {
  const otp = doc['outboundTrafficPolicy'];
  if (otp === undefined || otp === null) return 'ALLOW_ANY';
  if (typeof otp !== 'object' || Array.isArray(otp)) throw bad(path, 'outboundTrafficPolicy', 'expected a mapping such as {mode: REGISTRY_ONLY}');
  for (const key of Object.keys(otp)) {
    if (key !== 'mode') throw bad(path, `outboundTrafficPolicy.${key}`, key === 'egressProxy' ? 'is not supported yet: sending unknown destinations to an egress proxy' : 'unknown field; accepted: mode');
  }
  // The proto enum's zero value is REGISTRY_ONLY: a policy written without a mode means it.
  const mode = (otp as Doc)['mode'] ?? 'REGISTRY_ONLY';
  if (mode !== 'ALLOW_ANY' && mode !== 'REGISTRY_ONLY') throw bad(path, 'outboundTrafficPolicy.mode', `${JSON.stringify(mode)} is not ALLOW_ANY or REGISTRY_ONLY`);
  return mode;
}

/** Istio's default connectTimeout. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Reads the mesh config. `fileText` undefined means the file does not exist: the default mesh
 * (Istio's behaviour); a file that does not parse is an error naming the file and the field.
 */
export function loadMeshConfig(path: string, fileText: string | undefined, proxyConfigEnv: string): MeshConfig {
  const doc = fileText === undefined ? {} : parseDoc(fileText, path);
  const dc = doc['defaultConfig'] ?? {};
  if (typeof dc !== 'object' || dc === null || Array.isArray(dc)) throw bad(path, 'defaultConfig', 'expected a mapping');
  let proxy = proxyConfigOf(dc as Doc, path, 'defaultConfig.', DEFAULT_PROXY_CONFIG);
  const warnings = unreadMeshKeys(doc);
  if (proxyConfigEnv.trim() !== '') {
    const envDoc = parseDoc(proxyConfigEnv, 'PROXY_CONFIG');
    proxy = proxyConfigOf(envDoc, 'PROXY_CONFIG', '', proxy);
    warnings.push(...unreadProxyKeys(envDoc, 'PROXY_CONFIG.'));
  }
  let extAuthzProviders: readonly ExtAuthzProvider[];
  try {
    const read = readExtAuthzProviders(doc['extensionProviders']);
    extAuthzProviders = read.providers;
    warnings.push(...read.warnings);
  } catch (err) {
    if (err instanceof ProviderFieldError) throw bad(path, err.field, err.message.slice(err.field.length + 2));
    throw err;
  }
  const sources = doc['configSources'] ?? [];
  if (!Array.isArray(sources)) throw bad(path, 'configSources', 'expected a list of {address: fs://DIR}');
  const configSources = sources.map((s: unknown, i) => {
    const address = (s as Doc | null)?.['address'];
    if (typeof address !== 'string') throw bad(path, `configSources[${i}].address`, 'expected a string such as fs://./etc/mesh/resources');
    return address;
  });
  const accessLogFile = doc['accessLogFile'];
  if (accessLogFile !== undefined && typeof accessLogFile !== 'string') throw bad(path, 'accessLogFile', 'expected a path such as /dev/stdout, or "" for none');
  const encoding = doc['accessLogEncoding'] ?? 'TEXT';
  if (encoding !== 'TEXT' && encoding !== 'JSON') throw bad(path, 'accessLogEncoding', `${JSON.stringify(encoding)} is not TEXT or JSON`);
  const accessLogFormat = doc['accessLogFormat'];
  if (accessLogFormat !== undefined) {
    if (typeof accessLogFormat !== 'string') throw bad(path, 'accessLogFormat', 'expected a string (with accessLogEncoding JSON, the text of a JSON object)');
    try {
      compileAccessLogFormat(encoding, accessLogFormat);
    } catch (err) {
      if (err instanceof AccessLogFormatError) throw bad(path, 'accessLogFormat', err.message);
      throw err;
    }
  }
  return {
    source: fileText === undefined ? 'defaults' : path, defaultConfig: proxy, configSources, raw: doc, warnings,
    ...(accessLogFile !== undefined ? { accessLogFile } : {}), accessLogEncoding: encoding,
    ...(accessLogFormat !== undefined ? { accessLogFormat } : {}),
    pathNormalization: pathNormalizationOf(doc, path),
    ...autoMtlsOf(doc, path),
    connectTimeoutMs: connectTimeoutOf(doc, path),
    outboundTrafficPolicy: outboundTrafficPolicyOf(doc, path),
    localityLbSetting: localityLbSettingOf(doc, path, warnings),
    defaultAccessLog: defaultProvidersOf(doc, path, warnings),
    extAuthzProviders,
  };
}

/**
 * `defaultProviders`: which providers the Telemetry kinds use when none is named. Access logging by
 * `envoy` is honoured (the return value); Prometheus metrics are what this agent always does; other
 * providers, and tracing, are named in a warning (nothing here can send to them).
 */
function defaultProvidersOf(doc: Doc, path: string, warnings: string[]): boolean {
  const dp = doc['defaultProviders'];
  if (dp === undefined || dp === null) return false;
  if (typeof dp !== 'object' || Array.isArray(dp)) throw bad(path, 'defaultProviders', 'expected a mapping such as {accessLogging: [envoy]}');
  const names = (key: string): string[] => {
    const v = (dp as Doc)[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || v.some((n) => typeof n !== 'string')) throw bad(path, `defaultProviders.${key}`, 'expected a list of provider names');
    return v as string[];
  };
  let accessLog = false;
  for (const name of names('accessLogging')) {
    if (name === 'envoy') accessLog = true;
    else warnings.push(`meshConfig.defaultProviders.accessLogging: ${JSON.stringify(name)} is not used: this agent's one access log provider is envoy (stdout, the mesh config's format)`);
  }
  for (const name of names('metrics')) {
    if (name !== 'prometheus') warnings.push(`meshConfig.defaultProviders.metrics: ${JSON.stringify(name)} is not used: metrics are Prometheus's, on 15090 and 15020`);
  }
  if (names('tracing').length > 0) warnings.push('meshConfig.defaultProviders.tracing: not used: no traces are made or sent by this agent');
  for (const key of Object.keys(dp)) {
    if (key !== 'accessLogging' && key !== 'metrics' && key !== 'tracing') warnings.push(`meshConfig.defaultProviders.${key}: unknown field, not used (known: accessLogging, metrics, tracing)`);
  }
  return accessLog;
}

/** Istio's default: enabled, nothing else (failover by locality where outlierDetection is set). */
export const DEFAULT_LOCALITY_LB_SETTING: LocalityLbSetting = Object.freeze({ enabled: true, distribute: [], failover: [], failoverPriority: [] });

// Istio validates the mesh's setting as if outlier detection were present (it applies to many rules).
function localityLbSettingOf(doc: Doc, path: string, warnings: string[]): LocalityLbSetting {
  if (doc['localityLbSetting'] === undefined || doc['localityLbSetting'] === null) return DEFAULT_LOCALITY_LB_SETTING;
  try {
    return parseLocalityLbSetting(doc['localityLbSetting'], 'localityLbSetting', (field, message) => warnings.push(`meshConfig.${field}: ${message}`), true);
  } catch (err) {
    if (err instanceof FieldError) throw bad(path, err.field, err.message);
    throw err;
  }
}
