// Small writes to clients, held until the end of the event loop's I/O phase (setImmediate runs right
// after it) and then made back to back. Why: a write to a sleeping receiver (wrk, a browser, the
// application on the other CPU) wakes it with an inter-processor interrupt, paid in the writer's
// system call. Written as each response was ready, a few µs of our work apart, the receiver had
// often gone back to sleep between two of them; written together, one wake-up serves the lot.
// Measured with bench-proxy's load (2026-11-28): the traffic-managed sidecar caused 0.12-0.17
// interrupts per request against the passthrough one's 0.09-0.10 (its ~1 µs more of user time
// between writes), and paid them in kernel time (+1-2 µs per request); batched, both 0.10.
// Bounded: a writer holds at most HOLD_PER_WRITER bytes and all of them HOLD_TOTAL; past either
// the caller writes at once (a large body keeps its back-pressure as before).

/** What a batch writes: a connection with bytes assembled (copied out of any read buffer) and held. */
export interface BatchedWriter {
  /** In the batch already (set and cleared here). */
  inBatch: boolean;
  /** Writes what it holds now (also called for a writer that has since written or closed). */
  writeHeld(): void;
}

/** A writer holding more than this writes at once. */
export const HOLD_PER_WRITER = 16 * 1024;
/** All writers together: past this, the next ones write at once. */
export const HOLD_TOTAL = 1024 * 1024;

const batch: BatchedWriter[] = [];
let heldBytes = 0;
let scheduled = false;

/**
 * Holds `added` more bytes of `w` (which holds `total` with them) for the batch: true when held,
 * false when `w` must write now (over a bound). A held writer's bytes are given back with released().
 */
export function hold(w: BatchedWriter, added: number, total: number): boolean {
  if (total > HOLD_PER_WRITER || heldBytes + added > HOLD_TOTAL) return false;
  heldBytes += added;
  if (!w.inBatch) {
    w.inBatch = true;
    batch.push(w);
  }
  if (!scheduled) {
    scheduled = true;
    setImmediate(writeBatch);
  }
  return true;
}

/** `bytes` that hold() counted left the writer (written, or dropped with its socket). */
export function released(bytes: number): void {
  heldBytes -= bytes;
}

/** Bytes held now, all writers together (for tests). */
export function heldNow(): number {
  return heldBytes;
}

function writeBatch(): void {
  scheduled = false;
  const writers = batch.splice(0);
  for (const w of writers) {
    w.inBatch = false;
    w.writeHeld();
  }
}
