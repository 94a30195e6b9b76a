// The DNS proxy's metrics (spec 2.4, and one of its own), registered on every registry passed in: the agent's (merged on
// 15020) and the proxy's (15090). One set of collectors, so both endpoints always agree; the merged
// endpoint keeps the first copy of a series and leaves out the second.
import { Counter, Histogram, type Registry } from '../metrics/prom.js';
import { AGENT_METRIC_NAMES } from '../metrics/agent-metrics.js';

/** What the DNS proxy records. */
export interface DnsMetrics {
  incRequests(): void;
  incUpstreamRequests(): void;
  incUpstreamFailures(): void;
  observeUpstreamDuration(seconds: number): void;
  /** A message from an upstream server that does not answer the query it came for (spoofed, or late). */
  incUpstreamMismatches(): void;
}

export const DNS_METRIC_NAMES = {
  requests: AGENT_METRIC_NAMES.dnsRequests,
  upstreamRequests: AGENT_METRIC_NAMES.dnsUpstreamRequests,
  upstreamFailures: AGENT_METRIC_NAMES.dnsUpstreamFailures,
  upstreamDuration: AGENT_METRIC_NAMES.dnsUpstreamDuration,
  upstreamMismatches: AGENT_METRIC_NAMES.dnsUpstreamMismatchedAnswers,
} as const;

/** Seconds; a forwarded query to a resolver in the cluster takes about a millisecond. */
export const UPSTREAM_DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * Creates the series and registers them on each registry that does not hold a metric of the
 * same name already (a second call, or another owner, never makes prom-client throw).
 */
export function registerDnsMetrics(registries: readonly Registry[]): DnsMetrics {
  const n = DNS_METRIC_NAMES;
  const requests = new Counter({
    name: n.requests, help: 'Total DNS requests: every query the DNS proxy read, answered locally or forwarded.', registers: [],
  });
  const upstream = new Counter({
    name: n.upstreamRequests, help: 'DNS requests forwarded upstream (one per client query, whatever the number of servers asked).', registers: [],
  });
  const failures = new Counter({
    name: n.upstreamFailures,
    help: 'Total DNS failures: forwarded queries that got no good answer (time-out, unreachable, or SERVFAIL/REFUSED/NOTIMP from every server).',
    registers: [],
  });
  const duration = new Histogram({
    name: n.upstreamDuration, help: 'Time to get DNS responses from upstream, in seconds.',
    buckets: UPSTREAM_DURATION_BUCKETS, registers: [],
  });
  // Beyond spec 2.4: forged answers show here (as in Unbound's `unwanted.replies`), not as failures.
  const mismatches = new Counter({
    name: n.upstreamMismatches,
    help: 'Messages from upstream DNS servers that were not the answer to the query they came for (another id or question), ignored.',
    registers: [],
  });
  for (const registry of registries) {
    for (const metric of [requests, upstream, failures, duration, mismatches]) {
      if (registry.getSingleMetric((metric as unknown as { name: string }).name) === undefined) registry.registerMetric(metric);
    }
  }
  return {
    incRequests: () => requests.inc(),
    incUpstreamRequests: () => upstream.inc(),
    incUpstreamFailures: () => failures.inc(),
    observeUpstreamDuration: (seconds) => duration.observe(seconds),
    incUpstreamMismatches: () => mismatches.inc(),
  };
}
