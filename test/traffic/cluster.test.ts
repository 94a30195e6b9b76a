import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClusterRuntime, Endpoint, isPickFailure, NO_HEALTHY_UPSTREAM, OVERFLOW, type PickFailure } from '../../src/traffic/cluster.js';
import type { OutlierEvent } from '../../src/traffic/outlier-event.js';
import { OUTCOME, parseRetryOn, type AttemptOutcome } from '../../src/traffic/retry.js';
import { CL, createTrafficMemory, EP, privateTrafficStore, TrafficStore } from '../../src/traffic/shared-state.js';
import { DEFAULT_RETRY, type ClusterSpec, type EndpointSpec, type RetrySpec } from '../../src/traffic/spec.js';
import { clusterSpec, endpoint, FakeClock, outlierSpec, seeded } from './support.js';

const ok: AttemptOutcome = { kind: 'response', status: 200 };
const e503: AttemptOutcome = { kind: 'response', status: 503 };
const THREE = [endpoint('10.0.0.1'), endpoint('10.0.0.2'), endpoint('10.0.0.3')];

function runtime(o: { spec?: ClusterSpec; endpoints?: EndpointSpec[]; store?: TrafficStore; clock?: FakeClock; events?: OutlierEvent[] } = {}): ClusterRuntime {
  return new ClusterRuntime({
    spec: o.spec ?? clusterSpec(),
    endpoints: o.endpoints ?? THREE,
    store: o.store ?? privateTrafficStore({ endpointSlots: 64, clusterSlots: 8 }),
    clock: o.clock ?? new FakeClock(),
    random: seeded(1),
    onOutlierEvent: (e) => o.events?.push(e),
  });
}

function picked(r: Endpoint | PickFailure): Endpoint {
  assert.ok(!isPickFailure(r), `expected an endpoint, got ${isPickFailure(r) ? r.flag : ''}`);
  return r;
}

/** Starts an attempt on a given endpoint (startAttempt), expecting no overflow. */
function startOn(c: ClusterRuntime, ep: Endpoint): Endpoint {
  return picked(c.startAttempt(ep));
}

/** `workers` views of one shared memory. */
function views(workers: number): TrafficStore[] {
  const memory = createTrafficMemory({ workers, endpointSlots: 64, clusterSlots: 8 });
  return Array.from({ length: workers }, (_, worker) => new TrafficStore({ memory, worker }));
}

