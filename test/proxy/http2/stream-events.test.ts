// StreamEvents (codec-stream.ts), the events of our HTTP/2 streams without node's EventEmitter state
// per object: node's EventEmitter is the oracle. Random sequences of on, once, off and emit, with
// listeners that add and remove listeners while an emit runs, must call the same listeners in the
// same order with the same arguments on both.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { StreamEvents } from '../../../src/proxy/http2/codec-stream.js';
import { seeded } from '../../helpers/seeded.js';

type Emitter = Pick<StreamEvents, 'on' | 'once' | 'off' | 'emit' | 'listenerCount'>;

/** Runs `ops` random operations on `e`: the log of the calls listeners got, and what emit answered. */
function run(e: Emitter, seed: number, ops: number): string[] {
  const next = seeded(seed);
  const pick = (n: number): number => Math.floor(next() * n);
  const events = ['data', 'end', 'close'];
  const log: string[] = [];
  // Listeners are made up front (the same functions on both runs), some of them changing the listeners as they run.
  const fns = Array.from({ length: 6 }, (_, i) => {
    const fn = (arg?: unknown): void => {
      log.push(`f${i}(${String(arg)})`);
      if (i === 4) e.on('end', fns[0]!); // adds during an emit: not called in it
      if (i === 5) e.off('data', fns[1]!); // removes during an emit: still called in it
    };
    return fn;
  });
  for (let k = 0; k < ops; k++) {
    const op = pick(4);
    const event = events[pick(events.length)]!;
    const fn = fns[pick(fns.length)]!;
    if (op === 0) e.on(event, fn);
    else if (op === 1) e.once(event, fn);
    else if (op === 2) e.off(event, fn);
    else log.push(`emit ${event} ${e.emit(event, k)}`);
    if (k % 50 === 0) log.push(`count ${events.map((x) => e.listenerCount(x)).join(',')}`);
  }
  return log;
}

describe('StreamEvents, with node\'s EventEmitter as the oracle', () => {
  it('200 random sequences of 300 operations each: the same calls in the same order', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const ours = run(new StreamEvents(), seed, 300);
      const node = run(new EventEmitter() as unknown as Emitter, seed, 300);
      assert.deepEqual(ours, node, `seed ${seed}`);
    }
  });

  it('once: called once, and removable by the function it was given', () => {
    const e = new StreamEvents();
    const calls: unknown[] = [];
    const fn = (x?: unknown): void => { calls.push(x); };
    e.once('close', fn);
    assert.equal(e.emit('close', 1), true);
    assert.equal(e.emit('close', 2), false);
    e.once('close', fn);
    e.off('close', fn);
    assert.equal(e.emit('close', 3), false);
    assert.deepEqual(calls, [1]);
  });
});
