import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { OutlierEvent } from '../../src/traffic/outlier-event.js';
import { grpcToHttpStatus, LOCAL_ORIGIN, OutlierDetector, type OutlierMember } from '../../src/traffic/outlier.js';
import { EP, privateTrafficStore, type ClusterCounter } from '../../src/traffic/shared-state.js';
import type { OutlierDetectionSpec } from '../../src/traffic/spec.js';
import { FakeClock, outlierSpec } from './support.js';

/** A cluster of `n` endpoints with a detector, a fake clock and the events it emitted. */
function setup(spec: Partial<OutlierDetectionSpec> = {}, n = 3) {
  const store = privateTrafficStore({ endpointSlots: 64, clusterSlots: 4 });
  const cluster = store.attachCluster('outbound|80||r');
  const members: OutlierMember[] = Array.from({ length: n }, (_, i) => {
    const hostPort = `10.0.0.${i + 1}:80`;
    return { hostPort, slot: store.attachEndpoint('outbound|80||r', hostPort) };
  });
  const clock = new FakeClock();
  const events: OutlierEvent[] = [];
  const d = new OutlierDetector(outlierSpec(spec), cluster, 'outbound|80||r', clock, (e) => events.push(e));
  const report = (i: number, ...results: number[]): void => {
    for (const r of results) d.report(members[i]!, r, members);
  };
  const ejected = (): boolean[] => members.map((m) => m.slot.isEjected());
  const stat = (k: string): number => cluster.total(`outlier_detection.${k}` as ClusterCounter);
  return { d, members, clock, events, report, ejected, stat, cluster };
}

const fives = (n: number, code = 500): number[] => new Array<number>(n).fill(code);

