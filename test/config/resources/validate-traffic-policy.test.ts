// DestinationRule traffic policies (load balancer, connection pool, outlier detection) as Istio's
// validation reads them: a table of one field written under `trafficPolicy` → the typed value, or
// the rejection (field path and message), or the warning.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DestinationRule, TrafficPolicy } from '../../../src/config/resources/types.js';
import { isPrime } from '../../../src/config/resources/validate-traffic-policy.js';
import { acceptWarned, assertRejections, indent } from './helpers.js';

/** A rule for db.example.com whose trafficPolicy is `policy` (YAML block). */
const withPolicy = (policy: string): string => `apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: db, namespace: team-a}
spec:
  host: db.example.com
  trafficPolicy:
${indent(policy, 4)}
`;
/** The same policy under a subset and under a port-level setting, to show every level is checked alike. */
const inSubset = (policy: string): string => `apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: db, namespace: team-a}
spec:
  host: db.example.com
  subsets:
  - name: v1
    trafficPolicy:
${indent(policy, 6)}
`;
const atPort = (policy: string): string => withPolicy(`portLevelSettings:\n- port: {number: 80}\n${indent(policy, 2)}`);

function policyOf(yaml: string): { policy: TrafficPolicy; warnings: string[] } {
  const { value, warnings } = acceptWarned(yaml);
  const rule = value.resource as DestinationRule;
  assert.ok(rule.trafficPolicy);
  return { policy: rule.trafficPolicy, warnings };
}

