import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RoundRobinBalancer } from '../../../src/traffic/balancers/round-robin.js';
import { FakeHosts, seeded, tally } from '../support.js';

describe('RoundRobinBalancer', () => {
  it('rotates over equal endpoints: each gets exactly its turn', () => {
    const b = new RoundRobinBalancer({ hosts: new FakeHosts([1, 1, 1]), random: Math.random, panicThresholdPercent: 0 });
    const order = Array.from({ length: 9 }, () => b.pick({}));
    assert.deepEqual(order.slice(3, 6), order.slice(0, 3));
    assert.deepEqual([...order.slice(0, 3)].sort(), [0, 1, 2]);
  });

  it('starts at a random place, so that workers do not all begin with the same endpoint', () => {
    const firsts = new Set(Array.from({ length: 40 }, (_, s) =>
      new RoundRobinBalancer({ hosts: new FakeHosts([1, 1, 1, 1]), random: seeded(s), panicThresholdPercent: 0 }).pick({})));
    assert.ok(firsts.size >= 3, `${[...firsts]}`);
  });

  it('gives weighted endpoints their exact share, spread out (3:1 is three picks, one pick, never two in a row)', () => {
    const b = new RoundRobinBalancer({ hosts: new FakeHosts([3, 1]), random: seeded(3), panicThresholdPercent: 0 });
    const order = Array.from({ length: 4000 }, () => b.pick({}));
    const counts = tally(2, 4000, () => order.shift()!);
    assert.ok(Math.abs(counts[0]! - 3000) <= 1 && Math.abs(counts[1]! - 1000) <= 1, `${counts}`);
    const b2 = new RoundRobinBalancer({ hosts: new FakeHosts([3, 1]), random: seeded(3), panicThresholdPercent: 0 });
    const seq = Array.from({ length: 400 }, () => b2.pick({})).join('');
    assert.doesNotMatch(seq, /11/);
    assert.doesNotMatch(seq, /00000/);
  });

  it('skips an ejected endpoint and keeps rotating over the others', () => {
    const hosts = new FakeHosts([1, 1, 1]);
    const b = new RoundRobinBalancer({ hosts, random: Math.random, panicThresholdPercent: 0 });
    hosts.setHealthy(1, false);
    assert.deepEqual(tally(3, 100, () => b.pick({})), [50, 0, 50]);
  });
});
