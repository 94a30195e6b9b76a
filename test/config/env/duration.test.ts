import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DurationSyntaxError, formatDurationMs, formatDurationNs, parseDurationMs, parseDurationNs,
} from '../../../src/config/env/duration.js';

const S = 1_000_000_000n;
const M = 60n * S;
const H = 60n * M;

describe('parseDurationNs (Go time.ParseDuration)', () => {
  const good: [string, bigint][] = [
    ['0', 0n], ['5s', 5n * S], ['30s', 30n * S], ['1478s', 1478n * S], ['-5s', -5n * S], ['+5s', 5n * S],
    ['-0', 0n], ['+0', 0n], ['5.0s', 5n * S], ['5.6s', 5n * S + 600_000_000n], ['5.s', 5n * S], ['.5s', S / 2n],
    ['1.004s', S + 4_000_000n], ['100.00100s', 100n * S + 1_000_000n], ['10ns', 10n], ['11us', 11_000n],
    ['12µs', 12_000n], ['12μs', 12_000n], ['13ms', 13_000_000n], ['100ms', 100_000_000n], ['15m', 15n * M],
    ['16h', 16n * H], ['3h30m', 3n * H + 30n * M], ['10.5s4m', 4n * M + 10n * S + S / 2n],
    ['-2m3.4s', -(2n * M + 3n * S + 400_000_000n)], ['1h2m3s4ms5us6ns', H + 2n * M + 3n * S + 4_000_000n + 5_000n + 6n],
    ['39h9m14.425s', 39n * H + 9n * M + 14n * S + 425_000_000n], ['52763797000ns', 52_763_797_000n],
    ['0.3333333333333333333h', 20n * M], ['9223372036854775807ns', (1n << 63n) - 1n],
    ['-9223372036854775808ns', -(1n << 63n)], ['24h0m0s', 24n * H], ['5m0s', 5n * M],
  ];
  for (const [text, ns] of good) {
    it(`parses ${text}`, () => assert.equal(parseDurationNs(text), ns));
  }

  const bad = ['', '3', '-', 's', '.', '-.', '.s', '+.s', '1d', '10', '1.5.3s', '5 s', '5S', 'abc',
    '9223372036854775808ns', '-9223372036854775809ns', '1h-5m'];
  for (const text of bad) {
    it(`rejects ${JSON.stringify(text)}`, () => assert.throws(() => parseDurationNs(text), DurationSyntaxError));
  }

  it('gives milliseconds for the config', () => {
    assert.equal(parseDurationMs('100ms'), 100);
    assert.equal(parseDurationMs('1.5s'), 1500);
    assert.equal(parseDurationMs('250us'), 0.25);
  });
});

describe('formatDurationNs (Go Duration.String)', () => {
  const cases: [bigint, string][] = [
    [0n, '0s'], [1n, '1ns'], [1100n, '1.1µs'], [2_200_000n, '2.2ms'], [3_300_000_000n, '3.3s'],
    [4n * M + 5n * S, '4m5s'], [4n * M + 5_001_000_000n, '4m5.001s'], [5n * H + 6n * M + 7_001_000_000n, '5h6m7.001s'],
    [8n * M + 1n, '8m0.000000001s'], [(1n << 63n) - 1n, '2562047h47m16.854775807s'],
    [-(1n << 63n), '-2562047h47m16.854775808s'], [24n * H, '24h0m0s'], [5n * M, '5m0s'], [20n * M, '20m0s'],
    [H, '1h0m0s'], [100_000_000n, '100ms'], [-1_500_000_000n, '-1.5s'],
  ];
  for (const [ns, text] of cases) {
    it(`prints ${text}`, () => assert.equal(formatDurationNs(ns), text));
  }
  it('round-trips milliseconds', () => {
    assert.equal(formatDurationMs(100), '100ms');
    assert.equal(formatDurationMs(parseDurationMs('1h30m')), '1h30m0s');
  });
});
