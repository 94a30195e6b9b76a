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
import type { RequestDecider } from './proxy/http-handler.js';
import type { ProxyOptions } from './proxy/options.js';
import { ProxyStats } from './proxy/stats.js';
import { canSwitchSocketOwner } from './proxy/socket-options.js';
import { TRANSPARENT_OWNER } from './proxy/upstream.js';
import { startStatusServer, type Readiness } from './status/server.js';
import { startAdminServer } from './admin/server.js';
import { adminHooks } from './agent-admin.js';
import { MeshResources } from './agent-resources.js';
import { readWorkload } from './config/resources/workload.js';
import { DecisionLog } from './gateway/decisions.js';
import { GatewayRouter } from './gateway/router.js';
import { AccessLog } from './log/access-log.js';
import { createAgentMetrics } from './metrics/agent-metrics.js';
import { registerDnsMetrics } from './dns/metrics.js';
import { parseResolvConf } from './dns/resolv-conf.js';
import { startDnsProxy, type DnsProxy } from './dns/server.js';
import { registerDecisionMetrics, registerProxyMetrics } from './metrics/proxy-metrics.js';
import { parseMetricsAnnotations, startMergedMetricsServer, startProxyMetricsServer } from './metrics/servers.js';
import { Counter, Registry } from 'prom-client';
import { inboundDecider } from './security/inbound-decider.js';
import { JwtAuthenticator } from './security/jwt/authenticator.js';
import { RequestSecurity } from './security/request-security.js';

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
  /** `proxy router` only. */
  readonly router: GatewayRouter | undefined;
  readonly resources: MeshResources;
  readonly decisions: DecisionLog;
  readonly security: RequestSecurity;
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

