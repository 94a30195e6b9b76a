// Envoy's slow start: the share of its weight an endpoint that joined gets over the window.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { slowStartFactor } from '../../src/traffic/slow-start.js';

it('ramps linearly with aggression 1, never under the minimum, full at the end of the window', () => {
  const s = { windowMs: 10_000, minWeight: 0.1, aggression: 1 };
  assert.deepEqual([0, 500, 2_500, 5_000, 9_999, 10_000, 60_000].map((t) => slowStartFactor(s, t)), [0.1, 0.1, 0.25, 0.5, 0.9999, 1, 1]);
});

it('a higher aggression ramps faster at first: (t / window)^(1 / aggression)', () => {
  const s = { windowMs: 10_000, minWeight: 0, aggression: 2 };
  assert.equal(slowStartFactor(s, 2_500), 0.5);
  assert.equal(slowStartFactor(s, 0), Math.sqrt(1 / 10_000), 'at least 1 ms counted');
});
