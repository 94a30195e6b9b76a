// RANDOM: a uniform choice among the candidates, or a weighted one when weights differ (the
// cumulative weights are built once per health change; a pick is one random number and a binary
// search).
import { BaseBalancer, type BalancerOptions } from './balancer.js';

export class RandomBalancer extends BaseBalancer {
  private readonly cumulative: Float64Array;
  private weighted = false;

  constructor(o: BalancerOptions) {
    super(o);
    this.cumulative = new Float64Array(o.hosts.size);
  }

  protected rebuilt(): void {
    this.weighted = !this.equalWeights();
    let total = 0;
    for (let k = 0; k < this.count; k++) {
      total += this.hosts.weight(this.candidates[k]!);
      this.cumulative[k] = total;
    }
  }

  protected pickOnce(): number {
    if (!this.weighted) return this.candidates[Math.floor(this.random() * this.count)]!;
    const target = this.random() * this.cumulative[this.count - 1]!;
    // The first k whose cumulative weight exceeds the target.
    let lo = 0;
    let hi = this.count - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.cumulative[mid]! > target) hi = mid;
      else lo = mid + 1;
    }
    return this.candidates[lo]!;
  }
}
