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
declare module 'prom-client/lib/metrics/*.js' {
  const metric: DefaultMetric;
  export default metric;
}
