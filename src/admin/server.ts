// The admin API on 15000, Envoy's surface for operators: `pilot-agent request GET /stats` and the
// usual `/config_dump`, `/clusters`, `/logging`... Localhost only (bound to 127.0.0.1 and ::1), and
// not started at all when ENABLE_DEBUG_ON_HTTP is false. What it shows comes from the agent through
// AdminHooks; the rendering below is pure so tests can check it line by line.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { scope as logScope, scopeLevels, setScopeLevel } from '../log/logger.js';
import { ALL_SCOPES, LEVELS, SCOPE_NAMES, isLevel, isScope, type Level, type ScopeName } from '../log/levels.js';
import { filterExposition, parseExposition, renderExposition } from '../metrics/exposition.js';
import { PROMETHEUS_CONTENT_TYPE, closeServer, robustServer } from '../metrics/servers.js';
import { listenOnce } from '../net/listen.js';
import { DIRECTIONS, MTLS_FAILURE_REASONS, requestLabels, type Direction, type Histogram, type ProxyStats } from '../proxy/stats.js';
import { clusterStats, clusterStatusesJson, formatClustersText, type ClusterStatus } from '../traffic/cluster-status.js';

const log = logScope('default');

export type ServerState = 'PRE_INITIALIZING' | 'INITIALIZING' | 'LIVE' | 'DRAINING';

export interface AdminHooks {
  readonly stats: ProxyStats;
  readonly proxyRegistry: Registry;               // for /stats/prometheus
  readonly state: () => ServerState;
  readonly serverInfo: () => Record<string, unknown>; // version, state, uptime, command line options, node {id, cluster}
  readonly configDump: () => Record<string, unknown>; // listeners, routes, clusters, loaded resources, bootstrap settings
  readonly listeners: () => readonly { name: string; address: string; port: number }[];
  /** The passthrough clusters (PassthroughCluster, InboundPassthroughCluster), from `stats`. */
  readonly clusters: () => readonly { name: string; address: string; port: number; cxActive: number; cxTotal: number; rqTotal: number; connectFail: number }[];
  /**
   * The traffic clusters in force (`ClusterRuntime.status()`), for `/clusters` and `/stats`. Their
   * counts live in the memory every worker shares: this thread's runtimes give the process's totals.
   */
  readonly trafficClusters?: () => readonly ClusterStatus[];
  readonly drainListeners: () => void;
  readonly setHealthcheckFailed: (failed: boolean) => void;
  readonly quit: () => void;
  /** The last request decisions (JWT, policy, route), oldest first. */
  readonly decisions: () => readonly unknown[];
  /** Counters beyond ProxyStats, for /stats. */
  readonly extraStats: () => readonly StatValue[];
  /** Called before every endpoint: brings `stats` and the decisions up to date (the workers' included). */
  readonly refresh?: () => Promise<void>;
  /** Every thread's V8 heap, bytes (workers have heaps of their own); absent: this thread's. */
  readonly heap?: () => { readonly used: number; readonly total: number };
  /** The workload's certificates (`/certs`, Envoy's shape); absent: the endpoint says there are none. */
  readonly certs?: () => Record<string, unknown>;
}

export interface AdminServer {
  /** The port bound (the one asked for, or the one chosen for 0). */
  readonly port: number;
  /** The loopback addresses listened on: 127.0.0.1, and ::1 where IPv6 is on. */
  readonly addresses: readonly string[];
  close(): Promise<void>;
}

type ListenerInfo = ReturnType<AdminHooks['listeners']>[number];
type ClusterInfo = ReturnType<AdminHooks['clusters']>[number];

// ---------------------------------------------------------------------------------------------
// `/stats`: the ProxyStats counters under Envoy's names. Pure.

/** Envoy's numbering of server.state. */
const STATE_NUMBER: Record<ServerState, number> = { LIVE: 0, DRAINING: 1, PRE_INITIALIZING: 2, INITIALIZING: 3 };
/** The quantiles Envoy prints for a histogram. */
export const SUPPORTED_QUANTILES: readonly number[] = [0, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 100];

