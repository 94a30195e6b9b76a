import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HttpRoute, PolicySettings } from '../../src/config/resources/types.js';
import {
  buildClusters, clusterName, clusterPolicy, DEFAULT_CONSISTENT_HASH_RETRY, hashesConsistently, mergeTrafficPolicy, NO_RETRY,
  resolveDestination, routeTraffic, type ClusterBuildContext,
} from '../../src/traffic/clusters.js';
import { DEFAULT_RETRY, DEFAULT_RETRY_WITH_503, UNLIMITED, type ClusterSpec } from '../../src/traffic/spec.js';
import { dr, se, SHOP, snapshotOf, vs } from './resources.js';

const REVIEWS = 'reviews.shop.svc.cluster.local';
const reviews = (extra = ''): string => se('reviews', `{hosts: [${REVIEWS}], addresses: [10.0.0.10], ports: [{number: 80, name: http, protocol: HTTP}, {number: 9080, name: http-alt, protocol: HTTP}],
  resolution: STATIC, endpoints: [{address: 10.1.0.1, labels: {version: v1}}, {address: 10.1.0.2, labels: {version: v2}}]${extra}}`);

const ctx: ClusterBuildContext = { workload: SHOP };
const names = (cs: readonly ClusterSpec[]): string[] => cs.map((c) => c.name);

describe('cluster names, discovery and defaults', () => {
  it('one cluster per host and port, and one per subset, named as Istio names them', () => {
    const set = buildClusters(snapshotOf(reviews(), dr('reviews', `{host: reviews, subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]}`)), ctx);
    assert.deepEqual(names(set.clusters), [
      `outbound|80||${REVIEWS}`, `outbound|80|v1|${REVIEWS}`, `outbound|80|v2|${REVIEWS}`,
      `outbound|9080||${REVIEWS}`, `outbound|9080|v1|${REVIEWS}`, `outbound|9080|v2|${REVIEWS}`,
    ]);
    const v1 = set.byName.get(clusterName(80, 'v1', REVIEWS))!;
    assert.deepEqual([v1.host, v1.port, v1.subset, v1.subsetLabels, v1.service, v1.origin, v1.discovery, v1.policy.rule],
      [REVIEWS, 80, 'v1', { version: 'v1' }, `${REVIEWS}:80`, 'ServiceEntry shop/reviews', 'EDS', 'DestinationRule shop/reviews']);
    assert.deepEqual(set.services.map((s) => s.key), [`${REVIEWS}:80`, `${REVIEWS}:9080`]);
    assert.deepEqual(set.warnings, []);
    assert.ok(Object.isFrozen(set.clusters) && Object.isFrozen(v1.policy));
  });

  it('fills in Istio\'s defaults when no rule says otherwise', () => {
    const c = buildClusters(snapshotOf(reviews()), ctx).byName.get(clusterName(80, undefined, REVIEWS))!;
    assert.deepEqual(c.policy, {
      loadBalancer: { kind: 'simple', simple: 'LEAST_REQUEST' },
      connectionPool: {
        tcp: { maxConnections: UNLIMITED, connectTimeoutMs: 10_000 },
        http: { http1MaxPendingRequests: UNLIMITED, http2MaxRequests: UNLIMITED, maxRequestsPerConnection: 0, maxRetries: UNLIMITED,
          h2UpgradePolicy: 'DEFAULT', useClientProtocol: false },
      },
    });
    assert.equal(buildClusters(snapshotOf(reviews()), { ...ctx, connectTimeoutMs: 2500 }).clusters[0]!.policy.connectionPool.tcp.connectTimeoutMs, 2500,
      'the mesh config\'s connectTimeout');
  });

  it('a retry budget: Envoy\'s defaults for what it leaves out (20 %, 3), a subset\'s replacing the rule\'s, on every port', () => {
    const set = buildClusters(snapshotOf(reviews(), dr('reviews', `{host: reviews, trafficPolicy: {retryBudget: {minRetryConcurrency: 5},
      portLevelSettings: [{port: {number: 9080}, loadBalancer: {simple: RANDOM}}]},
      subsets: [{name: v1, labels: {version: v1}, trafficPolicy: {retryBudget: {percent: 50}}}, {name: v2, labels: {version: v2}}]}`)), ctx);
    const budget = (port: number, subset?: string) => set.byName.get(clusterName(port, subset, REVIEWS))!.policy.connectionPool.http.retryBudget;
    assert.deepEqual(budget(80), { percent: 20, minRetryConcurrency: 5 });
    assert.deepEqual(budget(9080), { percent: 20, minRetryConcurrency: 5 }, 'a port-level setting does not drop it');
    assert.deepEqual(budget(80, 'v1'), { percent: 50, minRetryConcurrency: 3 });
    assert.deepEqual(budget(80, 'v2'), { percent: 20, minRetryConcurrency: 5 });
    assert.equal(buildClusters(snapshotOf(reviews()), ctx).clusters[0]!.policy.connectionPool.http.retryBudget, undefined);
  });

  it('discovery follows the resolution; NONE and PASSTHROUGH are the original destination', () => {
    const discovery = (resolution: string, extra = '', rule?: string): [string | undefined, string] => {
      const endpoints = resolution === 'NONE' ? '' : resolution === 'STATIC' ? ', endpoints: [{address: 10.0.0.1}]' : '';
      const set = buildClusters(snapshotOf(se('api', `{hosts: [api.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: ${resolution}${endpoints}${extra}}`),
        ...(rule ? [dr('api', rule)] : [])), ctx);
      const c = set.clusters[0]!;
      return [c.discovery, c.policy.loadBalancer.kind === 'simple' ? c.policy.loadBalancer.simple : c.policy.loadBalancer.kind];
    };
    assert.deepEqual(discovery('STATIC'), ['EDS', 'LEAST_REQUEST']);
    assert.deepEqual(discovery('DNS'), ['STRICT_DNS', 'LEAST_REQUEST']);
    assert.deepEqual(discovery('DNS_ROUND_ROBIN'), ['LOGICAL_DNS', 'LEAST_REQUEST']);
    assert.deepEqual(discovery('NONE'), ['ORIGINAL_DST', 'PASSTHROUGH']);
    assert.deepEqual(discovery('NONE', '', '{host: api.example.com, trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}}'), ['ORIGINAL_DST', 'PASSTHROUGH'],
      'resolution NONE is passthrough whatever the rule says');
    assert.deepEqual(discovery('STATIC', '', '{host: api.example.com, trafficPolicy: {loadBalancer: {simple: PASSTHROUGH}}}'), ['ORIGINAL_DST', 'PASSTHROUGH']);
  });
});

