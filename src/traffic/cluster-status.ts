// What the admin surfaces show of a cluster, as plain data (ClusterRuntime.status()), and the pure
// formatters that print it as Envoy does: `/clusters` text lines, `/clusters?format=json`, and the
// `cluster.<name>.*` series of `/stats`.
import { ENVOY_HIGH_PRIORITY_LIMITS, retryBudgetLimit, type LimitValues } from './limits.js';
import { CLUSTER_COUNTERS, type ClusterCounter } from './shared-state.js';

/** Envoy's per-host stats, in the order its text output sorts them. */
export interface HostStats {
  readonly cx_active: number;
  readonly cx_connect_fail: number;
  readonly cx_total: number;
  readonly rq_active: number;
  readonly rq_error: number;
  readonly rq_success: number;
  readonly rq_timeout: number;
  readonly rq_total: number;
}

export interface HostStatus {
  readonly address: string;
  readonly port: number;
  /** `10.0.0.1:80`, `[fd00::1]:80`. */
  readonly hostPort: string;
  readonly weight: number;
  readonly region: string;
  readonly zone: string;
  readonly subZone: string;
  /** Envoy's priority (locality failover): 0 first; -1 when `distribute` sends it nothing. */
  readonly priority: number;
  /** Its locality's weight when the cluster balances by `distribute`. */
  readonly localityWeight?: number | undefined;
  /** Ejected by outlier detection (health_flags `/failed_outlier_check`). */
  readonly ejected: boolean;
  readonly stats: HostStats;
}

export interface ClusterStatus {
  readonly name: string;
  /** The cluster has outlier detection (its `outlier::` lines are printed). */
  readonly outlierDetection: boolean;
  readonly limits: LimitValues;
  readonly hosts: readonly HostStatus[];
  readonly counters: Readonly<Record<ClusterCounter, number>>;
  /** In flight now, from every worker. */
  readonly active: { readonly cx: number; readonly pending: number; readonly rq: number; readonly retries: number };
}

/** `region/zone/subzone` → its three parts (missing ones empty). */
export function splitLocality(locality: string | undefined): { region: string; zone: string; subZone: string } {
  const [region = '', zone = '', subZone = ''] = (locality ?? '').split('/');
  return { region, zone, subZone };
}

