// All mutable per-cluster and per-endpoint state, in one SharedArrayBuffer the primary creates and
// hands to every worker in its init data, so that the workers make one set of decisions: a limit of
// 1 connection is 1 for the process, and an endpoint ejected after worker 1's failures is skipped by
// worker 0 too.
//
// Workers agree on slots without messages: two open-addressing tables (endpoints keyed by
// `cluster \n address:port`, clusters by name) on the key's 64-bit hash, linear probing, so every
// thread finds the same slot from the key alone. Attaching and detaching (configuration changes,
// never requests) run under one table lock word taken by compare-exchange: looking a key up and
// claiming or reusing a slot must be one step, or two threads could give one key two slots.
// The data path never takes it: a runtime resolves its slots once per endpoint set and keeps them.
//
// What each kind of value costs and why:
// - gauges and limits that every thread must see exactly (requests and connections in flight,
//   pending requests, retries, consecutive-error counters, the ejected flag): Int32 words moved
//   with Atomics. Each worker also keeps its own share of the gauges in a region only it writes,
//   so that the primary can give back what a dead worker held (its sockets died with it).
// - counters that only add up (rq_total, rq_success, upstream_rq_retry...): each worker adds to its
//   own Float64 copy with a plain store (one writer, no Atomics, exact to 2^53: years at any rate);
//   a reader sums the workers' copies.
// - times (last ejection, last unejection, next outlier sweep): int64 milliseconds of the process
//   clock (BigInt64), written only on an ejection, an unejection or a sweep, never per request;
//   int32 milliseconds would overflow after 24.8 days.
//
// Memory: the buffer is allocated zeroed and the kernel commits pages on first write, so only the
// slots in use take memory. When a table is full (every slot referenced), the new key gets a slot
// in this thread's private fallback table and a warning is logged once: it still works, but that
// endpoint's limits and ejections are per worker.
import { hash64Words } from './hash.js';

export const DEFAULT_ENDPOINT_SLOTS = 16384;
export const DEFAULT_CLUSTER_SLOTS = 4096;

/** Per-endpoint counters (Envoy's host stats in /clusters), in the order of the per-worker copies. */
export const ENDPOINT_COUNTERS = ['rq_total', 'rq_success', 'rq_error', 'rq_timeout', 'cx_total', 'cx_connect_fail'] as const;
export type EndpointCounter = (typeof ENDPOINT_COUNTERS)[number];

/** Per-cluster counters with Envoy's stat names (`cluster.<name>.` + the name), in slot order. */
export const CLUSTER_COUNTERS = [
  'upstream_cx_total', 'upstream_cx_connect_fail', 'upstream_cx_connect_timeout', 'upstream_cx_overflow', 'upstream_cx_none_healthy',
  'upstream_rq_total', 'upstream_rq_completed', 'upstream_rq_1xx', 'upstream_rq_2xx', 'upstream_rq_3xx', 'upstream_rq_4xx', 'upstream_rq_5xx',
  'upstream_rq_pending_total', 'upstream_rq_pending_overflow', 'upstream_rq_timeout', 'upstream_rq_per_try_timeout',
  'upstream_rq_retry', 'upstream_rq_retry_success', 'upstream_rq_retry_overflow', 'upstream_rq_retry_limit_exceeded',
  'outlier_detection.ejections_total', 'outlier_detection.ejections_overflow', 'outlier_detection.ejections_enforced_total',
  'outlier_detection.ejections_consecutive_5xx',
  'outlier_detection.ejections_detected_consecutive_5xx', 'outlier_detection.ejections_enforced_consecutive_5xx',
  'outlier_detection.ejections_detected_consecutive_gateway_failure', 'outlier_detection.ejections_enforced_consecutive_gateway_failure',
  'outlier_detection.ejections_detected_consecutive_local_origin_failure', 'outlier_detection.ejections_enforced_consecutive_local_origin_failure',
] as const;
export type ClusterCounter = (typeof CLUSTER_COUNTERS)[number];

/** Counter name → index, for the hot paths' countAt (a constant property, not a lookup by a string variable). */
export const ENDPOINT_COUNTER = Object.freeze(Object.fromEntries(ENDPOINT_COUNTERS.map((n, i) => [n, i])) as Record<EndpointCounter, number>);
export const CLUSTER_COUNTER = Object.freeze(Object.fromEntries(CLUSTER_COUNTERS.map((n, i) => [n, i])) as Record<ClusterCounter, number>);
const EPC_RQ_TOTAL = ENDPOINT_COUNTER.rq_total;
const EPC_CX_TOTAL = ENDPOINT_COUNTER.cx_total;

