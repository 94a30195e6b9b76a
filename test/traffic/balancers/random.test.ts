import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RandomBalancer } from '../../../src/traffic/balancers/random.js';
import { CHI2_1E4, FakeHosts, SOURCES, chiSquare, tally } from '../support.js';

describe('RandomBalancer', () => {
  for (const { name, make } of SOURCES) {
    it(`is uniform over equal endpoints (${name}; chi-square, df 4, p < 1e-4)`, () => {
      const b = new RandomBalancer({ hosts: new FakeHosts([1, 1, 1, 1, 1]), random: make(), panicThresholdPercent: 0 });
      const seen = tally(5, 20_000, () => b.pick({}));
      assert.ok(chiSquare(seen, [1, 1, 1, 1, 1]) < CHI2_1E4[4]!, `${seen}`);
    });

    it(`follows the weights (${name}; chi-square, df 3, p < 1e-4)`, () => {
      const b = new RandomBalancer({ hosts: new FakeHosts([1, 2, 3, 4]), random: make(), panicThresholdPercent: 0 });
      const seen = tally(4, 20_000, () => b.pick({}));
      assert.ok(chiSquare(seen, [1, 2, 3, 4]) < CHI2_1E4[3]!, `${seen}`);
    });
  }

  it('gives an ejected endpoint\'s share to the others in proportion (weights 1, 2, 3 without the 2)', () => {
    const hosts = new FakeHosts([1, 2, 3]);
    const b = new RandomBalancer({ hosts, random: Math.random, panicThresholdPercent: 0 });
    hosts.setHealthy(1, false);
    // With random = r, the pick over cumulative [1, 4] is 0 below 1/4: check the boundaries exactly.
    const at = (r: number): number => new RandomBalancer({ hosts, random: () => r, panicThresholdPercent: 0 }).pick({});
    assert.equal(at(0.2499), 0);
    assert.equal(at(0.25), 2);
    assert.equal(b.pick({}) !== 1, true);
  });
});
