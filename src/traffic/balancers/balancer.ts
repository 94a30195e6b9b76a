// The one interface the engine's cluster runtime calls per attempt, and what every balancer shares:
// which endpoints are candidates (the healthy ones, or all of them in panic), and the retry rule
// that prefers an endpoint not tried yet. A balancer is per worker (its schedule, its round-robin
// position are its own); the health and active request counts it reads come from shared memory
// through HostSet, so every worker sees an ejection and every worker's requests.

/** pick()'s answer when no endpoint may be chosen (Envoy: no healthy upstream, 503 UH). */
export const NONE = -1;

/** Envoy's host_selection_retry_max_attempts as Istio sets it: re-picks while the pick was tried already. */
export const RETRY_HOST_REPICKS = 5;

/** The endpoints a balancer chooses among, by index 0..size-1 (the cluster runtime's current list). */
export interface HostSet {
  readonly size: number;
  /** Load-balancing weight (at least 1). */
  weight(i: number): number;
  /** `address:port` (IPv6 in brackets): what ring hash and maglev place on their table. */
  key(i: number): string;
  /** Not ejected by outlier detection (shared across workers). */
  isHealthy(i: number): boolean;
  /** Requests in flight to the endpoint from every worker. */
  activeRequests(i: number): number;
  /** Changes whenever any member's health may have changed: the balancer rebuilds its candidates then. */
  healthVersion(): number;
}

/** An endpoint an earlier attempt of the same request went to (the cluster runtime's Endpoint has `index`). */
export interface TriedEndpoint {
  /** Index in the current HostSet; -1 once removed. */
  readonly index: number;
}

export interface PickContext {
  /** The request's 53-bit hash (requestHash) for a consistent hash; undefined: none (a random one is used). */
  readonly hash?: number | undefined;
  /** Given only when the retry policy has ignorePreviousHosts: endpoints to avoid if another exists. */
  readonly tried?: readonly TriedEndpoint[] | undefined;
  /**
   * Given only when the retry policy has retryRemoteLocalities: the endpoints of the request's earlier
   * attempts, whose priorities a retry leaves out (Envoy's previous_priorities, as Istio sets it).
   */
  readonly attempted?: readonly TriedEndpoint[] | undefined;
}

export interface Balancer {
  /** The index of the endpoint for this attempt, or NONE. */
  pick(ctx: PickContext): number;
  /** Whether the last pick() balanced over every endpoint because too few were healthy (Envoy's panic mode). */
  readonly panic: boolean;
}

export interface BalancerOptions {
  readonly hosts: HostSet;
  readonly random: () => number;
  /** Istio's minHealthPercent (Envoy's healthy_panic_threshold); 0 disables panic. */
  readonly panicThresholdPercent: number;
}

// Why a linear scan: tried lists hold at most attempts-1 entries (Istio's default: 2).
function wasTried(tried: readonly TriedEndpoint[], i: number): boolean {
  for (let k = 0; k < tried.length; k++) if (tried[k]!.index === i) return true;
  return false;
}

/**
 * The candidates (healthy endpoints, or all in panic), rebuilt only when the health version or the
 * host set changes; subclasses choose among `candidates[0..count)` and rebuild their schedule in
 * rebuilt().
 */
export abstract class BaseBalancer implements Balancer {
  protected readonly hosts: HostSet;
  protected readonly random: () => number;
  private readonly threshold: number;
  /** Indices into the HostSet of the endpoints this balancer may choose now. */
  protected candidates: Int32Array;
  protected count = 0;
  private version = Number.NaN;
  panic = false;
  /** Consistent hashes keep their key's endpoint on a retry (Istio gives them no previous-hosts predicate). */
  protected readonly honoursTried: boolean = true;

  constructor(o: BalancerOptions) {
    this.hosts = o.hosts;
    this.random = o.random;
    this.threshold = o.panicThresholdPercent;
    this.candidates = new Int32Array(o.hosts.size);
  }

  pick(ctx: PickContext): number {
    this.refresh();
    if (this.count === 0) return NONE;
    let i = this.pickOnce(ctx);
    const tried = ctx.tried;
    if (tried === undefined || tried.length === 0 || !this.honoursTried || !wasTried(tried, i)) return i;
    for (let n = 0; n < RETRY_HOST_REPICKS && wasTried(tried, i); n++) i = this.pickOnce(ctx);
    // Envoy would now send the retry to a host it tried; we look once more for one it did not (the
    // issue's "each retry goes to another endpoint where one exists").
    return wasTried(tried, i) ? this.untried(tried, i) : i;
  }

  /** Chooses among candidates[0..count) (count > 0). */
  protected abstract pickOnce(ctx: PickContext): number;

  /** Called after the candidates changed. */
  protected abstract rebuilt(): void;

  // Why: one load of the shared health version per pick; the O(n) rebuild only after an ejection,
  // an unejection or a new endpoint set.
  private refresh(): void {
    const v = this.hosts.healthVersion();
    if (v === this.version) return;
    this.version = v;
    const n = this.hosts.size;
    let healthy = 0;
    for (let i = 0; i < n; i++) if (this.hosts.isHealthy(i)) this.candidates[healthy++] = i;
    // Envoy's panic: fewer healthy than the threshold's share balances over every endpoint.
    this.panic = n > 0 && this.threshold > 0 && healthy * 100 < this.threshold * n;
    if (this.panic) {
      for (let i = 0; i < n; i++) this.candidates[i] = i;
      this.count = n;
    } else {
      this.count = healthy;
    }
    this.rebuilt();
  }

  // A candidate not in tried, scanning from a random place; `fallback` when every candidate was tried.
  private untried(tried: readonly TriedEndpoint[], fallback: number): number {
    const start = Math.floor(this.random() * this.count);
    for (let k = 0; k < this.count; k++) {
      const i = this.candidates[(start + k) % this.count]!;
      if (!wasTried(tried, i)) return i;
    }
    return fallback;
  }

  /** Whether every candidate has the same weight (the unweighted algorithms apply). */
  protected equalWeights(): boolean {
    if (this.count === 0) return true;
    const w = this.hosts.weight(this.candidates[0]!);
    for (let k = 1; k < this.count; k++) if (this.hosts.weight(this.candidates[k]!) !== w) return false;
    return true;
  }
}