// ---- layout (Int32 word offsets inside a slot)

const MAGIC = 0x54524643; // "TRFC"
const LAYOUT_VERSION = 1;
const HEADER_WORDS = 16;
const H_MAGIC = 0;
const H_VERSION = 1;
const H_ENDPOINTS = 2;
const H_CLUSTERS = 3;
const H_WORKERS = 4;
const H_LOCK = 5;

const FREE = 0;
const LIVE = 1;

/** Endpoint slot words. */
export const EP = {
  STATE: 0, REFS: 1, KEY_HI: 2, KEY_LO: 3,
  RQ_ACTIVE: 4, CX_ACTIVE: 5,
  CONSECUTIVE_5XX: 6, CONSECUTIVE_GATEWAY: 7, CONSECUTIVE_LOCAL: 8,
  EJECTED: 9, NUM_EJECTIONS: 10, BACKOFF: 11,
} as const;
const EP_STRIDE = 16;
/** Endpoint times (BigInt64 per slot). */
const EPT_LAST_EJECTION = 0;
const EPT_LAST_UNEJECTION = 1;
const EPT_STRIDE = 2;
/** A worker's share of an endpoint: requests, connections, references. */
const EPS_RQ = 0;
const EPS_CX = 1;
const EPS_REFS = 2;
const EPS_STRIDE = 4;
const EPC_STRIDE = 8; // ENDPOINT_COUNTERS, padded

/** Cluster slot words. */
export const CL = {
  STATE: 0, REFS: 1, KEY_HI: 2, KEY_LO: 3,
  CX_ACTIVE: 4, RQ_PENDING: 5, RQ_ACTIVE: 6, RETRIES_ACTIVE: 7,
  /** Bumped at every connection released: what a worker waiting for a connection slot waits on. */
  CX_GENERATION: 8, CX_WAITERS: 9,
  EJECT_LOCK: 10, HEALTH_VERSION: 11,
} as const;
const CL_STRIDE = 16;
const CLT_NEXT_SWEEP = 0;
const CLT_STRIDE = 2;
/** A worker's share of a cluster's gauges, in CL order from CX_ACTIVE, then its references. */
const CLS_REFS = 4;
const CLS_STRIDE = 8;
const CLC_STRIDE = 32; // CLUSTER_COUNTERS, padded
if (CLUSTER_COUNTERS.length > CLC_STRIDE) throw new Error('CLUSTER_COUNTERS outgrew its stride');

/** The limit gauges a cluster slot holds (the order of CL.CX_ACTIVE..RETRIES_ACTIVE). */
export type LimitGauge = 'cx' | 'pending' | 'rq' | 'retries';
/**
 * The word of a gauge. A switch, not an object indexed by the name: called with four names from the
 * data path, such a keyed read was a megamorphic lookup (acquire + release 46 → 32 ns, micro-benchmark).
 */
function gaugeWord(gauge: LimitGauge): number {
  switch (gauge) {
    case 'cx': return CL.CX_ACTIVE;
    case 'pending': return CL.RQ_PENDING;
    case 'rq': return CL.RQ_ACTIVE;
    case 'retries': return CL.RETRIES_ACTIVE;
  }
}

export interface TrafficMemoryOptions {
  /** Threads that carry traffic: the primary and its worker threads (`--concurrency`). */
  readonly workers: number;
  readonly endpointSlots?: number | undefined;
  readonly clusterSlots?: number | undefined;
}

interface Layout {
  readonly endpoints: number;
  readonly clusters: number;
  readonly workers: number;
  readonly epWords: number; // byte offsets
  readonly epTimes: number;
  readonly clWords: number;
  readonly clTimes: number;
  readonly shares: number;
  readonly counters: number;
  readonly bytes: number;
  /** Int32 words of one worker's shares; Float64 entries of one worker's counters. */
  readonly sharesPerWorker: number;
  readonly countersPerWorker: number;
}