function captureListeners(env: EnvValues, stats: ProxyStats, inbound: RequestDecider): CaptureListener[] {
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
    listeners.push(new CaptureListener({ ...common, direction: 'inbound', port: PORTS.inbound, host: '0.0.0.0', transparent: true, upstream: { kind: 'transparent', mark }, decider: inbound }));
    listeners.push(new CaptureListener({ ...common, direction: 'inbound', port: PORTS.inbound, host: '::', transparent: true, upstream: { kind: 'transparent', mark }, decider: inbound }));
  } else {
    listeners.push(new CaptureListener({ ...common, direction: 'inbound', port: PORTS.inbound, host: '::', transparent: false, upstream: { kind: 'passthrough' }, decider: inbound }));
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

/** The access log: the mesh config's `accessLogFile`; when unset, a gateway logs to stdout (a sidecar does not). */
function accessLogOf(mesh: MeshConfig, type: ProxyOptions['type']): AccessLog | undefined {
  const path = mesh.accessLogFile ?? (type === 'router' ? '/dev/stdout' : '');
  return path === '' ? undefined : new AccessLog(path, mesh.accessLogEncoding);
}

export async function runProxy(options: ProxyOptions, env: EnvValues): Promise<void> {
  const startedAt = performance.timeOrigin;
  const cwd = process.cwd();
  const mesh = loadMeshConfig(options.meshConfigPath, readOptional(options.meshConfigPath), env.PROXY_CONFIG);
  log.info(`mesh config from ${mesh.source}; drain ${mesh.defaultConfig.terminationDrainDurationMs}ms on SIGTERM`);
  const stats = new ProxyStats();
  let state: AgentState = 'INITIALIZING';
  let healthcheckFailed = false;
  let listenersBound = env.DISABLE_PROXY;
  let configLoaded = false;
  let listeners: CaptureListener[] = [];
  const servers: { close(): Promise<void> }[] = [];
  let exiting = false;

  const agentMetrics = createAgentMetrics();
  const proxyRegistry = new Registry();
  registerProxyMetrics(proxyRegistry, stats);
  const decisions = new DecisionLog();
  decisions.sink = accessLogOf(mesh, options.type);
  registerDecisionMetrics(proxyRegistry, decisions);
  const authenticator = new JwtAuthenticator({
    refreshIntervalMs: env.PILOT_JWT_PUB_KEY_REFRESH_INTERVAL,
    insecureSkipVerify: env.JWKS_RESOLVER_INSECURE_SKIP_VERIFY,
    log: (level, message) => log[level](`jwks: ${message}`),
  });
  const security = new RequestSecurity(authenticator, decisions);
  const router = options.type === 'router' && !env.DISABLE_PROXY
    ? new GatewayRouter({ stats, security, decisions, allowHttp10: env.PILOT_HTTP10, forward100Continue: env.ENABLE_100_CONTINUE_HEADERS, host: '::' })
    : undefined;
  // The DNS proxy starts after the resources' first read; it gets the ServiceEntries from then on.
  let dnsProxy: DnsProxy | undefined;
  const resources = new MeshResources({
    dns: { setServiceEntries: (entries) => dnsProxy?.setServiceEntries(entries) },
    cwd, configSources: mesh.configSources, workload: readWorkload(cwd, env.POD_NAMESPACE || 'default'),
    debounceMs: env.FILE_DEBOUNCE_DURATION, security, ...(router ? { router } : {}),
    rejects: new Counter({
      name: 'mesh_config_rejects_total', help: 'Configuration resources rejected (not valid); the last good version stays in force.',
      labelNames: ['kind'], registers: [agentMetrics.registry],
    }),
    onWatchFailure: () => agentMetrics.incFileWatcherFailures(),
  });

  const exit = async (code: number): Promise<void> => {
    if (exiting) return;
    exiting = true;
    resources.close();
    authenticator.close();
    await Promise.allSettled([...servers.map((x) => x.close()), ...listeners.map((l) => l.stopAccepting()), router?.close()]);
    process.exit(code);
  };
  const activeConnections = (): number => listeners.reduce((n, l) => n + l.activeConnections, router?.activeConnections ?? 0);

  const agent: Agent = {
    options, env, mesh, stats, startedAt, router, resources, decisions, security,
    get listeners() { return listeners; },
    state: () => state,
    readiness: () => {
      if (state === 'DRAINING') return { ready: false, reason: 'draining' };
      if (healthcheckFailed) return { ready: false, reason: 'health check failed (POST /healthcheck/ok to clear)' };
      if (!configLoaded) return { ready: false, reason: `configuration not loaded yet from ${resources.directories.join(', ')}` };
      if (!listenersBound) return { ready: false, reason: `listeners not bound: ${router ? 'gateway ports' : `${PORTS.outbound}, ${PORTS.inbound}`}` };
      const unbound = router?.unbound() ?? [];
      if (unbound.length > 0) return { ready: false, reason: `gateway ports not bound: ${unbound.join(', ')}` };
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
      void router?.close();
      const deadline = setTimeout(() => void exit(0), drainMs);
      deadline.unref();
      if (env.EXIT_ON_ZERO_ACTIVE_CONNECTIONS) {
        setTimeout(() => {
          const poll = setInterval(() => {
            if (activeConnections() === 0) {
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
      void router?.close();
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
  await resources.start();
  configLoaded = true;
  if (!env.DISABLE_PROXY) {
    // The proxy's own surfaces: its metrics and its admin API.
    servers.push(await startProxyMetricsServer({ port: env.PROXY_METRICS_PORT, registry: proxyRegistry, localhostOnly }));
    const admin = await startAdminServer({ port: PORTS.admin, enabled: env.ENABLE_DEBUG_ON_HTTP, hooks: adminHooks(agent, proxyRegistry) });
    if (admin) servers.push(admin);
    // A gateway has no capture: its listeners are the Gateway servers' ports (opened by the resources).
    if (!router) listeners = await listenAll(captureListeners(env, stats, inboundDecider(security, decisions)));
    listenersBound = true;
  } else {
    log.info('DISABLE_PROXY: no capture listeners; agent surfaces only');
  }
  if (env.MESH_META_DNS_CAPTURE || env.MESH_META_ENABLE_DNS_SERVER) {
    // The DNS proxy is the agent's, not the data plane's: it runs with DISABLE_PROXY too.
    const dns = await startDnsProxy({
      address: env.DNS_PROXY_ADDR, domain: options.domain, parallel: env.DNS_FORWARD_PARALLEL,
      resolver: parseResolvConf(readOptional('/etc/resolv.conf') ?? ''),
      metrics: registerDnsMetrics([agentMetrics.registry, proxyRegistry]),
    });
    servers.push(dns);
    dns.setServiceEntries(resources.snapshot?.serviceEntries ?? []);
    dnsProxy = dns;
  }
  state = 'LIVE';
  const startupMs = performance.timeOrigin + performance.now() - startedAt;
  agentMetrics.setStartupDuration(startupMs / 1000);
  const names = [...listeners.map((l) => l.name), ...(router?.info().map((l) => l.name) ?? [])];
  log.info(`ready in ${Math.round(startupMs)}ms: ${names.join(', ') || 'no listeners'}, status ${status.port}`);
}
