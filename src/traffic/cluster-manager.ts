// The clusters in force in one worker (what Envoy calls the cluster manager): a ClusterRuntime per
// cluster of the configuration, kept across configuration changes when its spec is unchanged (its
// endpoints replaced in place, their state kept), fed by one endpoint source, its outlier sweeps
// on timers. Every worker holds its own (its balancers' schedules are its own); counts, limits and
// ejections are shared through the TrafficStore, so /clusters read from any worker is the process's.
import type { WorkloadEntry } from '../config/resources/types.js';
import { ClusterRuntime } from './cluster.js';
import type { ClusterSet } from './clusters.js';
import type { ClusterStatus } from './cluster-status.js';
import type { Clock, Random } from './clock.js';
import { selectSubset, type EndpointSource } from './endpoint-sources/endpoint-source.js';
import type { OutlierEvent } from './outlier-event.js';
import type { TrafficStore } from './shared-state.js';
import type { ClusterSpec } from './spec.js';

/** An endpoint source the manager can also tell which services and WorkloadEntries are in force. */
export interface UpdatableEndpointSource extends EndpointSource {
  update(services: ClusterSet['services'], workloadEntries: readonly WorkloadEntry[]): void;
}

export interface ClusterManagerOptions {
  readonly store: TrafficStore;
  readonly source: UpdatableEndpointSource;
  readonly clock?: Clock | undefined;
  readonly random?: Random | undefined;
  /** EJECT / UNEJECT events this worker caused (the outlier log). */
  readonly onOutlierEvent?: ((e: OutlierEvent) => void) | undefined;
}

const NO_CLUSTERS: readonly ClusterRuntime[] = Object.freeze([]);

export class ClusterManager {
  private runtimes = new Map<string, ClusterRuntime>();
  /** The spec text each runtime was built from: an unchanged cluster keeps its runtime. */
  private readonly built = new WeakMap<ClusterRuntime, string>();
  private readonly sweeps = new Map<string, NodeJS.Timeout>();
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(private readonly o: ClusterManagerOptions) {
    this.unsubscribe = o.source.onChange((services) => this.endpointsChanged(services));
  }

  /**
   * Puts a configuration's clusters in force. New runtimes are built before the ones they replace
   * are closed (an endpoint kept across the change keeps its shared state); removed clusters close.
   */
  update(set: ClusterSet, workloadEntries: readonly WorkloadEntry[]): void {
    if (this.closed) return;
    this.o.source.update(set.services, workloadEntries);
    const next = new Map<string, ClusterRuntime>();
    for (const spec of set.clusters) {
      const text = JSON.stringify(spec);
      const old = this.runtimes.get(spec.name);
      const endpoints = this.endpointsFor(spec);
      if (old !== undefined && this.built.get(old) === text) {
        old.setEndpoints(endpoints);
        next.set(spec.name, old);
        continue;
      }
      const runtime = new ClusterRuntime({
        spec, endpoints, store: this.o.store, clock: this.o.clock, random: this.o.random, onOutlierEvent: this.o.onOutlierEvent, previous: old,
      });
      this.built.set(runtime, text);
      next.set(spec.name, runtime);
    }
    for (const [name, runtime] of this.runtimes) {
      if (next.get(name) === runtime) continue;
      runtime.close();
      this.stopSweeps(name);
    }
    this.runtimes = next;
    for (const runtime of next.values()) this.scheduleSweep(runtime);
  }

  /** The runtime of a cluster in force, by its name (`outbound|80|v1|reviews...`). */
  get(name: string): ClusterRuntime | undefined {
    return this.runtimes.get(name);
  }

  /** Every cluster in force, in configuration order (for /clusters, /stats, /config_dump). */
  all(): readonly ClusterRuntime[] {
    return this.runtimes.size === 0 ? NO_CLUSTERS : [...this.runtimes.values()];
  }

  /** Every cluster in force as /clusters, /stats and the metrics show it (every worker's counts: shared memory). */
  statuses(): ClusterStatus[] {
    return this.all().map((c) => c.status());
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
    for (const name of [...this.sweeps.keys()]) this.stopSweeps(name);
    for (const runtime of this.runtimes.values()) runtime.close();
    this.runtimes.clear();
    this.o.source.close();
  }

  private endpointsFor(spec: ClusterSpec): ReturnType<typeof selectSubset> {
    // A cluster to the original destination (resolution NONE) has no endpoints of its own.
    if (spec.discovery === 'ORIGINAL_DST') return [];
    return selectSubset(this.o.source.endpointsOf(spec.service), spec.subsetLabels);
  }

  private endpointsChanged(services: readonly string[]): void {
    if (this.closed || services.length === 0) return;
    const changed = new Set(services);
    for (const runtime of this.runtimes.values()) {
      if (changed.has(runtime.spec.service)) runtime.setEndpoints(this.endpointsFor(runtime.spec));
    }
  }

  /** Outlier detection's sweeps: whichever worker's timer fires first runs the sweep for all. */
  private scheduleSweep(runtime: ClusterRuntime): void {
    if (this.sweeps.has(runtime.name)) return;
    const run = (): void => {
      this.sweeps.delete(runtime.name);
      if (this.closed || this.runtimes.get(runtime.name) !== runtime) return;
      const ms = runtime.sweepIfDue();
      if (ms !== undefined) this.sweeps.set(runtime.name, setTimeout(run, Math.max(ms, 10)).unref());
    };
    const first = runtime.sweepIfDue();
    if (first !== undefined) this.sweeps.set(runtime.name, setTimeout(run, Math.max(first, 10)).unref());
  }

  private stopSweeps(name: string): void {
    const t = this.sweeps.get(name);
    if (t !== undefined) clearTimeout(t);
    this.sweeps.delete(name);
  }
}
