// The DNS source with a fake resolver and fake timers: answers become endpoints (all of them, or
// the first), names are asked again at their TTL (floored) or the refresh rate, a failure keeps the
// last answer and says so, and listeners hear of real changes only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildClusters } from '../../../src/traffic/clusters.js';
import { DnsEndpointSource, nextRefreshMs, type DnsEvent, type DnsTimers, type ResolvedAddress } from '../../../src/traffic/endpoint-sources/dns-source.js';
import { dnsTargets } from '../../../src/traffic/endpoint-sources/mesh-source.js';
import type { EndpointSpec } from '../../../src/traffic/spec.js';
import { se, SHOP, snapshotOf } from '../resources.js';

/** Timers that run only when the test moves the clock. */
class FakeTimers implements DnsTimers {
  now = 0;
  #next = 1;
  readonly #due = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#due.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.#due.delete(handle as number);
  }
  pending(): number[] {
    return [...this.#due.values()].map((d) => d.at).sort((a, b) => a - b);
  }
  /** Moves the clock, running what falls due in order; answers given meanwhile are let through. */
  async advance(ms: number): Promise<void> {
    const until = this.now + ms;
    for (;;) {
      const next = [...this.#due.entries()].filter(([, d]) => d.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (next === undefined) break;
      this.#due.delete(next[0]);
      this.now = next[1].at;
      next[1].fn();
      await settle();
    }
    this.now = until;
  }
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

/** A resolver whose answers the test sets per name: a list of records, or an error. */
class FakeResolver {
  readonly answers = new Map<string, readonly ResolvedAddress[] | Error>();
  readonly asked: { name: string; at: number }[] = [];
  constructor(private readonly timers: FakeTimers) {}
  set(name: string, answer: readonly ResolvedAddress[] | Error): void {
    this.answers.set(name, answer);
  }
  readonly resolve = (name: string): Promise<readonly ResolvedAddress[]> => {
    this.asked.push({ name, at: this.timers.now });
    const a = this.answers.get(name);
    if (a === undefined) return Promise.reject(new Error(`no answer set for ${name}`));
    return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
  };
}

const A = (ttl: number, ...addresses: string[]): ResolvedAddress[] => addresses.map((address) => ({ address, ttl }));
const brief = (es: readonly EndpointSpec[]): string[] => es.map((e) => `${e.address}:${e.port}`);

function setup(entries: string[], o: { refreshMs?: number; minRefreshMs?: number; failureRefreshMs?: number } = {}) {
  const timers = new FakeTimers();
  const resolver = new FakeResolver(timers);
  const events: DnsEvent[] = [];
  const told: string[][] = [];
  const source = new DnsEndpointSource({ resolve: resolver.resolve, timers, log: (e) => events.push(e), ...o });
  source.onChange((k) => told.push([...k]));
  const snap = snapshotOf(...entries);
  const targets = dnsTargets(buildClusters(snap, { workload: SHOP }).services, snap.workloadEntries);
  return { timers, resolver, events, told, source, start: () => source.update(targets), targets };
}

const API = se('api', '{hosts: [api.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS}');
const KEY = 'api.example.com:443';

describe('DnsEndpointSource', () => {
  it('resolves the host at once; every address is an endpoint (STRICT_DNS)', async () => {
    const t = setup([API]);
    t.resolver.set('api.example.com', A(30, '192.0.2.1', '192.0.2.2'));
    t.start();
    assert.deepEqual(t.source.endpointsOf(KEY), [], 'nothing until the first answer');
    await settle();
    assert.deepEqual(brief(t.source.endpointsOf(KEY)), ['192.0.2.1:443', '192.0.2.2:443']);
    assert.equal(t.source.endpointsOf(KEY)[0]!.origin, 'DNS api.example.com (ServiceEntry shop/api)');
    assert.deepEqual(t.told, [[KEY], [KEY]], 'the service appeared (empty), then got its endpoints');
    assert.deepEqual(t.events, [{ kind: 'resolved', name: 'api.example.com', addresses: ['192.0.2.1', '192.0.2.2'], nextMs: 30_000 }]);
  });

  it('asks again when the TTL runs out; an unchanged answer tells no one', async () => {
    const t = setup([API]);
    t.resolver.set('api.example.com', A(30, '192.0.2.1'));
    t.start();
    await settle();
    await t.timers.advance(29_999);
    assert.equal(t.resolver.asked.length, 1);
    await t.timers.advance(1);
    assert.deepEqual(t.resolver.asked.map((a) => a.at), [0, 30_000]);
    assert.equal(t.told.length, 2, 'the same answer: no change');
    t.resolver.set('api.example.com', A(10, '192.0.2.9'));
    await t.timers.advance(30_000);
    assert.deepEqual(brief(t.source.endpointsOf(KEY)), ['192.0.2.9:443']);
    assert.equal(t.told.length, 3);
    await t.timers.advance(10_000);
    assert.deepEqual(t.resolver.asked.map((a) => a.at), [0, 30_000, 60_000, 70_000], 'the new TTL');
  });

  it('the next refresh: the lowest TTL, floored; the refresh rate without one', () => {
    const o = { refreshMs: 60_000, minRefreshMs: 5_000 };
    assert.equal(nextRefreshMs(A(30, 'a'), o), 30_000);
    assert.equal(nextRefreshMs([...A(30, 'a'), ...A(12, 'b')], o), 12_000);
    assert.equal(nextRefreshMs(A(1, 'a'), o), 5_000, 'floor');
    assert.equal(nextRefreshMs(A(0, 'a'), o), 60_000, 'no TTL');
    assert.equal(nextRefreshMs([], o), 60_000, 'an empty answer');
  });

  it('a failed resolution keeps the last answer, says so, and is tried again after the refresh rate', async () => {
    const t = setup([API], { failureRefreshMs: 15_000 });
    t.resolver.set('api.example.com', A(20, '192.0.2.1', '192.0.2.2'));
    t.start();
    await settle();
    t.resolver.set('api.example.com', new Error('queryA ETIMEOUT api.example.com'));
    await t.timers.advance(20_000);
    assert.deepEqual(brief(t.source.endpointsOf(KEY)), ['192.0.2.1:443', '192.0.2.2:443'], 'kept');
    assert.deepEqual(t.events[1], { kind: 'failed', name: 'api.example.com', error: 'queryA ETIMEOUT api.example.com', kept: ['192.0.2.1', '192.0.2.2'], nextMs: 15_000 });
    assert.equal(t.told.length, 2, 'nothing changed for the readers');
    t.resolver.set('api.example.com', A(20, '192.0.2.3'));
    await t.timers.advance(15_000);
    assert.deepEqual(brief(t.source.endpointsOf(KEY)), ['192.0.2.3:443']);
    assert.deepEqual(t.resolver.asked.map((a) => a.at), [0, 20_000, 35_000]);
  });

  it('a first resolution that fails leaves no endpoints; the default failure refresh is the refresh rate', async () => {
    const t = setup([API], { refreshMs: 45_000 });
    t.resolver.set('api.example.com', new Error('SERVFAIL'));
    t.start();
    await settle();
    assert.deepEqual(t.source.endpointsOf(KEY), []);
    assert.deepEqual(t.timers.pending(), [45_000]);
    t.resolver.set('api.example.com', []);
    await t.timers.advance(45_000);
    assert.deepEqual(t.source.endpointsOf(KEY), [], 'an empty answer is an answer');
    assert.deepEqual(t.events.map((e) => e.kind), ['failed', 'resolved']);
  });

  it('an empty answer replaces the last one (Envoy: no such name is an answer)', async () => {
    const t = setup([API]);
    t.resolver.set('api.example.com', A(10, '192.0.2.1'));
    t.start();
    await settle();
    t.resolver.set('api.example.com', []);
    await t.timers.advance(10_000);
    assert.deepEqual(t.source.endpointsOf(KEY), []);
  });

  it('DNS_ROUND_ROBIN: the first address of the latest answer only (LOGICAL_DNS)', async () => {
    const t = setup([se('api', '{hosts: [api.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS_ROUND_ROBIN}')]);
    t.resolver.set('api.example.com', A(10, '192.0.2.1', '192.0.2.2'));
    t.start();
    await settle();
    assert.deepEqual(brief(t.source.endpointsOf(KEY)), ['192.0.2.1:443']);
    t.resolver.set('api.example.com', A(10, '192.0.2.2', '192.0.2.1'));
    await t.timers.advance(10_000);
    assert.deepEqual(brief(t.source.endpointsOf(KEY)), ['192.0.2.2:443']);
  });

  it('resolves endpoints that are names (with their ports and labels), uses address endpoints as they are', async () => {
    const t = setup([se('db', `{hosts: [db.example.com], ports: [{number: 5432, name: pg, protocol: TCP}], resolution: DNS,
      endpoints: [{address: db-a.example.com, ports: {pg: 6432}, labels: {zone: a}}, {address: 192.0.2.50}, {address: db-b.example.com, weight: 4}]}`)]);
    t.resolver.set('db-a.example.com', A(30, '10.0.0.1', '10.0.0.2'));
    t.resolver.set('db-b.example.com', A(30, '10.0.1.1'));
    t.start();
    await settle();
    const es = t.source.endpointsOf('db.example.com:5432');
    assert.deepEqual(brief(es), ['10.0.0.1:6432', '10.0.0.2:6432', '192.0.2.50:5432', '10.0.1.1:5432']);
    assert.deepEqual([es[0]!.labels, es[3]!.weight, es[2]!.origin], [{ zone: 'a' }, 4, 'ServiceEntry shop/db']);
    assert.deepEqual(t.source.names().sort(), ['db-a.example.com', 'db-b.example.com']);
  });

  it('a name several services need is asked once; names no longer needed are dropped with their timers', async () => {
    const t = setup([se('api', '{hosts: [api.example.com], ports: [{number: 443, name: tls, protocol: TLS}, {number: 80, name: http, protocol: HTTP}], resolution: DNS}')]);
    t.resolver.set('api.example.com', A(10, '192.0.2.1'));
    t.start();
    await settle();
    assert.equal(t.resolver.asked.length, 1);
    assert.deepEqual(brief(t.source.endpointsOf('api.example.com:80')), ['192.0.2.1:80']);
    t.source.update([]);
    assert.deepEqual([t.source.names(), t.timers.pending()], [[], []]);
    assert.deepEqual(t.source.endpointsOf(KEY), []);
    assert.deepEqual(t.told.at(-1)?.sort(), ['api.example.com:443', 'api.example.com:80']);
    await t.timers.advance(60_000);
    assert.equal(t.resolver.asked.length, 1);
  });

  it('an answer that arrives after its name was dropped, or after close, is ignored', async () => {
    const t = setup([API]);
    let answer!: (records: ResolvedAddress[]) => void;
    const source = new DnsEndpointSource({ resolve: () => new Promise((r) => { answer = r; }), timers: t.timers });
    source.update(t.targets);
    source.update([]);
    answer(A(10, '192.0.2.1'));
    await settle();
    assert.deepEqual([source.endpointsOf(KEY), t.timers.pending()], [[], []]);
    source.update(t.targets);
    source.close();
    answer(A(10, '192.0.2.1'));
    await settle();
    assert.deepEqual(t.timers.pending(), [], 'closed: nothing scheduled');
  });

  it('close stops every refresh', async () => {
    const t = setup([API]);
    t.resolver.set('api.example.com', A(10, '192.0.2.1'));
    t.start();
    await settle();
    t.source.close();
    assert.deepEqual(t.timers.pending(), []);
    await t.timers.advance(100_000);
    assert.equal(t.resolver.asked.length, 1);
    assert.deepEqual(brief(t.source.endpointsOf(KEY)), ['192.0.2.1:443'], 'the last endpoints stay readable');
  });
});