export interface EnvoyStatsInput {
  readonly stats: ProxyStats;
  readonly listeners: readonly ListenerInfo[];
  readonly state: ServerState;
  readonly uptimeSeconds: number;
  /** Bytes: V8 heap used, V8 heap reserved, resident set. */
  readonly memory: { readonly allocated: number; readonly heapSize: number; readonly physical: number };
  /** More counters by name (request decisions, configuration rejects). */
  readonly extra?: readonly StatValue[];
  /** The traffic clusters in force: their `cluster.<name>.*` series. */
  readonly clusters?: readonly ClusterStatus[];
}

export interface StatValue {
  readonly name: string;
  readonly value: number;
}

export interface StatHistogram {
  readonly name: string;
  readonly histogram: Histogram;
}

export interface EnvoyStats {
  /** Counters and gauges, sorted by name. */
  readonly values: readonly StatValue[];
  /** Sorted by name. */
  readonly histograms: readonly StatHistogram[];
}

/** `0.0.0.0_15001`, `[__]_15006`: Envoy's stat-safe form of a listener address. */
function listenerStatName(address: string, port: number): string {
  const host = address.includes(':') ? `[${address}]` : address;
  return `${host}_${port}`.replace(/:/g, '_');
}

/**
 * The listener whose counters a direction's are: the first listener whose name contains the
 * direction (Istio's `virtualOutbound` / `virtualInbound`), else the default capture port.
 */
export function listenerOf(listeners: readonly ListenerInfo[], direction: Direction): { address: string; port: number } {
  const found = listeners.find((l) => l.name.toLowerCase().includes(direction));
  return found ?? { address: '0.0.0.0', port: direction === 'outbound' ? 15001 : 15006 };
}