function layout(endpoints: number, clusters: number, workers: number): Layout {
  const align8 = (n: number): number => Math.ceil(n / 8) * 8;
  const epWords = HEADER_WORDS * 4;
  const epTimes = align8(epWords + endpoints * EP_STRIDE * 4);
  const clWords = epTimes + endpoints * EPT_STRIDE * 8;
  const clTimes = align8(clWords + clusters * CL_STRIDE * 4);
  const shares = clTimes + clusters * CLT_STRIDE * 8;
  const sharesPerWorker = endpoints * EPS_STRIDE + clusters * CLS_STRIDE;
  const counters = align8(shares + workers * sharesPerWorker * 4);
  const countersPerWorker = endpoints * EPC_STRIDE + clusters * CLC_STRIDE;
  const bytes = counters + workers * countersPerWorker * 8;
  return { endpoints, clusters, workers, epWords, epTimes, clWords, clTimes, shares, counters, bytes, sharesPerWorker, countersPerWorker };
}

function checkCount(what: string, n: number, max: number): number {
  if (!Number.isInteger(n) || n < 1 || n > max) throw new RangeError(`${what} must be an integer from 1 to ${max}, got ${n}`);
  return n;
}

function optionsLayout(o: TrafficMemoryOptions): Layout {
  return layout(
    checkCount('endpointSlots', o.endpointSlots ?? DEFAULT_ENDPOINT_SLOTS, 1 << 22),
    checkCount('clusterSlots', o.clusterSlots ?? DEFAULT_CLUSTER_SLOTS, 1 << 20),
    checkCount('workers', o.workers, 1024),
  );
}

/** The bytes createTrafficMemory allocates (virtual: pages are committed as slots are used). */
export function trafficMemoryBytes(o: TrafficMemoryOptions): number {
  return optionsLayout(o).bytes;
}

/** Writes the header (the sizes every thread reads back) into a zeroed buffer. */
function initialise<T extends ArrayBufferLike>(buffer: T, l: Layout): T {
  const h = new Int32Array(buffer, 0, HEADER_WORDS);
  h[H_ENDPOINTS] = l.endpoints;
  h[H_CLUSTERS] = l.clusters;
  h[H_WORKERS] = l.workers;
  h[H_VERSION] = LAYOUT_VERSION;
  h[H_MAGIC] = MAGIC;
  return buffer;
}

/** The primary creates the memory once and passes it to every worker in its init data. */
export function createTrafficMemory(o: TrafficMemoryOptions): SharedArrayBuffer {
  const l = optionsLayout(o);
  return initialise(new SharedArrayBuffer(l.bytes), l);
}

// ---- slots

/**
 * One endpoint's state as this thread sees it: the data path's handle. Its methods are the only
 * places the words are touched (a few Atomics each, no allocation).
 */
export class EndpointSlot {
  /** Word offset of the slot in `words`. */
  readonly base: number;
  private readonly timeBase: number;
  private readonly shareBase: number;
  private readonly counterBase: number;

  constructor(
    readonly store: TrafficStore,
    readonly slot: number,
    readonly words: Int32Array,
    private readonly times: BigInt64Array,
    private readonly share: Int32Array,
    private readonly counters: Float64Array,
  ) {
    this.base = slot * EP_STRIDE;
    this.timeBase = slot * EPT_STRIDE;
    this.shareBase = slot * EPS_STRIDE;
    this.counterBase = slot * EPC_STRIDE;
  }

  /** Whether this slot is in the process-wide table (false: the thread-local fallback). */
  get shared(): boolean {
    return this.store.shared;
  }

  requestStarted(): void {
    Atomics.add(this.words, this.base + EP.RQ_ACTIVE, 1);
    this.share[this.shareBase + EPS_RQ]!++;
    this.counters[this.counterBase + EPC_RQ_TOTAL]!++;
  }

  requestEnded(): void {
    Atomics.sub(this.words, this.base + EP.RQ_ACTIVE, 1);
    this.share[this.shareBase + EPS_RQ]!--;
  }

  connectionOpened(): void {
    Atomics.add(this.words, this.base + EP.CX_ACTIVE, 1);
    this.share[this.shareBase + EPS_CX]!++;
    this.counters[this.counterBase + EPC_CX_TOTAL]!++;
  }

  connectionClosed(): void {
    Atomics.sub(this.words, this.base + EP.CX_ACTIVE, 1);
    this.share[this.shareBase + EPS_CX]!--;
  }

  activeRequests(): number {
    return Atomics.load(this.words, this.base + EP.RQ_ACTIVE);
  }

  activeConnections(): number {
    return Atomics.load(this.words, this.base + EP.CX_ACTIVE);
  }

  isEjected(): boolean {
    return Atomics.load(this.words, this.base + EP.EJECTED) !== 0;
  }

