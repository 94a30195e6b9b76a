// `pilot-agent proxy`: starts the capture listeners (unless DISABLE_PROXY) and the agent's local
// surfaces, reports readiness, and drains on SIGTERM. SIGTERM, /quitquitquit and /drain_listeners
// share the paths below.
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type { EnvValues } from './config/env/registry.js';
import { loadMeshConfig, type MeshConfig } from './config/mesh-config.js';
import { AgentError } from './errors/agent-error.js';
import { scope } from './log/logger.js';
import { CaptureListener } from './proxy/listener.js';
import type { ProxyOptions } from './proxy/options.js';
import { ProxyStats } from './proxy/stats.js';
import { canSwitchSocketOwner } from './proxy/socket-options.js';
import { TRANSPARENT_OWNER } from './proxy/upstream.js';
import { startStatusServer, type Readiness } from './status/server.js';
import { startAdminServer, type AdminHooks } from './admin/server.js';
import { createAgentMetrics } from './metrics/agent-metrics.js';
import { registerProxyMetrics } from './metrics/proxy-metrics.js';
import { parseMetricsAnnotations, startMergedMetricsServer, startProxyMetricsServer } from './metrics/servers.js';
import { Registry } from 'prom-client';
import { buildInfo } from './version/build-info.js';

const log = scope('default');

export const PORTS = {
  admin: 15000,
  outbound: 15001,
  inbound: 15006,
  tunnel: 15008,
  debug: 15004,
  agentMetrics: 15020,
  dns: 15053,
  proxyMetrics: 15090,
} as const;

export type AgentState = 'PRE_INITIALIZING' | 'INITIALIZING' | 'LIVE' | 'DRAINING';

/** Everything the running agent holds; the admin and metrics surfaces read it. */
export interface Agent {
  readonly options: ProxyOptions;
  readonly env: EnvValues;
  readonly mesh: MeshConfig;
  readonly stats: ProxyStats;
  readonly listeners: readonly CaptureListener[];
  readonly startedAt: number;
  state(): AgentState;
  readiness(): Readiness;
  /** SIGTERM: readiness 503, inbound stops accepting, exit when drained or at the drain duration. */
  drain(reason: string): void;
  /** /drain_listeners: every listener stops accepting; the process stays. */
  drainListeners(): void;
  setHealthcheckFailed(failed: boolean): void;
  /** /quitquitquit: exit now. */
  quit(): void;
}

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new AgentError('ERR_CONFIG', `cannot read ${path}: ${(err as Error).message}`);
  }
}

/** This pod's addresses, re-read at most every few seconds (interfaces rarely change). */
function localAddressCache(): () => ReadonlySet<string> {
  let cached = new Set<string>();
  let at = 0;
  return () => {
    if (Date.now() - at > 5_000) {
      cached = new Set(Object.values(networkInterfaces()).flatMap((l) => (l ?? []).map((a) => a.address)));
      at = Date.now();
    }
    return cached;
  };
}

function captureListeners(env: EnvValues, stats: ProxyStats): CaptureListener[] {
  const tproxy = env.INBOUND_INTERCEPTION_MODE === 'TPROXY';
  const mark = Number(env.INBOUND_TPROXY_MARK || '1337');
  const common = {
    stats,
    ownPorts: new Set<number>([...Object.values(PORTS), env.PROXY_STATUS_PORT]),
    localAddresses: localAddressCache(),
    forward100Continue: env.ENABLE_100_CONTINUE_HEADERS,
    allowHttp10: env.PILOT_HTTP10,
  };
  const listeners = [
    new CaptureListener({ ...common, direction: 'outbound', port: PORTS.outbound, host: '::', transparent: false, upstream: { kind: 'direct' } }),
  ];
  if (tproxy) {
    if (process.getuid?.() !== 0 && !canSwitchSocketOwner(TRANSPARENT_OWNER)) {
      log.warn('TPROXY: this sidecar can neither run as root nor create sockets as root (CAP_SETUID, CAP_SETGID): '
        + 'its connections to the app will be captured again by the inbound rules; run it as uid 0 / gid 1337 '
        + '(as Istio does) or grant NET_ADMIN, SETUID and SETGID');
    }
    // One IP_TRANSPARENT socket per family; the IPv6 one only where the kernel has IPv6.
    listeners.push(new CaptureListener({ ...common, direction: 'inbound', port: PORTS.inbound, host: '0.0.0.0', transparent: true, upstream: { kind: 'transparent', mark } }));
    listeners.push(new CaptureListener({ ...common, direction: 'inbound', port: PORTS.inbound, host: '::', transparent: true, upstream: { kind: 'transparent', mark } }));
  } else {
    listeners.push(new CaptureListener({ ...common, direction: 'inbound', port: PORTS.inbound, host: '::', transparent: false, upstream: { kind: 'passthrough' } }));
  }
  return listeners;
}

