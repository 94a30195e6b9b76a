// How many downstream connections this process holds, against MESH_MAX_DOWNSTREAM_CONNECTIONS (Envoy's
// overload-manager `global_downstream_max_connections`). Every listener of every worker thread
// (15001 and 15006 for the sidecar, every Gateway port for the router) draws on one count: the
// threads share one file-descriptor table and one heap, so the limit is the process's. The count
// lives in shared memory and moves with atomics: no worker waits for another, and none is refused
// while another has room (SO_REUSEPORT spreads connections by hash, not evenly, so a budget divided
// among workers would refuse early). Each worker also keeps its own share of the count, so a dead
// worker's connections (gone with it, their close events never run) can be given back.

/** Below this many file descriptors left for the process's own use, the derived maximum would starve it. */
export const RESERVED_FILE_DESCRIPTORS = 256;
/** The warning is logged from this share of the maximum on. */
const WARN_SHARE = 0.9;
/** At most one warning per this long, for the whole process. */
export const WARN_EVERY_MS = 60_000;
const MAX_INT32 = 2 ** 31 - 1;

/** The memory the workers share: [last warning time] as int64, then [total, worker 0, worker 1...] as int32. */
export function sharedCount(workers: number): SharedArrayBuffer {
  return new SharedArrayBuffer(8 + 4 * (1 + workers));
}

/**
 * The maximum for MESH_MAX_DOWNSTREAM_CONNECTIONS (`configured` above 0 wins): otherwise half of the
 * file descriptors left after RESERVED_FILE_DESCRIPTORS, since a connection may need its upstream
 * connection too; a process that runs out of descriptors cannot connect upstream, read a
 * certificate or answer its admin port any more.
 */
export function connectionLimit(configured: number, fileDescriptors: number | undefined): { max: number; source: string } {
  if (configured > 0) return { max: Math.min(configured, MAX_INT32), source: 'MESH_MAX_DOWNSTREAM_CONNECTIONS' };
  if (fileDescriptors === undefined || !Number.isFinite(fileDescriptors)) return { max: MAX_INT32, source: 'no file-descriptor limit known' };
  const max = Math.max(1, Math.floor((Math.min(fileDescriptors, 2 * MAX_INT32) - RESERVED_FILE_DESCRIPTORS) / 2));
  return { max, source: `half of the ${fileDescriptors} file descriptors less ${RESERVED_FILE_DESCRIPTORS}` };
}

export interface ConnectionBudgetOptions {
  readonly max: number;
  readonly shared: SharedArrayBuffer;
  /** This thread's share (0: the primary, i: worker thread i). */
  readonly worker: number;
  /** Where the near-the-limit warning goes (a logger's warn). */
  readonly warn: (message: string) => void;
  readonly now?: () => number;
}

export class ConnectionBudget {
  readonly max: number;
  private readonly warnAt: number;
  private readonly counts: Int32Array;
  private readonly lastWarning: BigInt64Array;
  private readonly slot: number;
  private readonly warn: (message: string) => void;
  private readonly now: () => number;

  constructor(o: ConnectionBudgetOptions) {
    this.max = o.max;
    this.warnAt = Math.max(1, Math.ceil(o.max * WARN_SHARE));
    this.lastWarning = new BigInt64Array(o.shared, 0, 1);
    this.counts = new Int32Array(o.shared, 8);
    this.slot = 1 + o.worker;
    if (this.slot >= this.counts.length) throw new RangeError(`worker ${o.worker} has no share in a count made for ${this.counts.length - 1}`);
    this.warn = o.warn;
    this.now = o.now ?? Date.now;
  }

  /** Connections held now by the whole process. */
  get used(): number {
    return Atomics.load(this.counts, 0);
  }

  /** Takes a place for a new connection; false (nothing taken) when the process is at its maximum. */
  tryAcquire(): boolean {
    const n = Atomics.add(this.counts, 0, 1) + 1;
    if (n > this.max) {
      Atomics.sub(this.counts, 0, 1);
      this.maybeWarn(n);
      return false;
    }
    Atomics.add(this.counts, this.slot, 1);
    if (n >= this.warnAt) this.maybeWarn(n);
    return true;
  }

  /** Gives back the place of a connection that closed. */
  release(): void {
    Atomics.sub(this.counts, this.slot, 1);
    Atomics.sub(this.counts, 0, 1);
  }

  /** Gives back every place a worker held (it died; its connections went with it). */
  reclaim(worker: number): void {
    const held = Atomics.exchange(this.counts, 1 + worker, 0);
    Atomics.sub(this.counts, 0, held);
  }

  /** One warning per WARN_EVERY_MS for the whole process: the first thread to claim the minute logs. */
  private maybeWarn(n: number): void {
    const now = BigInt(Math.floor(this.now()));
    const last = Atomics.load(this.lastWarning, 0);
    if (last !== 0n && now - last < BigInt(WARN_EVERY_MS)) return;
    if (Atomics.compareExchange(this.lastWarning, 0, last, now) !== last) return;
    this.warn(n > this.max
      ? `downstream connections at the maximum of ${this.max} (MESH_MAX_DOWNSTREAM_CONNECTIONS): new connections are refused until some close`
      : `downstream connections at ${n} of ${this.max} (MESH_MAX_DOWNSTREAM_CONNECTIONS): beyond it new connections are refused`);
  }
}
