// Memory back to the system after a burst. What a burst of traffic allocates outside V8's heap
// (socket reads, request bodies, TLS records) is freed, but glibc's malloc keeps the freed pages
// for later: measured, 8 parallel uploads of 50 MB left ~34 MiB of private memory resident for
// good, while V8's heap and Buffers had grown by 5. So once the process is quiet again, it asks
// malloc to hand its free pages back (malloc_trim(0): every thread's arena, not only this one's).
// Before that, the caller lets go of what it keeps for the next burst (pooled write buffers).
// No forced full collection (V8's `gc`) any more: measured (scripts/bench-idle.sh), it made the
// first second of the next burst cost 1.4-1.6x the steady CPU per request (1.18x without it; the
// compiled code has to warm up again), while RSS 30 s after the footprint bench's load was the same
// without it (V8's own collections free those Buffers).
// Under load it does nothing: trimming then would only mean faulting the same pages in again.
// Every thread runs one (the primary and each worker of --concurrency): each holds its own pools,
// and the process's CPU time says when all of them are quiet.
import { koffi } from '../native/koffi.js';
import { scope } from '../log/logger.js';

const log = scope('default');

/** How often the process's CPU time is looked at: memory is given back 2–4 s after a burst ends. */
const CHECK_EVERY_MS = 2_000;
/** Quiet: less than this share of one core used over the last check period. */
const QUIET_CPU_SHARE = 0.05;

type Trim = (pad: number) => number;

function loadTrim(): Trim | undefined {
  try {
    return koffi.load('libc.so.6').func('int malloc_trim(size_t pad)') as Trim;
  } catch (err) { // another libc (musl): nothing to call, memory stays with the allocator
    log.debug(`malloc_trim not available: ${(err as Error).message}`);
    return undefined;
  }
}

/** Starts the check (an unref'd timer); answers how to stop it. `release` drops what is kept for the next burst. */
export function trimAfterBursts(release: () => void = () => undefined): () => void {
  const trim = loadTrim();
  if (!trim) return () => undefined;
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
    if (!busySince) return;
    busySince = false;
    release();
    trim(0);
  }, CHECK_EVERY_MS).unref();
  return () => clearInterval(timer);
}
