// What the traffic tests share: a seeded random source, a fake clock, a HostSet whose health and
// load the test sets, specs with Istio's defaults, and the statistics the statistical checks use.
import type { Clock } from '../../src/traffic/clock.js';
import type { HostSet } from '../../src/traffic/balancers/index.js';
import {
  UNLIMITED, type ClusterPolicy, type ClusterSpec, type ConnectionPoolSpec, type EndpointSpec, type OutlierDetectionSpec,
} from '../../src/traffic/spec.js';
import { seeded } from '../helpers/seeded.js';

export { seeded };

/** Both kinds of source a statistical test runs with: a fixed seed (reproducible) and Math.random (the tolerance is real). */
export const SOURCES: readonly { readonly name: string; readonly make: () => () => number }[] = [
  { name: 'seeded', make: () => seeded(20240601) },
  { name: 'unseeded', make: () => Math.random },
];

export class FakeClock implements Clock {
  constructor(public t = 1_000_000, public wallT = Date.UTC(2024, 4, 1, 10, 0, 0)) {}
  now(): number {
    return this.t;
  }
  wall(): number {
    return this.wallT;
  }
  advance(ms: number): void {
    this.t += ms;
    this.wallT += ms;
  }
}

/** A HostSet the test drives: weights, health and active requests are plain arrays; bump() after a health change. */
export class FakeHosts implements HostSet {
  readonly healthy: boolean[];
  readonly active: number[];
  version = 0;

  constructor(readonly weights: number[]) {
    this.healthy = weights.map(() => true);
    this.active = weights.map(() => 0);
  }

  get size(): number {
    return this.weights.length;
  }
  weight(i: number): number {
    return this.weights[i]!;
  }
  key(i: number): string {
    return `10.0.0.${i + 1}:80`;
  }
  isHealthy(i: number): boolean {
    return this.healthy[i]!;
  }
  activeRequests(i: number): number {
    return this.active[i]!;
  }
  healthVersion(): number {
    return this.version;
  }
  setHealthy(i: number, healthy: boolean): void {
    this.healthy[i] = healthy;
    this.version++;
  }
}

export function endpoint(address: string, o: Partial<EndpointSpec> = {}): EndpointSpec {
  return { address, port: 80, labels: {}, weight: 1, origin: 'ServiceEntry default/test', ...o };
}

export const ISTIO_POOL: ConnectionPoolSpec = {
  tcp: { maxConnections: UNLIMITED, connectTimeoutMs: 10_000 },
  http: {
    http1MaxPendingRequests: UNLIMITED, http2MaxRequests: UNLIMITED, maxRequestsPerConnection: 0, maxRetries: UNLIMITED,
    h2UpgradePolicy: 'DEFAULT', useClientProtocol: false,
  },
};

/** Envoy's defaults for an outlierDetection block that sets nothing but what the test gives. */
export function outlierSpec(o: Partial<OutlierDetectionSpec> = {}): OutlierDetectionSpec {
  return {
    consecutive5xxErrors: 5, consecutiveGatewayErrors: 0, consecutiveLocalOriginFailures: 0, splitExternalLocalOriginErrors: false,
    intervalMs: 10_000, baseEjectionTimeMs: 30_000, maxEjectionPercent: 10, maxEjectionTimeMs: 300_000, minHealthPercent: 0,
    ...o,
  };
}

export function clusterSpec(o: { name?: string; policy?: Partial<ClusterPolicy>; pool?: { tcp?: Partial<ConnectionPoolSpec['tcp']>; http?: Partial<ConnectionPoolSpec['http']> } } = {}): ClusterSpec {
  const pool: ConnectionPoolSpec = { tcp: { ...ISTIO_POOL.tcp, ...o.pool?.tcp }, http: { ...ISTIO_POOL.http, ...o.pool?.http } };
  return {
    name: o.name ?? 'outbound|80||reviews.default.svc.cluster.local',
    host: 'reviews.default.svc.cluster.local',
    port: 80,
    service: 'reviews.default.svc.cluster.local',
    origin: 'ServiceEntry default/reviews',
    policy: { loadBalancer: { kind: 'simple', simple: 'LEAST_REQUEST' }, connectionPool: pool, ...o.policy },
  };
}

/** Counts per index of `n` calls of `pick`. */
export function tally(size: number, n: number, pick: () => number): number[] {
  const counts = new Array<number>(size).fill(0);
  for (let k = 0; k < n; k++) counts[pick()]!++;
  return counts;
}

/** Pearson's chi-square statistic of observed counts against expected proportions. */
export function chiSquare(observed: readonly number[], proportions: readonly number[]): number {
  const n = observed.reduce((a, b) => a + b, 0);
  const total = proportions.reduce((a, b) => a + b, 0);
  let x = 0;
  for (let i = 0; i < observed.length; i++) {
    const e = (n * proportions[i]!) / total;
    x += (observed[i]! - e) ** 2 / e;
  }
  return x;
}

/**
 * The chi-square value that a true distribution exceeds with probability 1e-4, by degrees of freedom
 * (computed with scipy.stats.chi2.isf(1e-4, df)): a test that fails above it fails falsely less than
 * once in 10,000 runs.
 */
export const CHI2_1E4: readonly number[] = [NaN, 15.137, 18.421, 21.108, 23.513, 25.745, 27.856, 29.878, 31.828, 33.720, 35.564];

/** The two-sided normal quantile for 1e-4 (scipy.stats.norm.isf(5e-5)). */
export const Z_1E4 = 3.8906;

/** The same at 1e-5 (scipy.stats.chi2.isf(1e-5, df)): for a test that makes up to ten such checks (Bonferroni: 10 × 1e-5 = 1e-4). */
export const CHI2_1E5: readonly number[] = [NaN, 19.511, 23.026, 25.902, 28.473, 30.856, 33.107, 35.259, 37.332, 39.341, 41.296];