describe('a port\'s declared protocol', () => {
  const entry = se('multi', `{hosts: [multi.example.com], addresses: [10.0.0.30], resolution: STATIC, endpoints: [{address: 10.1.0.30}], ports: [
    {number: 80, name: http, protocol: HTTP}, {number: 3128, name: proxy, protocol: HTTP_PROXY}, {number: 81, name: h2, protocol: HTTP2},
    {number: 7070, name: grpc, protocol: GRPC}, {number: 8080, name: unset}, {number: 9000, name: tcp, protocol: TCP}, {number: 53, name: dns, protocol: UDP}]}`);
  const http1 = (set: ReturnType<typeof buildClusters>): Record<string, boolean> =>
    Object.fromEntries(set.clusters.map((c) => [`${c.port}${c.subset ? `/${c.subset}` : ''}`, c.http1Upstream === true]));

  it('UDP: no cluster (Istio proxies no UDP); a route to it is refused NC, saying why', () => {
    const set = buildClusters(snapshotOf(entry), ctx);
    assert.ok(!set.clusters.some((c) => c.port === 53), names(set.clusters).join(', '));
    assert.ok(!set.services.some((s) => s.port.number === 53));
    const t = resolveDestination(set, { host: 'multi.example.com', port: 53, weight: 0 }, 80, 'shop');
    assert.equal(t.kind, 'no-cluster');
    assert.match(t.kind === 'no-cluster' ? t.reason : '', /port 53 of multi\.example\.com is UDP, which is not proxied/);
  });

  it('HTTP and HTTP_PROXY: HTTP/1.1 to the endpoints, unless the rule asks for the client\'s protocol', () => {
    assert.deepEqual(http1(buildClusters(snapshotOf(entry), ctx)),
      { 80: true, 3128: true, 81: false, 7070: false, 8080: false, 9000: false });
    const withRule = (http: string): Record<string, boolean> => http1(buildClusters(snapshotOf(entry, dr('multi', `{host: multi.example.com,
      trafficPolicy: {connectionPool: {http: {${http}}}}, subsets: [{name: v1, labels: {a: b}, trafficPolicy: {connectionPool: {http: {useClientProtocol: false}}}}]}`)), ctx));
    assert.deepEqual(withRule('useClientProtocol: true'),
      { 80: false, '80/v1': true, 3128: false, '3128/v1': true, 81: false, '81/v1': false, 7070: false, '7070/v1': false, 8080: false, '8080/v1': false, 9000: false, '9000/v1': false });
  });
});