describe('ClusterRuntime: attempts', () => {
  it('starts an attempt at pick and ends it with its outcome, counted per endpoint and per cluster', () => {
    const c = runtime({ endpoints: [endpoint('10.0.0.1')] });
    const ep = picked(c.pick());
    assert.equal(ep.hostPort, '10.0.0.1:80');
    assert.equal(c.status().hosts[0]!.stats.rq_active, 1);
    assert.equal(c.status().active.rq, 1);
    c.attemptEnded(ep, ok);
    c.attemptEnded(picked(c.pick()), e503);
    c.attemptEnded(picked(c.pick()), OUTCOME.perTryTimeout);
    c.attemptEnded(picked(c.pick()), OUTCOME.connectTimeout);
    const s = c.status();
    assert.deepEqual(s.hosts[0]!.stats, { cx_active: 0, cx_connect_fail: 1, cx_total: 0, rq_active: 0, rq_error: 3, rq_success: 1, rq_timeout: 1, rq_total: 4 });
    assert.deepEqual([s.counters.upstream_rq_total, s.counters.upstream_rq_2xx, s.counters.upstream_rq_5xx, s.counters.upstream_rq_completed,
      s.counters.upstream_rq_per_try_timeout, s.counters.upstream_cx_connect_fail, s.counters.upstream_cx_connect_timeout], [4, 1, 1, 2, 1, 1, 1]);
    assert.equal(s.active.rq, 0);
  });

  it('judges a gRPC call by its grpc-status (rq_error for UNAVAILABLE under :status 200)', () => {
    const c = runtime({ endpoints: [endpoint('10.0.0.1')] });
    c.attemptEnded(picked(c.pick()), { kind: 'response', status: 200, grpcStatus: 14 });
    c.attemptEnded(picked(c.pick()), { kind: 'response', status: 200, grpcStatus: 0 });
    assert.deepEqual([c.status().hosts[0]!.stats.rq_error, c.status().hosts[0]!.stats.rq_success], [1, 1]);
  });

  it('answers no healthy upstream (UH) when every endpoint is ejected, overflow (UO) past maxRequests', () => {
    const c = runtime({ spec: clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 1, maxEjectionPercent: 100 }) } }) });
    for (let k = 0; k < 3; k++) c.attemptEnded(picked(c.pick()), e503);
    assert.equal(c.pick(), NO_HEALTHY_UPSTREAM);
    assert.deepEqual([NO_HEALTHY_UPSTREAM.flag, NO_HEALTHY_UPSTREAM.body], ['UH', 'no healthy upstream']);
    assert.equal(c.status().counters.upstream_cx_none_healthy, 1);

    const limited = runtime({ spec: clusterSpec({ pool: { http: { http2MaxRequests: 1 } } }) });
    const first = picked(limited.pick());
    assert.equal(limited.pick(), OVERFLOW);
    assert.deepEqual([OVERFLOW.flag, OVERFLOW.overloaded], ['UO', true]);
    assert.equal(limited.status().counters.upstream_rq_pending_overflow, 1);
    limited.attemptEnded(first, ok);
    picked(limited.pick());
  });

  it('balances on every worker\'s requests in flight (least request reads the shared counts)', () => {
    const [a, b] = views(2);
    const ca = runtime({ store: a!, endpoints: THREE.slice(0, 2) });
    const cb = runtime({ store: b!, endpoints: THREE.slice(0, 2) });
    for (let k = 0; k < 5; k++) startOn(cb, cb.endpoints[0]!);
    for (let k = 0; k < 200; k++) {
      const ep = picked(ca.pick());
      assert.equal(ep.hostPort, '10.0.0.2:80');
      ca.attemptEnded(ep, ok);
    }
  });

  it('is a keep-alive race when resent: neither an error nor an outlier result, and the re-send goes to the same endpoint', () => {
    const c = runtime({ spec: clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 1, maxEjectionPercent: 100 }) } }) });
    const ep = picked(c.pick());
    c.attemptResent(ep);
    assert.deepEqual([ep.slot.isEjected(), ep.slot.total('rq_error'), c.status().active.rq], [false, 0, 0]);
    assert.equal(startOn(c, ep), ep);
    c.attemptEnded(ep, ok);
    assert.deepEqual([ep.slot.total('rq_total'), ep.slot.total('rq_success'), c.status().counters.upstream_rq_total], [2, 1, 2]);
  });

  it('has no balancer for PASSTHROUGH: the engine sends to the original destination', () => {
    const c = runtime({ spec: clusterSpec({ policy: { loadBalancer: { kind: 'simple', simple: 'PASSTHROUGH' } } }) });
    assert.equal(c.passthrough, true);
    assert.throws(() => c.pick(), /PASSTHROUGH: send to the original destination/);
    const closed = runtime();
    closed.close();
    assert.throws(() => closed.pick(), /is closed/);
    assert.throws(() => closed.setEndpoints(THREE), /is closed/);
  });

  it('offers the consistent-hash key of its policy, and keeps a key on its endpoint', () => {
    const key = { kind: 'header', name: 'x-user' } as const;
    const c = runtime({ spec: clusterSpec({ policy: { loadBalancer: { kind: 'consistentHash', key, table: { kind: 'ringHash', minimumRingSize: 1024 } } } }) });
    assert.deepEqual(c.hashKey, key);
    const first = picked(c.pick({ hash: 12345 }));
    c.attemptEnded(first, ok);
    for (let k = 0; k < 20; k++) {
      const ep = picked(c.pick({ hash: 12345 }));
      assert.equal(ep, first);
      c.attemptEnded(ep, ok);
    }
  });
});

