// The agent's own metrics (spec 2.4), on a registry of their own. Only metrics with a real source
// here are registered; docs/METRICS.md says, for every metric of 2.4, what feeds it or why it has no
// meaning in this agent. A metric whose value is not known yet (startup before ready, the
// certificate expiry when no chain is mounted) is left out rather than reported as 0.
import { readFile } from 'node:fs/promises';
import { Counter, Gauge, Registry, collectDefaultMetrics } from './prom.js';
import { scope } from '../log/logger.js';
import { buildInfo } from '../version/build-info.js';

const log = scope('monitoring');

export const AGENT_METRIC_NAMES = {
  build: 'mesh_build',
  startupDuration: 'startup_duration_seconds',
  scrapes: 'scrapes_total',
  scrapeFailures: 'scrape_failures_total',
  fileWatcherFailures: 'num_file_watcher_failures_total',
  certExpiry: 'cert_expiry_seconds',
  outgoingRequests: 'num_outgoing_requests',
  failedOutgoingRequests: 'num_failed_outgoing_requests',
  outgoingRetries: 'num_outgoing_retries',
  outgoingLatency: 'outgoing_latency',
  // Registered by the DNS proxy when it runs (src/dns/metrics.ts).
  dnsRequests: 'dns_requests_total',
  dnsUpstreamRequests: 'dns_upstream_requests_total',
  dnsUpstreamFailures: 'dns_upstream_failures_total',
  dnsUpstreamDuration: 'dns_upstream_request_duration_seconds',
  dnsUpstreamMismatchedAnswers: 'dns_upstream_mismatched_answers_total',
} as const;

/** Node's process metrics carry this prefix so they cannot collide with an app's own `process_*`. */
export const DEFAULT_METRICS_PREFIX = 'mesh_agent_';

/** prom-client's process and Node metrics (`mesh_agent_process_cpu_seconds_total`...) in `registry`. */
export function registerDefaultMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: DEFAULT_METRICS_PREFIX });
}
/** Istio's file-mounted certificate chain, relative to the working directory. */
export const DEFAULT_CERT_CHAIN_PATH = './etc/certs/cert-chain.pem';

/** The three parts of the merged metrics answer (15020). */
export type ScrapeType = 'agent' | 'proxy' | 'application';
export const SCRAPE_TYPES: readonly ScrapeType[] = ['agent', 'proxy', 'application'];

export interface ScrapeMetrics {
  /** Creates the series of these parts at 0. */
  initialise(types: readonly ScrapeType[]): void;
  countScrape(type: ScrapeType): void;
  countFailure(type: ScrapeType): void;
}

/**
 * `scrapes_total{type}` and `scrape_failures_total{type}` on `registry`, registered once: a second
 * call returns the same counters, so the merged-metrics server can take any agent registry.
 */
export function scrapeMetrics(registry: Registry): ScrapeMetrics {
  const existing = (name: string): Counter<'type'> | undefined => {
    const metric = registry.getSingleMetric(name);
    return metric instanceof Counter ? (metric as Counter<'type'>) : undefined;
  };
  const scrapes = existing(AGENT_METRIC_NAMES.scrapes) ?? new Counter({
    name: AGENT_METRIC_NAMES.scrapes,
    help: 'Scrapes of the merged metrics endpoint, counted per part (agent, proxy, application).',
    labelNames: ['type'], registers: [registry],
  });
  const failures = existing(AGENT_METRIC_NAMES.scrapeFailures) ?? new Counter({
    name: AGENT_METRIC_NAMES.scrapeFailures,
    help: 'Parts of a merged metrics scrape that failed and were left out, by part.',
    labelNames: ['type'], registers: [registry],
  });
  return {
    initialise(types) {
      for (const type of types) {
        scrapes.inc({ type }, 0);
        failures.inc({ type }, 0);
      }
    },
    countScrape: (type) => scrapes.inc({ type }),
    countFailure: (type) => failures.inc({ type }),
  };
}

export interface AgentMetricsOptions {
  /** PEM chain whose earliest `notAfter` is `cert_expiry_seconds`; default ./etc/certs/cert-chain.pem. */
  readonly certChainPath?: string;
  /**
   * The chain of the workload certificate in force (the identity source's), read instead of the
   * file: `cert_expiry_seconds` is then the certificate the proxy presents. Undefined: none held.
   */
  readonly certChain?: () => string | undefined;
  /** Node's process metrics (prefixed `mesh_agent_`); default true. */
  readonly defaultMetrics?: boolean;
  /** Build labels of `mesh_build`; default from buildInfo(). */
  readonly build?: { readonly version: string; readonly revision: string };
  /** Clock in epoch milliseconds, for tests. */
  readonly now?: () => number;
}

export interface AgentMetrics {
  readonly registry: Registry;
  /** The agent calls this once when it becomes ready (process start → ready). */
  setStartupDuration(seconds: number): void;
  /** The config watcher calls this when it cannot add a watch. */
  incFileWatcherFailures(): void;
  /** Outgoing requests of the agent (JWKS fetches...), by request type such as `jwks`. */
  incOutgoingRequests(requestType: string): void;
  incFailedOutgoingRequests(requestType: string): void;
  incOutgoingRetries(requestType: string): void;
  addOutgoingLatency(requestType: string, milliseconds: number): void;
}