describe('Istio\'s merge: rule → its port level → subset → the subset\'s port level', () => {
  /** The policy of the cluster (port, subset) for a rule written as `spec`, as the parts that differ. */
  const merged = (spec: string, port: number, subset?: string): Record<string, unknown> => {
    const set = buildClusters(snapshotOf(reviews(), dr('reviews', spec)), ctx);
    const p = set.byName.get(clusterName(port, subset, REVIEWS))!.policy;
    const lb = p.loadBalancer.kind === 'simple' ? p.loadBalancer.simple : p.loadBalancer.kind;
    return {
      lb, maxConnections: p.connectionPool.tcp.maxConnections, outlier: p.outlierDetection?.consecutive5xxErrors, tls: p.tls?.mode,
    };
  };
  const top = `loadBalancer: {simple: ROUND_ROBIN}, connectionPool: {tcp: {maxConnections: 7}}, outlierDetection: {consecutive5xxErrors: 3}, tls: {mode: SIMPLE}`;
  const cases: { name: string; spec: string; port: number; subset?: string; want: Record<string, unknown> }[] = [
    { name: 'the rule alone', spec: `{host: reviews, trafficPolicy: {${top}}}`, port: 80,
      want: { lb: 'ROUND_ROBIN', maxConnections: 7, outlier: 3, tls: 'SIMPLE' } },
    { name: 'a port-level setting replaces the rule\'s wholesale (absent fields: defaults)',
      spec: `{host: reviews, trafficPolicy: {${top}, portLevelSettings: [{port: {number: 80}, loadBalancer: {simple: RANDOM}}]}}`, port: 80,
      want: { lb: 'RANDOM', maxConnections: UNLIMITED, outlier: undefined, tls: undefined } },
    { name: 'another port keeps the rule\'s', spec: `{host: reviews, trafficPolicy: {${top}, portLevelSettings: [{port: {number: 80}, loadBalancer: {simple: RANDOM}}]}}`, port: 9080,
      want: { lb: 'ROUND_ROBIN', maxConnections: 7, outlier: 3, tls: 'SIMPLE' } },
    { name: 'a subset overrides field by field', spec: `{host: reviews, trafficPolicy: {${top}}, subsets: [{name: v1, labels: {version: v1}, trafficPolicy: {loadBalancer: {simple: RANDOM}, tls: {mode: DISABLE}}}]}`,
      port: 80, subset: 'v1', want: { lb: 'RANDOM', maxConnections: 7, outlier: 3, tls: 'DISABLE' } },
    { name: 'the subset-less cluster ignores subsets', spec: `{host: reviews, trafficPolicy: {${top}}, subsets: [{name: v1, trafficPolicy: {loadBalancer: {simple: RANDOM}}}]}`,
      port: 80, want: { lb: 'ROUND_ROBIN', maxConnections: 7, outlier: 3, tls: 'SIMPLE' } },
    { name: 'a subset\'s port level replaces all four fields',
      spec: `{host: reviews, trafficPolicy: {${top}}, subsets: [{name: v1, trafficPolicy: {loadBalancer: {simple: RANDOM}, portLevelSettings: [{port: {number: 80}, connectionPool: {tcp: {maxConnections: 2}}}]}}]}`,
      port: 80, subset: 'v1', want: { lb: 'LEAST_REQUEST', maxConnections: 2, outlier: undefined, tls: undefined } },
    { name: '... and on another port the subset\'s own fields override',
      spec: `{host: reviews, trafficPolicy: {${top}}, subsets: [{name: v1, trafficPolicy: {loadBalancer: {simple: RANDOM}, portLevelSettings: [{port: {number: 80}, connectionPool: {tcp: {maxConnections: 2}}}]}}]}`,
      port: 9080, subset: 'v1', want: { lb: 'RANDOM', maxConnections: 7, outlier: 3, tls: 'SIMPLE' } },
    { name: 'the rule\'s port level, then the subset\'s fields',
      spec: `{host: reviews, trafficPolicy: {${top}, portLevelSettings: [{port: {number: 80}, connectionPool: {tcp: {maxConnections: 9}}}]}, subsets: [{name: v1, trafficPolicy: {outlierDetection: {consecutive5xxErrors: 1}}}]}`,
      port: 80, subset: 'v1', want: { lb: 'LEAST_REQUEST', maxConnections: 9, outlier: 1, tls: undefined } },
    { name: 'a subset without a rule policy', spec: `{host: reviews, subsets: [{name: v1, trafficPolicy: {loadBalancer: {simple: RANDOM}}}]}`, port: 80, subset: 'v1',
      want: { lb: 'RANDOM', maxConnections: UNLIMITED, outlier: undefined, tls: undefined } },
    { name: 'a subset without a policy', spec: `{host: reviews, trafficPolicy: {${top}}, subsets: [{name: v1}]}`, port: 80, subset: 'v1',
      want: { lb: 'ROUND_ROBIN', maxConnections: 7, outlier: 3, tls: 'SIMPLE' } },
  ];
  it('merges as the table says', () => {
    for (const c of cases) assert.deepEqual(merged(c.spec, c.port, c.subset), c.want, c.name);
  });
  it('mergeTrafficPolicy keeps only what is set', () => {
    assert.deepEqual(mergeTrafficPolicy(undefined, undefined, 80), {});
    const lb = { kind: 'simple', simple: 'RANDOM' } as const;
    assert.deepEqual(mergeTrafficPolicy({ portLevelSettings: [{ port: 80, loadBalancer: lb }] }, undefined, 80), { loadBalancer: lb });
    assert.deepEqual(mergeTrafficPolicy({ loadBalancer: lb, portLevelSettings: [] }, { portLevelSettings: [{ port: 80, tls: { mode: 'DISABLE', subjectAltNames: [], insecureSkipVerify: false } }] }, 80),
      { tls: { mode: 'DISABLE', subjectAltNames: [], insecureSkipVerify: false } });
  });
});