describe('ClusterRuntime: endpoint sets', () => {
  it('sends nothing new to a removed endpoint, lets its attempt in flight end, and lets its slot go then', () => {
    const c = runtime({ spec: clusterSpec({ policy: { loadBalancer: { kind: 'simple', simple: 'ROUND_ROBIN' } } }), endpoints: THREE.slice(0, 2) });
    let inFlight: Endpoint | undefined;
    while (inFlight?.hostPort !== '10.0.0.1:80') {
      if (inFlight) c.attemptEnded(inFlight, ok);
      inFlight = picked(c.pick());
    }
    c.setEndpoints([endpoint('10.0.0.2'), endpoint('10.0.0.3')]);
    assert.equal(inFlight.index, -1);
    const seen = new Set<string>();
    for (let k = 0; k < 20; k++) {
      const ep = picked(c.pick());
      seen.add(ep.hostPort);
      c.attemptEnded(ep, ok);
    }
    assert.deepEqual([...seen].sort(), ['10.0.0.2:80', '10.0.0.3:80'], 'the new endpoint takes traffic at once');
    assert.equal(inFlight.slot.word(EP.REFS), 1, 'held while its attempt is in flight');
    c.attemptEnded(inFlight, ok);
    assert.equal(inFlight.slot.word(EP.REFS), 0);
    assert.equal(inFlight.slot.total('rq_success'), 1, 'its outcome was counted');
  });

  it('keeps the state of an endpoint that stays (same object, ejection and counts kept)', () => {
    const c = runtime({ spec: clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 1, maxEjectionPercent: 100 }) } }) });
    const ep = startOn(c, c.endpoints[1]!);
    c.attemptEnded(ep, e503);
    assert.equal(ep.slot.isEjected(), true);
    c.setEndpoints([endpoint('10.0.0.2', { weight: 5 }), endpoint('10.0.0.4')]);
    assert.equal(c.endpoints[0], ep);
    assert.equal(ep.slot.isEjected(), true);
    assert.equal(c.status().hosts[0]!.weight, 5);
    assert.equal(c.status().hosts[0]!.stats.rq_total, 1);
  });

  it('takes one endpoint per address:port even when the list repeats it', () => {
    const c = runtime({ endpoints: [endpoint('10.0.0.1'), endpoint('10.0.0.1'), endpoint('fd00::1', { port: 8080 })] });
    assert.deepEqual(c.endpoints.map((e) => e.hostPort), ['10.0.0.1:80', '[fd00::1]:8080']);
  });

  it('lets everything go on close, what is in flight as it ends; a replacement built first keeps the state', () => {
    const store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 8 });
    const spec = clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 1, maxEjectionPercent: 100 }) } });
    const old = runtime({ store, spec });
    const ep = startOn(old, old.endpoints[2]!); // the last: close must not let the cluster go before it
    const next = runtime({ store, spec });
    old.close();
    const clusterRefs = (): number => Atomics.load(next.limits.slot.words, next.limits.slot.base + CL.REFS);
    assert.equal(ep.slot.word(EP.REFS), 2, 'the replacement and the attempt in flight hold it');
    assert.equal(clusterRefs(), 2);
    assert.equal(old.endpoints.length, 0);
    old.attemptEnded(ep, e503);
    assert.equal(ep.slot.word(EP.REFS), 1);
    assert.equal(clusterRefs(), 1);
    const same = next.endpoints.find((e) => e.hostPort === ep.hostPort)!;
    assert.equal(same.slot.isEjected(), true, 'the ejection carried over');
  });
});

