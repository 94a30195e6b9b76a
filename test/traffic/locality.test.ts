// Locality-aware balancing, the pure parts: which setting applies, the endpoints' priorities
// (locality, failover regions, failoverPriority labels), distribute's locality weights, and Envoy's
// priority loads (overprovisioning 1.4, spill, panic).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LocalityLbSetting } from '../../src/config/resources/types.js';
import { workloadLocality } from '../../src/config/resources/workload.js';
import {
  lbPriority, localityMatch, parseLocality, planLocality, priorityHealth, priorityLoads, resolveLocalityLb, type LocalityLbSpec, type ProxyFacts,
} from '../../src/traffic/locality.js';
import { endpoint } from './support.js';

const setting = (o: Partial<LocalityLbSetting> = {}): LocalityLbSetting => ({ distribute: [], failover: [], failoverPriority: [], ...o });
const proxy = (locality: string, labels: Record<string, string> = {}): ProxyFacts => ({ locality, labels });
const failover = (p: ProxyFacts, o: { failover?: { from: string; to: string }[]; failoverPriority?: string[] } = {}): LocalityLbSpec =>
  ({ kind: 'failover', proxy: p, failover: o.failover ?? [], failoverPriority: o.failoverPriority ?? [] });

describe('localities', () => {
  it('matches as Istio\'s LocalityMatch: * for any part, missing parts any', () => {
    const l = parseLocality('us-east/a/rack1');
    for (const [rule, want] of [['us-east', true], ['us-east/*', true], ['us-east/a', true], ['us-east/a/rack1', true], ['us-east/b', false],
      ['*', true], ['us-west/*', false], ['us-east/a/rack2', false]] as const) {
      assert.equal(localityMatch(l, rule), want, rule);
    }
  });

  it('ranks an endpoint against the proxy: 0 same subzone, 1 same zone, 2 same region, 3 another', () => {
    const p = parseLocality('r/z/s');
    assert.deepEqual(['r/z/s', 'r/z/t', 'r/y/s', 'q/z/s', ''].map((e) => lbPriority(p, parseLocality(e))), [0, 1, 2, 3, 3]);
  });

  it('reads the workload\'s locality from istio-locality (dots), else the topology labels', () => {
    assert.equal(workloadLocality({ 'istio-locality': 'us-east.a.rack1', 'topology.kubernetes.io/region': 'x' }), 'us-east/a/rack1');
    assert.equal(workloadLocality({ 'topology.kubernetes.io/region': 'us-east', 'topology.kubernetes.io/zone': 'us-east-1a' }), 'us-east/us-east-1a');
    assert.equal(workloadLocality({ 'topology.kubernetes.io/region': 'r', 'topology.kubernetes.io/zone': 'z', 'topology.istio.io/subzone': 's' }), 'r/z/s');
    assert.equal(workloadLocality({ app: 'x' }), '');
  });
});

describe('resolveLocalityLb (Istio\'s choice of setting)', () => {
  const p = proxy('us-east/a');
  it('failover needs outlierDetection; the mesh default (enabled) applies it', () => {
    assert.equal(resolveLocalityLb(undefined, setting({ enabled: true }), false, p), undefined);
    assert.deepEqual(resolveLocalityLb(undefined, setting({ enabled: true }), true, p), failover(p));
  });
  it('the rule\'s setting wins; enabled: false on the rule turns it off, on the mesh only without a rule setting', () => {
    assert.equal(resolveLocalityLb(setting({ enabled: false }), setting({ enabled: true }), true, p), undefined);
    assert.equal(resolveLocalityLb(undefined, setting({ enabled: false }), true, p), undefined);
    assert.deepEqual(resolveLocalityLb(setting({ failover: [{ from: 'us-east', to: 'eu' }] }), setting({ enabled: false }), true, p),
      failover(p, { failover: [{ from: 'us-east', to: 'eu' }] }));
    assert.equal(resolveLocalityLb(undefined, undefined, true, p), undefined, 'no setting at all (a mesh config that sets none is Istio\'s default, enabled)');
  });
  it('distribute applies when a from covers the proxy (without outlierDetection); else nothing, not failover', () => {
    const d = setting({ distribute: [{ from: 'eu/*', to: [{ locality: 'eu', weight: 100 }] }, { from: 'us-east/*', to: [{ locality: 'us-east/a', weight: 100 }] }] });
    assert.deepEqual(resolveLocalityLb(d, undefined, false, p), { kind: 'distribute', proxy: p, to: [{ locality: 'us-east/a', weight: 100 }] });
    assert.equal(resolveLocalityLb(d, undefined, true, proxy('ap/x')), undefined);
  });
});