describe('defaults of outlier detection and connection pools (Istio on Envoy)', () => {
  const policyOf = (p: PolicySettings) => clusterPolicy(p);
  it('outlier detection present: Envoy\'s defaults where the rule is silent', () => {
    assert.deepEqual(policyOf({ outlierDetection: { splitExternalLocalOriginErrors: false } }).outlierDetection, {
      consecutive5xxErrors: 5, consecutiveGatewayErrors: 0, consecutiveLocalOriginFailures: 0, splitExternalLocalOriginErrors: false,
      intervalMs: 10_000, baseEjectionTimeMs: 30_000, maxEjectionPercent: 10, maxEjectionTimeMs: 300_000, minHealthPercent: 0,
    });
    const od = policyOf({ outlierDetection: { consecutive5xxErrors: 0, consecutiveGatewayErrors: 2, splitExternalLocalOriginErrors: true, maxEjectionPercent: 0, minHealthPercent: 30, intervalMs: 1000, baseEjectionTimeMs: 5000 } }).outlierDetection!;
    assert.deepEqual([od.consecutive5xxErrors, od.consecutiveGatewayErrors, od.consecutiveLocalOriginFailures, od.maxEjectionPercent, od.minHealthPercent, od.intervalMs, od.baseEjectionTimeMs],
      [0, 2, 5, 10, 30, 1000, 5000], '0 turns 5xx off; split without a count: Envoy\'s 5; maxEjectionPercent 0 is Envoy\'s 10 (Istio cannot tell)');
    assert.equal(policyOf({ outlierDetection: { splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 3 } }).outlierDetection!.consecutiveLocalOriginFailures, 3);
    assert.equal(policyOf({}).outlierDetection, undefined, 'no outlierDetection: nothing is ejected');
  });
  it('connection pool: 0 is unlimited, the pool\'s idle time-out falls back on tcp\'s', () => {
    const cp = policyOf({ connectionPool: { tcp: { maxConnections: 0, idleTimeoutMs: 5000, maxConnectionDurationMs: 60_000, tcpKeepalive: { probes: 3 } }, http: { http2MaxRequests: 10, maxConcurrentStreams: 0 } } }).connectionPool;
    assert.deepEqual(cp, {
      tcp: { maxConnections: UNLIMITED, connectTimeoutMs: 10_000, tcpKeepalive: { probes: 3 }, maxConnectionDurationMs: 60_000, idleTimeoutMs: 5000 },
      http: { http1MaxPendingRequests: UNLIMITED, http2MaxRequests: 10, maxRequestsPerConnection: 0, maxRetries: UNLIMITED, idleTimeoutMs: 5000,
        h2UpgradePolicy: 'DEFAULT', useClientProtocol: false },
    });
    assert.equal(policyOf({ connectionPool: { tcp: { idleTimeoutMs: 5000 }, http: { idleTimeoutMs: 100 } } }).connectionPool.http.idleTimeoutMs, 100);
  });
});

