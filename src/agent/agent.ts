// `pilot-agent proxy`: starts the data plane (capture listeners, or the gateway's) in as many
// workers as --concurrency says, and the agent's local surfaces (status, metrics, admin, DNS);
// reports readiness, and drains on SIGTERM. SIGTERM, /quitquitquit and /drain_listeners share the
// paths below.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Counter } from '../metrics/prom.js';
import { startAdminServer } from '../admin/server.js';
import { adminHooks } from './admin-hooks.js';
import type { EnvValues } from '../config/env/registry.js';
import { loadMeshConfig } from '../config/mesh-config.js';
import { DataPlane, threadHeap, type ThreadHeap } from './data-plane.js';
import { trimAfterBursts } from './memory-trim.js';
import type { DnsProxy } from '../dns/server.js';
import { AgentError } from '../errors/agent-error.js';
import { DecisionLog } from '../gateway/decisions.js';
import { currentLogOptions, scope } from '../log/logger.js';
import { createAgentMetrics, RefreshingRegistry, registerDefaultMetrics } from '../metrics/agent-metrics.js';
import { registerClusterMetrics } from '../metrics/cluster-metrics.js';
import { registerDecisionMetrics, registerProxyMetrics } from '../metrics/proxy-metrics.js';
import { parseMetricsAnnotations, startMergedMetricsServer, startProxyMetricsServer } from '../metrics/servers.js';
import { PORTS } from '../config/ports.js';
import { ConnectionBudget, connectionLimit, sharedCount } from '../proxy/connection-budget.js';
import { createTrafficMemory } from '../traffic/shared-state.js';
import { fileDescriptorLimit } from '../proxy/fd-limit.js';
import { DEFAULT_SERVICE_CLUSTER, type ProxyOptions } from '../proxy/options.js';
import { releasePooled } from '../proxy/read-buffers.js';
import { ProxyStats } from '../proxy/stats.js';
import { startStatusServer } from '../status/server.js';
import { WorkerPool } from './workers.js';
import { identitySourceFrom, noIdentitySource } from '../identity/provider.js';
import type { Agent, AgentState } from './running-agent.js';
import type { MetricsPrefix } from '../metrics/standard-metrics.js';
import { metricsFacts } from './metrics-facts.js';

const log = scope('default');

export type { Agent, AgentState } from './running-agent.js';

/** At the end of the drain, closing the servers and every connection gets this long; then the process exits. */
export const EXIT_MARGIN_MS = 1_000;

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new AgentError('ERR_CONFIG', `cannot read ${path}: ${(err as Error).message}`);
  }
}

/**
 * Workers to run: `--concurrency` when above 0, else the mesh config's (PROXY_CONFIG's)
 * `concurrency` (default 2, as Istio's) when above 0, else MESH_CPU_LIMIT, else the cores; without
 * the flag, never more than the cores the process may run on (`cores`: its CPU affinity). A second
 * worker on a process pinned to one core only costs: its memory, its start-up, and switches between
 * the two on that core.
 */
export function resolveConcurrency(flag: number, configured: number | undefined, cpuLimit: number, cores: number): number {
  if (flag > 0) return flag;
  const wanted = configured !== undefined && configured > 0 ? configured : cpuLimit > 0 ? cpuLimit : cores;
  return Math.max(1, Math.min(wanted, cores));
}

/**
 * The service cluster, in Istio's order: the mesh config's (PROXY_CONFIG's) `serviceCluster` when it
 * is set and not empty, else `--serviceCluster` (Istio fills only an empty one from the flag).
 */
export function resolveServiceCluster(flag: string, configured: string | undefined): string {
  return configured !== undefined && configured !== '' ? configured : flag;
}