describe('loadBalancer', () => {
  const cases: { name: string; yaml: string; want: unknown; warning?: RegExp }[] = [
    { name: '{} is Istio\'s default', yaml: 'loadBalancer: {}', want: { kind: 'simple', simple: 'LEAST_REQUEST' } },
    { name: 'UNSPECIFIED is the default', yaml: 'loadBalancer: {simple: UNSPECIFIED}', want: { kind: 'simple', simple: 'LEAST_REQUEST' } },
    { name: 'LEAST_CONN is the deprecated LEAST_REQUEST', yaml: 'loadBalancer: {simple: LEAST_CONN}', want: { kind: 'simple', simple: 'LEAST_REQUEST' },
      warning: /^spec\.trafficPolicy\.loadBalancer\.simple: LEAST_CONN is deprecated; Istio reads it as LEAST_REQUEST/ },
    { name: 'ROUND_ROBIN', yaml: 'loadBalancer: {simple: ROUND_ROBIN}', want: { kind: 'simple', simple: 'ROUND_ROBIN' } },
    { name: 'RANDOM', yaml: 'loadBalancer: {simple: RANDOM}', want: { kind: 'simple', simple: 'RANDOM' } },
    { name: 'PASSTHROUGH', yaml: 'loadBalancer: {simple: PASSTHROUGH}', want: { kind: 'simple', simple: 'PASSTHROUGH' } },
    { name: 'a header, lower-cased, default ring', yaml: 'loadBalancer: {consistentHash: {httpHeaderName: X-User}}',
      want: { kind: 'consistentHash', key: { kind: 'header', name: 'x-user' }, table: { kind: 'ringHash', minimumRingSize: 1024 } } },
    { name: 'a cookie with path and ttl', yaml: 'loadBalancer: {consistentHash: {httpCookie: {name: user, path: /, ttl: 10s}}}',
      want: { kind: 'consistentHash', key: { kind: 'cookie', name: 'user', path: '/', ttlMs: 10_000 }, table: { kind: 'ringHash', minimumRingSize: 1024 } } },
    { name: 'a session cookie (ttl 0s)', yaml: 'loadBalancer: {consistentHash: {httpCookie: {name: s, ttl: 0s}}}',
      want: { kind: 'consistentHash', key: { kind: 'cookie', name: 's', ttlMs: 0 }, table: { kind: 'ringHash', minimumRingSize: 1024 } } },
    { name: 'the source IP', yaml: 'loadBalancer: {consistentHash: {useSourceIp: true, ringHash: {minimumRingSize: 4096}}}',
      want: { kind: 'consistentHash', key: { kind: 'sourceIp' }, table: { kind: 'ringHash', minimumRingSize: 4096 } } },
    { name: 'a query parameter on maglev', yaml: 'loadBalancer: {consistentHash: {httpQueryParameterName: u, maglev: {tableSize: 65537}}}',
      want: { kind: 'consistentHash', key: { kind: 'queryParameter', name: 'u' }, table: { kind: 'maglev', tableSize: 65537 } } },
    { name: 'the deprecated minimumRingSize', yaml: 'loadBalancer: {consistentHash: {httpHeaderName: x, minimumRingSize: 2048}}',
      want: { kind: 'consistentHash', key: { kind: 'header', name: 'x' }, table: { kind: 'ringHash', minimumRingSize: 2048 } },
      warning: /minimumRingSize: is deprecated/ },
    { name: 'ringHash.minimumRingSize 0 is Envoy\'s 1024', yaml: 'loadBalancer: {consistentHash: {httpHeaderName: x, ringHash: {minimumRingSize: 0}}}',
      want: { kind: 'consistentHash', key: { kind: 'header', name: 'x' }, table: { kind: 'ringHash', minimumRingSize: 1024 } } },
    { name: 'warmup', yaml: 'loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 60s, minimumPercent: 5, aggression: 2}}',
      want: { kind: 'simple', simple: 'ROUND_ROBIN', warmup: { durationMs: 60_000, minimumPercent: 5, aggression: 2 } } },
    { name: 'warmupDurationSecs (deprecated) with Envoy\'s defaults', yaml: 'loadBalancer: {warmupDurationSecs: 30s}',
      want: { kind: 'simple', simple: 'LEAST_REQUEST', warmup: { durationMs: 30_000, minimumPercent: 10, aggression: 1 } }, warning: /warmupDurationSecs: is deprecated/ },
    { name: 'warmup under RANDOM: no effect (Envoy ramps only ROUND_ROBIN and LEAST_REQUEST)', yaml: 'loadBalancer: {simple: RANDOM, warmup: {duration: 60s}}',
      want: { kind: 'simple', simple: 'RANDOM', warmup: { durationMs: 60_000, minimumPercent: 10, aggression: 1 } }, warning: /warmup: has no effect with RANDOM/ },
    { name: 'localityLbSetting with distribute', yaml: 'loadBalancer: {simple: ROUND_ROBIN, localityLbSetting: {distribute: [{from: us-east/*, to: {us-east/a: 80, us-west/*: 20}}]}}',
      want: { kind: 'simple', simple: 'ROUND_ROBIN', locality: { distribute: [{ from: 'us-east/*', to: [{ locality: 'us-east/a', weight: 80 }, { locality: 'us-west/*', weight: 20 }] }], failover: [], failoverPriority: [] } } },
    { name: 'localityLbSetting off', yaml: 'loadBalancer: {localityLbSetting: {enabled: false}}',
      want: { kind: 'simple', simple: 'LEAST_REQUEST', locality: { enabled: false, distribute: [], failover: [], failoverPriority: [] } } },
    { name: 'failover without outlierDetection is warned about (Istio does)', yaml: 'loadBalancer: {localityLbSetting: {failover: [{from: us-east, to: eu-west}], failoverPriority: [version]}}',
      want: { kind: 'simple', simple: 'LEAST_REQUEST', locality: { distribute: [], failover: [{ from: 'us-east', to: 'eu-west' }], failoverPriority: ['version'] } },
      warning: /localityLbSetting\.failover: has no effect without outlierDetection/ },
  ];
  it('reads each algorithm with Istio\'s defaults', () => {
    for (const c of cases) {
      for (const [level, yaml, get] of [
        ['rule', withPolicy(c.yaml), (p: TrafficPolicy) => p.loadBalancer],
        ['port', atPort(c.yaml), (p: TrafficPolicy) => p.portLevelSettings[0]!.loadBalancer],
      ] as const) {
        const { policy, warnings } = policyOf(yaml);
        assert.deepEqual(get(policy), c.want, `${c.name} (${level})`);
        if (c.warning && level === 'rule') assert.ok(warnings.some((w) => c.warning!.test(w)), `${c.name}: ${warnings.join('; ')}`);
        if (!c.warning) assert.deepEqual(warnings, [], c.name);
      }
    }
  });
  it('refuses what Istio refuses, and what is not supported yet', () => {
    const at = 'spec.trafficPolicy.loadBalancer';
    assertRejections([
      { name: 'unknown simple', yaml: withPolicy('loadBalancer: {simple: LEAST}'), field: `${at}.simple`, message: /"LEAST" is not one of UNSPECIFIED, LEAST_CONN, RANDOM, PASSTHROUGH, ROUND_ROBIN, LEAST_REQUEST/ },
      { name: 'simple and consistentHash', yaml: withPolicy('loadBalancer: {simple: RANDOM, consistentHash: {useSourceIp: true}}'), field: `${at}.consistentHash`, message: /either simple or consistentHash/ },
      { name: 'no hash key', yaml: withPolicy('loadBalancer: {consistentHash: {ringHash: {minimumRingSize: 10}}}'), field: `${at}.consistentHash`, message: /needs a hash key: one of httpHeaderName, httpCookie, useSourceIp, httpQueryParameterName/ },
      { name: 'two hash keys', yaml: withPolicy('loadBalancer: {consistentHash: {httpHeaderName: a, useSourceIp: true}}'), field: `${at}.consistentHash.useSourceIp`, message: /only one hash key, got httpHeaderName and useSourceIp/ },
      { name: 'useSourceIp false', yaml: withPolicy('loadBalancer: {consistentHash: {useSourceIp: false}}'), field: `${at}.consistentHash.useSourceIp`, message: /must be true/ },
      { name: 'bad header name', yaml: withPolicy('loadBalancer: {consistentHash: {httpHeaderName: "a b"}}'), field: `${at}.consistentHash.httpHeaderName`, message: /not a valid HTTP header name/ },
      { name: 'cookie without name', yaml: withPolicy('loadBalancer: {consistentHash: {httpCookie: {ttl: 1s}}}'), field: `${at}.consistentHash.httpCookie.name`, message: /required/ },
      { name: 'negative cookie ttl', yaml: withPolicy('loadBalancer: {consistentHash: {httpCookie: {name: a, ttl: -1s}}}'), field: `${at}.consistentHash.httpCookie.ttl`, message: /is negative/ },
      { name: 'cookie attributes', yaml: withPolicy('loadBalancer: {consistentHash: {httpCookie: {name: a, attributes: [{name: SameSite, value: Strict}]}}}'), field: `${at}.consistentHash.httpCookie.attributes`, message: /^is not supported yet: attributes of the generated cookie$/ },
      { name: 'ringHash and maglev', yaml: withPolicy('loadBalancer: {consistentHash: {useSourceIp: true, ringHash: {}, maglev: {tableSize: 3}}}'), field: `${at}.consistentHash.maglev`, message: /either ringHash or maglev/ },
      { name: 'deprecated size with ringHash', yaml: withPolicy('loadBalancer: {consistentHash: {useSourceIp: true, minimumRingSize: 5, ringHash: {}}}'), field: `${at}.consistentHash.minimumRingSize`, message: /cannot be given with ringHash or maglev/ },
      { name: 'maglev without a table size', yaml: withPolicy('loadBalancer: {consistentHash: {useSourceIp: true, maglev: {}}}'), field: `${at}.consistentHash.maglev.tableSize`, message: /required for maglev/ },
      { name: 'maglev table not prime', yaml: withPolicy('loadBalancer: {consistentHash: {useSourceIp: true, maglev: {tableSize: 65536}}}'), field: `${at}.consistentHash.maglev.tableSize`, message: /65536 is not a prime number/ },
      { name: 'maglev table too large', yaml: withPolicy('loadBalancer: {consistentHash: {useSourceIp: true, maglev: {tableSize: 5000011}}}'), field: `${at}.consistentHash.maglev.tableSize`, message: /from 1 to 5000010/ },
      { name: 'ring above Envoy\'s bound', yaml: withPolicy('loadBalancer: {consistentHash: {useSourceIp: true, ringHash: {minimumRingSize: 8388609}}}'), field: `${at}.consistentHash.ringHash.minimumRingSize`, message: /from 0 to 8388608/ },
      { name: 'distribute with failover', yaml: withPolicy('loadBalancer: {localityLbSetting: {distribute: [{from: a/*, to: {b/*: 100}}], failover: [{from: a, to: b}]}}'), field: `${at}.localityLbSetting.failover`, message: /cannot be given with distribute/ },
      { name: 'distribute weights not 100', yaml: withPolicy('loadBalancer: {localityLbSetting: {distribute: [{from: a/*, to: {a/z1: 60, a/z2: 30}}]}}'), field: `${at}.localityLbSetting.distribute[0].to`, message: /sum to 90; they must sum to 100/ },
      { name: 'distribute weight 0', yaml: withPolicy('loadBalancer: {localityLbSetting: {distribute: [{from: a/*, to: {a/z1: 0, a/z2: 100}}]}}'), field: `${at}.localityLbSetting.distribute[0].to[a/z1]`, message: /from 1 to 100/ },
      { name: 'wildcard not at the end', yaml: withPolicy('loadBalancer: {localityLbSetting: {distribute: [{from: "*/z", to: {a: 100}}]}}'), field: `${at}.localityLbSetting.distribute[0].from`, message: /once, at the end/ },
      { name: 'overlapping localities', yaml: withPolicy('loadBalancer: {localityLbSetting: {distribute: [{from: a/*, to: {a/z1: 50, a: 50}}]}}'), field: `${at}.localityLbSetting.distribute[0].to[a]`, message: /overlaps "a\/z1"/ },
      { name: 'empty locality part', yaml: withPolicy('loadBalancer: {localityLbSetting: {distribute: [{from: a//b, to: {a: 100}}]}}'), field: `${at}.localityLbSetting.distribute[0].from`, message: /no empty part/ },
      { name: 'failover to the same region', yaml: withPolicy('loadBalancer: {localityLbSetting: {failover: [{from: a, to: a}]}}'), field: `${at}.localityLbSetting.failover[0].to`, message: /same region/ },
      { name: 'failover with a zone', yaml: withPolicy('loadBalancer: {localityLbSetting: {failover: [{from: a/z, to: b}]}}'), field: `${at}.localityLbSetting.failover[0].from`, message: /regions only/ },
      { name: 'failover wildcard', yaml: withPolicy('loadBalancer: {localityLbSetting: {failover: [{from: a, to: "*"}]}}'), field: `${at}.localityLbSetting.failover[0].to`, message: /cannot be a wildcard/ },
      { name: 'failover with a topology priority', yaml: withPolicy('loadBalancer: {localityLbSetting: {failover: [{from: a, to: b}], failoverPriority: [topology.kubernetes.io/zone]}}'), field: `${at}.localityLbSetting.failoverPriority[0]`, message: /topology label cannot be given with failover/ },
      { name: 'unknown locality field', yaml: withPolicy('loadBalancer: {localityLbSetting: {failovr: []}}'), field: `${at}.localityLbSetting.failovr`, message: /unknown field/ },
      { name: 'warmup and warmupDurationSecs', yaml: withPolicy('loadBalancer: {simple: ROUND_ROBIN, warmupDurationSecs: 60s, warmup: {duration: 60s}}'), field: `${at}.warmupDurationSecs`, message: /cannot be given with warmup/ },
      { name: 'warmup without duration', yaml: withPolicy('loadBalancer: {warmup: {minimumPercent: 5}}'), field: `${at}.warmup.duration`, message: /required/ },
      { name: 'warmup aggression under 1', yaml: withPolicy('loadBalancer: {warmup: {duration: 10s, aggression: 0.5}}'), field: `${at}.warmup.aggression`, message: /from 1 up/ },
      { name: 'warmup minimumPercent over 100', yaml: withPolicy('loadBalancer: {warmup: {duration: 10s, minimumPercent: 101}}'), field: `${at}.warmup.minimumPercent`, message: /from 0 to 100/ },
      { name: 'a subset\'s policy is checked alike', yaml: inSubset('loadBalancer: {simple: NOPE}'), field: 'spec.subsets[0].trafficPolicy.loadBalancer.simple', message: /"NOPE" is not one of/ },
    ]);
  });
  it('tests primes as Envoy does', () => {
    assert.deepEqual([1, 2, 3, 4, 9, 65537, 65541, 5000011].map(isPrime), [true, true, true, false, false, true, false, true]);
  });
});