describe('OutlierDetector: consecutive errors', () => {
  it('ejects at once on the 5th consecutive 5xx (Envoy\'s default), with Envoy\'s counters and event', () => {
    const t = setup({}, 10);
    const v0 = t.cluster.healthVersion();
    t.report(0, ...fives(4));
    assert.equal(t.ejected()[0], false);
    t.report(0, 503);
    assert.equal(t.ejected()[0], true);
    assert.ok(t.cluster.healthVersion() > v0, 'the balancers are told');
    assert.deepEqual(t.events.map((e) => [e.action, e.type, e.upstreamUrl, e.numEjections, e.enforced]), [['EJECT', 'CONSECUTIVE_5XX', '10.0.0.1:80', 1, true]]);
    assert.equal(t.events[0]!.secsSinceLastAction, undefined);
    assert.deepEqual(['ejections_detected_consecutive_5xx', 'ejections_enforced_consecutive_5xx', 'ejections_enforced_total', 'ejections_total',
      'ejections_consecutive_5xx', 'ejections_overflow'].map(t.stat), [1, 1, 1, 1, 1, 0]);
  });

  const runs: [name: string, spec: Partial<OutlierDetectionSpec>, results: number[], ejected: boolean, type?: string][] = [
    ['a success between resets the 5xx run', {}, [...fives(4), 200, ...fives(4)], false],
    ['a 4xx is a success for outlier detection', {}, [...fives(4), 404, ...fives(4)], false],
    ['consecutive5xxErrors 0 turns 5xx detection off', { consecutive5xxErrors: 0 }, fives(50), false],
    ['three gateway errors with consecutiveGatewayErrors 3', { consecutive5xxErrors: 0, consecutiveGatewayErrors: 3 }, [502, 503, 504], true, 'CONSECUTIVE_GATEWAY_FAILURE'],
    ['a 500 breaks a gateway run', { consecutive5xxErrors: 0, consecutiveGatewayErrors: 3 }, [502, 503, 500, 502, 504], false],
    ['a gateway run reaches its threshold before the 5xx one', { consecutive5xxErrors: 3, consecutiveGatewayErrors: 3 }, [503, 503, 503], true, 'CONSECUTIVE_GATEWAY_FAILURE'],
    ['mixed 5xx count to the 5xx run', { consecutive5xxErrors: 3, consecutiveGatewayErrors: 3 }, [500, 503, 500], true, 'CONSECUTIVE_5XX'],
    ['local-origin failures are 503s without the split', { consecutive5xxErrors: 3 }, [LOCAL_ORIGIN.CONNECT_FAILED, LOCAL_ORIGIN.CONNECT_FAILED, 500], true, 'CONSECUTIVE_5XX'],
    ['time-outs are 504s without the split', { consecutive5xxErrors: 0, consecutiveGatewayErrors: 2 }, [LOCAL_ORIGIN.TIMEOUT, 502], true, 'CONSECUTIVE_GATEWAY_FAILURE'],
    ['a connection made, then a 5xx: only the 5xx counts (no split)', { consecutive5xxErrors: 2 }, [LOCAL_ORIGIN.CONNECT_SUCCESS, 500, LOCAL_ORIGIN.CONNECT_SUCCESS, 500], true, 'CONSECUTIVE_5XX'],
    ['a TCP connection made is a success (no split)', { consecutive5xxErrors: 2 }, [LOCAL_ORIGIN.CONNECT_FAILED, LOCAL_ORIGIN.CONNECT_SUCCESS_FINAL, LOCAL_ORIGIN.CONNECT_FAILED], false],
    ['with the split, local-origin failures count apart', { splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 2, consecutive5xxErrors: 2 },
      [LOCAL_ORIGIN.CONNECT_FAILED, 500, LOCAL_ORIGIN.TIMEOUT], true, 'CONSECUTIVE_LOCAL_ORIGIN_FAILURE'],
    ['with the split, they do not count as 5xx', { splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 0, consecutive5xxErrors: 2 },
      [LOCAL_ORIGIN.CONNECT_FAILED, LOCAL_ORIGIN.CONNECT_FAILED, LOCAL_ORIGIN.TIMEOUT], false],
    ['with the split, a connection made resets the local-origin run', { splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 2 },
      [LOCAL_ORIGIN.CONNECT_FAILED, LOCAL_ORIGIN.CONNECT_SUCCESS, LOCAL_ORIGIN.CONNECT_FAILED], false],
    ['with the split, HTTP statuses still count as 5xx', { splitExternalLocalOriginErrors: true, consecutive5xxErrors: 2 }, [500, LOCAL_ORIGIN.CONNECT_SUCCESS, 503], true, 'CONSECUTIVE_5XX'],
  ];
  for (const [name, spec, results, ejected, type] of runs) {
    it(name, () => {
      const t = setup({ maxEjectionPercent: 100, ...spec });
      t.report(0, ...results);
      assert.equal(t.ejected()[0], ejected);
      assert.deepEqual(t.events.map((e) => e.type), ejected ? [type] : []);
    });
  }

  it('detects once per run: errors past the threshold while ejected change nothing', () => {
    const t = setup({ consecutive5xxErrors: 2, maxEjectionPercent: 100 });
    t.report(0, ...fives(10));
    assert.equal(t.events.length, 1);
    assert.equal(t.stat('ejections_detected_consecutive_5xx'), 1);
  });
});

describe('OutlierDetector: maxEjectionPercent', () => {
  it('ejects while the ejected share stays within it', () => {
    const t = setup({ consecutive5xxErrors: 1, maxEjectionPercent: 20 }, 10);
    for (let i = 0; i < 4; i++) t.report(i, 500);
    assert.deepEqual(t.ejected().slice(0, 4), [true, true, false, false]);
    assert.equal(t.stat('ejections_overflow'), 2);
    assert.equal(t.stat('ejections_detected_consecutive_5xx'), 4);
    assert.equal(t.stat('ejections_enforced_total'), 2);
  });

  it('always lets one endpoint be ejected (3 endpoints, Envoy\'s default 10%)', () => {
    const t = setup({ consecutive5xxErrors: 1 }, 3);
    t.report(0, 500);
    t.report(1, 500);
    assert.deepEqual(t.ejected(), [true, false, false]);
  });

  it('restarts the counter after a refused ejection, so the next run is detected again', () => {
    const t = setup({ consecutive5xxErrors: 2, maxEjectionPercent: 10 }, 3);
    t.report(0, 500, 500);
    t.report(1, 500, 500);
    assert.equal(t.stat('ejections_overflow'), 1);
    assert.equal(Atomics.load(t.members[1]!.slot.words, t.members[1]!.slot.base + EP.CONSECUTIVE_5XX), 0);
    t.report(1, 500, 500);
    assert.equal(t.stat('ejections_overflow'), 2);
  });
});

