// Our stable 64-bit string hash: FNV-1a 64 over the UTF-8 bytes, then the MurmurHash3 64-bit
// finaliser (FNV-1a alone mixes its last bytes into the low bits only; the finaliser spreads every
// input bit over the whole word, which ring positions and table indices need). Deterministic across
// threads, processes and versions of Node: workers find shared-memory slots by it, and a consistent
// hash must send a key to the same endpoint after a restart.
//
// The hot path (a request's hash key) hashes without allocating: 32-bit halves in plain numbers,
// no BigInt, no encoder. BigInt forms are for the cold paths (slot keys, cookie values, tests).

const TWO_32 = 4294967296;

// The result of the last hash, as two unsigned 32-bit halves (module scratch: no tuple per call).
let outHi = 0;
let outLo = 0;

/** FNV-1a 64 of the UTF-8 bytes of `text` into outHi/outLo (lone surrogates as U+FFFD, as TextEncoder does). */
function fnv1a64(text: string): void {
  outHi = 0xcbf29ce4;
  outLo = 0x84222325;
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c < 0x80) {
      step(c);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x800) {
      step(0xc0 | (c >> 6));
    } else {
      if (c < 0x10000) {
        step(0xe0 | (c >> 12));
      } else {
        step(0xf0 | (c >> 18));
        step(0x80 | ((c >> 12) & 0x3f));
      }
      step(0x80 | ((c >> 6) & 0x3f));
    }
    step(0x80 | (c & 0x3f));
  }
}

// One FNV-1a round on outHi/outLo, `(h ^ byte) * 0x100000001b3`: the prime is 2^40 + 0x1b3, so the
// product is h * 0x1b3 plus the low word shifted into the high one by 8 bits.
function step(byte: number): void {
  const l = (outLo ^ byte) >>> 0;
  const p = l * 0x1b3; // < 2^41: exact in a double
  outLo = p >>> 0;
  outHi = (Math.imul(outHi, 0x1b3) + Math.imul(l, 0x100) + Math.floor(p / TWO_32)) >>> 0;
}

// Low 64 bits of (ah:al) × (bh:bl), into outHi/outLo, with 16-bit limbs so every partial product is exact.
function mul64(ah: number, al: number, bh: number, bl: number): void {
  const a0 = al & 0xffff;
  const a1 = al >>> 16;
  const b0 = bl & 0xffff;
  const b1 = bl >>> 16;
  const mid = a0 * b1 + a1 * b0; // < 2^33
  const low = a0 * b0 + (mid % 65536) * 65536; // < 2^33
  const highOfLow = a1 * b1 + Math.floor(mid / 65536) + Math.floor(low / TWO_32);
  outLo = low >>> 0;
  outHi = (highOfLow + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

// MurmurHash3's fmix64 on outHi/outLo: xor-shift 33, multiply, twice, xor-shift 33.
function fmix64(): void {
  let hi = outHi;
  let lo = outLo;
  lo = (lo ^ (hi >>> 1)) >>> 0; // k ^= k >>> 33 (hi unchanged: its top 33 bits are 0 after the shift)
  mul64(hi, lo, 0xff51afd7, 0xed558ccd);
  hi = outHi;
  lo = (outLo ^ (hi >>> 1)) >>> 0;
  mul64(hi, lo, 0xc4ceb9fe, 0x1a85ec53);
  outLo = (outLo ^ (outHi >>> 1)) >>> 0;
}

/** The hash as a 53-bit integer (exact in a double): ring positions and the per-request key. No allocation. */
export function hash53(text: string): number {
  fnv1a64(text);
  fmix64();
  return outHi * 2097152 + (outLo >>> 11); // hi * 2^21 + top 21 bits of lo
}

/** The full 64-bit hash, for the cold paths (shared-memory slot keys, generated cookie values). */
export function hash64(text: string): bigint {
  fnv1a64(text);
  fmix64();
  return (BigInt(outHi) << 32n) | BigInt(outLo);
}

/** The two 32-bit halves of hash64(text), as signed int32 (what an Int32Array holds): [hi, lo]. */
export function hash64Words(text: string): [number, number] {
  fnv1a64(text);
  fmix64();
  return [outHi | 0, outLo | 0];
}

/** Plain FNV-1a 64 (before the finaliser): exposed for the published test vectors only. */
export function fnv1a64Raw(text: string): bigint {
  fnv1a64(text);
  return (BigInt(outHi) << 32n) | BigInt(outLo);
}

/** 16 lower-case hex digits of hash64(text): the value of a generated hash cookie. */
export function hash64Hex(text: string): string {
  return hash64(text).toString(16).padStart(16, '0');
}
