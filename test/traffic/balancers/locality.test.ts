// The locality balancer: a priority by Envoy's loads, a locality by weight × availability, an
// endpoint by the cluster's own algorithm. Statistical checks use the chi-square bound at 1e-5 per
// check (CHI2_1E5), at most ten checks per test: a false failure is rarer than 1 in 10,000.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createBalancer, NONE } from '../../../src/traffic/balancers/index.js';
import { LocalityBalancer } from '../../../src/traffic/balancers/locality.js';
import { planLocality, type LocalityLbSpec } from '../../../src/traffic/locality.js';
import type { EndpointSpec, LoadBalancerSpec } from '../../../src/traffic/spec.js';
import { CHI2_1E5, chiSquare, endpoint, FakeHosts, SOURCES, tally } from '../support.js';

const LEAST_REQUEST: LoadBalancerSpec = { kind: 'simple', simple: 'LEAST_REQUEST' };

function balancer(spec: LocalityLbSpec, eps: readonly EndpointSpec[], random: () => number, o: { lb?: LoadBalancerSpec; panic?: number } = {}) {
  const hosts = new FakeHosts(eps.map((e) => e.weight));
  const plan = planLocality(spec, eps);
  assert.ok(plan);
  const b = new LocalityBalancer({
    hosts, plan, random, panicThresholdPercent: o.panic ?? 0,
    inner: (group) => createBalancer(o.lb ?? LEAST_REQUEST, { hosts: group, random, panicThresholdPercent: 0 }),
  });
  return { hosts, b };
}

// Proxy in r/a: two endpoints there (priority 0), two in r/b (1), two in q/a (2).
const EPS = ['r/a', 'r/a', 'r/b', 'r/b', 'q/a', 'q/a'].map((l, i) => endpoint(`10.0.0.${i + 1}`, { locality: l }));
const FAILOVER: LocalityLbSpec = { kind: 'failover', proxy: { locality: 'r/a', labels: {} }, failover: [], failoverPriority: [] };

describe('LocalityBalancer: failover', () => {
  for (const source of SOURCES) {
    it(`keeps every pick in the first priority while it is healthy, fails over when it is ejected (${source.name})`, () => {
      const { hosts, b } = balancer(FAILOVER, EPS, source.make());
      const all = tally(6, 4000, () => b.pick({}));
      assert.deepEqual(all.slice(2), [0, 0, 0, 0]);
      assert.ok(chiSquare(all.slice(0, 2), [1, 1]) < CHI2_1E5[1]!, `${all}`);
      hosts.setHealthy(0, false);
      // 1 of 2 healthy: health 70, so 70 % stays, 30 % spills to r/b.
      const spill = tally(6, 20000, () => b.pick({}));
      assert.equal(spill[0], 0, 'the ejected endpoint is never picked');
      assert.deepEqual(spill.slice(4), [0, 0], 'r/b takes all of the rest: q/a gets nothing');
      assert.ok(chiSquare([spill[1]!, spill[2]! + spill[3]!], [70, 30]) < CHI2_1E5[1]!, `${spill}`);
      hosts.setHealthy(1, false);
      const over = tally(6, 4000, () => b.pick({}));
      assert.deepEqual([over[0], over[1], over[4], over[5]], [0, 0, 0, 0], `${over}`);
      assert.equal(b.lastPriority, 1);
      hosts.setHealthy(2, false);
      hosts.setHealthy(3, false);
      const region = tally(6, 1000, () => b.pick({}));
      assert.equal(region[4]! + region[5]!, 1000, 'then the other region');
      hosts.setHealthy(4, false);
      hosts.setHealthy(5, false);
      assert.equal(b.pick({}), NONE, 'all ejected, no panic threshold: no healthy upstream');
    });
  }

  it('in panic (minHealthPercent) a priority balances over all of its endpoints', () => {
    const { hosts, b } = balancer(FAILOVER, EPS.slice(0, 4), Math.random, { panic: 50 });
    for (let i = 0; i < 4; i++) hosts.setHealthy(i, false);
    const seen = tally(4, 4000, () => b.pick({}));
    assert.ok(seen.every((n) => n > 0), `every endpoint, ejected ones included: ${seen}`);
    assert.equal(b.panic, true);
  });

  it('a retry avoids the endpoints tried, within the priority it lands on', () => {
    const { b } = balancer(FAILOVER, EPS, Math.random);
    for (let k = 0; k < 200; k++) assert.equal(b.pick({ tried: [{ index: 0 }] }), 1);
  });

  it('retryRemoteLocalities: from the third attempt, the priorities of the first two are left out (Envoy\'s previous_priorities, update frequency 2)', () => {
    const { b } = balancer(FAILOVER, EPS, Math.random);
    for (let k = 0; k < 200; k++) {
      assert.ok(b.pick({ attempted: [{ index: 0 }] }) <= 1, 'the second attempt: the loads as they are');
      const third = b.pick({ attempted: [{ index: 0 }, { index: 1 }] });
      assert.ok(third === 2 || third === 3, `the third: the next priority (${third})`);
      const fourth = b.pick({ attempted: [{ index: 0 }, { index: 1 }, { index: 2 }] });
      assert.ok(fourth === 2 || fourth === 3, `the fourth: still only the first two left out (${fourth})`);
      const fifth = b.pick({ attempted: [{ index: 0 }, { index: 2 }, { index: 1 }, { index: 3 }] });
      assert.ok(fifth === 4 || fifth === 5, `the fifth: priorities 0 and 1 left out (${fifth})`);
      const all = b.pick({ attempted: [{ index: 0 }, { index: 2 }, { index: 4 }, { index: 5 }] });
      assert.ok(all <= 1, `every priority tried: the loads as they are (${all})`);
    }
  });

  it('a consistent hash keeps a key on its endpoint, and moves it to the next priority on ejection', () => {
    const ring: LoadBalancerSpec = { kind: 'consistentHash', key: { kind: 'sourceIp' }, table: { kind: 'ringHash', minimumRingSize: 1024 } };
    const { hosts, b } = balancer(FAILOVER, EPS, Math.random, { lb: ring });
    const first = b.pick({ hash: 123456789 });
    assert.ok(first === 0 || first === 1);
    for (let k = 0; k < 50; k++) assert.equal(b.pick({ hash: 123456789 }), first);
    hosts.setHealthy(0, false);
    hosts.setHealthy(1, false);
    const next = b.pick({ hash: 123456789 });
    assert.ok(next === 2 || next === 3, `${next}`);
  });
});