describe('connectionPool', () => {
  it('keeps what is written, and only that (Istio\'s defaults depend on presence)', () => {
    const { policy } = policyOf(withPolicy(`connectionPool:
  tcp: {maxConnections: 100, connectTimeout: 30ms, tcpKeepalive: {probes: 3, time: 10s, interval: 5s}, maxConnectionDuration: 1h, idleTimeout: 5m}
  http: {http1MaxPendingRequests: 10, http2MaxRequests: 1000, maxRequestsPerConnection: 1, maxRetries: 3, idleTimeout: 30s,
         h2UpgradePolicy: DO_NOT_UPGRADE, useClientProtocol: true, maxConcurrentStreams: 100}`));
    assert.deepEqual(policy.connectionPool, {
      tcp: { maxConnections: 100, connectTimeoutMs: 30, tcpKeepalive: { probes: 3, timeMs: 10_000, intervalMs: 5_000 }, maxConnectionDurationMs: 3_600_000, idleTimeoutMs: 300_000 },
      http: { http1MaxPendingRequests: 10, http2MaxRequests: 1000, maxRequestsPerConnection: 1, maxRetries: 3, idleTimeoutMs: 30_000,
        h2UpgradePolicy: 'DO_NOT_UPGRADE', useClientProtocol: true, maxConcurrentStreams: 100 },
    });
    assert.deepEqual(policyOf(withPolicy('connectionPool: {tcp: {}}')).policy.connectionPool, { tcp: {} });
    assert.deepEqual(policyOf(withPolicy('connectionPool: {http: {maxRetries: 0}}')).policy.connectionPool, { http: { maxRetries: 0 } });
  });
  it('refuses what Istio refuses', () => {
    const at = 'spec.trafficPolicy.connectionPool';
    assertRejections([
      { name: 'empty pool', yaml: withPolicy('connectionPool: {}'), field: at, message: /needs tcp or http/ },
      { name: 'negative maxConnections', yaml: withPolicy('connectionPool: {tcp: {maxConnections: -1}}'), field: `${at}.tcp.maxConnections`, message: /from 0 to 2147483647/ },
      { name: 'maxConnections above int32', yaml: withPolicy('connectionPool: {tcp: {maxConnections: 2147483648}}'), field: `${at}.tcp.maxConnections`, message: /from 0 to 2147483647/ },
      { name: 'connectTimeout under 1ms', yaml: withPolicy('connectionPool: {tcp: {connectTimeout: 500us}}'), field: `${at}.tcp.connectTimeout`, message: /"500us" is shorter than 1ms/ },
      { name: 'connectTimeout 0', yaml: withPolicy('connectionPool: {tcp: {connectTimeout: 0s}}'), field: `${at}.tcp.connectTimeout`, message: /shorter than 1ms/ },
      { name: 'fraction of a millisecond', yaml: withPolicy('connectionPool: {tcp: {connectTimeout: 1.5ms}}'), field: `${at}.tcp.connectTimeout`, message: /not a whole number of milliseconds/ },
      { name: 'not a duration', yaml: withPolicy('connectionPool: {tcp: {idleTimeout: soon}}'), field: `${at}.tcp.idleTimeout`, message: /"soon" is not a duration/ },
      { name: 'a number, not a duration', yaml: withPolicy('connectionPool: {tcp: {idleTimeout: 30}}'), field: `${at}.tcp.idleTimeout`, message: /expected a duration .* got the number 30/ },
      { name: 'negative keepalive time', yaml: withPolicy('connectionPool: {tcp: {tcpKeepalive: {time: -1s}}}'), field: `${at}.tcp.tcpKeepalive.time`, message: /negative/ },
      { name: 'maxConnectionDuration 0', yaml: withPolicy('connectionPool: {tcp: {maxConnectionDuration: 0s}}'), field: `${at}.tcp.maxConnectionDuration`, message: /shorter than 1ms/ },
      { name: 'negative pending', yaml: withPolicy('connectionPool: {http: {http1MaxPendingRequests: -5}}'), field: `${at}.http.http1MaxPendingRequests`, message: /from 0/ },
      { name: 'negative retries', yaml: withPolicy('connectionPool: {http: {maxRetries: -1}}'), field: `${at}.http.maxRetries`, message: /from 0/ },
      { name: 'http idleTimeout 0', yaml: withPolicy('connectionPool: {http: {idleTimeout: 0s}}'), field: `${at}.http.idleTimeout`, message: /shorter than 1ms/ },
      { name: 'unknown h2UpgradePolicy', yaml: withPolicy('connectionPool: {http: {h2UpgradePolicy: ALWAYS}}'), field: `${at}.http.h2UpgradePolicy`, message: /"ALWAYS" is not one of DEFAULT, DO_NOT_UPGRADE, UPGRADE/ },
      { name: 'UPGRADE with useClientProtocol', yaml: withPolicy('connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}'), field: `${at}.http.useClientProtocol`, message: /cannot be true with h2UpgradePolicy UPGRADE/ },
      { name: 'UPGRADE: not supported yet', yaml: withPolicy('connectionPool: {http: {h2UpgradePolicy: UPGRADE}}'), field: `${at}.http.h2UpgradePolicy`, message: /^UPGRADE is not supported yet: sending HTTP\/1\.1 requests to the upstream as HTTP\/2/ },
      { name: 'UPGRADE in a subset too', yaml: inSubset('connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: false}}'), field: 'spec.subsets[0].trafficPolicy.connectionPool.http.h2UpgradePolicy', message: /not supported yet/ },
      { name: 'typo', yaml: withPolicy('connectionPool: {tcp: {maxConnection: 1}}'), field: `${at}.tcp.maxConnection`, message: /unknown field "maxConnection"/ },
      { name: 'at port level too', yaml: atPort('connectionPool: {tcp: {connectTimeout: 0.1ms}}'), field: 'spec.trafficPolicy.portLevelSettings[0].connectionPool.tcp.connectTimeout', message: /shorter than 1ms/ },
    ]);
  });
});

