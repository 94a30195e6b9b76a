// Consistent hash with a Maglev table (Istio's consistentHash.maglev): a table of M entries (M
// prime, 65537 by default) filled by the candidates in turn, each walking its own permutation of
// the table (an offset and a skip from its `address:port` hash), a heavier endpoint taking more
// turns. A request goes to table[hash mod M]: one array read. Compared with a ring: an even spread
// and O(1) lookups, at the price of a larger table to rebuild when the candidates change.
import { hash64 } from '../hash.js';
import { BaseBalancer, type BalancerOptions, type PickContext } from './balancer.js';

/** Envoy's (and Istio's) default Maglev table size. */
export const DEFAULT_MAGLEV_TABLE_SIZE = 65537;

export function isPrime(n: number): boolean {
  if (!Number.isInteger(n) || n < 2) return false;
  if (n % 2 === 0) return n === 2;
  for (let d = 3; d * d <= n; d += 2) if (n % d === 0) return false;
  return true;
}

export class MaglevBalancer extends BaseBalancer {
  protected override readonly honoursTried = false;
  private readonly table: Int32Array;

  constructor(o: BalancerOptions & { readonly tableSize: number }) {
    super(o);
    // A composite size would let a permutation cycle before visiting every entry (the fill would not end).
    if (!isPrime(o.tableSize)) throw new RangeError(`maglev table size ${o.tableSize} is not a prime number`);
    this.table = new Int32Array(o.tableSize);
  }

  get tableSize(): number {
    return this.table.length;
  }

  protected rebuilt(): void {
    const m = this.table.length;
    const n = this.count;
    if (n === 0) return;
    const offset = new Float64Array(n);
    const skip = new Float64Array(n);
    const next = new Float64Array(n); // how far along its permutation each candidate is
    const taken = new Float64Array(n); // entries each candidate holds
    const weight = new Float64Array(n);
    let maxWeight = 0;
    const bm = BigInt(m);
    for (let k = 0; k < n; k++) {
      const i = this.candidates[k]!;
      const h = hash64(this.hosts.key(i));
      offset[k] = Number((h >> 32n) % bm);
      skip[k] = Number((h & 0xffffffffn) % (bm - 1n)) + 1;
      weight[k] = this.hosts.weight(i);
      if (weight[k]! > maxWeight) maxWeight = weight[k]!;
    }
    this.table.fill(-1);
    let filled = 0;
    // Round r: a candidate takes a turn while it holds fewer than r × weight/maxWeight entries, so
    // the heaviest takes one per round and the others in proportion.
    for (let round = 1; filled < m; round++) {
      for (let k = 0; k < n && filled < m; k++) {
        if (taken[k]! >= (round * weight[k]!) / maxWeight) continue;
        let c = (offset[k]! + next[k]! * skip[k]!) % m;
        while (this.table[c] !== -1) {
          next[k]!++;
          c = (offset[k]! + next[k]! * skip[k]!) % m;
        }
        this.table[c] = this.candidates[k]!;
        next[k]!++;
        taken[k]!++;
        filled++;
      }
    }
  }

  protected pickOnce(ctx: PickContext): number {
    const h = ctx.hash ?? Math.floor(this.random() * 2 ** 53);
    return this.table[h % this.table.length]!;
  }
}