/** Every stat of the admin `/stats` (docs/METRICS.md, "Admin /stats"). */
export function envoyStats(input: EnvoyStatsInput): EnvoyStats {
  const values: StatValue[] = [];
  const histograms: StatHistogram[] = [];
  const add = (name: string, value: number): void => { values.push({ name, value }); };
  for (const direction of DIRECTIONS) {
    const d = input.stats.of(direction);
    const l = listenerOf(input.listeners, direction);
    const listener = `listener.${listenerStatName(l.address, l.port)}`;
    add(`${listener}.downstream_cx_total`, d.cxTotal);
    add(`${listener}.downstream_cx_active`, d.cxActive);
    add(`${listener}.downstream_cx_destroy`, d.cxTotal - d.cxActive);
    add(`${listener}.downstream_cx_error`, d.cxErrors);
    add(`${listener}.downstream_cx_rx_bytes_total`, d.rxBytes);
    add(`${listener}.downstream_cx_tx_bytes_total`, d.txBytes);
    add(`${listener}.downstream_global_cx_overflow`, d.cxOverflow);
    add(`${listener}.no_filter_chain_match`, d.tlsNoServerMatch);
    add(`${listener}.ssl.handshake`, d.tlsHandshakes);
    add(`${listener}.ssl.connection_error`, d.tlsErrors);
    add(`${listener}.ssl.handshake_timeout`, d.tlsHandshakeTimeouts);
    add(`${listener}.ssl.renegotiation_refused`, d.tlsRenegotiations);
    add(`${listener}.mtls.handshake`, d.mtlsHandshakes);
    add(`${listener}.mtls.handshake_error`, d.mtlsHandshakeFailures);
    for (const reason of MTLS_FAILURE_REASONS) add(`${listener}.mtls.handshake_error_${reason}`, d.mtlsFailuresByReason.get(reason) ?? 0);
    add(`${listener}.mtls.plaintext_refused`, d.mtlsPlaintextRefused);
    add(`${listener}.mtls.no_identity`, d.mtlsNoIdentity);

    const http = `http.${direction}`;
    const byClass = [0, 0, 0, 0, 0];
    let completed = 0;
    for (const [code, count] of d.rqByCode) {
      completed += count;
      const cls = Math.floor(code / 100);
      if (cls >= 1 && cls <= 5) byClass[cls - 1]! += count;
    }
    add(`${http}.downstream_rq_total`, d.rqTotal);
    add(`${http}.downstream_rq_active`, d.rqActive);
    add(`${http}.downstream_rq_completed`, completed);
    byClass.forEach((count, i) => add(`${http}.downstream_rq_${i + 1}xx`, count));
    add(`${http}.downstream_cx_protocol_error`, d.rqProtocolErrors);
    add(`${http}.downstream_rq_header_timeout`, d.rqHeadTimeouts);
    add(`${http}.downstream_rq_upgrades_total`, d.rqTunnels);
    add(`${http}.downstream_rq_body_bytes_total`, d.rqBodyBytes);
    add(`${http}.downstream_cx_http2_total`, d.cxHttp2);
    add(`${http}.downstream_rq_http2_total`, d.rqHttp2);
    add(`${http}.downstream_cx_http2_protocol_error`, d.cxHttp2ProtocolErrors);
    add(`${http}.mirror_rq_total`, d.mirrorRqTotal);
    add(`${http}.mirror_rq_dropped`, d.mirrorRqDropped);
    add(`${http}.mirror_rq_failed`, d.mirrorRqFailed);
    add(`${http}.mirror_rq_too_large`, d.mirrorRqTooLarge);
    const grpc = new Map<string, number>();
    let grpcTotal = 0;
    for (const [key, count] of d.rqLabelled) {
      const l = requestLabels(key);
      if (l.protocol !== 'grpc') continue;
      grpcTotal += count;
      const name = l.grpcStatus === '' ? 'none' : l.grpcStatus;
      grpc.set(name, (grpc.get(name) ?? 0) + count);
    }
    add(`${http}.grpc.total`, grpcTotal);
    for (const [status, count] of grpc) add(`${http}.grpc.status_${status}`, count);
    add(`${http}.downstream_rs_body_bytes_total`, d.rsBodyBytes);
    histograms.push({ name: `${http}.downstream_rq_time`, histogram: d.rqDurationMs });

    add(`tcp.${direction}.downstream_cx_total`, d.tcpCxTotal);
    add(`tcp.${direction}.rbac.denied`, d.tcpCxDenied);
    // Envoy's name for the connections REGISTRY_ONLY sends nowhere (the requests: 502 with flag NR in the response counts).
    if (direction === 'outbound') add('cluster.BlackHoleCluster.upstream_cx_total', d.blackHoleCx);
    add(`tcp.${direction}.no_filter_chain_match`, d.tcpCxNoRoute);

    const cluster = `cluster.${direction}`;
    add(`${cluster}.upstream_cx_total`, d.upstreamCxTotal);
    add(`${cluster}.upstream_cx_active`, d.upstreamCxActive);
    add(`${cluster}.upstream_rq_active`, d.upstreamRqActive);
    add(`${cluster}.upstream_cx_connect_fail`, d.upstreamCxConnectFail);
    add(`${cluster}.upstream_cx_connect_timeout`, d.upstreamCxConnectTimeout);
    add(`${cluster}.upstream_rq_error`, d.upstreamRqErrors);
    add(`${cluster}.upstream_rq_timeout`, d.upstreamRqTimeouts);
  }
  add('server.live', input.state === 'LIVE' ? 1 : 0);
  add('server.state', STATE_NUMBER[input.state]);
  add('server.uptime', Math.floor(input.uptimeSeconds));
  add('server.memory_allocated', input.memory.allocated);
  add('server.memory_heap_size', input.memory.heapSize);
  add('server.memory_physical_size', input.memory.physical);
  add('server.total_connections', input.stats.outbound.cxActive + input.stats.inbound.cxActive);
  add('server.loop_connections_refused', input.stats.loopsRefused);
  for (const v of input.extra ?? []) values.push(v);
  for (const c of input.clusters ?? []) for (const s of clusterStats(c)) values.push({ name: s.name, value: s.value });
  const byName = <T extends { name: string }>(a: T, b: T): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  return { values: values.sort(byName), histograms: histograms.sort(byName) };
}