async function listenAll(listeners: CaptureListener[]): Promise<CaptureListener[]> {
  const bound: CaptureListener[] = [];
  for (const listener of listeners) {
    try {
      await listener.listen();
      bound.push(listener);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // No IPv6 in this kernel or namespace: the IPv4 listeners do.
      if (code === 'EAFNOSUPPORT' || code === 'EADDRNOTAVAIL' || (err as { errno?: number }).errno === 97) {
        log.info(`listener ${listener.name}: IPv6 unavailable, skipped`);
        continue;
      }
      throw new AgentError('ERR_LISTEN', `cannot listen on ${listener.name}: ${(err as Error).message}`, { cause: err });
    }
  }
  return bound;
}

export async function runProxy(options: ProxyOptions, env: EnvValues): Promise<void> {
  const startedAt = performance.timeOrigin;
  const mesh = loadMeshConfig(options.meshConfigPath, readOptional(options.meshConfigPath), env.PROXY_CONFIG);
  log.info(`mesh config from ${mesh.source}; drain ${mesh.defaultConfig.terminationDrainDurationMs}ms on SIGTERM`);
  const stats = new ProxyStats();
  let state: AgentState = 'INITIALIZING';
  let healthcheckFailed = false;
  let listenersBound = env.DISABLE_PROXY;
  let listeners: CaptureListener[] = [];
  const servers: { close(): Promise<void> }[] = [];
  let exiting = false;

  const exit = async (code: number): Promise<void> => {
    if (exiting) return;
    exiting = true;
    await Promise.allSettled([...servers.map((x) => x.close()), ...listeners.map((l) => l.stopAccepting())]);
    process.exit(code);
  };

  const agent: Agent = {
    options, env, mesh, stats, startedAt,
    get listeners() { return listeners; },
    state: () => state,
    readiness: () => {
      if (state === 'DRAINING') return { ready: false, reason: 'draining' };
      if (healthcheckFailed) return { ready: false, reason: 'health check failed (POST /healthcheck/ok to clear)' };
      if (!listenersBound) return { ready: false, reason: `listeners not bound: ${PORTS.outbound}, ${PORTS.inbound}` };
      return { ready: true };
    },
    drain: (reason) => {
      if (state === 'DRAINING') return;
      state = 'DRAINING';
      const drainMs = mesh.defaultConfig.terminationDrainDurationMs;
      log.info(`${reason}: draining; inbound stops accepting, outbound continues; exit in at most ${drainMs}ms`);
      for (const l of listeners.filter((x) => x.name.startsWith('inbound'))) {
        void l.stopAccepting();
        l.drainHttp();
      }
      const deadline = setTimeout(() => void exit(0), drainMs);
      deadline.unref();
      if (env.EXIT_ON_ZERO_ACTIVE_CONNECTIONS) {
        setTimeout(() => {
          const poll = setInterval(() => {
            const active = listeners.reduce((n, l) => n + l.activeConnections, 0);
            if (active === 0) {
              clearInterval(poll);
              log.info('no active connections left: exiting');
              void exit(0);
            }
          }, 1_000);
        }, env.MINIMUM_DRAIN_DURATION).unref();
      }
    },
    drainListeners: () => {
      for (const l of listeners) {
        void l.stopAccepting();
        l.drainHttp();
      }
    },
    setHealthcheckFailed: (failed) => { healthcheckFailed = failed; },
    quit: () => { log.info('quit requested'); void exit(0); },
  };

  process.on('SIGTERM', () => agent.drain('SIGTERM'));
  process.on('SIGINT', () => agent.drain('SIGINT'));
  // A proxy carries every connection of the pod: one odd socket error must not take them all down.
  // Anything that escapes its handler is logged (with its stack) and counted, and the process goes on.
  process.on('uncaughtException', (err) => {
    stats.uncaughtErrors++;
    log.error(`uncaught error (the proxy goes on): ${err.message}`, { stack: err.stack });
  });
  process.on('unhandledRejection', (reason) => {
    stats.uncaughtErrors++;
    log.error(`unhandled rejection (the proxy goes on): ${String((reason as Error)?.message ?? reason)}`);
  });

  const agentMetrics = createAgentMetrics();
  const proxyRegistry = new Registry();
  registerProxyMetrics(proxyRegistry, stats);
  const localhostOnly = env.METRICS_LOCALHOST_ACCESS_ONLY;

  const status = await startStatusServer({
    port: mesh.defaultConfig.statusPort ?? env.PROXY_STATUS_PORT,
    readiness: agent.readiness,
    probers: env.MESH_APP_PROBERS,
    env: {
      instanceIp: env.INSTANCE_IP,
      rewriteLegacyLocalhost: env.REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION,
      keepAlive: env.ENABLE_PROBE_KEEPALIVE_CONNECTIONS,
      http2Probing: env.MESH_ENABLE_HTTP2_PROBING,
    },
  });
  servers.push(status);
  const app = parseMetricsAnnotations(env.MESH_METRICS_ANNOTATIONS);
  servers.push(await startMergedMetricsServer({
    port: PORTS.agentMetrics, agentRegistry: agentMetrics.registry, proxyMetrics: () => proxyRegistry.metrics(),
    ...(app ? { app } : {}), localhostOnly,
  }));
  if (!env.DISABLE_PROXY) {
    // The proxy's own surfaces: its metrics and its admin API.
    servers.push(await startProxyMetricsServer({ port: env.PROXY_METRICS_PORT, registry: proxyRegistry, localhostOnly }));
    const admin = await startAdminServer({ port: PORTS.admin, enabled: env.ENABLE_DEBUG_ON_HTTP, hooks: adminHooks(agent, proxyRegistry) });
    if (admin) servers.push(admin);
    listeners = await listenAll(captureListeners(env, stats));
    listenersBound = true;
  } else {
    log.info('DISABLE_PROXY: no capture listeners; agent surfaces only');
  }
  state = 'LIVE';
  const startupMs = performance.timeOrigin + performance.now() - startedAt;
  agentMetrics.setStartupDuration(startupMs / 1000);
  log.info(`ready in ${Math.round(startupMs)}ms: `
    + `${listeners.map((l) => l.name).join(', ') || 'no listeners'}, status ${status.port}`);
}

