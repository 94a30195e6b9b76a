// A DestinationRule's `trafficPolicy` (the rule's, each port's, each subset's): load balancer,
// connection pool, outlier detection and TLS, checked as Istio's validation checks them. What Istio
// would refuse is refused here; what it will only honour in a later version of this agent
// (tunnels, PROXY headers) is refused as "not
// supported yet". Values keep their presence: how a subset's policy overrides the rule's, and which
// defaults apply, depends on what was written (src/traffic/clusters.ts merges and fills in).
import type {
  ConnectionPoolSettings, ConsistentHashKey, LoadBalancerSettings, OutlierDetectionSettings, PolicySettings, PortTrafficPolicy,
  RetryBudgetSettings, SimpleLb, TrafficPolicy, WarmupSettings,
} from './types.js';
import { parseClientTls } from './client-tls.js';
import { parseLocalityLbSetting } from './locality-lb-setting.js';
import {
  checkFields, child, duration, FieldError, INT32_MAX, int, item, obj, oneOf, optBool, optDuration, optInt, optList, optObj, show, str, UINT32_MAX,
  type Warn,
} from './fields.js';
import { checkHeaderName } from './names.js';

/** What each field refused as "not supported yet" would do. */
const LATER = {
  tunnel: 'tunnelling connections through a proxy (CONNECT or POST)',
  proxyProtocol: 'sending a PROXY protocol header to the upstream',
  budgetInterval: 'a retry budget over an interval of past requests (the budget counts the requests in flight)',
  attributes: 'attributes of the generated cookie',
} as const;

const SIMPLE_NAMES = ['UNSPECIFIED', 'LEAST_CONN', 'RANDOM', 'PASSTHROUGH', 'ROUND_ROBIN', 'LEAST_REQUEST'] as const;
const HASH_KEYS = ['httpHeaderName', 'httpCookie', 'useSourceIp', 'httpQueryParameterName'] as const;
/** Envoy's bound on a ring's minimum size (a larger one is refused by Envoy, so by Istio's proxies). */
const MAX_RING_SIZE = 8_388_608;
/** Istio's bound on a Maglev table (its validation refuses 5000011 and above). */
const MAGLEV_TABLE_LIMIT = 5_000_011;
/** Envoy's default ring size, which Istio keeps when none is given. */
export const DEFAULT_MINIMUM_RING_SIZE = 1024;

/** Envoy's primality test, which Istio's validation uses for Maglev table sizes (1, 2 and 3 pass). */
export function isPrime(x: number): boolean {
  if (x !== 0 && x < 4) return true;
  if (x % 2 === 0) return false;
  const limit = Math.floor(Math.sqrt(x));
  for (let f = 3; f <= limit; f += 2) if (x % f === 0) return false;
  return true;
}

function parseHashKey(o: Readonly<Record<string, unknown>>, field: string): ConsistentHashKey {
  const given = HASH_KEYS.filter((k) => o[k] !== undefined);
  if (given.length === 0) {
    throw new FieldError(field, `needs a hash key: one of ${HASH_KEYS.join(', ')} (without one, every request would hash at random)`);
  }
  if (given.length > 1) throw new FieldError(child(field, given[1]!), `takes only one hash key, got ${given.join(' and ')}`);
  const key = given[0]!;
  const at = child(field, key);
  switch (key) {
    case 'httpHeaderName':
      return { kind: 'header', name: checkHeaderName(str(o[key], at, { nonEmpty: true }), at).toLowerCase() };
    case 'httpQueryParameterName':
      return { kind: 'queryParameter', name: str(o[key], at, { nonEmpty: true }) };
    case 'useSourceIp':
      if (optBool(o[key], at) !== true) throw new FieldError(at, 'must be true when given (false hashes nothing); give another hash key instead');
      return { kind: 'sourceIp' };
    case 'httpCookie': {
      const c = obj(o[key], at);
      checkFields(c, at, { supported: ['name', 'path', 'ttl'], pending: { attributes: LATER.attributes } });
      // Istio's validation: a cookie needs its name.
      const name = str(c['name'], child(at, 'name'), { nonEmpty: true });
      const path = c['path'] === undefined ? undefined : str(c['path'], child(at, 'path'));
      const ttlMs = optDuration(c['ttl'], child(at, 'ttl'), { zero: true });
      return { kind: 'cookie', name, ...(path !== undefined ? { path } : {}), ...(ttlMs !== undefined ? { ttlMs } : {}) };
    }
  }
}

