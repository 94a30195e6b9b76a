import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fnv1a64Raw, hash53, hash64, hash64Hex, hash64Words } from '../../src/traffic/hash.js';

const MASK = (1n << 64n) - 1n;

/** Reference implementation over the bytes, in BigInt: FNV-1a 64 then MurmurHash3's fmix64. */
function reference(bytes: Uint8Array): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of bytes) h = ((h ^ BigInt(b)) * 0x100000001b3n) & MASK;
  h ^= h >> 33n;
  h = (h * 0xff51afd7ed558ccdn) & MASK;
  h ^= h >> 33n;
  h = (h * 0xc4ceb9fe1a85ec53n) & MASK;
  h ^= h >> 33n;
  return h;
}

describe('hash', () => {
  it('is FNV-1a 64 before the finaliser (the published test vectors)', () => {
    assert.equal(fnv1a64Raw(''), 0xcbf29ce484222325n);
    assert.equal(fnv1a64Raw('a'), 0xaf63dc4c8601ec8cn);
    assert.equal(fnv1a64Raw('foobar'), 0x85944171f73967e8n);
  });

  const texts = ['', 'a', '10.0.0.1:80', '10.0.0.1:80_17', '[fd00::1]:8080', 'é', '日本語', '😀 emoji', 'lone \ud800 high', 'lone \udc00 low',
    'x'.repeat(1000), 'user-12345'];
  for (const text of texts) {
    it(`matches the BigInt reference over the UTF-8 bytes: ${JSON.stringify(text.slice(0, 20))}`, () => {
      const expected = reference(new TextEncoder().encode(text));
      assert.equal(hash64(text), expected);
      assert.equal(hash53(text), Number(expected >> 11n), 'the top 53 bits');
      assert.equal(hash64Hex(text), expected.toString(16).padStart(16, '0'));
      const [hi, lo] = hash64Words(text);
      assert.equal(BigInt(hi >>> 0) << 32n | BigInt(lo >>> 0), expected);
    });
  }

  it('gives a 53-bit integer, exact in a double', () => {
    for (const t of texts) {
      const h = hash53(t);
      assert.ok(Number.isSafeInteger(h) && h >= 0, `${h}`);
    }
  });

  it('spreads keys that differ in their last character over the whole word (the finaliser\'s job)', () => {
    // Without fmix, FNV-1a's keys `k0`..`k9` differ in the low byte only of the high half; with it,
    // their top 8 bits (what a ring position depends on most) take several values.
    const tops = new Set(Array.from({ length: 10 }, (_, i) => Number(hash64(`k${i}`) >> 56n)));
    assert.ok(tops.size >= 8, `only ${tops.size} distinct top bytes`);
  });
});