describe('locality balancing: which setting applies to a cluster', () => {
  const mesh = { enabled: true, distribute: [], failover: [], failoverPriority: [] };
  const locCtx: ClusterBuildContext = { ...ctx, locality: 'us-east/a', localityLbSetting: mesh };
  const policyOf = (rule: string, c: ClusterBuildContext = locCtx, subset?: string) =>
    buildClusters(snapshotOf(reviews(), dr('reviews', rule)), c).byName.get(clusterName(80, subset, REVIEWS))!.policy;
  it('failover (the mesh default) only where outlierDetection is set', () => {
    assert.equal(policyOf('{host: reviews, trafficPolicy: {loadBalancer: {simple: RANDOM}}}').locality, undefined);
    assert.deepEqual(policyOf('{host: reviews, trafficPolicy: {outlierDetection: {}}}').locality,
      { kind: 'failover', proxy: { locality: 'us-east/a', labels: SHOP.labels }, failover: [], failoverPriority: [] });
    assert.equal(policyOf('{host: reviews, trafficPolicy: {outlierDetection: {}}}', ctx).locality, undefined, 'no mesh setting given: none');
  });
  it('the rule\'s distribute for this proxy\'s locality; a subset\'s loadBalancer replaces the rule\'s (Istio\'s merge)', () => {
    const rule = '{host: reviews, trafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: us-east/*, to: {us-east/a: 90, us-west: 10}}]}}}, '
      + 'subsets: [{name: v1, labels: {version: v1}, trafficPolicy: {loadBalancer: {simple: RANDOM}}}]}';
    assert.deepEqual(policyOf(rule).locality?.kind, 'distribute');
    assert.equal(policyOf(rule, locCtx, 'v1').locality, undefined);
    assert.equal(policyOf(rule, { ...locCtx, locality: 'eu/x' }).locality, undefined, 'no from covers the proxy');
  });
});

