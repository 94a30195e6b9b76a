// Earliest-deadline-first schedule (what Envoy's weighted round robin and weighted least request
// use): each entry has a deadline; a pick takes the earliest and puts it back one period later, the
// period being 1/weight. Over time every entry is picked in proportion to its weight, evenly spread
// (a weight-3 entry is not picked three times in a row). The weight is asked again at each re-add,
// so least request can lower the weight of a busy endpoint. A binary heap in typed arrays: no
// allocation per pick.

export class EdfSchedule {
  private readonly deadline: Float64Array;
  private readonly entry: Int32Array;
  /** Insertion order, the tie-break between equal deadlines (stable, deterministic). */
  private readonly order: Float64Array;
  private size = 0;
  private nextOrder = 0;

  constructor(capacity: number) {
    this.deadline = new Float64Array(capacity);
    this.entry = new Int32Array(capacity);
    this.order = new Float64Array(capacity);
  }

  get length(): number {
    return this.size;
  }

  clear(): void {
    this.size = 0;
    this.nextOrder = 0;
  }

  /** Adds `entry` with its first deadline. */
  add(entry: number, deadline: number): void {
    const i = this.size++;
    this.deadline[i] = deadline;
    this.entry[i] = entry;
    this.order[i] = this.nextOrder++;
    this.siftUp(i);
  }

  /** Takes the entry with the earliest deadline and puts it back `1 / weightOf(entry)` later. */
  pickAndReadd(weightOf: (entry: number) => number): number {
    const e = this.entry[0]!;
    const w = weightOf(e);
    // A weight of 0 or less would never come back; the smallest positive period keeps it last.
    this.deadline[0] = this.deadline[0]! + (w > 0 ? 1 / w : Number.MAX_SAFE_INTEGER);
    this.order[0] = this.nextOrder++;
    this.siftDown(0);
    return e;
  }

  private less(a: number, b: number): boolean {
    const da = this.deadline[a]!;
    const db = this.deadline[b]!;
    return da < db || (da === db && this.order[a]! < this.order[b]!);
  }

  private swap(a: number, b: number): void {
    const d = this.deadline[a]!; this.deadline[a] = this.deadline[b]!; this.deadline[b] = d;
    const e = this.entry[a]!; this.entry[a] = this.entry[b]!; this.entry[b] = e;
    const o = this.order[a]!; this.order[a] = this.order[b]!; this.order[b] = o;
  }

  private siftUp(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private siftDown(i: number): void {
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.size) return;
      const r = l + 1;
      const child = r < this.size && this.less(r, l) ? r : l;
      if (!this.less(child, i)) return;
      this.swap(i, child);
      i = child;
    }
  }
}
