// Which mirrors copy a request: per request, each with its own percentage.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { HttpMirror } from '../../src/config/resources/types.js';
import { chooseMirrors } from '../../src/routing/mirror-choice.js';
import { seeded } from '../helpers/seeded.js';

const mirror = (host: string, percent: number): HttpMirror => ({ destination: { host, weight: 100 }, percent });

it('copies every request at 100% (no draw) and none at 0%', () => {
  const never = (): number => { throw new Error('no draw expected'); };
  assert.deepEqual(chooseMirrors([mirror('a', 100)], never), [mirror('a', 100)]);
  assert.equal(chooseMirrors([mirror('a', 0)], never), undefined);
  assert.equal(chooseMirrors([], never), undefined);
});

it('draws each mirror on its own: the share copied follows each percentage', () => {
  // Binomial: n = 20000; at p = 0.25 the standard deviation is ~61, at p = 0.005 ~10. The bounds are
  // 6 standard deviations wide: a false failure is rarer than 1 in 10^8 per bound (seeded anyway).
  const random = seeded(29);
  const n = 20000;
  const counts = new Map<string, number>();
  let both = 0;
  for (let i = 0; i < n; i++) {
    const chosen = chooseMirrors([mirror('quarter', 25), mirror('half-percent', 0.5)], random) ?? [];
    for (const m of chosen) counts.set(m.destination.host, (counts.get(m.destination.host) ?? 0) + 1);
    if (chosen.length === 2) both++;
  }
  const within = (got: number, p: number): boolean => Math.abs(got - n * p) <= 6 * Math.sqrt(n * p * (1 - p));
  assert.ok(within(counts.get('quarter') ?? 0, 0.25), `25%: ${counts.get('quarter')}`);
  assert.ok(within(counts.get('half-percent') ?? 0, 0.005), `0.5%: ${counts.get('half-percent')}`);
  assert.ok(within(both, 0.25 * 0.005), `independent draws: both ${both}`);
});
