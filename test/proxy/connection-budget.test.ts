import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { ConnectionBudget, connectionLimit, sharedCount, WARN_EVERY_MS } from '../../src/proxy/connection-budget.js';
import { fileDescriptorLimit } from '../../src/proxy/fd-limit.js';

/** Budgets of `workers` threads over one shared count, a fake clock and the warnings they log. */
function budgets(max: number, workers = 1): { all: ConnectionBudget[]; warnings: string[]; clock: { now: number } } {
  const shared = sharedCount(workers);
  const warnings: string[] = [];
  const clock = { now: 1_000_000 };
  const all = Array.from({ length: workers }, (_, worker) => new ConnectionBudget({ max, shared, worker, warn: (m) => warnings.push(m), now: () => clock.now }));
  return { all, warnings, clock };
}

describe('connectionLimit', () => {
  const cases: [configured: number, fds: number | undefined, max: number, source: RegExp][] = [
    [500, 20_000, 500, /MESH_MAX_DOWNSTREAM_CONNECTIONS/],
    [0, 20_000, 9_872, /half of the 20000 file descriptors less 256/],
    [0, 1_048_576, 524_160, /1048576/],
    [0, 300, 22, /300/],
    [0, 100, 1, /100/], // never 0: one connection still gets through
    [0, undefined, 2 ** 31 - 1, /no file-descriptor limit known/],
    [2 ** 40, 1024, 2 ** 31 - 1, /MESH_MAX/], // kept within the shared int32 count
  ];
  for (const [configured, fds, max, source] of cases) {
    it(`${configured} with ${fds ?? 'no'} descriptors → ${max}`, () => {
      const limit = connectionLimit(configured, fds);
      assert.equal(limit.max, max);
      assert.match(limit.source, source);
    });
  }

  it('reads the open-file limit this process runs with', async () => {
    const { readFile } = await import('node:fs/promises');
    const line = (await readFile('/proc/self/limits', 'utf8')).split('\n').find((l) => l.startsWith('Max open files'))!;
    const soft = line.split(/\s{2,}/)[1]!;
    assert.equal(fileDescriptorLimit(), soft === 'unlimited' ? undefined : Number(soft));
  });
});

describe('ConnectionBudget', () => {
  it('admits up to the maximum, refuses beyond it, admits again once one closes', () => {
    const { all: [b] } = budgets(3);
    assert.deepEqual([b!.tryAcquire(), b!.tryAcquire(), b!.tryAcquire(), b!.tryAcquire()], [true, true, true, false]);
    assert.equal(b!.used, 3, 'a refusal takes nothing');
    b!.release();
    assert.equal(b!.tryAcquire(), true);
    assert.equal(b!.tryAcquire(), false);
  });

  it('is one count for every worker: none admits past the process\'s maximum', () => {
    const { all: [w0, w1, w2] } = budgets(4, 3);
    assert.deepEqual([w0!.tryAcquire(), w1!.tryAcquire(), w2!.tryAcquire(), w2!.tryAcquire()], [true, true, true, true]);
    assert.deepEqual([w0!.tryAcquire(), w1!.tryAcquire()], [false, false]);
    w0!.release();
    assert.equal(w1!.tryAcquire(), true, 'a place freed in one worker is free for all');
  });

  it('gives back the places of a worker that died', () => {
    const { all: [w0, w1] } = budgets(3, 2);
    w1!.tryAcquire();
    w1!.tryAcquire();
    w0!.tryAcquire();
    assert.equal(w0!.tryAcquire(), false);
    w0!.reclaim(1);
    assert.equal(w0!.used, 1);
    assert.deepEqual([w0!.tryAcquire(), w0!.tryAcquire(), w0!.tryAcquire()], [true, true, false]);
  });

  it('warns from 90% on, and at the maximum, at most once a minute for the whole process', () => {
    const { all: [w0, w1], warnings, clock } = budgets(10, 2);
    for (let i = 0; i < 8; i++) w0!.tryAcquire();
    assert.deepEqual(warnings, [], 'quiet below 90%');
    w1!.tryAcquire();
    assert.deepEqual(warnings, ['downstream connections at 9 of 10 (MESH_MAX_DOWNSTREAM_CONNECTIONS): beyond it new connections are refused']);
    w0!.tryAcquire();
    w0!.tryAcquire();
    w1!.tryAcquire();
    assert.equal(warnings.length, 1, 'not again within the minute, from either worker');
    clock.now += WARN_EVERY_MS;
    w1!.tryAcquire();
    assert.deepEqual(warnings.slice(1), ['downstream connections at the maximum of 10 (MESH_MAX_DOWNSTREAM_CONNECTIONS): new connections are refused until some close']);
  });

  it('holds across real worker threads: 4 threads × 500 attempts on a maximum of 1000 admit exactly 1000', async () => {
    const shared = sharedCount(4);
    const url = new URL('../../src/proxy/connection-budget.js', import.meta.url).href;
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      import(workerData.url).then(({ ConnectionBudget }) => {
        const b = new ConnectionBudget({ max: 1000, shared: workerData.shared, worker: workerData.worker, warn: () => {} });
        let admitted = 0;
        for (let i = 0; i < 500; i++) if (b.tryAcquire()) admitted++;
        parentPort.postMessage(admitted);
      });`;
    const admitted = await Promise.all([0, 1, 2, 3].map(async (worker) => {
      const w = new Worker(code, { eval: true, workerData: { url, shared, worker } });
      const [n] = await once(w, 'message') as [number];
      await w.terminate();
      return n;
    }));
    assert.equal(admitted.reduce((a, b) => a + b, 0), 1000);
    assert.equal(new Int32Array(shared, 8)[0], 1000);
  });
});