describe('planLocality: priorities', () => {
  const eps = ['r/z/s', 'r/z/t', 'r/y/s', 'q/z/s', 'p/a'].map((l, i) => endpoint(`10.0.0.${i + 1}`, { locality: l }));
  it('by locality, renumbered without gaps', () => {
    const plan = planLocality(failover(proxy('r/z/s')), eps)!;
    assert.deepEqual([...plan.priority], [0, 1, 2, 3, 3]);
    assert.equal(plan.priorities, 4);
    assert.deepEqual(plan.groups.map((g) => [g.priority, [...g.members]]), [[0, [0]], [1, [1]], [2, [2]], [3, [3, 4]]]);
    // The proxy in region q: the others are all "another region", one priority after its own.
    assert.deepEqual([...planLocality(failover(proxy('q/x')), eps)!.priority], [1, 1, 1, 0, 1]);
  });
  it('failover regions: the named region before the other regions', () => {
    const plan = planLocality(failover(proxy('r/z/s'), { failover: [{ from: 'r', to: 'p' }] }), eps)!;
    assert.deepEqual([...plan.priority], [0, 1, 2, 4, 3]);
  });
  it('no plan when every endpoint is one priority (nothing to pay per pick)', () => {
    assert.equal(planLocality(failover(proxy('r/z/s')), [eps[0]!, endpoint('10.0.1.1', { locality: 'r/z/s' })]), undefined);
    assert.equal(planLocality(failover(proxy('')), [endpoint('10.0.1.1'), endpoint('10.0.1.2')]), undefined, 'no localities at all');
  });
  it('failoverPriority: the number of leading labels shared decides; topology labels come from the localities; name=value gives the proxy\'s value', () => {
    const labelled = [
      endpoint('10.0.0.1', { labels: { net: 'n1', version: 'v1' } }),
      endpoint('10.0.0.2', { labels: { net: 'n1', version: 'v2' } }),
      endpoint('10.0.0.3', { labels: { net: 'n2', version: 'v1' } }),
    ];
    const p = proxy('', { net: 'n1', version: 'v1' });
    assert.deepEqual([...planLocality(failover(p, { failoverPriority: ['net', 'version'] }), labelled)!.priority], [0, 1, 2]);
    assert.deepEqual([...planLocality(failover(p, { failoverPriority: ['net=n2'] }), labelled)!.priority], [1, 1, 0]);
    const zones = ['r/a', 'r/b', 'q/a'].map((l, i) => endpoint(`10.0.2.${i}`, { locality: l }));
    assert.deepEqual([...planLocality(failover(proxy('r/a'), { failoverPriority: ['topology.kubernetes.io/region', 'topology.kubernetes.io/zone'] }), zones)!.priority],
      [0, 1, 2]);
  });
  it('failoverPriority with failover: labels first, then the locality\'s rank within them', () => {
    const e = [
      endpoint('10.0.0.1', { labels: { net: 'n1' }, locality: 'r/a' }),
      endpoint('10.0.0.2', { labels: { net: 'n1' }, locality: 'q/a' }),
      endpoint('10.0.0.3', { labels: { net: 'n2' }, locality: 'r/a' }),
    ];
    assert.deepEqual([...planLocality(failover(proxy('r/a', { net: 'n1' }), { failoverPriority: ['net'], failover: [{ from: 'r', to: 'q' }] }), e)!.priority], [0, 1, 2]);
  });
});

describe('planLocality: distribute', () => {
  const p = proxy('r/a');
  it('shares each to\'s weight among the localities it covers by their endpoints\' weights (rounded up); others get nothing', () => {
    const e = [
      endpoint('10.0.0.1', { locality: 'r/a' }), endpoint('10.0.0.2', { locality: 'r/a' }),
      endpoint('10.0.0.3', { locality: 'r/b', weight: 3 }), endpoint('10.0.0.4', { locality: 'r/c' }),
      endpoint('10.0.0.5', { locality: 'q/a' }),
    ];
    const plan = planLocality({ kind: 'distribute', proxy: p, to: [{ locality: 'r/a', weight: 70 }, { locality: 'r/b', weight: 10 }, { locality: 'r/c', weight: 20 }] }, e)!;
    assert.deepEqual(plan.groups.map((g) => [g.name, g.weight, [...g.members]]), [['r/a', 70, [0, 1]], ['r/b', 10, [2]], ['r/c', 20, [3]]]);
    assert.deepEqual([...plan.priority], [0, 0, 0, 0, -1]);
    const wild = planLocality({ kind: 'distribute', proxy: p, to: [{ locality: 'r/*', weight: 75 }, { locality: 'q', weight: 25 }] }, e)!;
    // r/* covers r/a (2 endpoints of weight 1), r/b (weight 3), r/c (1): 75 × 2/6, 75 × 3/6, 75 × 1/6, rounded up.
    assert.deepEqual(wild.groups.map((g) => [g.name, g.weight]), [['r/a', 25], ['r/b', 38], ['r/c', 13], ['q/a', 25]]);
  });
});

describe('priorityLoads (Envoy)', () => {
  it('health is min(100, 1.4 × healthy share)', () => {
    assert.deepEqual([priorityHealth(10, 10), priorityHealth(8, 10), priorityHealth(5, 10), priorityHealth(0, 10), priorityHealth(0, 0)], [100, 100, 70, 0, 0]);
  });
  it('spills to the next priority what the first cannot take', () => {
    assert.deepEqual([...priorityLoads([10, 10], [10, 10], 0).load], [100, 0]);
    assert.deepEqual([...priorityLoads([5, 10], [10, 10], 0).load], [70, 30]);
    assert.deepEqual([...priorityLoads([0, 4], [4, 4], 0).load], [0, 100]);
    assert.deepEqual([...priorityLoads([1, 1, 4], [4, 4, 4], 0).load], [35, 35, 30]);
  });
  it('scales the healths up when they sum to less than 100', () => {
    // 1 of 4 and 1 of 4: 35 + 35 = 70, scaled to 50 / 50.
    assert.deepEqual([...priorityLoads([1, 1], [4, 4], 0).load], [50, 50]);
  });
  it('every endpoint ejected: none without panic; with a threshold, every priority in panic, the load by endpoint count', () => {
    assert.equal(priorityLoads([0, 0], [2, 2], 0).none, true);
    const l = priorityLoads([0, 0], [1, 3], 50);
    assert.equal(l.none, false);
    assert.deepEqual([...l.load], [25, 75]);
    assert.deepEqual([...l.panic], [1, 1]);
  });
  it('panic only below 100 % total health, per priority under the threshold', () => {
    assert.deepEqual([...priorityLoads([1, 10], [10, 10], 50).panic], [0, 0], 'the second priority makes up for the first: no panic');
    const l = priorityLoads([1, 1], [10, 2], 50);
    assert.deepEqual([...l.panic], [1, 0]);
  });
});
