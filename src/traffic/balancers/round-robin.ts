// ROUND_ROBIN. Equal weights: a rotation over the candidates, from a random place per worker (so
// that the workers do not all send their first request to the same endpoint). Unequal weights: a
// smooth weighted rotation (EDF with fixed periods 1/weight), so a weight-3 endpoint gets three
// picks in every four against a weight-1 one, spread out rather than in a burst.
import { BaseBalancer, type BalancerOptions } from './balancer.js';
import { EdfSchedule } from './edf.js';

export class RoundRobinBalancer extends BaseBalancer {
  private readonly edf: EdfSchedule;
  private weighted = false;
  private next = 0;
  private readonly weightOf = (i: number): number => this.hosts.weight(i);

  constructor(o: BalancerOptions) {
    super(o);
    this.edf = new EdfSchedule(o.hosts.size);
  }

  protected rebuilt(): void {
    this.weighted = !this.equalWeights();
    this.edf.clear();
    this.next = Math.floor(this.random() * Math.max(1, this.count));
    if (!this.weighted) return;
    for (let k = 0; k < this.count; k++) {
      const i = this.candidates[k]!;
      this.edf.add(i, this.random() / this.hosts.weight(i));
    }
  }

  protected pickOnce(): number {
    if (this.weighted) return this.edf.pickAndReadd(this.weightOf);
    const i = this.candidates[this.next % this.count]!;
    this.next = (this.next + 1) % this.count;
    return i;
  }
}