  count(counter: EndpointCounter): void {
    this.counters[this.counterBase + ENDPOINT_COUNTER[counter]]!++;
  }

  /** count() by index (ENDPOINT_COUNTER.x): the data path's form. */
  countAt(index: number): void {
    this.counters[this.counterBase + index]!++;
  }

  /** A counter summed over every worker. */
  total(counter: EndpointCounter): number {
    return this.store.sumCounters(this.counterBase + ENDPOINT_COUNTER[counter]);
  }

  word(w: number): number {
    return Atomics.load(this.words, this.base + w);
  }

  /** Last ejection / unejection time (ms of the process clock), undefined when there was none. */
  lastEjection(): number | undefined {
    const t = Atomics.load(this.times, this.timeBase + EPT_LAST_EJECTION);
    return t < 0n ? undefined : Number(t);
  }

  lastUnejection(): number | undefined {
    const t = Atomics.load(this.times, this.timeBase + EPT_LAST_UNEJECTION);
    return t < 0n ? undefined : Number(t);
  }

  setLastEjection(ms: number): void {
    Atomics.store(this.times, this.timeBase + EPT_LAST_EJECTION, BigInt(Math.floor(ms)));
  }

  setLastUnejection(ms: number): void {
    Atomics.store(this.times, this.timeBase + EPT_LAST_UNEJECTION, BigInt(Math.floor(ms)));
  }

  /** Clears what a new membership starts without (Envoy's state of a host just added). */
  reset(): void {
    for (let w = EP.RQ_ACTIVE; w < EP_STRIDE; w++) Atomics.store(this.words, this.base + w, 0);
    this.setLastEjection(-1);
    this.setLastUnejection(-1);
    this.store.clearCounters(this.counterBase, EPC_STRIDE);
  }
}

/** One cluster's shared state: its circuit-breaker gauges, its eject lock, its counters. */
export class ClusterSlot {
  readonly base: number;
  private readonly timeBase: number;
  private readonly shareBase: number;
  private readonly counterBase: number;

  constructor(
    readonly store: TrafficStore,
    readonly slot: number,
    readonly words: Int32Array,
    private readonly times: BigInt64Array,
    private readonly share: Int32Array,
    private readonly counters: Float64Array,
  ) {
    this.base = slot * CL_STRIDE;
    this.timeBase = slot * CLT_STRIDE;
    this.shareBase = slot * CLS_STRIDE;
    this.counterBase = slot * CLC_STRIDE;
  }

  get shared(): boolean {
    return this.store.shared;
  }

  /** Takes one unit of a limited gauge unless that would pass `max`: one Atomics.add (and a sub on refusal). */
  tryAcquire(gauge: LimitGauge, max: number): boolean {
    const w = gaugeWord(gauge);
    if (Atomics.add(this.words, this.base + w, 1) + 1 > max) {
      Atomics.sub(this.words, this.base + w, 1);
      return false;
    }
    this.share[this.shareBase + w - CL.CX_ACTIVE]!++;
    return true;
  }

  release(gauge: LimitGauge): void {
    const w = gaugeWord(gauge);
    Atomics.sub(this.words, this.base + w, 1);
    this.share[this.shareBase + w - CL.CX_ACTIVE]!--;
    if (w === CL.CX_ACTIVE) {
      Atomics.add(this.words, this.base + CL.CX_GENERATION, 1);
      if (Atomics.load(this.words, this.base + CL.CX_WAITERS) > 0) this.store.notify(this.words, this.base + CL.CX_GENERATION);
    }
  }

  gauge(gauge: LimitGauge): number {
    return Atomics.load(this.words, this.base + gaugeWord(gauge));
  }

  /**
   * Resolves when a connection is released anywhere in the process, or after `timeoutMs`: true when
   * woken by a release. The caller tries to acquire again (another waiter may win the slot).
   */
  waitForConnectionRelease(timeoutMs: number): Promise<boolean> {
    const at = this.base + CL.CX_GENERATION;
    const seen = Atomics.load(this.words, at);
    Atomics.add(this.words, this.base + CL.CX_WAITERS, 1);
    return this.store.wait(this.words, at, seen, timeoutMs).finally(() => {
      Atomics.sub(this.words, this.base + CL.CX_WAITERS, 1);
    });
  }

  /** Workers waiting for a connection slot (a worker holding an idle connection may close it for them). */
  connectionWaiters(): number {
    return Atomics.load(this.words, this.base + CL.CX_WAITERS);
  }

