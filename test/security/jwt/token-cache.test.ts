import assert from 'node:assert/strict';
import { it } from 'node:test';
import { TokenCache } from '../../../src/security/jwt/token-cache.js';

it('returns an entry until its expiry, then drops it', () => {
  const c = new TokenCache<string>(10);
  c.set('t', 'v', 1000);
  assert.equal(c.get('t', 999), 'v');
  assert.equal(c.get('t', 1000), undefined, 'at exp: expired');
  assert.equal(c.size, 0);
  c.set('forever', 'v', Infinity);
  assert.equal(c.get('forever', Number.MAX_SAFE_INTEGER), 'v');
});

it('evicts the least recently used entry when full', () => {
  const c = new TokenCache<number>(3);
  c.set('a', 1, Infinity);
  c.set('b', 2, Infinity);
  c.set('c', 3, Infinity);
  assert.equal(c.get('a', 1000), 1, 'a is now the most recently used (a hit a second after its last use moves it)');
  c.set('d', 4, Infinity);
  assert.equal(c.get('b', 1000), undefined, 'b was the least recently used');
  assert.deepEqual(['a', 'c', 'd'].map((k) => c.get(k, 1000)), [1, 3, 4]);
  assert.equal(c.size, 3);
  c.set('c', 30, Infinity);
  assert.equal(c.size, 3, 'replacing does not grow');
  assert.equal(c.get('c', 0), 30);
});

it('a hit within a second of the last use does not move the entry (no churn on the hot path)', () => {
  const c = new TokenCache<number>(2);
  c.set('a', 1, Infinity, 5_000);
  c.set('b', 2, Infinity, 5_000);
  assert.equal(c.get('a', 5_500), 1);
  c.set('c', 3, Infinity, 5_600);
  assert.equal(c.get('a', 5_600), undefined, 'a stayed the oldest: its hit came too soon to move it');
  assert.equal(c.get('b', 5_600), 2);
});

it('caches nothing with capacity 0, and clears', () => {
  const off = new TokenCache<number>(0);
  off.set('a', 1, Infinity);
  assert.equal(off.get('a', 0), undefined);
  const c = new TokenCache<number>(2);
  c.set('a', 1, Infinity);
  c.clear();
  assert.equal(c.size, 0);
  assert.throws(() => new TokenCache(-1), /cacheSize must be a non-negative integer, got -1/);
});

it('needs the whole token to match, not only its end', () => {
  const c = new TokenCache<string>(10);
  const sig = 'S'.repeat(40);
  c.set(`header.payload.${sig}`, 'genuine', Infinity);
  assert.equal(c.get(`header.forged.${sig}`, 0), undefined);
  assert.equal(c.get(`header.payload.${sig}`, 0), 'genuine', 'a near miss does not displace the entry');
  c.set(`header.other.${sig}`, 'other', Infinity);
  assert.equal(c.get(`header.other.${sig}`, 0), 'other');
  assert.equal(c.get(`header.payload.${sig}`, 0), undefined, 'same index: displaced');
  assert.equal(c.size, 1);
});
