// prom-client's metric classes, each from its own file. The package's index also loads its push
// gateway client (node:https, node:tls, node:zlib), the cluster aggregator (node:cluster) and
// summaries (tdigest): the agent uses none of them, and every start paid for them in time and
// memory (docs/PERFORMANCE.md, "Start-up"). Same files as the index's, so instances are the same.
import type * as Prom from 'prom-client';
import CounterClass from 'prom-client/lib/counter.js';
import collectDefault from 'prom-client/lib/defaultMetrics.js';
import GaugeClass from 'prom-client/lib/gauge.js';
import HistogramClass from 'prom-client/lib/histogram.js';
import RegistryClass from 'prom-client/lib/registry.js';

export const Registry = RegistryClass;
export type Registry = Prom.Registry;
export const Counter = CounterClass;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge = GaugeClass;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram = HistogramClass;
export type Histogram<T extends string = string> = Prom.Histogram<T>;
export const collectDefaultMetrics = collectDefault;
export type { MetricType } from 'prom-client';
