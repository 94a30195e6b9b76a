// LEAST_REQUEST, Istio's default. Envoy's two algorithms:
// - every candidate has the same weight: power of two choices. Two random candidates (distinct
//   when there are two or more), the one with fewer requests in flight wins; a tie goes to the
//   first. Cheap (two shared loads) and avoids the herd a global "least" would cause.
// - weights differ: weighted round robin (EDF) where an endpoint's weight is scaled down by its
//   load at the moment it is re-queued: weight / (active + 1)^bias, bias 1.0 (Envoy's default
//   active_request_bias).
import { BaseBalancer, type BalancerOptions } from './balancer.js';
import { EdfSchedule } from './edf.js';

/** Envoy's active_request_bias default. */
export const ACTIVE_REQUEST_BIAS = 1;

export class LeastRequestBalancer extends BaseBalancer {
  private readonly edf: EdfSchedule;
  private weighted = false;
  // Bound once: the EDF asks it for the weight at each re-add (no closure per pick).
  private readonly effectiveWeight = (i: number): number => this.hosts.weight(i) / (this.hosts.activeRequests(i) + 1) ** ACTIVE_REQUEST_BIAS;

  constructor(o: BalancerOptions) {
    super(o);
    this.edf = new EdfSchedule(o.hosts.size);
  }

  protected rebuilt(): void {
    this.weighted = !this.equalWeights();
    this.edf.clear();
    if (!this.weighted) return;
    // A random phase per worker, so that the workers' schedules do not pick in step.
    for (let k = 0; k < this.count; k++) {
      const i = this.candidates[k]!;
      this.edf.add(i, this.random() / this.effectiveWeight(i));
    }
  }

  protected pickOnce(): number {
    if (this.weighted) return this.edf.pickAndReadd(this.effectiveWeight);
    const n = this.count;
    if (n === 1) return this.candidates[0]!;
    const first = Math.floor(this.random() * n);
    let second = Math.floor(this.random() * (n - 1));
    if (second >= first) second++;
    const a = this.candidates[first]!;
    const b = this.candidates[second]!;
    return this.hosts.activeRequests(b) < this.hosts.activeRequests(a) ? b : a;
  }
}