function parseConsistentHash(raw: unknown, field: string, warn: Warn): LoadBalancerSettings {
  const o = obj(raw, field);
  checkFields(o, field, { supported: [...HASH_KEYS, 'ringHash', 'maglev', 'minimumRingSize'] });
  const key = parseHashKey(o, field);
  if (o['ringHash'] !== undefined && o['maglev'] !== undefined) throw new FieldError(child(field, 'maglev'), 'give either ringHash or maglev, not both');
  const deprecated = optInt(o['minimumRingSize'], child(field, 'minimumRingSize'), 0, MAX_RING_SIZE);
  if (deprecated !== undefined && deprecated !== 0) {
    if (o['ringHash'] !== undefined || o['maglev'] !== undefined) {
      throw new FieldError(child(field, 'minimumRingSize'), 'cannot be given with ringHash or maglev (Istio\'s rule); use ringHash.minimumRingSize');
    }
    warn(child(field, 'minimumRingSize'), 'is deprecated (Istio still honours it); use ringHash.minimumRingSize');
  }
  if (o['maglev'] !== undefined) {
    const at = child(field, 'maglev');
    const m = obj(o['maglev'], at);
    checkFields(m, at, { supported: ['tableSize'] });
    const sizeAt = child(at, 'tableSize');
    if (m['tableSize'] === undefined || m['tableSize'] === 0) throw new FieldError(sizeAt, 'required for maglev (a prime number below 5000011, such as 65537)');
    const tableSize = int(m['tableSize'], sizeAt, 1, MAGLEV_TABLE_LIMIT - 1);
    if (!isPrime(tableSize)) throw new FieldError(sizeAt, `${tableSize} is not a prime number, which Istio requires for a Maglev table (65537 is Envoy's default)`);
    return { kind: 'consistentHash', key, table: { kind: 'maglev', tableSize } };
  }
  let size = deprecated !== undefined && deprecated !== 0 ? deprecated : DEFAULT_MINIMUM_RING_SIZE;
  if (o['ringHash'] !== undefined) {
    const at = child(field, 'ringHash');
    const r = obj(o['ringHash'], at);
    checkFields(r, at, { supported: ['minimumRingSize'] });
    const given = optInt(r['minimumRingSize'], child(at, 'minimumRingSize'), 0, MAX_RING_SIZE);
    size = given === undefined || given === 0 ? DEFAULT_MINIMUM_RING_SIZE : given;
  }
  return { kind: 'consistentHash', key, table: { kind: 'ringHash', minimumRingSize: size } };
}

/** Envoy's slow start defaults, which Istio keeps unless `warmup` says. */
export const WARMUP_DEFAULTS = Object.freeze({ minimumPercent: 10, aggression: 1 });

// `warmup` or the deprecated `warmupDurationSecs` (Istio accepts either, not both).
function parseWarmup(o: Readonly<Record<string, unknown>>, field: string, warn: Warn): WarmupSettings | undefined {
  if (o['warmup'] !== undefined && o['warmupDurationSecs'] !== undefined) {
    throw new FieldError(child(field, 'warmupDurationSecs'), 'cannot be given with warmup (Istio\'s rule); use warmup.duration');
  }
  if (o['warmupDurationSecs'] !== undefined) {
    const durationMs = duration(o['warmupDurationSecs'], child(field, 'warmupDurationSecs'));
    warn(child(field, 'warmupDurationSecs'), 'is deprecated (Istio still honours it, and so does this agent); use warmup.duration');
    return { durationMs, ...WARMUP_DEFAULTS };
  }
  if (o['warmup'] === undefined) return undefined;
  const at = child(field, 'warmup');
  const w = obj(o['warmup'], at);
  checkFields(w, at, { supported: ['duration', 'minimumPercent', 'aggression'] });
  const durationMs = duration(w['duration'], child(at, 'duration'));
  const number = (k: string, min: number, max: number, def: number): number => {
    const v = w[k];
    if (v === undefined) return def;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
      throw new FieldError(child(at, k), `${show(v)}: expected a number from ${min}${max === Infinity ? ' up' : ` to ${max}`}`);
    }
    return v;
  };
  return {
    durationMs,
    minimumPercent: number('minimumPercent', 0, 100, WARMUP_DEFAULTS.minimumPercent),
    aggression: number('aggression', 1, Infinity, WARMUP_DEFAULTS.aggression),
  };
}