/** `address:port`, IPv6 in brackets, as Envoy prints an address. */
export function hostPortOf(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

const HOST_STAT_NAMES = ['cx_active', 'cx_connect_fail', 'cx_total', 'rq_active', 'rq_error', 'rq_success', 'rq_timeout', 'rq_total'] as const;
const HOST_GAUGES: ReadonlySet<string> = new Set(['cx_active', 'rq_active']);

function limitLines(name: string, priority: string, l: LimitValues): string[] {
  return [
    `${name}::${priority}_priority::max_connections::${l.maxConnections}`,
    `${name}::${priority}_priority::max_pending_requests::${l.maxPendingRequests}`,
    `${name}::${priority}_priority::max_requests::${l.maxRequests}`,
    `${name}::${priority}_priority::max_retries::${l.maxRetries}`,
  ];
}

/** Envoy's `/clusters` text: per cluster its settings, then `name::host::stat::value` per host. */
export function formatClustersText(clusters: readonly ClusterStatus[]): string {
  const lines: string[] = [];
  for (const c of clusters) {
    const n = c.name;
    lines.push(`${n}::observability_name::${n}`);
    if (c.outlierDetection) {
      // Success-rate detection is off under Istio: Envoy prints its "no value" -1.
      lines.push(`${n}::outlier::success_rate_average::-1`, `${n}::outlier::success_rate_ejection_threshold::-1`,
        `${n}::outlier::local_origin_success_rate_average::-1`, `${n}::outlier::local_origin_success_rate_ejection_threshold::-1`);
    }
    lines.push(...limitLines(n, 'default', c.limits), ...limitLines(n, 'high', ENVOY_HIGH_PRIORITY_LIMITS), `${n}::added_via_api::true`);
    for (const h of c.hosts) {
      const p = `${n}::${h.hostPort}`;
      for (const s of HOST_STAT_NAMES) lines.push(`${p}::${s}::${h.stats[s]}`);
      lines.push(`${p}::hostname::`, `${p}::health_flags::${h.ejected ? '/failed_outlier_check' : 'healthy'}`, `${p}::weight::${h.weight}`,
        `${p}::region::${h.region}`, `${p}::zone::${h.zone}`, `${p}::sub_zone::${h.subZone}`, `${p}::canary::false`,
        `${p}::priority::${h.priority}`, `${p}::success_rate::-1`, `${p}::local_origin_success_rate::-1`);
    }
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

// A protobuf uint64 in JSON: a string, and (proto3) absent when 0.
function metric(name: string, value: number, gauge: boolean): Record<string, unknown> {
  return { ...(gauge ? { type: 'GAUGE' } : {}), ...(value !== 0 ? { value: String(value) } : {}), name };
}

function thresholds(l: LimitValues, priority?: 'HIGH'): Record<string, unknown> {
  return {
    ...(priority !== undefined ? { priority } : {}),
    max_connections: l.maxConnections, max_pending_requests: l.maxPendingRequests, max_requests: l.maxRequests, max_retries: l.maxRetries,
  };
}

/**
 * The `cluster_statuses` entries of Envoy's `/clusters?format=json` (admin.v3.ClusterStatus as
 * protobuf JSON: fields in field-number order, zero values left out, uint64 as strings; counters
 * before gauges in a host's stats): for an admin page that lists other clusters beside these.
 */
export function clusterStatusesJson(clusters: readonly ClusterStatus[]): Record<string, unknown>[] {
  return clusters.map((c) => ({
    name: c.name,
    added_via_api: true,
    host_statuses: c.hosts.map((h) => {
      const counters = HOST_STAT_NAMES.filter((s) => !HOST_GAUGES.has(s)).map((s) => metric(s, h.stats[s], false));
      const gauges = HOST_STAT_NAMES.filter((s) => HOST_GAUGES.has(s)).map((s) => metric(s, h.stats[s], true));
      const locality = {
        ...(h.region !== '' ? { region: h.region } : {}), ...(h.zone !== '' ? { zone: h.zone } : {}),
        ...(h.subZone !== '' ? { sub_zone: h.subZone } : {}),
      };
      return {
        address: { socket_address: { address: h.address, port_value: h.port } },
        stats: [...counters, ...gauges],
        health_status: { ...(h.ejected ? { failed_outlier_check: true } : {}), eds_health_status: 'HEALTHY' },
        weight: h.weight,
        ...(h.priority > 0 ? { priority: h.priority } : {}),
        locality,
      };
    }),
    circuit_breakers: { thresholds: [thresholds(c.limits), thresholds(ENVOY_HIGH_PRIORITY_LIMITS, 'HIGH')] },
    observability_name: c.name,
  }));
}

/** Envoy's `/clusters?format=json` (admin.v3.Clusters) of these clusters. */
export function formatClustersJson(clusters: readonly ClusterStatus[]): string {
  return `${JSON.stringify({ cluster_statuses: clusterStatusesJson(clusters) }, null, 2)}\n`;
}

export type StatType = 'counter' | 'gauge';

/** One of a cluster's stats, named as Envoy names it under `cluster.<cluster>.`. */
export interface ClusterStat {
  /** `upstream_rq_retry`, `outlier_detection.ejections_active`, `circuit_breakers.default.cx_open`. */
  readonly stat: string;
  readonly value: number;
  readonly type: StatType;
}

export interface StatSample {
  /** The full Envoy name: `cluster.<cluster>.<stat>`. */
  readonly name: string;
  readonly value: number;
  readonly type: StatType;
}

/** The cluster's stats with Envoy's names (without the `cluster.<name>.` prefix): its counters, then its gauges. */
export function clusterStatValues(c: ClusterStatus): ClusterStat[] {
  const out: ClusterStat[] = CLUSTER_COUNTERS.map((k) => ({ stat: k, value: c.counters[k], type: 'counter' as const }));
  const healthy = c.hosts.filter((h) => !h.ejected).length;
  const gauge = (stat: string, value: number): void => { out.push({ stat, value, type: 'gauge' }); };
  gauge('upstream_cx_active', c.active.cx);
  gauge('upstream_rq_active', c.active.rq);
  gauge('upstream_rq_pending_active', c.active.pending);
  gauge('membership_total', c.hosts.length);
  gauge('membership_healthy', healthy);
  gauge('membership_degraded', 0);
  gauge('membership_excluded', 0);
  gauge('outlier_detection.ejections_active', c.hosts.length - healthy);
  // Istio sets track_remaining: the remaining_* gauges exist; *_open is 1 while the breaker is full.
  const open = (active: number, max: number): number => (active >= max ? 1 : 0);
  const cb = 'circuit_breakers.default.';
  gauge(`${cb}cx_open`, open(c.active.cx, c.limits.maxConnections));
  gauge(`${cb}cx_pool_open`, 0);
  gauge(`${cb}rq_pending_open`, open(c.active.pending, c.limits.maxPendingRequests));
  gauge(`${cb}rq_open`, open(c.active.rq, c.limits.maxRequests));
  // A retry budget replaces maxRetries with what the requests in flight allow now.
  const maxRetries = c.limits.retryBudget !== undefined ? retryBudgetLimit(c.limits.retryBudget, c.active.rq + c.active.pending) : c.limits.maxRetries;
  gauge(`${cb}rq_retry_open`, open(c.active.retries, maxRetries));
  gauge(`${cb}remaining_cx`, Math.max(0, c.limits.maxConnections - c.active.cx));
  gauge(`${cb}remaining_pending`, Math.max(0, c.limits.maxPendingRequests - c.active.pending));
  gauge(`${cb}remaining_rq`, Math.max(0, c.limits.maxRequests - c.active.rq));
  gauge(`${cb}remaining_retries`, Math.max(0, maxRetries - c.active.retries));
  return out;
}

/** Every stat a cluster has, in clusterStatValues' order (the names do not depend on the cluster). */
export const CLUSTER_STATS: readonly { readonly stat: string; readonly type: StatType }[] = Object.freeze(clusterStatValues({
  name: '', outlierDetection: false, hosts: [],
  limits: { maxConnections: 0, maxPendingRequests: 0, maxRequests: 0, maxRetries: 0 },
  counters: Object.fromEntries(CLUSTER_COUNTERS.map((k) => [k, 0])) as Record<ClusterCounter, number>,
  active: { cx: 0, pending: 0, rq: 0, retries: 0 },
}).map(({ stat, type }) => Object.freeze({ stat, type })));

/** The cluster's `/stats` series with Envoy's names (`cluster.<name>.<stat>`): its counters, then its gauges. */
export function clusterStats(c: ClusterStatus): StatSample[] {
  const p = `cluster.${c.name}.`;
  return clusterStatValues(c).map((s) => ({ name: p + s.stat, value: s.value, type: s.type }));
}

/** `/stats` text lines (`name: value`), sorted by name as Envoy prints them. */
export function formatClusterStatsText(clusters: readonly ClusterStatus[]): string {
  const all = clusters.flatMap(clusterStats).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return all.map((s) => `${s.name}: ${s.value}\n`).join('');
}