describe('ClusterRuntime: outlier detection', () => {
  it('ejects on its outcomes, logs the event, skips the endpoint, and brings it back at the sweep', () => {
    const clock = new FakeClock();
    const events: OutlierEvent[] = [];
    const spec = clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 2, baseEjectionTimeMs: 30_000, intervalMs: 10_000 }) } });
    const c = runtime({ spec, clock, events, endpoints: THREE });
    const target = c.endpoints[0]!;
    c.attemptEnded(startOn(c, target), OUTCOME.connectFailure);
    c.attemptEnded(startOn(c, target), { kind: 'response', status: 200, grpcStatus: 14 });
    assert.deepEqual(events.map((e) => `${e.action} ${e.type} ${e.upstreamUrl}`), ['EJECT CONSECUTIVE_5XX 10.0.0.1:80']);
    for (let k = 0; k < 100; k++) {
      const ep = picked(c.pick());
      assert.notEqual(ep, target);
      c.attemptEnded(ep, ok);
    }
    assert.equal(c.status().hosts[0]!.ejected, true);
    let due = c.sweepIfDue()!;
    while (target.slot.isEjected()) {
      clock.advance(due);
      due = c.sweepIfDue()!;
    }
    assert.equal(events[1]!.action, 'UNEJECT');
    assert.equal(due, 10_000);
  });

  it('does not count a gRPC status that came in trailers, as Envoy does not', () => {
    const c = runtime({ spec: clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 1, maxEjectionPercent: 100 }) } }),
      endpoints: [endpoint('10.0.0.1')] });
    c.attemptEnded(picked(c.pick()), { kind: 'response', status: 200, grpcStatus: 14, grpcInTrailers: true });
    assert.equal(c.endpoints[0]!.slot.isEjected(), false);
  });

  it('runs each sweep once for the whole process, whichever worker asks', () => {
    const [a, b] = views(2);
    const clock = new FakeClock();
    const spec = clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 1, baseEjectionTimeMs: 10_000, intervalMs: 10_000 }) } });
    const events: OutlierEvent[] = [];
    const ca = runtime({ store: a!, spec, clock, events });
    const cb = runtime({ store: b!, spec, clock, events });
    ca.attemptEnded(startOn(ca, ca.endpoints[0]!), e503);
    clock.advance(10_000);
    cb.sweepIfDue();
    ca.sweepIfDue();
    assert.deepEqual(events.map((e) => e.action), ['EJECT', 'UNEJECT']);
  });

  it('runs a sweep already due when a runtime is built (a claimed sweep is never skipped)', () => {
    const store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 8 });
    const clock = new FakeClock();
    const spec = clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 1, baseEjectionTimeMs: 10_000, intervalMs: 10_000 }) } });
    const first = runtime({ store, spec, clock });
    first.attemptEnded(startOn(first, first.endpoints[0]!), e503);
    clock.advance(40_000);
    const second = runtime({ store, spec, clock });
    assert.equal(second.endpoints[0]!.slot.isEjected(), false);
  });

  it('has no sweep without outlier detection', () => {
    assert.equal(runtime().sweepIfDue(), undefined);
  });
});

describe('ClusterRuntime: retries and the retry budget', () => {
  const fivexx: RetrySpec = { ...DEFAULT_RETRY, ...parseRetryOn('5xx')! };
  const facts = { bodyReplayable: true };

  it('holds one of maxRetries per retry until the retried attempt ends, for every worker', () => {
    const [a, b] = views(2);
    const spec = clusterSpec({ pool: { http: { maxRetries: 1 } } });
    const ca = runtime({ store: a!, spec });
    const cb = runtime({ store: b!, spec });
    const d1 = ca.decideRetry(fivexx, e503, 0, facts);
    assert.equal(d1.retry, true);
    const d2 = cb.decideRetry(fivexx, e503, 0, facts);
    assert.deepEqual([d2.retry, d2.flag], [false, 'UO']);
    // The retry was sent and succeeded: its share comes back; the success is counted.
    assert.equal(ca.decideRetry(fivexx, ok, 1, facts).retry, false);
    assert.equal(cb.decideRetry(fivexx, e503, 0, facts).retry, true);
    const s = ca.status().counters;
    assert.deepEqual([s.upstream_rq_retry, s.upstream_rq_retry_overflow, s.upstream_rq_retry_success], [2, 1, 1]);
    cb.retryAbandoned();
    assert.equal(cb.status().active.retries, 0);
  });

  it('counts upstream_rq_retry_limit_exceeded when the attempts are spent, and no success then', () => {
    const c = runtime();
    const p = { ...fivexx, attempts: 1 };
    assert.equal(c.decideRetry(p, e503, 0, facts).retry, true);
    const d = c.decideRetry(p, e503, 1, facts);
    assert.deepEqual([d.retry, d.flag], [false, 'URX']);
    const s = c.status().counters;
    assert.deepEqual([s.upstream_rq_retry, s.upstream_rq_retry_limit_exceeded, s.upstream_rq_retry_success], [1, 1, 0]);
    assert.equal(c.status().active.retries, 0);
  });
});

