// Istio's standard metrics (requests_total, request_duration_milliseconds, request_bytes,
// response_bytes, request_messages_total, response_messages_total and the four TCP ones), with every
// label Istio gives them, on both reporters: `source` is the sidecar's outbound side, `destination`
// its inbound side. The data plane counts per label-set key (src/proxy/standard-series.ts); this
// reads the counts at scrape time and works the labels out (standard-labels.ts).
import { Counter, Histogram, type MetricType, type Registry } from './prom.js';
import { DIRECTIONS, type ProxyStats } from '../proxy/stats.js';
import { DURATION_BUCKETS_MS, SIZE_BUCKETS_BYTES, type HttpSeries, type TcpSeries } from '../proxy/standard-series.js';
import type { Histogram as StatsHistogram } from '../proxy/stats-histogram.js';
import { HTTP_LABELS, httpLabels, TCP_LABELS, tcpLabels, type LocalFacts } from './standard-labels.js';

export type MetricsPrefix = 'mesh' | 'istio';

/** The ten names under a prefix (MESH_METRICS_PREFIX). */
export function standardMetricNames(prefix: MetricsPrefix) {
  return {
    requests: `${prefix}_requests_total`,
    requestDuration: `${prefix}_request_duration_milliseconds`,
    requestBytes: `${prefix}_request_bytes`,
    responseBytes: `${prefix}_response_bytes`,
    requestMessages: `${prefix}_request_messages_total`,
    responseMessages: `${prefix}_response_messages_total`,
    tcpSent: `${prefix}_tcp_sent_bytes_total`,
    tcpReceived: `${prefix}_tcp_received_bytes_total`,
    tcpOpened: `${prefix}_tcp_connections_opened_total`,
    tcpClosed: `${prefix}_tcp_connections_closed_total`,
  } as const;
}

/** A series with its labels, as one scrape sees it. */
interface Labelled<T> {
  readonly labels: Record<string, string>;
  readonly series: T;
}

/** Every series of both reporters with its labels (worked out once per scrape, shared by the ten metrics). */
function collectSeries(stats: ProxyStats, facts: LocalFacts): { http: Labelled<HttpSeries>[]; tcp: Labelled<TcpSeries>[] } {
  const http: Labelled<HttpSeries>[] = [];
  const tcp: Labelled<TcpSeries>[] = [];
  for (const direction of DIRECTIONS) {
    const inbound = direction === 'inbound';
    const standard = stats.of(direction).standard;
    for (const [service, principal, peer, packed, series] of standard.httpEntries()) {
      http.push({ labels: httpLabels(inbound, facts, service, principal, peer, packed), series });
    }
    for (const [service, principal, peer, series] of standard.tcpEntries()) {
      tcp.push({ labels: tcpLabels(inbound, facts, service, principal, peer), series });
    }
  }
  return { http, tcp };
}

/** prom-client types the kind as an enum its JavaScript does not export; the value is the string. */
const HISTOGRAM = 'histogram' as unknown as MetricType;

interface HistogramSample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/** The cumulative Prometheus samples (`_bucket` per bound and `+Inf`, `_sum`, `_count`) of one fixed-bucket histogram. */
export function histogramSamples(name: string, labels: Record<string, string>, h: StatsHistogram): HistogramSample[] {
  const out: HistogramSample[] = [];
  let cumulative = 0;
  for (let i = 0; i < h.bounds.length; i++) {
    cumulative += h.counts[i]!;
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: h.bounds[i]! }, value: cumulative });
  }
  out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: h.count });
  out.push({ metricName: `${name}_sum`, labels, value: h.sum });
  out.push({ metricName: `${name}_count`, labels, value: h.count });
  return out;
}

/**
 * prom-client's Histogram only learns through observe(); this one reports fixed-bucket counts read
 * at scrape time (the registry calls getForPromString for text).
 */
class SampledHistogram extends Histogram<string> {
  constructor(registry: Registry, private readonly metricName: string, private readonly helpText: string, buckets: readonly number[],
    private readonly samples: () => HistogramSample[]) {
    super({ name: metricName, help: helpText, labelNames: [...HTTP_LABELS], buckets: [...buckets], registers: [registry] });
  }