  healthVersion(): number {
    return Atomics.load(this.words, this.base + CL.HEALTH_VERSION);
  }

  bumpHealthVersion(): void {
    Atomics.add(this.words, this.base + CL.HEALTH_VERSION, 1);
  }

  /** The cluster's eject lock (spin): ejections of one cluster are decided one at a time, so maxEjectionPercent holds. */
  lockEjections(): void {
    this.store.spinLock(this.words, this.base + CL.EJECT_LOCK);
  }

  unlockEjections(): void {
    Atomics.store(this.words, this.base + CL.EJECT_LOCK, 0);
  }

  /** Claims the outlier sweep due at or before `now` for this thread: true once per interval for the whole process. */
  claimSweep(now: number, intervalMs: number): boolean {
    const at = this.timeBase + CLT_NEXT_SWEEP;
    const due = Atomics.load(this.times, at);
    const t = BigInt(Math.floor(now));
    if (due === 0n) {
      // First sight of the cluster: the first sweep is one interval from now.
      Atomics.compareExchange(this.times, at, 0n, t + BigInt(Math.floor(intervalMs)));
      return false;
    }
    if (t < due) return false;
    return Atomics.compareExchange(this.times, at, due, t + BigInt(Math.floor(intervalMs))) === due;
  }

  /** When the next sweep is due (ms of the process clock), or undefined before the first claimSweep. */
  nextSweepAt(): number | undefined {
    const due = Atomics.load(this.times, this.timeBase + CLT_NEXT_SWEEP);
    return due === 0n ? undefined : Number(due);
  }

  count(counter: ClusterCounter): void {
    this.counters[this.counterBase + CLUSTER_COUNTER[counter]]!++;
  }

  /** count() by index (CLUSTER_COUNTER.x): the data path's form. */
  countAt(index: number): void {
    this.counters[this.counterBase + index]!++;
  }

  total(counter: ClusterCounter): number {
    return this.store.sumCounters(this.counterBase + CLUSTER_COUNTER[counter], true);
  }

  reset(): void {
    for (let w = CL.CX_ACTIVE; w < CL_STRIDE; w++) Atomics.store(this.words, this.base + w, 0);
    Atomics.store(this.times, this.timeBase + CLT_NEXT_SWEEP, 0n);
    this.store.clearCounters(this.counterBase, CLC_STRIDE, true);
  }
}

// ---- the store

/** Atomics.waitAsync (Node 16+; TypeScript declares it only from lib es2024, this project compiles with es2023). */
type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as {
  waitAsync(words: Int32Array, index: number, value: number, timeoutMs: number): WaitAsyncResult;
}).waitAsync;

export interface TrafficStoreOptions {
  /** From createTrafficMemory (process-wide), or an ArrayBuffer for a store private to one thread. */
  readonly memory: SharedArrayBuffer | ArrayBuffer;
  /** This thread's number: 0 the primary, 1..N-1 the worker threads. */
  readonly worker: number;
  /** Where "table full" goes (once per table). */
  readonly warn?: ((message: string) => void) | undefined;
}

/** This thread's view of the traffic memory: attaches keys to slots, gives back a dead worker's share. */
export class TrafficStore {
  readonly shared: boolean;
  readonly worker: number;
  private readonly l: Layout;
  private readonly header: Int32Array;
  private readonly epWords: Int32Array;
  private readonly epTimes: BigInt64Array;
  private readonly clWords: Int32Array;
  private readonly clTimes: BigInt64Array;
  /** Every worker's shares and counters (this thread writes only its own part). */
  private readonly shares: Int32Array;
  private readonly counters: Float64Array;
  private readonly ownShares: Int32Array;
  private readonly ownCounters: Float64Array;
  private readonly warn: (message: string) => void;
  private fallback: TrafficStore | undefined;
  private readonly warned = new Set<string>();
  /** A private store's waiters for a connection slot (no Atomics.waitAsync without shared memory). */
  private readonly localWaiters = new Set<() => void>();

