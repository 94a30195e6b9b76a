// Consistent hash on a ring (Istio's default for consistentHash): every candidate endpoint is placed
// on a ring of 53-bit positions several times, in proportion to its weight; a request goes to the
// first entry at or after its hash, wrapping round. Removing an endpoint moves only the keys that
// were on its entries. The ring is rebuilt per worker when the candidates change (an ejection
// removes the endpoint's entries), never per request.
import { hash53 } from '../hash.js';
import { BaseBalancer, type BalancerOptions, type PickContext } from './balancer.js';

/** Envoy's maximum_ring_size default: a ring larger than this is not built, whatever the weights. */
export const MAX_RING_SIZE = 8 * 1024 * 1024;
/** Istio's (and Envoy's) minimumRingSize default. */
export const DEFAULT_MIN_RING_SIZE = 1024;

/** A 53-bit hash for a request without a key: a random one, as Envoy picks then. */
function randomHash(random: () => number): number {
  return Math.floor(random() * 2 ** 53);
}

export class RingHashBalancer extends BaseBalancer {
  protected override readonly honoursTried = false;
  private readonly minRingSize: number;
  private positions = new Float64Array(0);
  private owners = new Int32Array(0);

  constructor(o: BalancerOptions & { readonly minimumRingSize: number }) {
    super(o);
    this.minRingSize = Math.max(1, Math.min(o.minimumRingSize, MAX_RING_SIZE));
  }

  /** Entries on the ring now (for tests and /config_dump). */
  get ringSize(): number {
    return this.positions.length;
  }

  protected rebuilt(): void {
    if (this.count === 0) {
      this.positions = new Float64Array(0);
      this.owners = new Int32Array(0);
      return;
    }
    // Scale so that the lightest endpoint gets at least its share of minRingSize entries (whole
    // ones), capped at MAX_RING_SIZE; each endpoint then gets its weight's share of the scale.
    let total = 0;
    let minWeight = Infinity;
    for (let k = 0; k < this.count; k++) {
      const w = this.hosts.weight(this.candidates[k]!);
      total += w;
      if (w < minWeight) minWeight = w;
    }
    const minShare = minWeight / total;
    const scale = Math.min(Math.ceil(minShare * this.minRingSize) / minShare, MAX_RING_SIZE);
    const replicas = new Int32Array(this.count);
    let size = 0;
    let target = 0;
    for (let k = 0; k < this.count; k++) {
      target += (scale * this.hosts.weight(this.candidates[k]!)) / total;
      const upTo = Math.max(size + 1, Math.round(target));
      replicas[k] = upTo - size;
      size = upTo;
    }
    const pos = new Float64Array(size);
    const own = new Int32Array(size);
    let e = 0;
    for (let k = 0; k < this.count; k++) {
      const i = this.candidates[k]!;
      const key = this.hosts.key(i);
      for (let r = 0; r < replicas[k]!; r++) {
        pos[e] = hash53(`${key}_${r}`);
        own[e++] = i;
      }
    }
    const order = new Int32Array(size);
    for (let j = 0; j < size; j++) order[j] = j;
    // Equal positions (a 53-bit collision) are ordered by owner, so every worker builds the same ring.
    order.sort((a, b) => pos[a]! - pos[b]! || own[a]! - own[b]!);
    this.positions = new Float64Array(size);
    this.owners = new Int32Array(size);
    for (let j = 0; j < size; j++) {
      this.positions[j] = pos[order[j]!]!;
      this.owners[j] = own[order[j]!]!;
    }
  }

  protected pickOnce(ctx: PickContext): number {
    const h = ctx.hash ?? randomHash(this.random);
    let lo = 0;
    let hi = this.positions.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.positions[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    return this.owners[lo === this.positions.length ? 0 : lo]!;
  }
}