describe('connectionPool: the upstream protocol', () => {
  it('h2UpgradePolicy DEFAULT and DO_NOT_UPGRADE, and useClientProtocol either way, mean here what they mean under Istio: accepted without a word', () => {
    for (const http of ['{h2UpgradePolicy: DEFAULT}', '{h2UpgradePolicy: DO_NOT_UPGRADE}', '{useClientProtocol: true}', '{useClientProtocol: false}',
      '{h2UpgradePolicy: DO_NOT_UPGRADE, useClientProtocol: true}']) {
      const { policy, warnings } = policyOf(withPolicy(`connectionPool: {http: ${http}}`));
      assert.deepEqual(warnings, [], http);
      assert.ok(policy);
    }
  });
});

describe('outlierDetection', () => {
  it('keeps what is written; splitExternalLocalOriginErrors defaults to false', () => {
    const { policy, warnings } = policyOf(withPolicy(`outlierDetection:
  consecutive5xxErrors: 0
  consecutiveGatewayErrors: 3
  consecutiveLocalOriginFailures: 2
  splitExternalLocalOriginErrors: true
  interval: 1s
  baseEjectionTime: 3m
  maxEjectionPercent: 100
  minHealthPercent: 50`));
    assert.deepEqual(policy.outlierDetection, {
      consecutive5xxErrors: 0, consecutiveGatewayErrors: 3, consecutiveLocalOriginFailures: 2, splitExternalLocalOriginErrors: true,
      intervalMs: 1000, baseEjectionTimeMs: 180_000, maxEjectionPercent: 100, minHealthPercent: 50,
    });
    assert.deepEqual(warnings, []);
    assert.deepEqual(policyOf(withPolicy('outlierDetection: {}')).policy.outlierDetection, { splitExternalLocalOriginErrors: false });
  });
  it('accepts the deprecated consecutiveErrors with a warning: Istio ignores it', () => {
    const { policy, warnings } = policyOf(withPolicy('outlierDetection: {consecutiveErrors: 7}'));
    assert.deepEqual(policy.outlierDetection, { splitExternalLocalOriginErrors: false }, 'nothing of it is kept');
    assert.deepEqual(warnings, ['spec.trafficPolicy.outlierDetection.consecutiveErrors: is deprecated and Istio ignores it; use consecutive5xxErrors or consecutiveGatewayErrors']);
  });
  it('refuses what Istio refuses', () => {
    const at = 'spec.trafficPolicy.outlierDetection';
    assertRejections([
      { name: 'local-origin failures without the split', yaml: withPolicy('outlierDetection: {consecutiveLocalOriginFailures: 3}'), field: `${at}.consecutiveLocalOriginFailures`, message: /needs splitExternalLocalOriginErrors: true/ },
      { name: 'maxEjectionPercent over 100', yaml: withPolicy('outlierDetection: {maxEjectionPercent: 101}'), field: `${at}.maxEjectionPercent`, message: /from 0 to 100/ },
      { name: 'minHealthPercent negative', yaml: withPolicy('outlierDetection: {minHealthPercent: -1}'), field: `${at}.minHealthPercent`, message: /from 0 to 100/ },
      { name: 'interval under 1ms', yaml: withPolicy('outlierDetection: {interval: 0s}'), field: `${at}.interval`, message: /shorter than 1ms/ },
      { name: 'negative base ejection', yaml: withPolicy('outlierDetection: {baseEjectionTime: -30s}'), field: `${at}.baseEjectionTime`, message: /negative/ },
      { name: 'negative 5xx count', yaml: withPolicy('outlierDetection: {consecutive5xxErrors: -1}'), field: `${at}.consecutive5xxErrors`, message: /from 0 to 4294967295/ },
      { name: 'consecutiveErrors of the wrong type', yaml: withPolicy('outlierDetection: {consecutiveErrors: many}'), field: `${at}.consecutiveErrors`, message: /integer/ },
    ]);
  });
});

