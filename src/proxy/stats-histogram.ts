// A fixed-bucket histogram of plain numbers: what the data plane observes into, summed across workers.

/** A fixed-bucket histogram: counts per upper bound (non-cumulative), plus sum and count. */
export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  /** Adds another histogram's samples (same bounds): the workers' histograms summed. */
  add(other: { readonly counts: readonly number[]; readonly sum: number; readonly count: number }): void {
    for (let i = 0; i < this.counts.length; i++) this.counts[i]! += other.counts[i] ?? 0;
    this.sum += other.sum;
    this.count += other.count;
  }

  observe(value: number): void {
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

