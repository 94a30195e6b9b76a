import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DEFAULT_BACKOFF, backoffDelayMs, jitteredGraceRatio, renewalDelayMs, renewalTimeMs,
} from '../../src/identity/rotation.js';

const HOUR = 3_600_000;
/** A random source that returns the given values in turn. */
const sequence = (...values: number[]) => { let i = 0; return () => values[i++ % values.length]!; };

describe('renewalTimeMs (remaining life below the grace ratio)', () => {
  const cases: [string, number, number, number, number][] = [
    ['24h, ratio 0.5: at 12h', 0, 24 * HOUR, 0.5, 12 * HOUR],
    ['24h, ratio 0.25: at 18h (6h left)', 0, 24 * HOUR, 0.25, 18 * HOUR],
    ['24h, ratio 0.8: at 4.8h', 0, 24 * HOUR, 0.8, 4.8 * HOUR],
    ['ratio 0: at expiry', 1000, 5000, 0, 5000],
    ['ratio 1: at once', 1000, 5000, 1, 1000],
    ['ratio above 1 is clamped', 1000, 5000, 7, 1000],
    ['4s, ratio 0.5: 2s after notBefore', 10_000, 14_000, 0.5, 12_000],
  ];
  for (const [name, nb, na, ratio, at] of cases) it(name, () => assert.equal(renewalTimeMs(nb, na, ratio), at));
});

describe('jitteredGraceRatio', () => {
  it('moves down by random × jitter', () => assert.equal(jitteredGraceRatio({ graceRatio: 0.5, graceJitter: 0.01 }, sequence(0.5, 0.1)), 0.495));
  it('moves up by random × jitter', () => assert.equal(jitteredGraceRatio({ graceRatio: 0.5, graceJitter: 0.01 }, sequence(0.5, 0.9)), 0.505));
  it('no jitter, no change', () => assert.equal(jitteredGraceRatio({ graceRatio: 0.3, graceJitter: 0 }, Math.random), 0.3));
  it('stays within [0, 1]', () => {
    assert.equal(jitteredGraceRatio({ graceRatio: 0.99, graceJitter: 0.5 }, sequence(1, 0.9)), 1);
    assert.equal(jitteredGraceRatio({ graceRatio: 0.01, graceJitter: 0.5 }, sequence(1, 0.1)), 0);
  });
  it('spreads 24h renewals by about ±15 minutes with the defaults', () => {
    const validity = { notBeforeMs: 0, notAfterMs: 24 * HOUR };
    const delays = Array.from({ length: 500 }, () => renewalDelayMs(validity, 0, { graceRatio: 0.5, graceJitter: 0.01 }));
    const spread = Math.max(...delays) - Math.min(...delays);
    assert.ok(spread > 20 * 60_000 && spread <= 2 * 0.01 * 24 * HOUR, `spread ${spread / 60_000} min`);
    for (const d of delays) assert.ok(Math.abs(d - 12 * HOUR) <= 0.01 * 24 * HOUR);
  });
});

describe('renewalDelayMs', () => {
  it('counts from now', () => assert.equal(renewalDelayMs({ notBeforeMs: 0, notAfterMs: 4000 }, 1500, { graceRatio: 0.5, graceJitter: 0 }), 500));
  it('is 0 when overdue', () => assert.equal(renewalDelayMs({ notBeforeMs: 0, notAfterMs: 4000 }, 3000, { graceRatio: 0.5, graceJitter: 0 }), 0));
});

describe('backoffDelayMs', () => {
  const middle = () => 0.5;
  it('doubles from 1 s to the 60 s cap', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8, 50].map((n) => backoffDelayMs(n, DEFAULT_BACKOFF, middle)),
      [1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  });
  it('jitters within ±20 %, never above the cap', () => {
    assert.equal(backoffDelayMs(1, DEFAULT_BACKOFF, () => 0), 800);
    assert.equal(backoffDelayMs(1, DEFAULT_BACKOFF, () => 1), 1200);
    assert.equal(backoffDelayMs(10, DEFAULT_BACKOFF, () => 1), 60_000);
    assert.equal(backoffDelayMs(10, DEFAULT_BACKOFF, () => 0), 48_000);
  });
});