  constructor(o: TrafficStoreOptions) {
    this.shared = typeof SharedArrayBuffer !== 'undefined' && o.memory instanceof SharedArrayBuffer;
    this.header = new Int32Array(o.memory, 0, HEADER_WORDS);
    if (this.header[H_MAGIC] !== MAGIC || this.header[H_VERSION] !== LAYOUT_VERSION) {
      throw new TypeError('traffic memory was not made by createTrafficMemory (or by another version of it)');
    }
    this.l = layout(this.header[H_ENDPOINTS]!, this.header[H_CLUSTERS]!, this.header[H_WORKERS]!);
    if (!Number.isInteger(o.worker) || o.worker < 0 || o.worker >= this.l.workers) {
      throw new RangeError(`worker ${o.worker} has no share in traffic memory made for ${this.l.workers} threads`);
    }
    this.worker = o.worker;
    const l = this.l;
    this.epWords = new Int32Array(o.memory, l.epWords, l.endpoints * EP_STRIDE);
    this.epTimes = new BigInt64Array(o.memory, l.epTimes, l.endpoints * EPT_STRIDE);
    this.clWords = new Int32Array(o.memory, l.clWords, l.clusters * CL_STRIDE);
    this.clTimes = new BigInt64Array(o.memory, l.clTimes, l.clusters * CLT_STRIDE);
    this.shares = new Int32Array(o.memory, l.shares, l.workers * l.sharesPerWorker);
    this.counters = new Float64Array(o.memory, l.counters, l.workers * l.countersPerWorker);
    this.ownShares = this.shares.subarray(o.worker * l.sharesPerWorker, (o.worker + 1) * l.sharesPerWorker);
    this.ownCounters = this.counters.subarray(o.worker * l.countersPerWorker, (o.worker + 1) * l.countersPerWorker);
    this.warn = o.warn ?? (() => undefined);
  }

  get endpointSlots(): number {
    return this.l.endpoints;
  }

  get clusterSlots(): number {
    return this.l.clusters;
  }

  get workers(): number {
    return this.l.workers;
  }

  /**
   * The slot of an endpoint of a cluster, referenced until detachEndpoint. A key nobody referenced
   * starts afresh (Envoy forgets a host's outlier state when it leaves the cluster).
   */
  attachEndpoint(cluster: string, hostPort: string): EndpointSlot {
    const slot = this.attach(this.epWords, EP_STRIDE, `${cluster}\n${hostPort}`, this.l.endpoints,
      (s) => this.endpointAt(s).reset(), (s) => this.epIdle(s), (s) => s * EPS_STRIDE + EPS_REFS);
    if (slot >= 0) return this.endpointAt(slot);
    return this.fallbackStore('endpoint', this.l.endpoints).attachEndpoint(cluster, hostPort);
  }

  detachEndpoint(slot: EndpointSlot): void {
    if (slot.store !== this) {
      slot.store.detachEndpoint(slot);
      return;
    }
    this.detach(this.epWords, EP_STRIDE, slot.slot, slot.slot * EPS_STRIDE + EPS_REFS);
  }

  attachCluster(name: string): ClusterSlot {
    const slot = this.attach(this.clWords, CL_STRIDE, name, this.l.clusters,
      (s) => this.clusterAt(s).reset(), (s) => this.clIdle(s), (s) => this.l.endpoints * EPS_STRIDE + s * CLS_STRIDE + CLS_REFS);
    if (slot >= 0) return this.clusterAt(slot);
    return this.fallbackStore('cluster', this.l.clusters).attachCluster(name);
  }

  detachCluster(slot: ClusterSlot): void {
    if (slot.store !== this) {
      slot.store.detachCluster(slot);
      return;
    }
    this.detach(this.clWords, CL_STRIDE, slot.slot, this.l.endpoints * EPS_STRIDE + slot.slot * CLS_STRIDE + CLS_REFS);
  }