describe('trafficPolicy and portLevelSettings', () => {
  it('refuses empty policies and settings, and what is not supported yet', () => {
    assertRejections([
      { name: 'empty policy', yaml: withPolicy('{}'), field: 'spec.trafficPolicy', message: /needs at least one of loadBalancer, connectionPool, outlierDetection, tls, portLevelSettings/ },
      { name: 'empty subset policy', yaml: inSubset('{}'), field: 'spec.subsets[0].trafficPolicy', message: /needs at least one of/ },
      { name: 'empty port setting', yaml: atPort(''), field: 'spec.trafficPolicy.portLevelSettings[0]', message: /needs at least one of loadBalancer, connectionPool, outlierDetection, tls/ },
      { name: 'retryBudget percent over 100', yaml: withPolicy('retryBudget: {percent: 120}'), field: 'spec.trafficPolicy.retryBudget.percent', message: /from 0 to 100/ },
      { name: 'retryBudget negative minimum', yaml: withPolicy('retryBudget: {minRetryConcurrency: -1}'), field: 'spec.trafficPolicy.retryBudget.minRetryConcurrency', message: /from 0/ },
      { name: 'retryBudget budgetInterval', yaml: withPolicy('retryBudget: {budgetInterval: 10s}'), field: 'spec.trafficPolicy.retryBudget.budgetInterval', message: /^is not supported yet: a retry budget over an interval/ },
      { name: 'port-level retryBudget (not a port field)', yaml: atPort('retryBudget: {percent: 5}'), field: 'spec.trafficPolicy.portLevelSettings[0].retryBudget', message: /unknown field "retryBudget"/ },
      { name: 'tunnel in a subset', yaml: inSubset('tunnel: {targetHost: p, targetPort: 8080}'), field: 'spec.subsets[0].trafficPolicy.tunnel', message: /^is not supported yet: tunnelling/ },
      { name: 'port-level tunnel (not a port field)', yaml: atPort('tunnel: {}'), field: 'spec.trafficPolicy.portLevelSettings[0].tunnel', message: /unknown field "tunnel"/ },
    ]);
  });
  it('reads a retry budget as written, alone or beside other settings (a subset\'s too)', () => {
    assert.deepEqual(policyOf(withPolicy('retryBudget: {percent: 12.5, minRetryConcurrency: 2}')).policy.retryBudget, { percent: 12.5, minRetryConcurrency: 2 });
    assert.deepEqual(policyOf(withPolicy('retryBudget: {}')).policy.retryBudget, {});
    const { value } = acceptWarned(inSubset('retryBudget: {percent: 50}'));
    assert.deepEqual((value.resource as DestinationRule).subsets[0]!.trafficPolicy?.retryBudget, { percent: 50 });
  });
  it('a subset carries its own policy and TLS (subsets are routed to)', () => {
    const { value } = acceptWarned(inSubset('tls: {mode: SIMPLE, sni: v1.example.com}\nportLevelSettings:\n- port: {number: 443}\n  loadBalancer: {simple: RANDOM}'));
    const subset = (value.resource as DestinationRule).subsets[0]!;
    assert.equal(subset.trafficPolicy?.tls?.sni, 'v1.example.com');
    assert.deepEqual(subset.trafficPolicy?.portLevelSettings, [{ port: 443, loadBalancer: { kind: 'simple', simple: 'RANDOM' } }]);
  });
});

