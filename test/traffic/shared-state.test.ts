import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { ClusterRuntime, isPickFailure } from '../../src/traffic/cluster.js';
import {
  CL, createTrafficMemory, EP, privateTrafficStore, TrafficStore, trafficMemoryBytes,
} from '../../src/traffic/shared-state.js';
import { clusterSpec, endpoint, outlierSpec } from './support.js';

/** `workers` views of one shared memory, as the primary and its worker threads hold them. */
function views(workers: number, o: { endpointSlots?: number; clusterSlots?: number; warn?: (m: string) => void } = {}): TrafficStore[] {
  const memory = createTrafficMemory({ workers, ...o });
  return Array.from({ length: workers }, (_, worker) => new TrafficStore({ memory, worker, warn: o.warn }));
}

const moduleUrl = (name: string): string => new URL(`../../src/traffic/${name}.js`, import.meta.url).href;

/** Runs `body` (an async function's text, with `workerData` and the traffic modules in scope) in a worker thread. */
async function inWorker<T>(body: string, workerData: Record<string, unknown>): Promise<T> {
  const code = `
    const { workerData, parentPort } = require('node:worker_threads');
    (async () => {
      const shared = await import(workerData.urls.shared);
      const cluster = await import(workerData.urls.cluster);
      ${body}
    })().then((r) => parentPort.postMessage({ ok: r }), (e) => parentPort.postMessage({ error: String(e && e.stack || e) }));`;
  const w = new Worker(code, {
    eval: true,
    workerData: { ...workerData, urls: { shared: moduleUrl('shared-state'), cluster: moduleUrl('cluster') } },
  });
  const [m] = await once(w, 'message') as [{ ok?: T; error?: string }];
  await w.terminate();
  if (m.error !== undefined) throw new Error(m.error);
  return m.ok as T;
}