  /**
   * Gives back everything a dead worker held (its requests, connections, pending requests, retries
   * and references died with it), and any lock it held. The primary calls it when a worker exits.
   * Its counters stay: they are history, and a worker started in its place adds to them.
   */
  reclaim(worker: number): void {
    if (worker === this.worker) throw new RangeError('a thread cannot reclaim its own share');
    const l = this.l;
    const me = worker + 1;
    Atomics.compareExchange(this.header, H_LOCK, me, 0);
    this.lock();
    try {
      const s = this.shares.subarray(worker * l.sharesPerWorker, (worker + 1) * l.sharesPerWorker);
      for (let e = 0; e < l.endpoints; e++) {
        const b = e * EPS_STRIDE;
        if (s[b + EPS_RQ] === 0 && s[b + EPS_CX] === 0 && s[b + EPS_REFS] === 0) continue;
        Atomics.sub(this.epWords, e * EP_STRIDE + EP.RQ_ACTIVE, s[b + EPS_RQ]!);
        Atomics.sub(this.epWords, e * EP_STRIDE + EP.CX_ACTIVE, s[b + EPS_CX]!);
        Atomics.sub(this.epWords, e * EP_STRIDE + EP.REFS, s[b + EPS_REFS]!);
        s[b + EPS_RQ] = 0;
        s[b + EPS_CX] = 0;
        s[b + EPS_REFS] = 0;
      }
      for (let c = 0; c < l.clusters; c++) {
        const b = l.endpoints * EPS_STRIDE + c * CLS_STRIDE;
        const base = c * CL_STRIDE;
        Atomics.compareExchange(this.clWords, base + CL.EJECT_LOCK, me, 0);
        let any = false;
        for (let k = 0; k <= CLS_REFS; k++) if (s[b + k] !== 0) any = true;
        if (!any) continue;
        const cxHeld = s[b]!;
        for (let k = 0; k < 4; k++) Atomics.sub(this.clWords, base + CL.CX_ACTIVE + k, s[b + k]!);
        Atomics.sub(this.clWords, base + CL.REFS, s[b + CLS_REFS]!);
        for (let k = 0; k <= CLS_REFS; k++) s[b + k] = 0;
        if (cxHeld > 0) {
          Atomics.add(this.clWords, base + CL.CX_GENERATION, 1);
          this.notify(this.clWords, base + CL.CX_GENERATION);
        }
      }
    } finally {
      this.unlock();
    }
  }

  /** Every worker's copy of a counter, summed. */
  sumCounters(index: number, cluster = false): number {
    const l = this.l;
    const at = cluster ? l.endpoints * EPC_STRIDE + index : index;
    let sum = 0;
    for (let w = 0; w < l.workers; w++) sum += this.counters[w * l.countersPerWorker + at]!;
    return sum;
  }

  /** Zeroes a slot's counters in every worker's copy (the slot starts a new membership; nobody else holds it). */
  clearCounters(index: number, n: number, cluster = false): void {
    const l = this.l;
    const at = cluster ? l.endpoints * EPC_STRIDE + index : index;
    for (let w = 0; w < l.workers; w++) this.counters.fill(0, w * l.countersPerWorker + at, w * l.countersPerWorker + at + n);
  }

  /** Wakes the threads waiting on a word (Atomics.notify; nothing to wake in a private store's same thread but local waiters). */
  notify(words: Int32Array, at: number): void {
    if (this.shared) Atomics.notify(words, at);
    else for (const wake of [...this.localWaiters]) wake();
  }

