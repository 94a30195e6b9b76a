// The write batch: held writers write together once the I/O phase is over, within the bounds.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { setImmediate as immediate } from 'node:timers/promises';
import { HOLD_PER_WRITER, HOLD_TOTAL, heldNow, hold, released, type BatchedWriter } from '../../src/proxy/write-batch.js';

class Writer implements BatchedWriter {
  inBatch = false;
  held = 0;
  writes = 0;
  constructor(readonly log: string[], readonly name: string) {}
  add(bytes: number): boolean {
    const ok = hold(this, bytes, this.held + bytes);
    if (ok) this.held += bytes;
    return ok;
  }
  writeHeld(): void {
    if (this.held === 0) return;
    this.log.push(this.name);
    this.writes++;
    released(this.held);
    this.held = 0;
  }
}

it('holds small writes until the I/O phase is over, then writes each writer once, in the order they came', async () => {
  const log: string[] = [];
  const a = new Writer(log, 'a');
  const b = new Writer(log, 'b');
  assert.ok(a.add(100));
  assert.ok(b.add(200));
  assert.ok(a.add(300), 'a writer may add to what it holds');
  assert.deepEqual(log, [], 'nothing written in this turn');
  assert.equal(heldNow(), 600);
  await immediate();
  assert.deepEqual(log, ['a', 'b']);
  assert.equal(a.writes, 1, 'one write for both of a\'s parts');
  assert.equal(heldNow(), 0);
  assert.equal(a.inBatch, false);
});

it('refuses past a writer\'s bound and past the bound of all writers (the caller writes at once)', async () => {
  const log: string[] = [];
  const big = new Writer(log, 'big');
  assert.equal(big.add(HOLD_PER_WRITER + 1), false);
  assert.ok(big.add(HOLD_PER_WRITER));
  assert.equal(big.add(1), false, 'one byte more than a writer may hold');
  const many = Array.from({ length: HOLD_TOTAL / HOLD_PER_WRITER }, (_, i) => new Writer(log, `w${i}`));
  const taken = many.map((w) => w.add(HOLD_PER_WRITER)).filter(Boolean).length;
  assert.equal(taken, HOLD_TOTAL / HOLD_PER_WRITER - 1, 'all together at most HOLD_TOTAL (big holds a share)');
  assert.ok(heldNow() <= HOLD_TOTAL);
  await immediate();
  assert.equal(heldNow(), 0);
  assert.equal(log.length, taken + 1);
});

it('a writer that wrote on its own before the batch ran is called and writes nothing', async () => {
  const log: string[] = [];
  const w = new Writer(log, 'w');
  assert.ok(w.add(10));
  w.writeHeld(); // e.g. the connection ended and wrote what it held first
  assert.deepEqual(log, ['w']);
  await immediate();
  assert.deepEqual(log, ['w']);
  assert.equal(heldNow(), 0);
});
