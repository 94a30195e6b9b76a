import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeastRequestBalancer } from '../../../src/traffic/balancers/least-request.js';
import { CHI2_1E4, FakeHosts, SOURCES, chiSquare, tally } from '../support.js';

const N = 20_000;

describe('LeastRequestBalancer, equal weights: power of two choices', () => {
  it('sends every request to the less loaded of two endpoints', () => {
    const hosts = new FakeHosts([1, 1]);
    hosts.active[0] = 5;
    const b = new LeastRequestBalancer({ hosts, random: Math.random, panicThresholdPercent: 0 });
    // Two endpoints: the two choices are always both (distinct picks), so the idle one always wins.
    assert.deepEqual(tally(2, 1000, () => b.pick({})), [0, 1000]);
  });

  for (const { name, make } of SOURCES) {
    it(`spreads evenly over idle endpoints (${name}; chi-square, df 3, p < 1e-4)`, () => {
      const hosts = new FakeHosts([1, 1, 1, 1]);
      const b = new LeastRequestBalancer({ hosts, random: make(), panicThresholdPercent: 0 });
      const seen = tally(4, N, () => b.pick({}));
      // Equal loads: the first of two distinct uniform picks, uniform over the four.
      assert.ok(chiSquare(seen, [1, 1, 1, 1]) < CHI2_1E4[3]!, `${seen}`);
    });

    it(`favours the one idle endpoint exactly as two distinct choices do (${name}; chi-square, df 3, p < 1e-4)`, () => {
      const hosts = new FakeHosts([1, 1, 1, 1]);
      hosts.active.splice(0, 4, 0, 10, 10, 10);
      const b = new LeastRequestBalancer({ hosts, random: make(), panicThresholdPercent: 0 });
      const seen = tally(4, N, () => b.pick({}));
      // Endpoint 0 wins whenever it is one of the two distinct choices: 1 - C(3,2)/C(4,2) = 1/2;
      // otherwise the first of two busy ones: 1/6 each.
      assert.ok(chiSquare(seen, [3, 1, 1, 1]) < CHI2_1E4[3]!, `${seen}`);
    });
  }
});

describe('LeastRequestBalancer, unequal weights: weight / (active + 1)', () => {
  it('picks in proportion to the weights when idle (EDF: within one pick of the exact share)', () => {
    const hosts = new FakeHosts([1, 2, 3]);
    const b = new LeastRequestBalancer({ hosts, random: Math.random, panicThresholdPercent: 0 });
    const seen = tally(3, 6000, () => b.pick({}));
    seen.forEach((n, i) => assert.ok(Math.abs(n - (6000 * hosts.weights[i]!) / 6) <= 1, `${seen}`));
  });

  it('divides a weight by the endpoint\'s requests in flight plus one (active_request_bias 1)', () => {
    // Effective weights 1/1, 4/(3+1), 2/(1+1) = 1, 1, 1: an even split.
    const hosts = new FakeHosts([1, 4, 2]);
    hosts.active.splice(0, 3, 0, 3, 1);
    const b = new LeastRequestBalancer({ hosts, random: Math.random, panicThresholdPercent: 0 });
    const seen = tally(3, 3000, () => b.pick({}));
    seen.forEach((n) => assert.ok(Math.abs(n - 1000) <= 1, `${seen}`));
  });

  it('reads the load anew at every pick (a busy endpoint drops out of turn)', () => {
    const hosts = new FakeHosts([1, 3]);
    const b = new LeastRequestBalancer({ hosts, random: Math.random, panicThresholdPercent: 0 });
    hosts.active[1] = 1_000_000;
    const seen = tally(2, 1000, () => b.pick({}));
    assert.ok(seen[0]! > 990, `${seen}`);
  });
});
