// The traffic core's public face for the engine and the agent (README.md "Engine API"). The config
// side (clusters.ts, endpoint sources) adds its own exports beside these.
export { processClock, type Clock, type Random } from './clock.js';
export { NONE, type Balancer, type HostSet, type PickContext, type TriedEndpoint } from './balancers/index.js';
export {
  ClusterRuntime, Endpoint, isPickFailure, NO_HEALTHY_UPSTREAM, OVERFLOW, type ClusterRuntimeOptions, type PickFailure,
} from './cluster.js';
export {
  clusterStats, formatClustersJson, formatClustersText, formatClusterStatsText, hostPortOf, type ClusterStatus, type HostStatus, type StatSample,
} from './cluster-status.js';
export { cookieToGenerate, hashKeyOf, requestHash, type GeneratedCookie, type HashRequestFacts } from './hash-key.js';
export { connectionExhausted, type LimitValues } from './limits.js';
export { formatOutlierEvent, type OutlierEjectionType, type OutlierEvent } from './outlier-event.js';
export {
  backoffMs, decideRetry, isKeepAliveRace, NO_RETRY, OUTCOME, parseRetryOn, REPLAYABLE_BODY_LIMIT, responseOutcome, retryCondition,
  type AttemptOutcome, type KeepAliveRaceFacts, type OutcomeKind, type ParsedRetryOn, type RetryDecision, type RetryFacts,
} from './retry.js';
export {
  createTrafficMemory, DEFAULT_CLUSTER_SLOTS, DEFAULT_ENDPOINT_SLOTS, privateTrafficStore, TrafficStore, trafficMemoryBytes,
  type TrafficMemoryOptions, type TrafficStoreOptions,
} from './shared-state.js';
