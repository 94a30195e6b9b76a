// The traffic clusters' series for Prometheus (15090, the proxy part of 15020, the admin's
// `/stats?format=prometheus`): Envoy's per-cluster stats, which Envoy exports as
// `envoy_cluster_<stat>{cluster_name="..."}`, under this project's prefix as the proxy's other series
// (`istio_` / `envoy_` → `mesh_`): `mesh_cluster_<stat>{cluster_name="outbound|80|v1|reviews..."}`,
// dots as underscores, counters ending in `_total` (Prometheus' rule, which promtool checks), a gauge
// never (`membership_total` → `mesh_cluster_membership_size`). Read at scrape time from
// `ClusterRuntime.status()`: the counts live in the memory every worker shares, so this thread's
// clusters give the process's totals with no round trip to the workers.
import { Counter, Gauge, type Registry } from './prom.js';
import { CLUSTER_STATS, clusterStatValues, type ClusterStat, type ClusterStatus, type StatType } from '../traffic/cluster-status.js';

/** The Prometheus name of one of Envoy's cluster stats (`upstream_rq_retry` → `mesh_cluster_upstream_rq_retry_total`). */
export function clusterMetricName(stat: string, type: StatType): string {
  const base = `mesh_cluster_${stat.replace(/\./g, '_')}`;
  if (type === 'counter') return base.endsWith('_total') ? base : `${base}_total`;
  return base.endsWith('_total') ? `${base.slice(0, -'_total'.length)}_size` : base;
}

/** The label every series carries: Envoy's own (its `cluster_name` tag). */
export const CLUSTER_LABEL = 'cluster_name';

/**
 * Registers one family per cluster stat (CLUSTER_STATS) on `registry`, each with one series per
 * traffic cluster in force. Nothing is counted here: `clusters()` is read when the registry is scraped.
 */
export function registerClusterMetrics(registry: Registry, clusters: () => readonly ClusterStatus[]): void {
  // One read of every cluster per scrape, not one per family: the registry collects all its families
  // in one synchronous pass, so what the first family took serves the others and is dropped at the
  // next microtask (were the pass ever split, a family would read again: slower, still right).
  let taken: readonly { readonly name: string; readonly values: readonly ClusterStat[] }[] | undefined;
  const current = (): NonNullable<typeof taken> => {
    if (taken === undefined) {
      taken = clusters().map((c) => ({ name: c.name, values: clusterStatValues(c) }));
      queueMicrotask(() => { taken = undefined; });
    }
    return taken;
  };
  CLUSTER_STATS.forEach(({ stat, type }, i) => {
    const name = clusterMetricName(stat, type);
    const help = `Envoy's cluster.<cluster>.${stat} (${type}) of each traffic cluster in force, every worker's together (docs/METRICS.md).`;
    if (type === 'counter') {
      new Counter({
        name, help, labelNames: [CLUSTER_LABEL], registers: [registry],
        collect() {
          this.reset();
          for (const c of current()) this.inc({ [CLUSTER_LABEL]: c.name }, c.values[i]!.value);
        },
      });
    } else {
      new Gauge({
        name, help, labelNames: [CLUSTER_LABEL], registers: [registry],
        collect() {
          this.reset();
          for (const c of current()) this.set({ [CLUSTER_LABEL]: c.name }, c.values[i]!.value);
        },
      });
    }
  });
}