  getForPromString(): ReturnType<Histogram<string>['get']> {
    return Promise.resolve({
      name: this.metricName, help: this.helpText, type: HISTOGRAM, aggregator: 'sum', collect: () => undefined,
      // `le` is a label prom-client's histograms carry; the type does not name it.
      values: this.samples() as Awaited<ReturnType<Histogram<string>['get']>>['values'],
    });
  }

  override get(): ReturnType<Histogram<string>['get']> {
    return this.getForPromString();
  }
}

/**
 * Registers the ten standard metrics on `registry`. The labels of every series are worked out once
 * per scrape (the first of the ten to be collected does it; the others reuse it within the same tick).
 */
export function registerStandardMetrics(registry: Registry, stats: ProxyStats, prefix: MetricsPrefix, facts: () => LocalFacts): void {
  const n = standardMetricNames(prefix);
  let cached: { at: number; value: ReturnType<typeof collectSeries> } | undefined;
  const series = (): ReturnType<typeof collectSeries> => {
    // One scrape collects every metric in the same turn of the event loop: the labels are made once for it.
    const at = scrapeTurn();
    if (cached === undefined || cached.at !== at) cached = { at, value: collectSeries(stats, facts()) };
    return cached.value;
  };
  const counter = (name: string, help: string, labelNames: readonly string[], read: () => [Record<string, string>, number][]): void => {
    new Counter({
      name, help, labelNames: [...labelNames], registers: [registry],
      collect() {
        this.reset();
        for (const [labels, value] of read()) this.inc(labels, value);
      },
    });
  };
  counter(n.requests, 'Requests completed, by Istio\'s standard labels (reporter source: this sidecar\'s outbound side; destination: its inbound side).',
    HTTP_LABELS, () => series().http.map((s) => [s.labels, s.series.count]));
  new SampledHistogram(registry, n.requestDuration, 'Request durations, from the first byte of the request to the end of the response, in milliseconds.',
    DURATION_BUCKETS_MS, () => series().http.flatMap((s) => histogramSamples(n.requestDuration, s.labels, s.series.duration)));
  new SampledHistogram(registry, n.requestBytes, 'Request body sizes, in bytes.',
    SIZE_BUCKETS_BYTES, () => series().http.flatMap((s) => histogramSamples(n.requestBytes, s.labels, s.series.requestBytes)));
  new SampledHistogram(registry, n.responseBytes, 'Response body sizes, in bytes.',
    SIZE_BUCKETS_BYTES, () => series().http.flatMap((s) => histogramSamples(n.responseBytes, s.labels, s.series.responseBytes)));
  const grpc = (): Labelled<HttpSeries>[] => series().http.filter((s) => s.labels['request_protocol'] === 'grpc');
  counter(n.requestMessages, 'gRPC messages sent by clients, by Istio\'s standard labels.', HTTP_LABELS,
    () => grpc().map((s) => [s.labels, s.series.requestMessages]));
  counter(n.responseMessages, 'gRPC messages sent back to clients, by Istio\'s standard labels.', HTTP_LABELS,
    () => grpc().map((s) => [s.labels, s.series.responseMessages]));
  counter(n.tcpSent, 'Bytes sent to clients on TCP connections (counted as each connection closes).', TCP_LABELS,
    () => series().tcp.map((s) => [s.labels, s.series.sentBytes]));
  counter(n.tcpReceived, 'Bytes received from clients on TCP connections (counted as each connection closes).', TCP_LABELS,
    () => series().tcp.map((s) => [s.labels, s.series.receivedBytes]));
  counter(n.tcpOpened, 'TCP connections opened (carried as TCP, not HTTP).', TCP_LABELS, () => series().tcp.map((s) => [s.labels, s.series.opened]));
  counter(n.tcpClosed, 'TCP connections closed (carried as TCP, not HTTP).', TCP_LABELS, () => series().tcp.map((s) => [s.labels, s.series.closed]));
}

/** A number that changes once per turn of the event loop: the metrics of one scrape share it. */
let turn = 0;
let turnScheduled = false;
function scrapeTurn(): number {
  if (!turnScheduled) {
    turnScheduled = true;
    setImmediate(() => { turn++; turnScheduled = false; });
  }
  return turn;
}