describe('subsets, selectors and exportTo', () => {
  const rule = (spec: string): string => `apiVersion: networking.mesh.io/v1\nkind: DestinationRule\nmetadata: {name: db, namespace: team-a}\nspec:\n${indent(spec)}\n`;
  it('refuses what Istio refuses', () => {
    assertRejections([
      { name: 'subset name not a DNS label', yaml: rule('host: a\nsubsets: [{name: V1}]'), field: 'spec.subsets[0].name', message: /not a valid subset name/ },
      { name: 'subset label key', yaml: rule('host: a\nsubsets: [{name: v1, labels: {"-bad": x}}]'), field: 'spec.subsets[0].labels[-bad]', message: /not a valid label key/ },
      { name: 'subset label value', yaml: rule('host: a\nsubsets: [{name: v1, labels: {version: "v 1"}}]'), field: 'spec.subsets[0].labels[version]', message: /not a valid label value/ },
      { name: 'wildcard in a selector', yaml: rule('host: a\nworkloadSelector: {matchLabels: {app: "*"}}'), field: 'spec.workloadSelector.matchLabels[app]', message: /wildcards are not allowed/ },
      { name: 'selector with exportTo elsewhere', yaml: rule('host: a\nworkloadSelector: {matchLabels: {app: x}}\nexportTo: ["*"]'), field: 'spec.exportTo', message: /exported to its own namespace only/ },
      { name: 'exportTo repeated', yaml: rule('host: a\nexportTo: [team-b, team-b]'), field: 'spec.exportTo[1]', message: /"team-b" is listed twice/ },
      { name: 'exportTo . and the namespace', yaml: rule('host: a\nexportTo: [".", team-a]'), field: 'spec.exportTo[1]', message: /"\." and "team-a" are the same namespace/ },
    ]);
  });
  it('warns about a selector without labels, as Istio does', () => {
    const { warnings } = acceptWarned(rule('host: a\nworkloadSelector: {matchLabels: {}}'));
    assert.deepEqual(warnings, ['spec.workloadSelector.matchLabels: has no labels: the rule applies to every workload of its namespace (Istio warns about this too)']);
    assert.deepEqual(acceptWarned(rule('host: a\nworkloadSelector: {matchLabels: {app: x}}\nexportTo: ["."]')).warnings, []);
  });
});