/** `outlierDetection`: the same policy has one (locality failover needs it). */
export function parseLoadBalancer(raw: unknown, field: string, warn: Warn, outlierDetection = false): LoadBalancerSettings {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['simple', 'consistentHash', 'localityLbSetting', 'warmup', 'warmupDurationSecs'],
  }, warn);
  if (o['simple'] !== undefined && o['consistentHash'] !== undefined) {
    throw new FieldError(child(field, 'consistentHash'), 'give either simple or consistentHash, not both');
  }
  const locality = o['localityLbSetting'] === undefined ? undefined
    : parseLocalityLbSetting(o['localityLbSetting'], child(field, 'localityLbSetting'), warn, outlierDetection);
  const warmup = parseWarmup(o, field, warn);
  const withLocality = { ...(locality !== undefined ? { locality } : {}), ...(warmup !== undefined ? { warmup } : {}) };
  const warnNoSlowStart = (kind: string): void => {
    if (warmup !== undefined) warn(child(field, o['warmup'] !== undefined ? 'warmup' : 'warmupDurationSecs'), `has no effect with ${kind}: Envoy ramps up new endpoints only under ROUND_ROBIN and LEAST_REQUEST (Istio sets it on those alone)`);
  };
  if (o['consistentHash'] !== undefined) {
    warnNoSlowStart('a consistent hash');
    return { ...parseConsistentHash(o['consistentHash'], child(field, 'consistentHash'), warn), ...withLocality };
  }
  if (o['simple'] === undefined) return { kind: 'simple', simple: 'LEAST_REQUEST', ...withLocality };
  const name = oneOf(o['simple'], child(field, 'simple'), SIMPLE_NAMES);
  if (name === 'LEAST_CONN') warn(child(field, 'simple'), 'LEAST_CONN is deprecated; Istio reads it as LEAST_REQUEST, and so does this agent');
  const simple: SimpleLb = name === 'UNSPECIFIED' || name === 'LEAST_CONN' ? 'LEAST_REQUEST' : name;
  if (simple === 'RANDOM' || simple === 'PASSTHROUGH') warnNoSlowStart(simple);
  return { kind: 'simple', simple, ...withLocality };
}

const nonNegative = (o: Readonly<Record<string, unknown>>, key: string, at: string, max = INT32_MAX): number | undefined =>
  optInt(o[key], child(at, key), 0, max);