describe('OutlierDetector: ejection time, unejection, decay', () => {
  it('unejects at the first sweep after baseEjectionTime (so up to one interval late), logging UNEJECT', () => {
    const t = setup({ consecutive5xxErrors: 1, baseEjectionTimeMs: 30_000, intervalMs: 10_000 });
    t.clock.advance(5_000); // ejected between two sweeps
    t.report(0, 500);
    for (const at of [10_000, 20_000, 30_000]) {
      t.clock.t = 1_000_000 + at;
      t.d.sweep(t.members);
      assert.equal(t.ejected()[0], true, `still ejected at ${at}`);
    }
    t.clock.t = 1_000_000 + 40_000;
    t.clock.wallT += 35_000;
    t.d.sweep(t.members);
    assert.equal(t.ejected()[0], false);
    const un = t.events[1]!;
    assert.deepEqual([un.action, un.numEjections, un.secsSinceLastAction, un.enforced], ['UNEJECT', 1, 35, false]);
  });

  it('multiplies the ejection time by the ejections, caps it at maxEjectionTime, and logs the time since the unejection', () => {
    const t = setup({ consecutive5xxErrors: 1, baseEjectionTimeMs: 30_000, intervalMs: 1_000, maxEjectionTimeMs: 100_000 });
    const m = t.members[0]!;
    const durations: number[] = [];
    for (let k = 0; k < 5; k++) {
      t.report(0, 500);
      durations.push(t.d.ejectionTimeMs(m));
      // Sweep every second until it comes back, then fail again at once (no healthy interval: no decay).
      while (t.ejected()[0]) {
        t.clock.advance(1_000);
        t.d.sweep(t.members);
      }
    }
    assert.deepEqual(durations, [30_000, 60_000, 90_000, 100_000, 100_000]);
    const ejects = t.events.filter((e) => e.action === 'EJECT');
    assert.deepEqual(ejects.map((e) => e.numEjections), [1, 2, 3, 4, 5]);
    assert.deepEqual(ejects.map((e) => e.secsSinceLastAction), [undefined, 0, 0, 0, 0]);
  });

  it('lets the multiplier shrink by one per interval an endpoint stays healthy after its unejection', () => {
    const t = setup({ consecutive5xxErrors: 1, baseEjectionTimeMs: 10_000, intervalMs: 10_000, maxEjectionTimeMs: 300_000 });
    const m = t.members[0]!;
    const ejectAndWait = (): void => {
      t.report(0, 500);
      while (t.ejected()[0]) {
        t.clock.advance(10_000);
        t.d.sweep(t.members);
      }
    };
    ejectAndWait();
    ejectAndWait();
    ejectAndWait();
    assert.equal(t.d.ejectionTimeMs(m), 30_000);
    // The sweep that unejects does not decay; each later one does.
    t.clock.advance(10_000);
    t.d.sweep(t.members);
    assert.equal(t.d.ejectionTimeMs(m), 20_000);
    for (let k = 0; k < 5; k++) {
      t.clock.advance(10_000);
      t.d.sweep(t.members);
    }
    assert.equal(t.d.ejectionTimeMs(m), 0);
    t.report(0, 500);
    assert.equal(t.d.ejectionTimeMs(m), 10_000, 'back to the base time');
  });

  it('restarts every counter at unejection (a few errors right after coming back do not eject again)', () => {
    const t = setup({ consecutive5xxErrors: 3, consecutiveGatewayErrors: 5, baseEjectionTimeMs: 1_000, intervalMs: 1_000, maxEjectionPercent: 100 });
    t.report(0, 502, 502, 502); // 5xx run ejects; the gateway run stands at 3
    t.clock.advance(1_000);
    t.d.sweep(t.members);
    assert.equal(t.ejected()[0], false);
    t.report(0, 502, 502);
    assert.equal(t.ejected()[0], false);
  });
});

describe('grpcToHttpStatus', () => {
  const cases: [number, number][] = [[0, 200], [1, 499], [2, 500], [3, 400], [4, 504], [5, 404], [6, 409], [7, 403], [8, 429], [9, 400], [10, 409],
    [11, 400], [12, 501], [13, 500], [14, 503], [15, 500], [16, 401], [99, 500]];
  for (const [grpc, http] of cases) it(`${grpc} → ${http}`, () => assert.equal(grpcToHttpStatus(grpc), http));
});
