import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hash53 } from '../../../src/traffic/hash.js';
import { DEFAULT_MAGLEV_TABLE_SIZE, isPrime, MaglevBalancer } from '../../../src/traffic/balancers/maglev.js';
import { FakeHosts } from '../support.js';

const KEYS = Array.from({ length: 20_000 }, (_, i) => hash53(`user-${i}`));

function maglev(weights: number[], tableSize = DEFAULT_MAGLEV_TABLE_SIZE): { b: MaglevBalancer; hosts: FakeHosts } {
  const hosts = new FakeHosts(weights);
  return { b: new MaglevBalancer({ hosts, random: Math.random, panicThresholdPercent: 0, tableSize }), hosts };
}

describe('MaglevBalancer', () => {
  it('refuses a table size that is not prime (its permutations would not cover the table)', () => {
    assert.throws(() => maglev([1], 65536), /65536 is not a prime/);
    assert.ok(isPrime(65537) && isPrime(2) && !isPrime(1) && !isPrime(91));
  });

  it('fills the table in proportion to the weights (within one entry per endpoint of the exact share)', () => {
    for (const weights of [[1, 1, 1], [1, 2], [5, 1, 3, 1]]) {
      const { b } = maglev(weights, 10007);
      // Each table entry is one slice of the hash space: count them through keys spaced one apart.
      const counts = new Array<number>(weights.length).fill(0);
      for (let h = 0; h < 10007; h++) counts[b.pick({ hash: h })]!++;
      const total = weights.reduce((x, y) => x + y, 0);
      counts.forEach((n, i) => assert.ok(Math.abs(n - (10007 * weights[i]!) / total) <= weights.length, `${weights}: ${counts}`));
    }
  });

  it('sends a key to the same endpoint every time, and from another worker\'s table too', () => {
    const { b } = maglev([1, 1, 1]);
    const { b: other } = maglev([1, 1, 1]);
    for (const h of KEYS.slice(0, 1000)) assert.equal(other.pick({ hash: h }), b.pick({ hash: h }));
  });

  it('moves few keys of the other endpoints when one leaves (Maglev\'s minimal disruption: under 3%)', () => {
    const { b, hosts } = maglev([1, 1, 1, 1, 1]);
    const before = KEYS.map((h) => b.pick({ hash: h }));
    hosts.setHealthy(4, false);
    const after = KEYS.map((h) => b.pick({ hash: h }));
    let others = 0;
    let movedOthers = 0;
    KEYS.forEach((_, k) => {
      assert.notEqual(after[k], 4);
      if (before[k] === 4) return;
      others++;
      if (after[k] !== before[k]) movedOthers++;
    });
    assert.ok(movedOthers / others < 0.03, `${movedOthers} of ${others}`);
  });
});