/** Istio's node id: `sidecar~<ip>~<pod>.<namespace>~<domain>`. */
function nodeId(agent: Agent): string {
  const e = agent.env;
  return `${agent.options.type}~${e.INSTANCE_IP}~${e.POD_NAME}.${e.POD_NAMESPACE}~${agent.options.domain}`;
}

/** What the admin API shows and does, read from the running agent. */
function adminHooks(agent: Agent, proxyRegistry: Registry): AdminHooks {
  // The dual-stack `::` listeners are shown as Istio's virtualOutbound/virtualInbound (0.0.0.0_15001),
  // the names operators' dashboards and `/stats` filters expect.
  const listenerInfo = () => agent.listeners.map((l) => ({ name: l.name, address: l.address === '::' ? '0.0.0.0' : l.address, port: l.port }));
  const clusterInfo = () => (['outbound', 'inbound'] as const).map((direction) => {
    const s = agent.stats.of(direction);
    return {
      name: direction === 'outbound' ? 'PassthroughCluster' : 'InboundPassthroughCluster',
      address: direction === 'outbound' ? 'original destination' : agent.env.INBOUND_INTERCEPTION_MODE === 'TPROXY' ? 'client address (TPROXY)' : '127.0.0.6',
      port: 0, cxActive: s.upstreamCxActive, cxTotal: s.upstreamCxTotal, rqTotal: s.rqTotal, connectFail: s.upstreamCxConnectFail,
    };
  });
  return {
    stats: agent.stats,
    proxyRegistry,
    state: agent.state,
    serverInfo: () => ({
      version: buildInfo().version,
      state: agent.state(),
      uptime_current_epoch: `${Math.round((performance.timeOrigin + performance.now() - agent.startedAt) / 1000)}s`,
      node: { id: nodeId(agent), cluster: agent.options.serviceCluster },
      command_line_options: {
        concurrency: agent.options.concurrency, log_level: agent.options.logLevels.level,
        component_log_level: Object.fromEntries(agent.options.logLevels.components), drain_time: `${agent.mesh.defaultConfig.drainDurationMs / 1000}s`,
        termination_drain_time: `${agent.mesh.defaultConfig.terminationDrainDurationMs / 1000}s`,
      },
    }),
    configDump: () => ({
      bootstrap: {
        node: { id: nodeId(agent), cluster: agent.options.serviceCluster },
        admin: { port: PORTS.admin }, proxy_type: agent.options.type, domain: agent.options.domain,
        mesh_config_source: agent.mesh.source, proxy_config: agent.mesh.defaultConfig,
        interception_mode: agent.env.INBOUND_INTERCEPTION_MODE || 'REDIRECT',
      },
      listeners: listenerInfo(),
      routes: [],
      clusters: clusterInfo(),
      loaded_resources: [],
      mesh_config: agent.mesh.raw,
    }),
    listeners: listenerInfo,
    clusters: clusterInfo,
    drainListeners: agent.drainListeners,
    setHealthcheckFailed: agent.setHealthcheckFailed,
    quit: agent.quit,
  };
}