/**
 * Earliest `notAfter` (epoch ms) among the certificates of a PEM chain; throws when the text holds
 * no certificate or one does not parse.
 */
export function earliestNotAfter(pem: string): number {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('no PEM certificate in the file');
  return Math.min(...blocks.map((block) => {
    const notAfter = Date.parse(new (process.getBuiltinModule('node:crypto').X509Certificate)(block).validTo);
    if (Number.isNaN(notAfter)) throw new Error('a certificate has an unreadable notAfter');
    return notAfter;
  }));
}

/**
 * A registry that runs `beforeScrape` before every scrape: the agent's refreshes the metrics whose
 * presence changes (prom-client always prints HELP/TYPE for a registered metric, so "absent" means
 * "not registered"); the proxy's gathers the workers' counters.
 */
export class RefreshingRegistry extends Registry {
  constructor(private readonly beforeScrape: () => Promise<void>) {
    super();
  }

  override async metrics(): Promise<string> {
    await this.beforeScrape();
    return super.metrics();
  }
}

export function createAgentMetrics(options: AgentMetricsOptions = {}): AgentMetrics {
  const now = options.now ?? Date.now;
  const certPath = options.certChainPath ?? DEFAULT_CERT_CHAIN_PATH;
  const names = AGENT_METRIC_NAMES;

  const certExpiry = new Gauge<'resource_name'>({
    name: names.certExpiry,
    help: 'Seconds until the earliest notAfter of the mounted certificate chain; negative means expired.',
    labelNames: ['resource_name'], registers: [],
  });
  let lastCertProblem = '';
  const refreshCertExpiry = async (): Promise<void> => {
    let notAfter: number | undefined;
    try {
      const held = options.certChain ? options.certChain() : await readFile(certPath, 'utf8');
      notAfter = held === undefined ? undefined : earliestNotAfter(held);
      lastCertProblem = '';
    } catch (err) {
      const problem = (err as NodeJS.ErrnoException).code === 'ENOENT' ? '' : (err as Error).message;
      // Logged once per distinct problem, not on every scrape.
      if (problem !== '' && problem !== lastCertProblem) {
        log.warn(`cert_expiry_seconds: cannot read the certificate chain ${certPath}: ${problem}`);
      }
      lastCertProblem = problem;
    }
    if (notAfter === undefined) {
      registry.removeSingleMetric(names.certExpiry);
      return;
    }
    certExpiry.set({ resource_name: 'default' }, (notAfter - now()) / 1000);
    if (registry.getSingleMetric(names.certExpiry) === undefined) registry.registerMetric(certExpiry);
  };
  const registry = new RefreshingRegistry(refreshCertExpiry);

  const build = options.build ?? buildInfo();
  new Gauge({
    name: names.build,
    help: 'Component build information (always 1).',
    labelNames: ['component', 'tag', 'revision'], registers: [registry],
  }).set({ component: 'pilot-agent', tag: build.version, revision: build.revision }, 1);

  const startup = new Gauge({
    name: names.startupDuration, help: 'Seconds from process start to ready.', registers: [],
  });

  scrapeMetrics(registry);

  const watcherFailures = new Counter({
    name: names.fileWatcherFailures,
    help: 'Times the configuration file watcher could not add a watch.',
    registers: [registry],
  });

  const outgoing = new Counter({
    name: names.outgoingRequests, help: 'Outgoing requests of the agent, by request type.',
    labelNames: ['request_type'], registers: [registry],
  });
  const failedOutgoing = new Counter({
    name: names.failedOutgoingRequests, help: 'Failed outgoing requests of the agent, by request type.',
    labelNames: ['request_type'], registers: [registry],
  });
  const retries = new Counter({
    name: names.outgoingRetries, help: 'Retried outgoing requests of the agent, by request type.',
    labelNames: ['request_type'], registers: [registry],
  });
  const latency = new Counter({
    name: names.outgoingLatency, help: 'Total latency of outgoing requests of the agent, in milliseconds, by request type.',
    labelNames: ['request_type'], registers: [registry],
  });

  if (options.defaultMetrics ?? true) registerDefaultMetrics(registry);

  return {
    registry,
    setStartupDuration(seconds) {
      startup.set(seconds);
      if (registry.getSingleMetric(names.startupDuration) === undefined) registry.registerMetric(startup);
    },
    incFileWatcherFailures: () => watcherFailures.inc(),
    incOutgoingRequests: (requestType) => outgoing.inc({ request_type: requestType }),
    incFailedOutgoingRequests: (requestType) => failedOutgoing.inc({ request_type: requestType }),
    incOutgoingRetries: (requestType) => retries.inc({ request_type: requestType }),
    addOutgoingLatency: (requestType, milliseconds) => latency.inc({ request_type: requestType }, milliseconds),
  };
}
