// Memory back to the system after a burst. What a burst of traffic allocates outside V8's heap
// (socket reads, request bodies, TLS records) is freed, but glibc's malloc keeps the freed pages
// for later: measured, 8 parallel uploads of 50 MB left ~34 MiB of private memory resident for
// good, while V8's heap and Buffers had grown by 5. So once the process is quiet again, it asks
// malloc to hand its free pages back (malloc_trim(0): every thread's arena, not only this one's).
// Before that, the caller lets go of what it keeps for the next burst (pooled write buffers).
// A forced full collection (V8's `gc`) runs first only after a burst that left the process more
// than FULL_GC_GROWTH above its quiet size: measured (scripts/bench-idle.sh), one after every burst
// made the first second of the next cost 1.3-1.6x the steady CPU per request (1.08-1.18x without it;
// the compiled code has to warm up again), while an ordinary burst leaves little to collect (the
// footprint bench: RSS 30 s after its load the same without it). A long one does: after the 180 s
// disconnect soak the sidecars stayed 70 MB and more above idle without it, +3 to +49 with it, V8
// collecting nothing while the process is idle.
// Under load it does nothing: trimming then would only mean faulting the same pages in again.
// The primary watches (the process's CPU time says when every thread is quiet) and tells each worker
// of --concurrency to do the same at the same time: each isolate holds its own pools and collects
// its own heap, and a thread that looked for itself saw the process's RSS already lowered by
// another's trim, skipped its collection, and kept what its dead objects held (the soak: 50-70 MB).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { koffi } from '../native/koffi.js';
import { scope } from '../log/logger.js';

const log = scope('default');

/** How often the process's CPU time is looked at: memory is given back 2–4 s after a burst ends. */
const CHECK_EVERY_MS = 2_000;
/** Quiet: less than this share of one core used over the last check period. */
const QUIET_CPU_SHARE = 0.05;

/** A burst that left the process this far above its quiet size gets a full collection before the trim. */
const FULL_GC_GROWTH = 48 * 1024 * 1024;
/** Full collections in a row when one is made (see trimThread). */
const FULL_GC_PASSES = 3;

type Trim = (pad: number) => number;

function loadTrim(): Trim | undefined {
  try {
    return koffi.load('libc.so.6').func('int malloc_trim(size_t pad)') as Trim;
  } catch (err) { // another libc (musl): nothing to call, memory stays with the allocator
    log.debug(`malloc_trim not available: ${(err as Error).message}`);
    return undefined;
  }
}

/** V8's full collection: the flag exposes `gc` to the contexts made after it is set. */
function loadFullGc(): (() => void) | undefined {
  try {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as unknown;
    return typeof gc === 'function' ? (gc as () => void) : undefined;
  } catch (err) {
    log.debug(`full collection not available: ${(err as Error).message}`);
    return undefined;
  }
}

// Loaded when first needed (null until then), once per thread.
let trimFn: Trim | undefined | null = null;
let fullGc: (() => void) | undefined | null = null; // a context costs ~2 ms
const trimmer = (): Trim | undefined => (trimFn === null ? (trimFn = loadTrim()) : trimFn);

/** One thread's part once the process is quiet after a burst: drop what it pools, collect its heap (`collect`), trim. */
export function trimThread(release: () => void, collect: boolean): void {
  const trim = trimmer();
  if (!trim) return;
  release();
  if (collect) {
    if (fullGc === null) fullGc = loadFullGc();
    // More than one: what a collection finds dead behind native handles (sockets, sessions, the
    // memory of Buffers) is freed by callbacks after it, and the objects only they held need the
    // next one. Measured after the soak: the second and third gave back 13-32 MB more than the first.
    for (let i = 0; i < FULL_GC_PASSES; i++) fullGc?.();
  }
  trim(0);
}

/**
 * Starts the check (an unref'd timer) in the primary; answers how to stop it. `release` drops what
 * this thread keeps for the next burst; `others(collect)` has every worker do its part (trimThread).
 */
export function trimAfterBursts(release: () => void = () => undefined, others: (collect: boolean) => void = () => undefined): () => void {
  if (!trimmer()) return () => undefined;
  /** The smallest the process has been when quiet: at the first quiet check, then after each trim. */
  let quietRss = Number.POSITIVE_INFINITY;
  let last = process.cpuUsage();
  /** CPU was spent since the last trim: there may be something to give back. */
  let busySince = false;
  const timer = setInterval(() => {
    const now = process.cpuUsage();
    const share = (now.user - last.user + now.system - last.system) / 1000 / CHECK_EVERY_MS;
    last = now;
    if (share >= QUIET_CPU_SHARE) {
      busySince = true;
      return;
    }
    if (quietRss === Number.POSITIVE_INFINITY) quietRss = process.memoryUsage.rss();
    if (!busySince) return;
    busySince = false;
    const collect = process.memoryUsage.rss() > quietRss + FULL_GC_GROWTH;
    others(collect);
    trimThread(release, collect);
    quietRss = Math.min(quietRss, process.memoryUsage.rss());
  }, CHECK_EVERY_MS).unref();
  return () => clearInterval(timer);
}
