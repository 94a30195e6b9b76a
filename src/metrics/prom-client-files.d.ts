// Types for the files of prom-client that src/metrics/prom.ts imports one by one (the package types
// its index only).
declare module 'prom-client/lib/registry.js' {
  const Registry: typeof import('prom-client').Registry;
  export default Registry;
}
declare module 'prom-client/lib/counter.js' {
  const Counter: typeof import('prom-client').Counter;
  export default Counter;
}
declare module 'prom-client/lib/gauge.js' {
  const Gauge: typeof import('prom-client').Gauge;
  export default Gauge;
}
declare module 'prom-client/lib/histogram.js' {
  const Histogram: typeof import('prom-client').Histogram;
  export default Histogram;
}
/** One of prom-client's default metrics (lib/metrics/*.js): registers its families on `registry`. */
type DefaultMetric = (registry: import('prom-client').Registry, config: { prefix?: string; eventLoopMonitoringPrecision?: number }) => void;
declare module 'prom-client/lib/metrics/processCpuTotal.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/processStartTime.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/osMemoryHeap.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/processOpenFileDescriptors.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/processMaxFileDescriptors.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/eventLoopLag.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/processResources.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/processHandles.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/processRequests.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/heapSizeAndUsed.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js' { const m: DefaultMetric; export default m; }
declare module 'prom-client/lib/metrics/version.js' { const m: DefaultMetric; export default m; }