describe('TrafficStore', () => {
  it('gives every thread the same slot for a key, without a message (the key\'s hash and probing)', () => {
    const [a, b] = views(2);
    const ea = a!.attachEndpoint('outbound|80||r', '10.0.0.1:80');
    const eb = b!.attachEndpoint('outbound|80||r', '10.0.0.1:80');
    assert.equal(ea.slot, eb.slot);
    assert.notEqual(a!.attachEndpoint('outbound|80||r', '10.0.0.2:80').slot, ea.slot);
    assert.notEqual(a!.attachEndpoint('outbound|80|v1|r', '10.0.0.1:80').slot, ea.slot, 'the cluster is part of the key');
    assert.equal(a!.attachCluster('outbound|80||r').slot, b!.attachCluster('outbound|80||r').slot);
    assert.ok(ea.shared);
  });

  it('resolves collisions by probing: as many keys as slots, each its own slot, found again by every thread', () => {
    const [a, b] = views(2, { endpointSlots: 64 });
    const keys = Array.from({ length: 64 }, (_, i) => `10.0.${i >> 8}.${i & 255}:80`);
    const slots = keys.map((k) => a!.attachEndpoint('c', k).slot);
    assert.equal(new Set(slots).size, 64);
    assert.deepEqual(keys.map((k) => b!.attachEndpoint('c', k).slot), slots);
  });

  it('shares gauges exactly and sums each worker\'s counters', () => {
    const [a, b] = views(2);
    const ea = a!.attachEndpoint('c', '10.0.0.1:80');
    const eb = b!.attachEndpoint('c', '10.0.0.1:80');
    ea.requestStarted();
    eb.requestStarted();
    eb.requestStarted();
    assert.equal(ea.activeRequests(), 3);
    ea.count('rq_success');
    eb.count('rq_success');
    assert.equal(ea.total('rq_total'), 3);
    assert.equal(eb.total('rq_success'), 2);
    eb.requestEnded();
    assert.equal(ea.activeRequests(), 2);
  });

  it('gives back what a dead worker held: its requests, connections, limits and references', () => {
    const [a, b] = views(2);
    const eb = b!.attachEndpoint('c', '10.0.0.1:80');
    const cb = b!.attachCluster('c');
    eb.requestStarted();
    eb.connectionOpened();
    assert.equal(cb.tryAcquire('cx', 1), true);
    assert.equal(cb.tryAcquire('rq', 10), true);
    eb.count('rq_success');
    const ca = a!.attachCluster('c');
    assert.equal(ca.tryAcquire('cx', 1), false, 'the dead worker\'s connection still counts');
    a!.reclaim(1);
    const ea = a!.attachEndpoint('c', '10.0.0.1:80');
    assert.deepEqual([ea.activeRequests(), ea.activeConnections(), ca.gauge('rq')], [0, 0, 0]);
    assert.equal(ca.tryAcquire('cx', 1), true);
    assert.equal(ea.total('rq_success'), 0, 'nobody referenced the endpoint any more: a new membership starts afresh');
    assert.throws(() => a!.reclaim(0), /its own share/);
  });

  it('keeps an endpoint\'s state while any thread references it, and starts afresh once nobody does', () => {
    const [a, b] = views(2);
    const ea = a!.attachEndpoint('c', '10.0.0.1:80');
    const eb = b!.attachEndpoint('c', '10.0.0.1:80');
    Atomics.store(ea.words, ea.base + EP.EJECTED, 1);
    ea.count('rq_error');
    a!.detachEndpoint(ea);
    assert.equal(a!.attachEndpoint('c', '10.0.0.1:80').isEjected(), true, 'b still holds it');
    b!.detachEndpoint(eb);
    a!.detachEndpoint(ea);
    const again = a!.attachEndpoint('c', '10.0.0.1:80');
    assert.equal(again.isEjected(), false);
    assert.equal(again.total('rq_error'), 0);
    assert.throws(() => b!.detachEndpoint(eb), /does not hold/);
  });

  it('counts each thread\'s references to a cluster in its own share, apart from its endpoints\'', () => {
    const [a, b] = views(2);
    const c1 = a!.attachCluster('c');
    const c2 = a!.attachCluster('c');
    b!.attachCluster('c');
    a!.attachEndpoint('c', '10.0.0.1:80');
    assert.equal(Atomics.load(c1.words, c1.base + CL.REFS), 3);
    a!.detachCluster(c1);
    a!.detachCluster(c2);
    assert.throws(() => a!.detachCluster(c1), /does not hold/);
    a!.reclaim(1);
    assert.equal(Atomics.load(c1.words, c1.base + CL.REFS), 0);
  });

  it('reuses the slots of keys nobody references when the table is full, then falls back to a private slot with one warning', () => {
    const warnings: string[] = [];
    const [a] = views(1, { endpointSlots: 4, warn: (m) => warnings.push(m) });
    const held = [1, 2, 3, 4].map((i) => a!.attachEndpoint('c', `10.0.0.${i}:80`));
    a!.detachEndpoint(held[0]!);
    a!.detachEndpoint(held[1]!);
    const reused = [5, 6].map((i) => a!.attachEndpoint('c', `10.0.0.${i}:80`));
    assert.deepEqual(reused.map((s) => s.slot).sort(), [held[0]!.slot, held[1]!.slot].sort());
    assert.deepEqual(warnings, []);
    const extra = a!.attachEndpoint('c', '10.0.0.7:80');
    const extra2 = a!.attachEndpoint('c', '10.0.0.8:80');
    assert.equal(extra.shared, false);
    assert.notEqual(extra.slot, extra2.slot);
    extra.requestStarted();
    assert.equal(extra.activeRequests(), 1);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /all 4 endpoint slots are in use/);
    a!.detachEndpoint(extra);
  });

  it('holds times as int64 milliseconds: exact far past the 24.8 days of an int32', () => {
    const s = privateTrafficStore().attachEndpoint('c', '10.0.0.1:80');
    assert.equal(s.lastEjection(), undefined);
    const t = 1_717_000_000_000 + 400 * 86_400_000 + 0.7;
    s.setLastEjection(t);
    assert.equal(s.lastEjection(), Math.floor(t));
  });

  it('lets one thread claim each outlier sweep', () => {
    const [a, b] = views(2);
    const ca = a!.attachCluster('c');
    const cb = b!.attachCluster('c');
    assert.equal(ca.claimSweep(1000, 10_000), false, 'the first sight schedules the first sweep');
    assert.equal(cb.claimSweep(5000, 10_000), false);
    assert.equal(cb.claimSweep(11_000, 10_000), true);
    assert.equal(ca.claimSweep(11_000, 10_000), false);
    assert.equal(ca.nextSweepAt(), 21_000);
  });

  it('refuses memory it did not make and a worker without a share', () => {
    assert.throws(() => new TrafficStore({ memory: new SharedArrayBuffer(1024), worker: 0 }), /not made by createTrafficMemory/);
    assert.throws(() => new TrafficStore({ memory: createTrafficMemory({ workers: 2 }), worker: 2 }), /worker 2 has no share/);
    assert.throws(() => createTrafficMemory({ workers: 0 }), /workers must be an integer/);
  });

  it('sizes its memory from the slot counts (about 7 MB virtual for the defaults and 2 workers)', () => {
    const bytes = trafficMemoryBytes({ workers: 2 });
    assert.ok(bytes > 5e6 && bytes < 8e6, `${bytes}`);
    assert.ok(trafficMemoryBytes({ workers: 2, endpointSlots: 16, clusterSlots: 4 }) < 10_000);
  });
});

