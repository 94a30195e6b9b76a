// What the running agent holds, as the surfaces that read it (admin hooks, metrics) see it: an
// interface of its own so those surfaces need not import the process that starts them.
import type { EnvValues } from '../config/env/registry.js';
import type { MeshConfig } from '../config/mesh-config.js';
import type { DecisionLog } from '../gateway/decisions.js';
import type { ProxyOptions } from '../proxy/options.js';
import type { ProxyStats } from '../proxy/stats.js';
import type { Readiness } from '../status/server.js';
import type { DataPlane, ThreadHeap } from './data-plane.js';
import type { IdentitySource } from '../identity/workload-certificate.js';

export type AgentState = 'PRE_INITIALIZING' | 'INITIALIZING' | 'LIVE' | 'DRAINING';

/** Everything the running agent holds; the admin and metrics surfaces read it. */
export interface Agent {
  readonly options: ProxyOptions;
  readonly env: EnvValues;
  readonly mesh: MeshConfig;
  /** This thread's data plane (its listeners, router, resources and checks). */
  readonly plane: DataPlane;
  /** Workers carrying traffic (--concurrency), this thread included. */
  readonly concurrency: number;
  /** Every worker's counters and decisions together, as of the last `refresh()`. */
  readonly stats: ProxyStats;
  readonly decisions: DecisionLog;
  readonly startedAt: number;
  /** The workload's certificate source (mounted files, Istio's CA, or none). */
  readonly identity: IdentitySource;
  /** Gathers the workers' counters and decisions into `stats` and `decisions`. */
  refresh(): Promise<void>;
  /** Every thread's V8 heap together, as of the last `refresh()`. */
  heap(): ThreadHeap;
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
