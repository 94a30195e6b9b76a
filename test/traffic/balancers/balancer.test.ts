// What every balancer shares: candidates (health, panic), NONE, and the retry rule for tried hosts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createBalancer, NONE } from '../../../src/traffic/balancers/index.js';
import type { LoadBalancerSpec } from '../../../src/traffic/spec.js';
import { FakeHosts, seeded, tally } from '../support.js';

const KINDS: readonly [string, LoadBalancerSpec][] = [
  ['LEAST_REQUEST', { kind: 'simple', simple: 'LEAST_REQUEST' }],
  ['ROUND_ROBIN', { kind: 'simple', simple: 'ROUND_ROBIN' }],
  ['RANDOM', { kind: 'simple', simple: 'RANDOM' }],
  ['ring hash', { kind: 'consistentHash', key: { kind: 'sourceIp' }, table: { kind: 'ringHash', minimumRingSize: 1024 } }],
  ['maglev', { kind: 'consistentHash', key: { kind: 'sourceIp' }, table: { kind: 'maglev', tableSize: 65537 } }],
];

function make(spec: LoadBalancerSpec, hosts: FakeHosts, panicThresholdPercent = 0) {
  const b = createBalancer(spec, { hosts, random: seeded(7), panicThresholdPercent });
  assert.ok(b);
  return b;
}

describe('every balancer', () => {
  for (const [name, spec] of KINDS) {
    describe(name, () => {
      it('never picks an ejected endpoint, and picks it again once healthy', () => {
        const hosts = new FakeHosts([1, 1, 1]);
        const b = make(spec, hosts);
        hosts.setHealthy(1, false);
        const seen = tally(3, 3000, () => b.pick({ hash: Math.floor(Math.random() * 2 ** 53) }));
        assert.equal(seen[1], 0);
        assert.ok(seen[0]! > 0 && seen[2]! > 0, `${seen}`);
        hosts.setHealthy(1, true);
        const again = tally(3, 3000, () => b.pick({ hash: Math.floor(Math.random() * 2 ** 53) }));
        assert.ok(again[1]! > 0, `${again}`);
      });

      it('answers NONE when every endpoint is ejected and panic is off (Istio\'s minHealthPercent 0)', () => {
        const hosts = new FakeHosts([1, 2]);
        const b = make(spec, hosts);
        hosts.setHealthy(0, false);
        hosts.setHealthy(1, false);
        assert.equal(b.pick({}), NONE);
        assert.equal(b.panic, false);
      });

      it('answers NONE with no endpoint at all', () => {
        assert.equal(make(spec, new FakeHosts([]), 50).pick({}), NONE);
      });

      it('balances over every endpoint, ejected ones too, below the panic threshold', () => {
        const hosts = new FakeHosts([1, 1, 1]);
        const b = make(spec, hosts, 50);
        hosts.setHealthy(0, false);
        hosts.setHealthy(1, false); // 33% healthy < 50%
        const seen = tally(3, 3000, () => b.pick({ hash: Math.floor(Math.random() * 2 ** 53) }));
        assert.equal(b.panic, true);
        assert.ok(seen.every((n) => n > 0), `${seen}`);
      });

      it('is not in panic at exactly the threshold', () => {
        const hosts = new FakeHosts([1, 1]);
        const b = make(spec, hosts, 50);
        hosts.setHealthy(0, false); // 50% healthy, not < 50%
        const seen = tally(2, 500, () => b.pick({ hash: Math.floor(Math.random() * 2 ** 53) }));
        assert.equal(b.panic, false);
        assert.deepEqual(seen, [0, 500]);
      });
    });
  }
});

describe('retries (ignorePreviousHosts)', () => {
  for (const [name, spec] of KINDS.slice(0, 3)) {
    it(`${name}: a retry goes to an endpoint not tried yet whenever one exists`, () => {
      const hosts = new FakeHosts([1, 1, 1]);
      const b = make(spec, hosts);
      for (let k = 0; k < 500; k++) assert.equal(b.pick({ tried: [{ index: 0 }, { index: 2 }] }), 1);
      const seen = tally(3, 600, () => b.pick({ tried: [{ index: 1 }] }));
      assert.equal(seen[1], 0);
      assert.ok(seen[0]! > 0 && seen[2]! > 0, `${seen}`);
    });

    it(`${name}: when every endpoint was tried, one of them is picked again (not NONE)`, () => {
      const b = make(spec, new FakeHosts([1, 1]));
      const i = b.pick({ tried: [{ index: 0 }, { index: 1 }] });
      assert.ok(i === 0 || i === 1);
    });

    it(`${name}: an ejected endpoint is not chosen to avoid a tried one`, () => {
      const hosts = new FakeHosts([1, 1, 1]);
      const b = make(spec, hosts);
      hosts.setHealthy(2, false);
      for (let k = 0; k < 200; k++) assert.equal(b.pick({ tried: [{ index: 0 }] }), 1);
    });
  }

  for (const [name, spec] of KINDS.slice(3)) {
    it(`${name}: a retry keeps its key's endpoint (Istio gives consistent hashes no previous-hosts predicate)`, () => {
      const b = make(spec, new FakeHosts([1, 1, 1]));
      for (let k = 0; k < 200; k++) {
        const hash = Math.floor(Math.random() * 2 ** 53);
        const first = b.pick({ hash });
        assert.equal(b.pick({ hash, tried: [{ index: first }] }), first);
      }
    });
  }
});