describe('TrafficStore across worker threads', () => {
  it('a limit of 1 held by two threads hammering acquire/release is never held twice at once', async () => {
    const memory = createTrafficMemory({ workers: 3 });
    const probe = new SharedArrayBuffer(8); // [holders now, threads ready]
    const body = `
      const store = new shared.TrafficStore({ memory: workerData.memory, worker: workerData.worker });
      const slot = store.attachCluster('c');
      const holders = new Int32Array(workerData.probe);
      // Start together (a thread starts in tens of milliseconds: alone, one would finish first).
      Atomics.add(holders, 1, 1);
      while (Atomics.load(holders, 1) < 2) {}
      let got = 0, overlaps = 0;
      for (let i = 0; i < 2000000 && got < 20000; i++) {
        if (!slot.tryAcquire('cx', 1)) continue;
        if (Atomics.add(holders, 0, 1) !== 0) overlaps++;
        got++;
        Atomics.sub(holders, 0, 1);
        slot.release('cx');
      }
      return { got, overlaps };`;
    const results = await Promise.all([1, 2].map((worker) => inWorker<{ got: number; overlaps: number }>(body, { memory, probe, worker })));
    for (const r of results) {
      assert.equal(r.overlaps, 0);
      assert.ok(r.got > 0, 'each thread got the slot in turn');
    }
    assert.equal(new TrafficStore({ memory, worker: 0 }).attachCluster('c').gauge('cx'), 0);
  });

  it('an endpoint ejected by failures seen in one thread is skipped by another', async () => {
    const memory = createTrafficMemory({ workers: 2 });
    const spec = clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 3, maxEjectionPercent: 100 }) } });
    const endpoints = [endpoint('10.0.0.1'), endpoint('10.0.0.2'), endpoint('10.0.0.3')];
    const here = new ClusterRuntime({ spec, endpoints, store: new TrafficStore({ memory, worker: 0 }) });
    for (let k = 0; k < 300; k++) {
      const ep = here.pick();
      assert.ok(!isPickFailure(ep));
      here.attemptEnded(ep, { kind: 'response', status: 200 });
    }
    const ejected = await inWorker<string[]>(`
      const store = new shared.TrafficStore({ memory: workerData.memory, worker: 1 });
      const events = [];
      const c = new cluster.ClusterRuntime({ spec: workerData.spec, endpoints: workerData.endpoints, store, onOutlierEvent: (e) => events.push(e.upstreamUrl) });
      const target = c.endpoints[0];
      for (let k = 0; k < 3; k++) c.attemptEnded(c.startAttempt(target), { kind: 'response', status: 503 });
      return events;`, { memory, spec, endpoints });
    assert.deepEqual(ejected, ['10.0.0.1:80']);
    assert.equal(here.endpoints[0]!.slot.isEjected(), true);
    for (let k = 0; k < 300; k++) {
      const ep = here.pick();
      assert.ok(!isPickFailure(ep));
      assert.notEqual(ep.hostPort, '10.0.0.1:80');
      here.attemptEnded(ep, { kind: 'response', status: 200 });
    }
  });

  it('a worker waiting for the one connection slot gets it as soon as another thread releases it', async () => {
    const memory = createTrafficMemory({ workers: 2 });
    const store = new TrafficStore({ memory, worker: 0 });
    const slot = store.attachCluster('c');
    assert.equal(slot.tryAcquire('cx', 1), true);
    const started = Date.now();
    const waiter = inWorker<{ waited: number; woken: boolean; got: boolean }>(`
      const slot = new shared.TrafficStore({ memory: workerData.memory, worker: 1 }).attachCluster('c');
      const t0 = Date.now();
      if (slot.tryAcquire('cx', 1)) return { waited: 0, woken: false, got: true };
      const woken = await slot.waitForConnectionRelease(10000);
      const got = slot.tryAcquire('cx', 1);
      if (got) slot.release('cx');
      return { waited: Date.now() - t0, woken, got };`, { memory });
    // Release once the worker waits (it registers as a waiter first).
    while (slot.connectionWaiters() === 0) await new Promise((r) => setTimeout(r, 5));
    slot.release('cx');
    const r = await waiter;
    assert.deepEqual([r.woken, r.got], [true, true]);
    assert.ok(Date.now() - started < 5000, 'woken by the release, not by the time-out');
    assert.equal(slot.connectionWaiters(), 0);
  });
});