describe('ClusterRuntime: connections', () => {
  it('keeps maxConnections for the whole process and counts the refusals', () => {
    const [a, b] = views(2);
    const spec = clusterSpec({ pool: { tcp: { maxConnections: 1 } } });
    const ca = runtime({ store: a!, spec });
    const cb = runtime({ store: b!, spec });
    const ep = ca.endpoints[0]!;
    assert.equal(ca.tryAcquireConnection(ep), true);
    assert.equal(cb.tryAcquireConnection(cb.endpoints[1]!), false);
    assert.equal(cb.status().counters.upstream_cx_overflow, 1);
    assert.deepEqual([ca.status().hosts[0]!.stats.cx_active, ca.status().active.cx, ca.status().counters.upstream_cx_total], [1, 1, 1]);
    ca.releaseConnection(ep);
    assert.equal(cb.tryAcquireConnection(cb.endpoints[1]!), true);
  });

  it('takes TCP connections without counting requests, and feeds their connects to outlier detection', () => {
    const c = runtime({ spec: clusterSpec({ policy: { outlierDetection: outlierSpec({ consecutive5xxErrors: 2, maxEjectionPercent: 100 }) } }),
      endpoints: [endpoint('10.0.0.1'), endpoint('10.0.0.2')] });
    for (let k = 0; k < 2; k++) {
      const ep = c.endpoints[0]!;
      assert.equal(c.tryAcquireConnection(ep), true);
      c.connectEnded(ep, OUTCOME.connectFailure);
      c.releaseConnection(ep);
    }
    assert.equal(c.endpoints[0]!.slot.isEjected(), true);
    const ep = picked(c.pickConnection());
    assert.equal(ep.hostPort, '10.0.0.2:80');
    const s = c.status();
    assert.deepEqual([s.hosts[0]!.stats.cx_connect_fail, s.hosts[0]!.stats.rq_total, s.counters.upstream_rq_total], [2, 0, 0]);
  });
});

describe('ClusterRuntime: locality', () => {
  const local = [endpoint('10.0.0.1', { locality: 'r/a' }), endpoint('10.0.0.2', { locality: 'r/b' }), endpoint('10.0.0.3', { locality: 'q/a' })];
  const failoverSpec = (minHealthPercent = 0): ClusterSpec => clusterSpec({
    policy: {
      outlierDetection: outlierSpec({ consecutive5xxErrors: 2, maxEjectionPercent: 100, minHealthPercent }),
      locality: { kind: 'failover', proxy: { locality: 'r/a', labels: {} }, failover: [], failoverPriority: [] },
    },
  });

  it('sends everything to the local endpoint, then to the next priority once outlier detection ejects it; /clusters shows the priorities', () => {
    const clock = new FakeClock();
    const c = runtime({ spec: failoverSpec(), endpoints: local, clock });
    for (let k = 0; k < 50; k++) {
      const ep = picked(c.pick());
      assert.equal(ep.hostPort, '10.0.0.1:80');
      c.attemptEnded(ep, ok);
    }
    assert.equal(c.lastPickPriority, 0);
    assert.deepEqual(c.status().hosts.map((h) => h.priority), [0, 1, 2]);
    for (let k = 0; k < 2; k++) c.attemptEnded(picked(c.pick()), e503);
    for (let k = 0; k < 50; k++) {
      const ep = picked(c.pick());
      assert.equal(ep.hostPort, '10.0.0.2:80', 'the same region\'s other zone, not the other region');
      c.attemptEnded(ep, ok);
    }
    assert.equal(c.lastPickPriority, 1);
    // Back after the ejection time: the local endpoint takes the traffic again.
    clock.advance(31_000);
    c.sweepIfDue();
    assert.equal(picked(c.pick()).hostPort, '10.0.0.1:80');
  });

  it('a cluster without locality balancing has no plan: every endpoint priority 0', () => {
    const c = runtime({ endpoints: local, spec: clusterSpec({ policy: { outlierDetection: outlierSpec() } }) });
    assert.equal(c.lastPickPriority, undefined);
    assert.deepEqual(c.status().hosts.map((h) => h.priority), [0, 0, 0]);
  });
});