export function parseConnectionPool(raw: unknown, field: string): ConnectionPoolSettings {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['tcp', 'http'] });
  if (o['tcp'] === undefined && o['http'] === undefined) throw new FieldError(field, 'needs tcp or http (Istio refuses an empty connection pool)');
  let tcp: ConnectionPoolSettings['tcp'];
  let http: ConnectionPoolSettings['http'];
  if (o['tcp'] !== undefined) {
    const at = child(field, 'tcp');
    const t = obj(o['tcp'], at);
    checkFields(t, at, { supported: ['maxConnections', 'connectTimeout', 'tcpKeepalive', 'maxConnectionDuration', 'idleTimeout'] });
    let tcpKeepalive: NonNullable<ConnectionPoolSettings['tcp']>['tcpKeepalive'];
    const ka = optObj(t['tcpKeepalive'], child(at, 'tcpKeepalive'));
    if (ka !== undefined) {
      const kaAt = child(at, 'tcpKeepalive');
      checkFields(ka, kaAt, { supported: ['probes', 'time', 'interval'] });
      const probes = nonNegative(ka, 'probes', kaAt, UINT32_MAX);
      const timeMs = optDuration(ka['time'], child(kaAt, 'time'));
      const intervalMs = optDuration(ka['interval'], child(kaAt, 'interval'));
      tcpKeepalive = {
        ...(probes !== undefined ? { probes } : {}), ...(timeMs !== undefined ? { timeMs } : {}), ...(intervalMs !== undefined ? { intervalMs } : {}),
      };
    }
    const maxConnections = nonNegative(t, 'maxConnections', at);
    const connectTimeoutMs = optDuration(t['connectTimeout'], child(at, 'connectTimeout'));
    const maxConnectionDurationMs = optDuration(t['maxConnectionDuration'], child(at, 'maxConnectionDuration'));
    const idleTimeoutMs = optDuration(t['idleTimeout'], child(at, 'idleTimeout'));
    tcp = {
      ...(maxConnections !== undefined ? { maxConnections } : {}),
      ...(connectTimeoutMs !== undefined ? { connectTimeoutMs } : {}),
      ...(tcpKeepalive !== undefined ? { tcpKeepalive } : {}),
      ...(maxConnectionDurationMs !== undefined ? { maxConnectionDurationMs } : {}),
      ...(idleTimeoutMs !== undefined ? { idleTimeoutMs } : {}),
    };
  }
  if (o['http'] !== undefined) {
    const at = child(field, 'http');
    const h = obj(o['http'], at);
    checkFields(h, at, {
      supported: ['http1MaxPendingRequests', 'http2MaxRequests', 'maxRequestsPerConnection', 'maxRetries', 'idleTimeout', 'h2UpgradePolicy',
        'useClientProtocol', 'maxConcurrentStreams'],
    });
    const h2UpgradePolicy = h['h2UpgradePolicy'] === undefined ? undefined
      : oneOf(h['h2UpgradePolicy'], child(at, 'h2UpgradePolicy'), ['DEFAULT', 'DO_NOT_UPGRADE', 'UPGRADE'] as const);
    const useClientProtocol = optBool(h['useClientProtocol'], child(at, 'useClientProtocol'));
    if (h2UpgradePolicy === 'UPGRADE' && useClientProtocol === true) {
      throw new FieldError(child(at, 'useClientProtocol'), 'cannot be true with h2UpgradePolicy UPGRADE (Istio\'s rule)');
    }
    // The upstream's protocol: HTTP/1.1 for a port declared HTTP unless useClientProtocol (Istio's
    // rule, src/traffic/clusters.ts), the client's otherwise; never upgraded, so DEFAULT (the mesh's
    // DO_NOT_UPGRADE) and DO_NOT_UPGRADE are what happens. An HTTP/1.1 client of a port declared
    // HTTP2 or GRPC stays HTTP/1.1: the ServiceEntry warns at load.
    if (h2UpgradePolicy === 'UPGRADE') {
      throw new FieldError(child(at, 'h2UpgradePolicy'),
        'UPGRADE is not supported yet: sending HTTP/1.1 requests to the upstream as HTTP/2 (DEFAULT and DO_NOT_UPGRADE are accepted)');
    }
    const values = {
      http1MaxPendingRequests: nonNegative(h, 'http1MaxPendingRequests', at),
      http2MaxRequests: nonNegative(h, 'http2MaxRequests', at),
      maxRequestsPerConnection: nonNegative(h, 'maxRequestsPerConnection', at),
      maxRetries: nonNegative(h, 'maxRetries', at),
      idleTimeoutMs: optDuration(h['idleTimeout'], child(at, 'idleTimeout')),
      h2UpgradePolicy,
      useClientProtocol,
      maxConcurrentStreams: nonNegative(h, 'maxConcurrentStreams', at),
    };
    http = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as ConnectionPoolSettings['http'];
  }
  return { ...(tcp !== undefined ? { tcp } : {}), ...(http !== undefined ? { http } : {}) };
}

export function parseOutlierDetection(raw: unknown, field: string, warn: Warn): OutlierDetectionSettings {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['consecutive5xxErrors', 'consecutiveGatewayErrors', 'consecutiveLocalOriginFailures', 'splitExternalLocalOriginErrors', 'interval',
      'baseEjectionTime', 'maxEjectionPercent', 'minHealthPercent'],
    istioIgnores: { consecutiveErrors: 'is deprecated and Istio ignores it; use consecutive5xxErrors or consecutiveGatewayErrors' },
  }, warn);
  if (o['consecutiveErrors'] !== undefined) optInt(o['consecutiveErrors'], child(field, 'consecutiveErrors'), 0, INT32_MAX);
  const splitExternalLocalOriginErrors = optBool(o['splitExternalLocalOriginErrors'], child(field, 'splitExternalLocalOriginErrors')) ?? false;
  const consecutiveLocalOriginFailures = nonNegative(o, 'consecutiveLocalOriginFailures', field, UINT32_MAX);
  if (!splitExternalLocalOriginErrors && (consecutiveLocalOriginFailures ?? 0) > 0) {
    throw new FieldError(child(field, 'consecutiveLocalOriginFailures'), 'needs splitExternalLocalOriginErrors: true (Istio\'s rule)');
  }
  const values = {
    consecutive5xxErrors: nonNegative(o, 'consecutive5xxErrors', field, UINT32_MAX),
    consecutiveGatewayErrors: nonNegative(o, 'consecutiveGatewayErrors', field, UINT32_MAX),
    consecutiveLocalOriginFailures,
    intervalMs: optDuration(o['interval'], child(field, 'interval')),
    baseEjectionTimeMs: optDuration(o['baseEjectionTime'], child(field, 'baseEjectionTime')),
    maxEjectionPercent: optInt(o['maxEjectionPercent'], child(field, 'maxEjectionPercent'), 0, 100),
    minHealthPercent: optInt(o['minHealthPercent'], child(field, 'minHealthPercent'), 0, 100),
  };
  const set = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
  return { ...set, splitExternalLocalOriginErrors } as OutlierDetectionSettings;
}