  /** Waits until words[at] moves from `seen` or `timeoutMs` passes: Atomics.waitAsync on shared memory, a local wake-up otherwise. */
  wait(words: Int32Array, at: number, seen: number, timeoutMs: number): Promise<boolean> {
    if (this.shared) {
      const r = waitAsync(words, at, seen, timeoutMs);
      if (!r.async) return Promise.resolve(r.value === 'not-equal');
      // A pending waitAsync does not keep Node's event loop alive, and its time-out is no loop event
      // either: our own timer (a little later) keeps the loop alive and ends the wait if it fires first.
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs + 10);
        void r.value.then((v) => {
          clearTimeout(timer);
          resolve(v === 'ok');
        });
      });
    }
    return new Promise((resolve) => {
      const done = (woken: boolean): void => {
        clearTimeout(timer);
        this.localWaiters.delete(wake);
        resolve(woken);
      };
      const wake = (): void => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.localWaiters.add(wake);
      if (Atomics.load(words, at) !== seen) done(true);
    });
  }

  /** A spin lock on a word (value: holder's worker + 1); held for microseconds, never across an await. */
  spinLock(words: Int32Array, at: number): void {
    const me = this.worker + 1;
    for (let spins = 0; ; spins++) {
      const held = Atomics.compareExchange(words, at, 0, me);
      if (held === 0) return;
      // Re-entry would deadlock: a bug in the caller, not a wait.
      if (held === me) throw new Error('traffic memory: lock already held by this thread');
      if (spins > 64 && this.shared) Atomics.wait(words, at, held, 1);
    }
  }

  // ---- slot tables

  private lock(): void {
    this.spinLock(this.header, H_LOCK);
  }

  private unlock(): void {
    Atomics.store(this.header, H_LOCK, 0);
  }

  private epIdle(s: number): boolean {
    const b = s * EP_STRIDE;
    return Atomics.load(this.epWords, b + EP.REFS) === 0 && Atomics.load(this.epWords, b + EP.RQ_ACTIVE) === 0
      && Atomics.load(this.epWords, b + EP.CX_ACTIVE) === 0;
  }

  private clIdle(s: number): boolean {
    const b = s * CL_STRIDE;
    if (Atomics.load(this.clWords, b + CL.REFS) !== 0) return false;
    for (let w = CL.CX_ACTIVE; w <= CL.RETRIES_ACTIVE; w++) if (Atomics.load(this.clWords, b + w) !== 0) return false;
    return true;
  }

  /**
   * Finds `key` by linear probing from its hash, or claims a slot for it: the first free one on its
   * probe path, else an unreferenced idle one (reused in place, so no probe path is ever broken).
   * -1 when the table is full. Under the table lock.
   */
  private attach(words: Int32Array, stride: number, key: string, capacity: number,
    reset: (slot: number) => void, idle: (slot: number) => boolean, ownRefsAt: (slot: number) => number): number {
    const [hi, lo] = hash64Words(key);
    const start = (lo >>> 0) % capacity;
    this.lock();
    try {
      let reusable = -1;
      let target = -1;
      for (let k = 0; k < capacity; k++) {
        const s = (start + k) % capacity;
        const b = s * stride;
        if (Atomics.load(words, b) === FREE) {
          target = s;
          break;
        }
        if (Atomics.load(words, b + 2) === hi && Atomics.load(words, b + 3) === lo) {
          // A key that nobody references any more starts a new membership.
          if (Atomics.load(words, b + 1) === 0) reset(s);
          this.addRef(words, b, ownRefsAt(s));
          return s;
        }
        if (reusable < 0 && idle(s)) reusable = s;
      }
      if (reusable >= 0) target = reusable;
      if (target < 0) return -1;
      const b = target * stride;
      Atomics.store(words, b + 2, hi);
      Atomics.store(words, b + 3, lo);
      reset(target);
      Atomics.store(words, b, LIVE);
      this.addRef(words, b, ownRefsAt(target));
      return target;
    } finally {
      this.unlock();
    }
  }

  private addRef(words: Int32Array, b: number, ownRefsAt: number): void {
    Atomics.add(words, b + 1, 1);
    this.ownShares[ownRefsAt]!++;
  }

  private detach(words: Int32Array, stride: number, s: number, ownRefsAt: number): void {
    this.lock();
    try {
      if (this.ownShares[ownRefsAt]! <= 0) throw new Error('traffic memory: detaching a slot this thread does not hold');
      this.ownShares[ownRefsAt]!--;
      Atomics.sub(words, s * stride + 1, 1);
    } finally {
      this.unlock();
    }
  }

  private endpointAt(s: number): EndpointSlot {
    return new EndpointSlot(this, s, this.epWords, this.epTimes, this.ownShares, this.ownCounters);
  }

  private clusterAt(s: number): ClusterSlot {
    return new ClusterSlot(this, s, this.clWords, this.clTimes, this.ownShares.subarray(this.l.endpoints * EPS_STRIDE),
      this.ownCounters.subarray(this.l.endpoints * EPC_STRIDE));
  }

  // The thread-private table a key goes to when the shared one is full (warned once per table).
  private fallbackStore(what: string, size: number): TrafficStore {
    if (!this.warned.has(what)) {
      this.warned.add(what);
      this.warn(`traffic memory: all ${size} ${what} slots are in use; new ${what}s get state private to this worker `
        + '(their limits and ejections are not shared with the other workers): raise the slot count');
    }
    if (!this.shared) throw new RangeError(`traffic memory: all ${size} ${what} slots of a private store are in use`);
    this.fallback ??= new TrafficStore({
      memory: initialise(new ArrayBuffer(layout(this.l.endpoints, this.l.clusters, 1).bytes), layout(this.l.endpoints, this.l.clusters, 1)),
      worker: 0,
      warn: this.warn,
    });
    return this.fallback;
  }
}

/** A store private to one thread (tests, and a single-threaded sidecar that wants no shared memory). */
export function privateTrafficStore(o: Omit<TrafficMemoryOptions, 'workers'> & { readonly warn?: (m: string) => void } = {}): TrafficStore {
  const l = optionsLayout({ ...o, workers: 1 });
  return new TrafficStore({ memory: initialise(new ArrayBuffer(l.bytes), l), worker: 0, warn: o.warn });
}