/**
 * Estimates a quantile (0–100) from fixed buckets by linear interpolation inside the bucket it falls
 * in; values beyond the last bound are reported as the last bound. Undefined without samples.
 */
export function histogramQuantile(h: Histogram, quantile: number): number | undefined {
  if (h.count === 0) return undefined;
  const rank = (quantile / 100) * h.count;
  let cumulative = 0;
  for (let i = 0; i < h.counts.length; i++) {
    const inBucket = h.counts[i]!;
    if (inBucket === 0) continue;
    if (cumulative + inBucket >= rank) {
      const lower = i === 0 ? 0 : h.bounds[i - 1]!;
      const upper = i < h.bounds.length ? h.bounds[i]! : lower;
      return lower + (upper - lower) * Math.max(0, (rank - cumulative) / inBucket);
    }
    cumulative += inBucket;
  }
  return h.bounds[h.bounds.length - 1];
}

function formatQuantile(value: number): string {
  return String(Number(value.toPrecision(6)));
}

/** `P0(nan,0.5) P25(nan,1.2) ...`; Envoy's interval values are `nan` (no interval histograms here). */
export function histogramSummary(h: Histogram): string {
  if (h.count === 0) return 'No recorded values';
  return SUPPORTED_QUANTILES.map((q) => `P${q}(nan,${formatQuantile(histogramQuantile(h, q)!)})`).join(' ');
}

export type StatsFormat = 'text' | 'json' | 'prometheus';

export interface StatsQuery {
  readonly filter?: RegExp;
  readonly usedOnly: boolean;
  readonly format: StatsFormat;
}

/** A bad query parameter: the admin answers 400 with the message. */
export class BadRequest extends Error {}

/** `?filter=<regex>&usedonly&format=text|json|prometheus`, as Envoy reads them. */
export function parseStatsQuery(params: URLSearchParams): StatsQuery {
  const filterText = params.get('filter');
  let filter: RegExp | undefined;
  if (filterText !== null && filterText !== '') {
    try {
      filter = new RegExp(filterText);
    } catch (err) {
      throw new BadRequest(`filter: invalid regex "${filterText}": ${(err as Error).message}`);
    }
  }
  const formatText = params.get('format') ?? 'text';
  if (formatText !== 'text' && formatText !== 'json' && formatText !== 'prometheus') {
    throw new BadRequest(`format: "${formatText}" is not one of text, json, prometheus`);
  }
  return { ...(filter ? { filter } : {}), usedOnly: params.has('usedonly'), format: formatText };
}

function selectStats(all: EnvoyStats, query: StatsQuery): EnvoyStats {
  const keep = (name: string): boolean => query.filter === undefined || query.filter.test(name);
  return {
    values: all.values.filter((s) => keep(s.name) && (!query.usedOnly || s.value !== 0)),
    histograms: all.histograms.filter((h) => keep(h.name) && (!query.usedOnly || h.histogram.count > 0)),
  };
}