const SETTINGS = ['loadBalancer', 'connectionPool', 'outlierDetection', 'tls'] as const;

function parseSettings(o: Readonly<Record<string, unknown>>, field: string, warn: Warn): PolicySettings {
  const loadBalancer = o['loadBalancer'] === undefined ? undefined
    : parseLoadBalancer(o['loadBalancer'], child(field, 'loadBalancer'), warn, o['outlierDetection'] !== undefined);
  const connectionPool = o['connectionPool'] === undefined ? undefined : parseConnectionPool(o['connectionPool'], child(field, 'connectionPool'));
  const outlierDetection = o['outlierDetection'] === undefined ? undefined
    : parseOutlierDetection(o['outlierDetection'], child(field, 'outlierDetection'), warn);
  const tls = o['tls'] === undefined ? undefined : parseClientTls(o['tls'], child(field, 'tls'));
  return {
    ...(loadBalancer !== undefined ? { loadBalancer } : {}),
    ...(connectionPool !== undefined ? { connectionPool } : {}),
    ...(outlierDetection !== undefined ? { outlierDetection } : {}),
    ...(tls !== undefined ? { tls } : {}),
  };
}

function parsePortLevelSettings(raw: unknown, field: string, warn: Warn): PortTrafficPolicy[] {
  const seen = new Set<number>();
  return optList(raw, field).map((p, i) => {
    const at = item(field, i);
    const o = obj(p, at);
    checkFields(o, at, { supported: ['port', ...SETTINGS] }, warn);
    const portField = child(at, 'port');
    const po = obj(o['port'], portField);
    checkFields(po, portField, { supported: ['number'] });
    const port = int(po['number'], child(portField, 'number'), 1, 65535);
    // Two settings for one port: which one applies would be a guess.
    if (seen.has(port)) throw new FieldError(child(portField, 'number'), `port ${port} already has a setting earlier in ${field}`);
    seen.add(port);
    if (!SETTINGS.some((k) => o[k] !== undefined)) {
      throw new FieldError(at, `needs at least one of ${SETTINGS.join(', ')} (Istio refuses an empty port setting)`);
    }
    return { port, ...parseSettings(o, at, warn) };
  });
}

/** A `trafficPolicy` (the rule's or a subset's); undefined when absent. */
export function parseTrafficPolicy(raw: unknown, field: string, warn: Warn): TrafficPolicy | undefined {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, {
    supported: [...SETTINGS, 'portLevelSettings', 'retryBudget'],
    pending: { tunnel: LATER.tunnel, proxyProtocol: LATER.proxyProtocol },
  }, warn);
  const retryBudget = parseRetryBudget(o['retryBudget'], child(field, 'retryBudget'));
  const portLevel = optList(o['portLevelSettings'], child(field, 'portLevelSettings'));
  if (!SETTINGS.some((k) => o[k] !== undefined) && portLevel.length === 0 && retryBudget === undefined) {
    throw new FieldError(field, `needs at least one of ${[...SETTINGS, 'portLevelSettings', 'retryBudget'].join(', ')} (Istio refuses an empty traffic policy; leave it out instead)`);
  }
  return {
    ...parseSettings(o, field, warn), portLevelSettings: parsePortLevelSettings(o['portLevelSettings'], child(field, 'portLevelSettings'), warn),
    ...(retryBudget !== undefined ? { retryBudget } : {}),
  };
}

/** Istio's RetryBudget: `percent` of the requests in flight (a number from 0 to 100), `minRetryConcurrency` (uint32). */
function parseRetryBudget(raw: unknown, field: string): RetryBudgetSettings | undefined {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['percent', 'minRetryConcurrency'], pending: { budgetInterval: LATER.budgetInterval } });
  const p = o['percent'];
  if (p !== undefined && (typeof p !== 'number' || !Number.isFinite(p) || p < 0 || p > 100)) {
    throw new FieldError(child(field, 'percent'), `${JSON.stringify(p)}: expected a number from 0 to 100 (a percentage of the requests in flight)`);
  }
  const minRetryConcurrency = optInt(o['minRetryConcurrency'], child(field, 'minRetryConcurrency'), 0, UINT32_MAX);
  return { ...(p !== undefined ? { percent: p as number } : {}), ...(minRetryConcurrency !== undefined ? { minRetryConcurrency } : {}) };
}