describe('which rule and which entries this workload sees', () => {
  it('a rule in the client\'s namespace wins over the service\'s, which wins over the root namespace\'s', () => {
    const lb = (...docs: string[]): string => {
      const c = buildClusters(snapshotOf(se('db/db', '{hosts: [db.db.svc.cluster.local], ports: [{number: 5432, name: tcp, protocol: TCP}], addresses: [10.9.9.9], resolution: STATIC}'), ...docs), ctx).clusters[0]!;
      return `${c.policy.rule ?? '-'} ${c.policy.loadBalancer.kind === 'simple' ? c.policy.loadBalancer.simple : ''}`;
    };
    const rule = (id: string, simple: string, extra = ''): string => dr(id, `{host: db.db.svc.cluster.local, trafficPolicy: {loadBalancer: {simple: ${simple}}}${extra}}`);
    assert.equal(lb(), '- LEAST_REQUEST');
    assert.equal(lb(rule('mesh-system/root', 'RANDOM')), 'DestinationRule mesh-system/root RANDOM');
    assert.equal(lb(rule('mesh-system/root', 'RANDOM'), rule('db/owner', 'ROUND_ROBIN')), 'DestinationRule db/owner ROUND_ROBIN');
    assert.equal(lb(rule('db/owner', 'ROUND_ROBIN'), rule('client', 'RANDOM')), 'DestinationRule shop/client RANDOM');
    assert.equal(lb(rule('db/owner', 'ROUND_ROBIN', ', exportTo: [other]')), '- LEAST_REQUEST', 'not exported to shop');
    assert.equal(lb(rule('client', 'RANDOM', ', workloadSelector: {matchLabels: {app: other}}')), '- LEAST_REQUEST', 'selects another workload');
    assert.equal(lb(dr('db/wild', '{host: "*.db.svc.cluster.local", trafficPolicy: {loadBalancer: {simple: RANDOM}}}')), 'DestinationRule db/wild RANDOM', 'a wildcard rule');
  });
  it('honours a ServiceEntry\'s exportTo; a host declared twice: the client\'s namespace first, with a warning', () => {
    const entry = (id: string, exportTo: string, address: string): string =>
      se(id, `{hosts: [api.example.com], addresses: [${address}], ports: [{number: 443, name: tls, protocol: TLS}], resolution: STATIC, exportTo: ${exportTo}}`);
    assert.deepEqual(buildClusters(snapshotOf(entry('other/a', '["."]', '10.0.0.1')), ctx).clusters, [], 'exported to its namespace only');
    assert.deepEqual(buildClusters(snapshotOf(entry('a', '["~"]', '10.0.0.1')), ctx).clusters, [], '~: to no one');
    assert.equal(buildClusters(snapshotOf(entry('other/a', '[shop]', '10.0.0.1')), ctx).clusters.length, 1);
    const set = buildClusters(snapshotOf(entry('other/a', '["*"]', '10.0.0.1'), entry('mine', '["*"]', '10.0.0.2')), ctx);
    assert.equal(set.clusters.length, 1);
    assert.equal(set.clusters[0]!.origin, 'ServiceEntry shop/mine');
    assert.deepEqual(set.warnings, ['host api.example.com is declared by ServiceEntry shop/mine and ServiceEntry other/a; ServiceEntry shop/mine is used (Istio prefers the client\'s namespace, then the oldest)']);
  });
});