/** Envoy's text: `name: value` lines sorted, then histograms as quantile summaries. */
export function renderStatsText(all: EnvoyStats, query: Omit<StatsQuery, 'format'>): string {
  const { values, histograms } = selectStats(all, { ...query, format: 'text' });
  const lines = [
    ...values.map((s) => `${s.name}: ${s.value}`),
    ...histograms.map((h) => `${h.name}: ${histogramSummary(h.histogram)}`),
  ];
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/** Envoy's `{"stats":[{"name":..,"value":..},...,{"histograms":{...}}]}`. */
export function renderStatsJson(all: EnvoyStats, query: Omit<StatsQuery, 'format'>): string {
  const { values, histograms } = selectStats(all, { ...query, format: 'json' });
  const stats: unknown[] = values.map((s) => ({ name: s.name, value: s.value }));
  if (histograms.length > 0) {
    stats.push({
      histograms: {
        supported_quantiles: SUPPORTED_QUANTILES,
        computed_quantiles: histograms.map((h) => ({
          name: h.name,
          values: SUPPORTED_QUANTILES.map((q) => {
            const v = histogramQuantile(h.histogram, q);
            return { interval: null, cumulative: v === undefined ? null : Number(v.toPrecision(6)) };
          }),
        })),
      },
    });
  }
  return `${JSON.stringify({ stats }, null, 2)}\n`;
}

/** The proxy registry's Prometheus text with the same filter and usedonly as `/stats`. */
export async function renderStatsPrometheus(registry: Registry, query: Omit<StatsQuery, 'format'>): Promise<string> {
  const text = await registry.metrics();
  if (query.filter === undefined && !query.usedOnly) return text;
  return renderExposition(filterExposition(parseExposition(text), query));
}

// ---------------------------------------------------------------------------------------------
// `/clusters`, `/listeners`: Envoy's text and JSON. Pure.

function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/**
 * Envoy's `/clusters` text: the passthrough clusters (`name::observability_name::name`, then
 * `name::addr:port::stat::N` per host), then the traffic clusters in force (formatClustersText).
 */
export function renderClustersText(clusters: readonly ClusterInfo[], traffic: readonly ClusterStatus[] = []): string {
  return renderPassthroughText(clusters) + formatClustersText(traffic);
}

function renderPassthroughText(clusters: readonly ClusterInfo[]): string {
  const lines: string[] = [];
  const named = new Set<string>();
  for (const c of clusters) {
    if (!named.has(c.name)) {
      named.add(c.name);
      lines.push(`${c.name}::observability_name::${c.name}`);
    }
    const host = `${c.name}::${hostPort(c.address, c.port)}`;
    lines.push(`${host}::cx_active::${c.cxActive}`, `${host}::cx_connect_fail::${c.connectFail}`,
      `${host}::cx_total::${c.cxTotal}`, `${host}::rq_total::${c.rqTotal}`, `${host}::health_flags::healthy`);
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/**
 * Envoy's `{"cluster_statuses":[...]}`, the passthrough clusters then the traffic ones; counters as
 * strings, as Envoy's protobuf JSON prints uint64.
 */
export function renderClustersJson(clusters: readonly ClusterInfo[], traffic: readonly ClusterStatus[] = []): string {
  const byName = new Map<string, ClusterInfo[]>();
  for (const c of clusters) byName.set(c.name, [...(byName.get(c.name) ?? []), c]);
  const cluster_statuses = [...byName].map(([name, hosts]) => ({
    name,
    observability_name: name,
    host_statuses: hosts.map((c) => ({
      address: { socket_address: { address: c.address, port_value: c.port } },
      stats: [
        { name: 'cx_connect_fail', value: String(c.connectFail) },
        { name: 'cx_total', value: String(c.cxTotal) },
        { name: 'rq_total', value: String(c.rqTotal) },
        { type: 'GAUGE', name: 'cx_active', value: String(c.cxActive) },
      ],
      health_status: { eds_health_status: 'HEALTHY' },
      weight: 1,
    })),
  }));
  return `${JSON.stringify({ cluster_statuses: [...cluster_statuses, ...clusterStatusesJson(traffic)] }, null, 2)}\n`;
}

export function renderListenersText(listeners: readonly ListenerInfo[]): string {
  return listeners.map((l) => `${l.name}::${hostPort(l.address, l.port)}\n`).join('');
}

export function renderListenersJson(listeners: readonly ListenerInfo[]): string {
  const listener_statuses = listeners.map((l) => ({
    name: l.name, local_address: { socket_address: { address: l.address, port_value: l.port } },
  }));
  return `${JSON.stringify({ listener_statuses }, null, 2)}\n`;
}

// ---------------------------------------------------------------------------------------------
// `/logging`. Pure.

/** Envoy's level names (what `--proxyLogLevel` takes) mapped to ours. */
const LEVEL_ALIASES: Record<string, Level> = { trace: 'debug', warning: 'warn', critical: 'fatal', off: 'none' };

function toLevel(text: string): Level | undefined {
  const t = text.toLowerCase();
  return isLevel(t) ? t : LEVEL_ALIASES[t];
}

/**
 * `?level=<level>` (every scope) and `?<scope>=<level>` (that scope; `all` is every scope), checked
 * all before any applies. Named scopes win over `level`, whatever the order.
 */
export function parseLoggingChanges(params: URLSearchParams): Map<ScopeName, Level> {
  const everyScope = new Map<ScopeName, Level>();
  const named = new Map<ScopeName, Level>();
  const levels = `${LEVELS.join(', ')} (or Envoy's trace, warning, critical, off)`;
  for (const [key, value] of params) {
    const level = toLevel(value);
    if (key === 'level' || key === ALL_SCOPES) {
      if (!level) throw new BadRequest(`unknown level "${value}"; levels are ${levels}`);
      for (const s of SCOPE_NAMES) everyScope.set(s, level);
    } else if (isScope(key)) {
      if (!level) throw new BadRequest(`unknown level "${value}" for scope ${key}; levels are ${levels}`);
      named.set(key, level);
    } else {
      throw new BadRequest(`unknown scope "${key}"; scopes are level (every scope), ${ALL_SCOPES}, ${SCOPE_NAMES.join(', ')}`);
    }
  }
  return new Map([...everyScope, ...named]);
}

export function renderLoggers(levels: Readonly<Record<ScopeName, Level>>): string {
  return `active loggers:\n${SCOPE_NAMES.map((s) => `  ${s}: ${levels[s]}\n`).join('')}`;
}

// ---------------------------------------------------------------------------------------------
// The endpoints.

export interface Reply {
  readonly status: number;
  readonly body: string;
  readonly contentType?: string;
  readonly headers?: Record<string, string>;
  /** Runs once the response has been sent (quitquitquit answers before the agent exits). */
  readonly after?: () => void;
}

interface Endpoint {
  readonly path: string;
  readonly help: string;
  /** State-changing endpoints take POST only. */
  readonly mutates: boolean;
  readonly handle: (params: URLSearchParams, method: string) => Reply | Promise<Reply>;
}

const TEXT = 'text/plain; charset=UTF-8';
const JSON_TYPE = 'application/json';
const ok = (body: string, contentType = TEXT): Reply => ({ status: 200, body, contentType });

function endpoints(hooks: AdminHooks): Endpoint[] {
  const stats = (): EnvoyStats => {
    const memory = process.memoryUsage();
    const heap = hooks.heap?.() ?? { used: memory.heapUsed, total: memory.heapTotal };
    return envoyStats({
      stats: hooks.stats,
      listeners: hooks.listeners(),
      state: hooks.state(),
      uptimeSeconds: process.uptime(),
      memory: { allocated: heap.used, heapSize: heap.total, physical: memory.rss },
      extra: hooks.extraStats(),
      clusters: hooks.trafficClusters?.() ?? [],
    });
  };
  const list: Endpoint[] = [
    { path: '/', help: 'this list of endpoints', mutates: false, handle: () => ok(helpText(list)) },
    { path: '/help', help: 'this list of endpoints', mutates: false, handle: () => ok(helpText(list)) },
    {
      path: '/stats', mutates: false,
      help: 'counters and gauges as "name: value" lines (?filter=<regex>, ?usedonly, ?format=json|prometheus)',
      handle: async (params) => {
        const query = parseStatsQuery(params);
        if (query.format === 'prometheus') return ok(await renderStatsPrometheus(hooks.proxyRegistry, query), PROMETHEUS_CONTENT_TYPE);
        if (query.format === 'json') return ok(renderStatsJson(stats(), query), JSON_TYPE);
        return ok(renderStatsText(stats(), query));
      },
    },
    {
      path: '/stats/prometheus', mutates: false, help: 'the proxy\'s metrics in Prometheus text (?filter=<regex>, ?usedonly)',
      handle: async (params) => ok(await renderStatsPrometheus(hooks.proxyRegistry, parseStatsQuery(params)), PROMETHEUS_CONTENT_TYPE),
    },
    {
      path: '/config_dump', mutates: false, help: 'listeners, routes, clusters, loaded resources and bootstrap settings (JSON)',
      handle: () => ok(`${JSON.stringify(hooks.configDump(), null, 2)}\n`, JSON_TYPE),
    },
    {
      path: '/certs', mutates: false, help: 'the workload certificate, its chain and root: identity, serial, SANs, validity (JSON)',
      handle: () => ok(`${JSON.stringify(hooks.certs?.() ?? { identity_state: 'none', certificates: [] }, null, 2)}\n`, JSON_TYPE),
    },
    {
      path: '/debug/decisions', mutates: false,
      help: 'why the last requests got their answers: JWT outcome, policy, route (JSON; ?limit=N)',
      handle: (params) => {
        const limit = Number(params.get('limit') ?? '');
        const all = hooks.decisions();
        const shown = Number.isInteger(limit) && limit > 0 ? all.slice(-limit) : all;
        return ok(`${JSON.stringify({ decisions: shown }, null, 2)}\n`, JSON_TYPE);
      },
    },
    {
      path: '/clusters', mutates: false, help: 'upstream clusters (passthrough and traffic) and their hosts: counts, health, weights, circuit breakers (?format=json)',
      handle: (params) => {
        const traffic = hooks.trafficClusters?.() ?? [];
        return params.get('format') === 'json'
          ? ok(renderClustersJson(hooks.clusters(), traffic), JSON_TYPE) : ok(renderClustersText(hooks.clusters(), traffic));
      },
    },
    {
      path: '/listeners', mutates: false, help: 'listeners and their addresses (?format=json)',
      handle: (params) => (params.get('format') === 'json'
        ? ok(renderListenersJson(hooks.listeners()), JSON_TYPE) : ok(renderListenersText(hooks.listeners()))),
    },
    {
      path: '/server_info', mutates: false, help: 'version, state, uptime, command line options, node (JSON)',
      handle: () => ok(`${JSON.stringify({ state: hooks.state(), ...hooks.serverInfo() }, null, 2)}\n`, JSON_TYPE),
    },
    {
      path: '/ready', mutates: false, help: '200 LIVE when serving, else 503 and the state',
      handle: () => {
        const state = hooks.state();
        return { status: state === 'LIVE' ? 200 : 503, body: `${state}\n`, contentType: TEXT };
      },
    },
    {
      path: '/logging', mutates: false,
      help: 'GET lists the level of every scope; POST ?<scope>=<level> or ?level=<level> changes them',
      handle: (params, method) => {
        if ([...params.keys()].length === 0) return ok(renderLoggers(scopeLevels()));
        if (method !== 'POST') {
          return { status: 405, body: 'changing log levels needs POST\n', contentType: TEXT, headers: { allow: 'POST' } };
        }
        const changes = parseLoggingChanges(params);
        for (const [name, level] of changes) setScopeLevel(name, level);
        log.info('log levels changed through the admin API', { changes: Object.fromEntries(changes) });
        return ok(renderLoggers(scopeLevels()));
      },
    },
    {
      path: '/drain_listeners', mutates: true, help: 'stop accepting new connections (POST)',
      handle: () => { hooks.drainListeners(); return ok('OK\n'); },
    },
    {
      path: '/healthcheck/fail', mutates: true, help: 'report unhealthy to health checks (POST)',
      handle: () => { hooks.setHealthcheckFailed(true); return ok('OK\n'); },
    },
    {
      path: '/healthcheck/ok', mutates: true, help: 'report healthy again (POST)',
      handle: () => { hooks.setHealthcheckFailed(false); return ok('OK\n'); },
    },
    {
      path: '/quitquitquit', mutates: true, help: 'exit the proxy now (POST)',
      handle: () => ({ ...ok('OK\n'), after: () => hooks.quit() }),
    },
  ];
  return list;
}

function helpText(list: readonly Endpoint[]): string {
  return `admin endpoints:\n${list.filter((e) => e.path !== '/help').map((e) => `  ${e.path}: ${e.help}\n`).join('')}`;
}

/** Answers one admin request; never throws (a failing hook is a 500 naming it). */
async function answer(list: readonly Endpoint[], method: string, url: string, refresh?: () => Promise<void>): Promise<Reply> {
  let parsed: URL;
  try {
    parsed = new URL(url, 'http://localhost');
  } catch {
    return { status: 400, body: `bad request target "${url}"\n`, contentType: TEXT };
  }
  const endpoint = list.find((e) => e.path === parsed.pathname);
  if (!endpoint) {
    return { status: 404, body: `no such endpoint: ${parsed.pathname}\n${helpText(list)}`, contentType: TEXT };
  }
  const allowed = endpoint.mutates ? ['POST'] : ['GET', 'HEAD', 'POST'];
  if (!allowed.includes(method)) {
    return {
      status: 405, body: `${endpoint.path} takes ${allowed.join(', ')}, not ${method}\n`, contentType: TEXT,
      headers: { allow: allowed.join(', ') },
    };
  }
  try {
    await refresh?.();
    return await endpoint.handle(parsed.searchParams, method);
  } catch (err) {
    if (err instanceof BadRequest) return { status: 400, body: `${err.message}\n`, contentType: TEXT };
    log.error(`admin ${endpoint.path} failed: ${(err as Error).message}`);
    return { status: 500, body: `${endpoint.path} failed: ${(err as Error).message}\n`, contentType: TEXT };
  }
}

/** The admin API without a socket: method and request target in, status and body out. */
export function adminRouter(hooks: AdminHooks): (method: string, url: string) => Promise<Reply> {
  const list = endpoints(hooks);
  return (method, url) => answer(list, method, url, hooks.refresh);
}


/**
 * Starts the admin API on 127.0.0.1:<port> and [::1]:<port> (the latter where IPv6 is on). With
 * `enabled` false (ENABLE_DEBUG_ON_HTTP=false) nothing listens and the result is undefined.
 */
export async function startAdminServer(options: { port: number; enabled: boolean; hooks: AdminHooks }): Promise<AdminServer | undefined> {
  if (!options.enabled) {
    log.info('admin API disabled: ENABLE_DEBUG_ON_HTTP is false; nothing listens on the admin port', { port: options.port });
    return undefined;
  }
  const route = adminRouter(options.hooks);
  const handler = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    req.resume(); // bodies are ignored
    const reply = await route(req.method ?? 'GET', req.url ?? '/');
    if (reply.after) {
      const after = reply.after;
      res.once('finish', () => {
        try {
          after();
        } catch (err) {
          log.error(`admin ${req.url ?? ''}: ${(err as Error).message}`);
        }
      });
    }
    res.writeHead(reply.status, {
      'content-type': reply.contentType ?? TEXT,
      'cache-control': 'no-cache, max-age=0',
      'x-content-type-options': 'nosniff',
      ...reply.headers,
    });
    res.end(reply.body);
  };
  const servers: Server[] = [];
  const addresses: string[] = [];
  const v4 = robustServer(handler, log);
  try {
    await listenOnce(v4, options.port, '127.0.0.1');
  } catch (err) {
    throw new Error(`admin API: cannot listen on 127.0.0.1:${options.port}: ${(err as Error).message}`, { cause: err });
  }
  servers.push(v4);
  addresses.push('127.0.0.1');
  const address = v4.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const v6 = robustServer(handler, log);
  try {
    await listenOnce(v6, port, '::1');
    servers.push(v6);
    addresses.push('::1');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT') log.debug('admin API: IPv6 loopback not available; 127.0.0.1 only');
    else log.warn(`admin API: cannot listen on [::1]:${port} (${(err as Error).message}); 127.0.0.1 only`);
  }
  log.info(`admin API listening on ${addresses.map((a) => hostPort(a, port)).join(' and ')}`);
  return { port, addresses, close: async () => { await Promise.all(servers.map(closeServer)); } };
}