export async function runProxy(flagOptions: ProxyOptions, env: EnvValues): Promise<void> {
  const startedAt = performance.timeOrigin;
  const cwd = process.cwd();
  const mesh = loadMeshConfig(flagOptions.meshConfigPath, readOptional(flagOptions.meshConfigPath), env.PROXY_CONFIG);
  const serviceCluster = resolveServiceCluster(flagOptions.serviceCluster, mesh.defaultConfig.serviceCluster);
  const options: ProxyOptions = serviceCluster === flagOptions.serviceCluster ? flagOptions : Object.freeze({ ...flagOptions, serviceCluster });
  const concurrency = env.DISABLE_PROXY ? 1 : resolveConcurrency(options.concurrency, mesh.defaultConfig.concurrency, env.MESH_CPU_LIMIT, availableParallelism());
  log.info(`mesh config from ${mesh.source}; drain ${mesh.defaultConfig.terminationDrainDurationMs}ms on SIGTERM; ${concurrency} worker(s)`);
  for (const warning of mesh.warnings) log.warn(warning);
  if (options !== flagOptions && flagOptions.serviceCluster !== DEFAULT_SERVICE_CLUSTER) {
    log.info(`service cluster ${serviceCluster} (the mesh config's serviceCluster; it wins over --serviceCluster ${flagOptions.serviceCluster}, as in Istio)`);
  }
  let state: AgentState = 'INITIALIZING';
  let healthcheckFailed = false;
  let listenersBound = env.DISABLE_PROXY;
  let configLoaded = false;
  const servers: { close(): Promise<void> }[] = [];
  let exiting = false;

  // The workload's identity: mounted certificates, Istio's CA, or none (plaintext, as before).
  const identity = env.DISABLE_PROXY ? noIdentitySource() : identitySourceFrom(env, cwd, scope('security'));
  // The process and Node metrics are registered once ready (they cost ~10 ms of start-up; nothing scrapes before).
  const agentMetrics = createAgentMetrics({ certChain: () => identity.current()?.certChainPem, defaultMetrics: false });
  // The DNS proxy starts after the resources' first read; it gets the ServiceEntries from then on.
  let dnsProxy: DnsProxy | undefined;
  const dnsWanted = env.MESH_META_DNS_CAPTURE || env.MESH_META_ENABLE_DNS_SERVER;
  // One count of downstream connections for the process: this thread is worker 0, the threads 1..N-1.
  const limit = connectionLimit(env.MESH_MAX_DOWNSTREAM_CONNECTIONS, fileDescriptorLimit());
  const budget = { shared: sharedCount(concurrency), max: limit.max };
  const warn = (message: string): void => log.warn(message);
  const connections = new ConnectionBudget({ ...budget, worker: 0, warn });
  log.info(`at most ${limit.max} downstream connections for the process, all workers together (${limit.source})`);
  // Traffic management's counts, limits and ejections, shared by every worker (src/traffic/shared-state.ts).
  const trafficMemory = createTrafficMemory({ workers: concurrency });
  const plane = new DataPlane({
    options, env, mesh, cwd, reusePort: concurrency > 1, connections, traffic: { memory: trafficMemory, worker: 0 },
    primary: {
      rejects: new Counter({
        name: 'mesh_config_rejects_total', help: 'Configuration resources rejected (not valid); the last good version stays in force.',
        labelNames: ['kind'], registers: [agentMetrics.registry],
      }),
      onWatchFailure: () => agentMetrics.incFileWatcherFailures(),
      dns: { setServiceEntries: (entries) => dnsProxy?.setServiceEntries(entries) },
      onJwksFetch: (fetch) => {
        agentMetrics.incOutgoingRequests('jwks');
        if (!fetch.ok) agentMetrics.incFailedOutgoingRequests('jwks');
        if (fetch.retry) agentMetrics.incOutgoingRetries('jwks');
        agentMetrics.addOutgoingLatency('jwks', fetch.ms);
      },
    },
  });
  // A worker that dies takes its connections with it: its places go back to the count.
  const workers = new WorkerPool(concurrency - 1, { options, env, mesh, cwd, logOptions: currentLogOptions(), connections: budget, traffic: trafficMemory }, (worker) => {
    connections.reclaim(worker);
    plane.trafficStore.reclaim(worker);
  });
  // One worker: its own counters are the totals. Several: the totals are gathered on each read.
  const stats = workers.size === 0 ? plane.stats : new ProxyStats();
  const decisions = workers.size === 0 ? plane.decisions : new DecisionLog();
  // Every thread's heap as of the last refresh (one worker: this thread's, read when asked).
  let heaps: readonly ThreadHeap[] = [];
  const refresh = async (): Promise<void> => {
    if (workers.size === 0) return;
    const parts = [plane.snapshot(), ...await workers.snapshots()];
    stats.assignSum(parts.map((p) => p.stats));
    decisions.assignMerged(parts);
    heaps = parts.map((p) => p.heap);
  };
  const heap = (): ThreadHeap => (workers.size === 0 ? threadHeap() : heaps.reduce((sum, h) => ({ used: sum.used + h.used, total: sum.total + h.total }), { used: 0, total: 0 }));
  const activeConnections = async (): Promise<number> =>
    plane.activeConnections + (await workers.snapshots()).reduce((n, s) => n + s.activeConnections, 0);
  const proxyRegistry = new RefreshingRegistry(refresh);
  registerProxyMetrics(proxyRegistry, stats, { prefix: env.MESH_METRICS_PREFIX as MetricsPrefix, facts: metricsFacts(plane, plane.clusterDomain) });
  // The traffic clusters' counts are in the memory every worker shares: this thread's clusters give the totals.
  registerClusterMetrics(proxyRegistry, () => plane.clusters.statuses());
  registerDecisionMetrics(proxyRegistry, decisions);
  // Each new certificate (the source logs it) goes to every worker for the connections made from now on.
  identity.onChange((certificate) => {
    plane.setCertificate(certificate);
    workers.setCertificate(certificate);
  });

  // Closing is given EXIT_MARGIN_MS at most: a connection that will not end (an idle TCP one, a
  // client that never reads) must not keep the process past the drain duration it promised.
  const exit = async (code: number): Promise<void> => {
    if (exiting) return;
    exiting = true;
    identity.close();
    const closed = Promise.allSettled([...servers.map((x) => x.close()), plane.close(), workers.close()]);
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, EXIT_MARGIN_MS).unref())]);
    process.exit(code);
  };

  const agent: Agent = {
    options, env, mesh, plane, concurrency, stats, decisions, startedAt, refresh, heap, identity,
    state: () => state,
    readiness: () => {
      if (state === 'DRAINING') return { ready: false, reason: 'draining' };
      if (healthcheckFailed) return { ready: false, reason: 'health check failed (POST /healthcheck/ok to clear)' };
      if (!configLoaded) return { ready: false, reason: `configuration not loaded yet from ${plane.resources.directories.join(', ')}` };
      if (!listenersBound) return { ready: false, reason: `listeners not bound: ${plane.router ? 'gateway ports' : `${PORTS.outbound}, ${PORTS.inbound}`}` };
      const unbound = plane.unbound();
      if (unbound.length > 0) return { ready: false, reason: `gateway ports not bound: ${unbound.join(', ')}` };
      if (dnsWanted && dnsProxy === undefined) return { ready: false, reason: 'DNS proxy not started yet' };
      const needs = plane.identityRequiredBy();
      if (needs !== undefined && identity.current() === undefined) {
        const s = identity.state();
        return { ready: false, reason: `no workload certificate, required by ${needs}${s.state === 'error' || s.state === 'pending' ? `: ${s.message}` : ''}` };
      }
      return { ready: true };
    },
    drain: (reason) => {
      if (state === 'DRAINING') return;
      state = 'DRAINING';
      const drainMs = mesh.defaultConfig.terminationDrainDurationMs;
      log.info(`${reason}: draining; inbound stops accepting, outbound continues; exit in at most ${drainMs + EXIT_MARGIN_MS}ms`);
      plane.drainInbound();
      workers.tell('drainInbound');
      const deadline = setTimeout(() => void exit(0), drainMs);
      deadline.unref();
      if (env.EXIT_ON_ZERO_ACTIVE_CONNECTIONS) {
        setTimeout(() => {
          // What is idle now will not become active in a way that matters: closed at once.
          plane.closeIdle();
          workers.tell('closeIdle');
          const poll = setInterval(() => {
            void activeConnections().then((active) => {
              if (active !== 0) return;
              clearInterval(poll);
              log.info('no active connections left: exiting');
              void exit(0);
            });
          }, 1_000);
        }, env.MINIMUM_DRAIN_DURATION).unref();
      }
    },
    drainListeners: () => {
      plane.drainAll();
      workers.tell('drainAll');
    },
    setHealthcheckFailed: (failed) => { healthcheckFailed = failed; },
    quit: () => { log.info('quit requested'); void exit(0); },
  };

  process.on('SIGTERM', () => agent.drain('SIGTERM'));
  process.on('SIGINT', () => agent.drain('SIGINT'));
  // A proxy carries every connection of the pod: one odd socket error must not take them all down.
  // Anything that escapes its handler is logged (with its stack) and counted, and the process goes on.
  process.on('uncaughtException', (err) => {
    plane.stats.uncaughtErrors++;
    log.error(`uncaught error (the proxy goes on): ${err.message}`, { stack: err.stack });
  });
  process.on('unhandledRejection', (reason) => {
    plane.stats.uncaughtErrors++;
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
  await plane.loadConfiguration();
  configLoaded = true;
  // Not awaited: a CA that is slow or down must not keep the listeners closed (the app's traffic is
  // captured already). Readiness waits for the certificate where one is required; until it comes,
  // mTLS that is asked for fails (503, reset) rather than falling back to plaintext.
  identity.start().catch((err: Error) => log.error(`workload identity: ${err.message}`));
  if (identity.state().state === 'none') log.info('no workload identity (no mounted certificates, no CA_ADDR): traffic between sidecars stays plaintext');
  if (!env.DISABLE_PROXY) {
    // The proxy's own surfaces: its metrics and its admin API.
    servers.push(await startProxyMetricsServer({ port: env.PROXY_METRICS_PORT, registry: proxyRegistry, localhostOnly }));
    const admin = await startAdminServer({ port: PORTS.admin, enabled: env.ENABLE_DEBUG_ON_HTTP, hooks: adminHooks(agent, proxyRegistry) });
    if (admin) servers.push(admin);
    await plane.listen();
    listenersBound = true;
    // Not awaited: each worker thread loads the data plane again (a few hundred ms), and this thread
    // serves every connection meanwhile; the workers join the ports (SO_REUSEPORT) as they come up.
    if (workers.size > 0) {
      workers.start().then(
        () => log.info(`${workers.size} more worker(s) listening`),
        (err: Error) => log.error(`cannot start the workers (the first worker carries the traffic): ${err.message}`));
    }
  } else {
    log.info('DISABLE_PROXY: no capture listeners; agent surfaces only');
  }
  if (dnsWanted) {
    // The DNS proxy is the agent's, not the data plane's: it runs with DISABLE_PROXY too.
    // Loaded only here: a sidecar without DNS capture never needs the DNS code and its packet library.
    const [{ startDnsProxy }, { registerDnsMetrics }, { parseResolvConf }] = await Promise.all([
      import('../dns/server.js'), import('../dns/metrics.js'), import('../dns/resolv-conf.js')]);
    const dns = await startDnsProxy({
      address: env.DNS_PROXY_ADDR, domain: options.domain, parallel: env.DNS_FORWARD_PARALLEL,
      resolver: parseResolvConf(readOptional('/etc/resolv.conf') ?? ''),
      metrics: registerDnsMetrics([agentMetrics.registry, proxyRegistry]),
      // What the pod resolved: the names a DestinationRule host can meet a connection by.
      onAnswered: (name, addresses) => {
        if (plane.addDnsNames(name, addresses)) workers.addDnsNames(name, addresses);
      },
    });
    servers.push(dns);
    dns.setServiceEntries(plane.resources.visibleServiceEntries);
    dnsProxy = dns;
  }
  state = 'LIVE';
  // For the process's life (its timer does not keep it alive); the workers trim when it does.
  trimAfterBursts(releasePooled, (collect) => workers.trim(collect));
  setImmediate(() => registerDefaultMetrics(agentMetrics.registry));
  const startupMs = performance.timeOrigin + performance.now() - startedAt;
  agentMetrics.setStartupDuration(startupMs / 1000);
  const names = [...plane.listeners.map((l) => l.name), ...(plane.router?.info().map((l) => l.name) ?? [])];
  log.info(`ready in ${Math.round(startupMs)}ms: ${names.join(', ') || 'no listeners'} in ${concurrency} worker(s), status ${status.port}`);
}
