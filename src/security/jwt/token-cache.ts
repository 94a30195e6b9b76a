// Verified tokens, so that a client sending the same token on every request costs one signature
// verification, not one per request. Least recently used entries go first when full; an entry is
// never returned at or after its expiry (the token's `exp`). Lookups are synchronous: this is what
// lets authentication answer without a promise.
//
// Indexed by the token's last INDEX_CHARS characters (the end of the signature), and a hit needs
// the whole token to be equal. Why not key by the whole token: every request brings a fresh copy
// of it, and a Map must hash all of its ~800 characters before it can look it up (≈1 µs here);
// hashing 32 and comparing the rest costs ≈0.15 µs. Two tokens with one index only displace each
// other; a forged token that copies a cached token's signature does not match it.

const INDEX_CHARS = 32;
/**
 * A hit moves its entry to the recent end at most this often: re-inserting on every hit churned the
 * long-lived Map (old-space allocation, several full GCs per bench run); recency to the second is
 * plenty for choosing what to evict.
 */
const TOUCH_EVERY_MS = 1_000;

interface Entry<V> {
  readonly token: string;
  readonly value: V;
  readonly expiresAtMs: number;
  touchedAtMs: number;
}

function indexOf(token: string): string {
  return token.length <= INDEX_CHARS ? token : token.slice(-INDEX_CHARS);
}

export class TokenCache<V> {
  // A Map iterates in insertion order: re-inserting on a hit keeps the least recently used first.
  private readonly entries = new Map<string, Entry<V>>();

  /** `capacity` 0 disables the cache. */
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 0) throw new TypeError(`cacheSize must be a non-negative integer, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value cached for `token`, unless it has expired at `nowMs` (then it is dropped). */
  get(token: string, nowMs: number): V | undefined {
    const index = indexOf(token);
    const e = this.entries.get(index);
    if (e === undefined || e.token !== token) return undefined;
    if (nowMs >= e.expiresAtMs) {
      this.entries.delete(index);
      return undefined;
    }
    if (nowMs - e.touchedAtMs >= TOUCH_EVERY_MS) {
      e.touchedAtMs = nowMs;
      this.entries.delete(index);
      this.entries.set(index, e);
    }
    return e.value;
  }

  /** Caches `value` until `expiresAtMs` (Infinity for a token without `exp`); `nowMs` is its last use. */
  set(token: string, value: V, expiresAtMs: number, nowMs = 0): void {
    if (this.capacity === 0) return;
    const index = indexOf(token);
    this.entries.delete(index);
    while (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(index, { token, value, expiresAtMs, touchedAtMs: nowMs });
  }

  clear(): void {
    this.entries.clear();
  }
}