describe('route destinations: a cluster, or 503 NC with a warning naming both resources', () => {
  const rule = dr('reviews', '{host: reviews, subsets: [{name: v1, labels: {version: v1}}]}');
  const route = (dest: string, extra = ''): string => vs('reviews', `{hosts: [${REVIEWS}], http: [{route: [${dest}]}]${extra}}`);
  it('resolves hosts (short names in the VirtualService\'s namespace), ports and subsets', () => {
    const set = buildClusters(snapshotOf(reviews(), rule), ctx);
    const target = (d: { host: string; port?: number; subset?: string }, requestPort = 80, ns = 'shop'): string => {
      const t = resolveDestination(set, { ...d, weight: 100 }, requestPort, ns);
      return t.kind === 'cluster' ? t.cluster.name : `NC ${t.name}: ${t.reason}`;
    };
    assert.equal(target({ host: 'reviews', subset: 'v1' }), `outbound|80|v1|${REVIEWS}`);
    assert.equal(target({ host: 'reviews' }, 9080), `outbound|9080||${REVIEWS}`, 'no port: the request\'s');
    assert.equal(target({ host: REVIEWS, port: 9080, subset: 'v1' }), `outbound|9080|v1|${REVIEWS}`);
    assert.equal(target({ host: 'reviews', subset: 'v3' }), `NC outbound|80|v3|${REVIEWS}: subset v3 is not defined for ${REVIEWS}`);
    assert.equal(target({ host: 'reviews', port: 81 }), `NC outbound|81||${REVIEWS}: port 81 is not a port of ${REVIEWS}`);
    assert.equal(target({ host: 'reviews' }, 80, 'other'), 'NC outbound|80||reviews.other.svc.cluster.local: host reviews.other.svc.cluster.local is not declared by any ServiceEntry this workload sees');
    const single = buildClusters(snapshotOf(se('api', '{hosts: ["*.example.com"], ports: [{number: 443, name: tls, protocol: TLS}], resolution: NONE}')), ctx);
    const t = resolveDestination(single, { host: 'api.example.com', weight: 100 }, 8443, 'shop');
    assert.equal(t.kind === 'cluster' ? t.cluster.name : t.reason, 'outbound|443||*.example.com', 'a wildcard entry; its single port');
  });
  it('warns, naming the VirtualService and the DestinationRule, about a subset no rule defines', () => {
    const set = buildClusters(snapshotOf(reviews(), rule, route('{destination: {host: reviews, subset: v1}, weight: 90}, {destination: {host: reviews, subset: v3}, weight: 10}')), ctx);
    assert.deepEqual(set.warnings, [
      `VirtualService shop/reviews spec.http[0].route[1] routes to outbound|80|v3|${REVIEWS}, which no cluster serves (DestinationRule shop/reviews defines no subset v3 for it): its requests get 503 with flag NC`,
    ]);
    const noRule = buildClusters(snapshotOf(reviews(), route('{destination: {host: reviews, subset: v1}}')), ctx);
    assert.match(noRule.warnings[0]!, /^VirtualService shop\/reviews spec\.http\[0\]\.route\[0\] routes to outbound\|80\|v1\|.* \(no DestinationRule defines subset v1 for it\)/);
    const unknown = buildClusters(snapshotOf(reviews(), route('{destination: {host: ratings}}')), ctx);
    assert.match(unknown.warnings[0]!, /routes to outbound\|<request port>\|\|ratings\.shop\.svc\.cluster\.local, which no cluster serves \(host ratings\.shop\.svc\.cluster\.local is not declared/);
    assert.deepEqual(buildClusters(snapshotOf(reviews(), route('{destination: {host: ratings}}', ', exportTo: [other]')), ctx).warnings, [], 'a VirtualService this sidecar does not see');
    assert.deepEqual(buildClusters(snapshotOf(reviews(), route('{destination: {host: ratings}}', ', gateways: [gw]')), ctx).warnings, [], 'another workload\'s gateway');
    assert.equal(buildClusters(snapshotOf(reviews(), route('{destination: {host: ratings}}', ', gateways: [gw]')), { ...ctx, gateways: ['shop/gw'] }).warnings.length, 1, 'this gateway\'s');
  });
});

describe('a route\'s timeout and retries (Istio\'s ConvertPolicy)', () => {
  const r = (retries?: HttpRoute['retries'], timeoutMs?: number): Pick<HttpRoute, 'retries' | 'timeoutMs'> =>
    ({ ...(retries !== undefined ? { retries } : {}), ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
  it('absent: Istio\'s default policy (2 retries, no status code), no time-out', () => {
    assert.deepEqual(routeTraffic(r()), { retry: DEFAULT_RETRY });
    assert.equal(routeTraffic(r()).retry, DEFAULT_RETRY, 'shared, not rebuilt');
    assert.deepEqual([...DEFAULT_RETRY.retryOn], ['connect-failure', 'refused-stream', 'unavailable', 'cancelled', 'retriable-status-codes']);
    assert.deepEqual(DEFAULT_RETRY.retriableStatusCodes, [], 'a 503 is not retried');
    assert.equal(routeTraffic(r(undefined, 3000)).timeoutMs, 3000);
    assert.equal(routeTraffic(r(), { consistentHash: true }).retry, DEFAULT_CONSISTENT_HASH_RETRY);
    assert.equal(DEFAULT_CONSISTENT_HASH_RETRY.ignorePreviousHosts, false);
  });
  it('a route with fault injection gets no retries, whatever its retries say (Istio\'s reference); its time-out stays', () => {
    const fault = { abort: { perMillion: 1000, httpStatus: 503 } };
    assert.deepEqual(routeTraffic({ retries: { attempts: 3 }, timeoutMs: 2000, fault }), { retry: NO_RETRY, timeoutMs: 2000 });
    assert.equal(routeTraffic({ fault: { delay: { fixedDelayMs: 5, perMillion: 0 } } }).retry, NO_RETRY, 'not even Istio\'s default policy');
  });
  it('EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY=false (retry503): the default policy retries a 503, and so does `retries` without retryOn', () => {
    assert.equal(routeTraffic(r(), { retry503: false }).retry, DEFAULT_RETRY, 'true (the default): as before');
    assert.equal(routeTraffic(r(), { retry503: true }).retry, DEFAULT_RETRY_WITH_503);
    assert.deepEqual(DEFAULT_RETRY_WITH_503.retriableStatusCodes, [503]);
    assert.deepEqual([...DEFAULT_RETRY_WITH_503.retryOn], [...DEFAULT_RETRY.retryOn]);
    const hashed = routeTraffic(r(), { retry503: true, consistentHash: true }).retry;
    assert.deepEqual([hashed.retriableStatusCodes, hashed.ignorePreviousHosts], [[503], false]);
    assert.deepEqual(routeTraffic(r({ attempts: 4 }), { retry503: true }).retry.retriableStatusCodes, [503], 'Istio keeps the default\'s codes');
    assert.deepEqual(routeTraffic(r({ attempts: 4 }), { retry503: false }).retry.retriableStatusCodes, []);
    const own = routeTraffic(r({ attempts: 4, retryOn: { conditions: ['reset'], statusCodes: [] } }), { retry503: true }).retry;
    assert.deepEqual([[...own.retryOn], own.retriableStatusCodes], [['reset'], []], 'a retryOn of its own replaces them');
  });
  it('attempts 0: no retries', () => {
    assert.equal(routeTraffic(r({ attempts: 0 })).retry, NO_RETRY);
    assert.equal(NO_RETRY.attempts, 0);
  });
  it('a policy overrides the default field by field; status codes add retriable-status-codes', () => {
    const a = routeTraffic(r({ attempts: 5 })).retry;
    assert.deepEqual([a.attempts, [...a.retryOn], a.retriableStatusCodes, a.ignorePreviousHosts, a.backoffBaseMs, a.perTryTimeoutMs],
      [5, [...DEFAULT_RETRY.retryOn], [], true, 25, undefined]);
    const b = routeTraffic(r({ attempts: 3, perTryTimeoutMs: 200, retryOn: { conditions: ['5xx'], statusCodes: [503, 429] }, backoffMs: 100, retryRemoteLocalities: true })).retry;
    assert.deepEqual([[...b.retryOn], b.retriableStatusCodes, b.perTryTimeoutMs, b.backoffBaseMs, b.retryRemoteLocalities], [['5xx', 'retriable-status-codes'], [503, 429], 200, 100, true]);
    const c = routeTraffic(r({ attempts: 1, retryOn: { conditions: ['reset'], statusCodes: [] } })).retry;
    assert.deepEqual([...c.retryOn], ['reset']);
    assert.equal(routeTraffic(r({ attempts: 1 }), { consistentHash: true }).retry.ignorePreviousHosts, false, 'hash: stay on the endpoint');
    assert.equal(routeTraffic(r({ attempts: 1, retryIgnorePreviousHosts: true }), { consistentHash: true }).retry.ignorePreviousHosts, true, 'unless told');
    assert.equal(routeTraffic(r({ attempts: 1, retryIgnorePreviousHosts: false })).retry.ignorePreviousHosts, false);
  });
  it('the hash variant applies when every destination hashes consistently', () => {
    const set = buildClusters(snapshotOf(reviews(), dr('reviews', '{host: reviews, trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}, subsets: [{name: v1, trafficPolicy: {loadBalancer: {simple: RANDOM}}}]}')), ctx);
    const t = (subset?: string) => resolveDestination(set, { host: 'reviews', weight: 1, ...(subset ? { subset } : {}) }, 80, 'shop');
    assert.equal(hashesConsistently([t()]), true);
    assert.equal(hashesConsistently([t(), t('v1')]), false);
    assert.equal(hashesConsistently([t('nope')]), false);
  });
});
