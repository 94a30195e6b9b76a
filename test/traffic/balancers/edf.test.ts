import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EdfSchedule } from '../../../src/traffic/balancers/edf.js';

describe('EdfSchedule', () => {
  it('picks the earliest deadline and re-queues it one period (1/weight) later', () => {
    const edf = new EdfSchedule(3);
    const w = [1, 2, 4];
    w.forEach((weight, i) => edf.add(i, 1 / weight));
    const order = Array.from({ length: 7 }, () => edf.pickAndReadd((i) => w[i]!));
    // Deadlines: 2 at 0.25, 0.5, 0.75, 1; 1 at 0.5, 1; 0 at 1: ties go to the earlier queued.
    assert.deepEqual(order, [2, 1, 2, 2, 0, 1, 2]);
  });

  it('keeps an entry whose weight fell to 0 last instead of losing it', () => {
    const edf = new EdfSchedule(2);
    edf.add(0, 1);
    edf.add(1, 2);
    assert.equal(edf.pickAndReadd(() => 0), 0);
    assert.equal(edf.pickAndReadd(() => 1), 1);
    assert.equal(edf.pickAndReadd(() => 1), 1);
    assert.equal(edf.length, 2);
  });
});