describe('ClusterRuntime: slow start (warmup)', () => {
  const slow = clusterSpec({ policy: { loadBalancer: { kind: 'simple', simple: 'ROUND_ROBIN', slowStart: { windowMs: 10_000, minWeight: 0.1, aggression: 1 } } } });
  const share = (c: ClusterRuntime, hostPort: string, n: number): number => {
    let hits = 0;
    for (let k = 0; k < n; k++) {
      const ep = picked(c.pick());
      if (ep.hostPort === hostPort) hits++;
      c.attemptEnded(ep, ok);
    }
    return hits / n;
  };

  it('the first endpoints get their full weight; one that joins later ramps up over the window, then is even', () => {
    const clock = new FakeClock();
    const c = runtime({ spec: slow, endpoints: [endpoint('10.0.0.1'), endpoint('10.0.0.2')], clock });
    assert.ok(Math.abs(share(c, '10.0.0.1:80', 1000) - 0.5) < 0.01, 'no slow start at the start');
    c.setEndpoints([endpoint('10.0.0.1'), endpoint('10.0.0.2'), endpoint('10.0.0.3')]);
    // Weighted round robin is deterministic: at 0.1 of its weight, 0.1 / 2.1 of the picks.
    assert.ok(Math.abs(share(c, '10.0.0.3:80', 2100) - 0.1 / 2.1) < 0.01);
    clock.advance(5_000);
    assert.ok(Math.abs(share(c, '10.0.0.3:80', 2500) - 0.5 / 2.5) < 0.01);
    clock.advance(5_000);
    assert.ok(Math.abs(share(c, '10.0.0.3:80', 3000) - 1 / 3) < 0.01, 'full weight after the window');
  });

  it('a new version of the cluster keeps its endpoints\' join times; without warmup a newcomer gets its full share at once', () => {
    const clock = new FakeClock();
    const store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 8 });
    const first = runtime({ spec: slow, endpoints: [endpoint('10.0.0.1')], clock, store });
    first.setEndpoints([endpoint('10.0.0.1'), endpoint('10.0.0.2')]);
    const next = new ClusterRuntime({ spec: slow, endpoints: [endpoint('10.0.0.1'), endpoint('10.0.0.2')], store, clock, random: seeded(2), previous: first });
    first.close();
    assert.ok(Math.abs(share(next, '10.0.0.2:80', 1100) - 0.1 / 1.1) < 0.01, 'still in slow start');
    const plain = runtime({ endpoints: [endpoint('10.0.0.1')], clock, spec: clusterSpec({ policy: { loadBalancer: { kind: 'simple', simple: 'ROUND_ROBIN' } } }) });
    plain.setEndpoints([endpoint('10.0.0.1'), endpoint('10.0.0.2')]);
    assert.ok(Math.abs(share(plain, '10.0.0.2:80', 1000) - 0.5) < 0.01);
  });
});
