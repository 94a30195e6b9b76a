// prom-client's metric classes, each from its own file. The package's index also loads its push
// gateway client (node:https, node:tls, node:zlib), the cluster aggregator (node:cluster) and
// summaries (tdigest): the agent uses none of them, and every start paid for them in time and
// memory (docs/PERFORMANCE.md, "Start-up"). Same files as the index's, so instances are the same.
import type * as Prom from 'prom-client';
import CounterClass from 'prom-client/lib/counter.js';
import GaugeClass from 'prom-client/lib/gauge.js';
import HistogramClass from 'prom-client/lib/histogram.js';
import eventLoopLag from 'prom-client/lib/metrics/eventLoopLag.js';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed.js';
import heapSpacesSizeAndUsed from 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap.js';
import processCpuTotal from 'prom-client/lib/metrics/processCpuTotal.js';
import processHandles from 'prom-client/lib/metrics/processHandles.js';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors.js';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors.js';
import processRequests from 'prom-client/lib/metrics/processRequests.js';
import processResources from 'prom-client/lib/metrics/processResources.js';
import processStartTime from 'prom-client/lib/metrics/processStartTime.js';
import version from 'prom-client/lib/metrics/version.js';
import RegistryClass from 'prom-client/lib/registry.js';

export const Registry = RegistryClass;
export type Registry = Prom.Registry;
export const Counter = CounterClass;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge = GaugeClass;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram = HistogramClass;
export type Histogram<T extends string = string> = Prom.Histogram<T>;

/**
 * prom-client's default process and Node metrics, every one but `nodejs_gc_duration_seconds`: that
 * one observes each collection through perf_hooks, which cost 0.6–0.8 µs of CPU per proxied request
 * (~3%) on the thread that carries the data path, and saw no worker's collections
 * (docs/METRICS.md). The others are read when scraped.
 */
export function collectDefaultMetrics(config: { register: Prom.Registry; prefix: string }): void {
  const c = { prefix: config.prefix, eventLoopMonitoringPrecision: 10 };
  // prom-client's order; processResources only where node can list its active resources, as there.
  const listsResources = typeof (process as { getActiveResourcesInfo?: unknown }).getActiveResourcesInfo === 'function';
  for (const metric of [processCpuTotal, processStartTime, osMemoryHeap, processOpenFileDescriptors, processMaxFileDescriptors, eventLoopLag,
    ...(listsResources ? [processResources] : []), processHandles, processRequests, heapSizeAndUsed, heapSpacesSizeAndUsed, version]) {
    metric(config.register, c);
  }
}
export type { MetricType } from 'prom-client';