describe('LocalityBalancer: distribute', () => {
  const eps = ['r/a', 'r/a', 'r/b', 'q/a'].map((l, i) => endpoint(`10.0.0.${i + 1}`, { locality: l }));
  const spec: LocalityLbSpec = { kind: 'distribute', proxy: { locality: 'r/a', labels: {} }, to: [{ locality: 'r/a', weight: 80 }, { locality: 'r/b', weight: 20 }] };
  for (const source of SOURCES) {
    it(`sends each locality its share, nothing to the uncovered one (${source.name})`, () => {
      const { b } = balancer(spec, eps, source.make(), { lb: { kind: 'simple', simple: 'ROUND_ROBIN' } });
      const seen = tally(4, 20000, () => b.pick({}));
      assert.equal(seen[3], 0);
      assert.ok(chiSquare([seen[0]! + seen[1]!, seen[2]!], [80, 20]) < CHI2_1E5[1]!, `${seen}`);
    });
  }
  it('a locality partly ejected takes less (weight × min(1, 1.4 × healthy share))', () => {
    const four = ['r/a', 'r/a', 'r/a', 'r/a', 'r/b'].map((l, i) => endpoint(`10.0.1.${i + 1}`, { locality: l }));
    const { hosts, b } = balancer(spec, four, Math.random);
    hosts.setHealthy(0, false);
    hosts.setHealthy(1, false);
    hosts.setHealthy(2, false);
    // r/a: 80 × 1.4 × 1/4 = 28 against r/b's 20.
    const seen = tally(5, 20000, () => b.pick({}));
    assert.ok(chiSquare([seen[3]!, seen[4]!], [28, 20]) < CHI2_1E5[1]!, `${seen}`);
  });
  it('no endpoint in any locality distribute names: no healthy upstream, with or without a panic threshold', () => {
    const only = [endpoint('10.0.2.1', { locality: 'q/a' }), endpoint('10.0.2.2', { locality: 'q/b' })];
    for (const panic of [0, 50]) assert.equal(balancer(spec, only, Math.random, { panic }).b.pick({}), NONE);
  });
});
