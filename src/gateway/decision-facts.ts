// What is new with every request in the decision ring (its method, authority and path, its start
// time and duration), kept outside the JS heap: bytes and numbers copied into memory made once.
// Held by the ring as strings and numbers, they outlived two young collections and were moved to the
// old generation, every one of them (decisions.ts says what that cost).

/** Bytes per place: a short head, then the method, the authority and the path. */
const PLACE_BYTES = 256;
/**
 * The head: the three texts' byte counts (one byte each), their lengths in characters (two bytes
 * each), and which of them are UTF-8 (one bit each; the others are latin-1, a byte per character,
 * as what comes off the wire is: copied by a loop, ~10x cheaper than an encoder call), and which of
 * them are a known text (one bit each: their byte count is then its number).
 */
const HEAD_BYTES = 10;
const METHOD_KNOWN = 8;
const AUTHORITY_KNOWN = 16;
const PATH_KNOWN = 32;
/**
 * Methods, authorities and paths kept as texts of their own, by number, a table for each: a
 * service's requests repeat a few, and comparing with the last one is cheaper than copying its
 * bytes (~40 ns for an authority, ~25 ns for an 8-character path). Bounded: past this many in a
 * table, a new text of that kind is copied (a client inventing paths fills the paths' table once,
 * with at most this many texts of at most 136 characters, and costs the other kinds nothing).
 */
const KNOWN_MAX = 255;
/** At most this much of a method and of an authority; the path has the rest (at least 136 bytes). */
const METHOD_MAX = 16;
const AUTHORITY_MAX = 95;
/** A text cut to fit ends with this when read. */
const CUT = '…';
/** A length too long for the head's two bytes reads as this (and so as cut). */
const LENGTH_MAX = 0xffff;

export interface RequestTexts {
  readonly method: string;
  readonly authority: string;
  readonly path: string;
}

interface Recorded extends RequestTexts {
  /** ms since the epoch, or ISO text (kept by the ring itself). */
  readonly time: string | number;
  readonly durationMs: number;
}

export class RequestFacts {
  private readonly bytes: Buffer;
  /** Per place: the start time (ms; NaN: the ring holds it as text) and the duration. */
  private readonly numbers: Float64Array;
  private readonly methods = new KnownTexts();
  private readonly authorities = new KnownTexts();
  private readonly paths = new KnownTexts();
  /** The head's flag bits of the place being written (putText sets its texts'). */
  private flags = 0;

  constructor(capacity: number) {
    // 128 KB for the default 500 places, per DecisionLog (each worker's, and the primary's merge).
    this.bytes = Buffer.alloc(capacity * PLACE_BYTES);
    this.numbers = new Float64Array(capacity * 2);
  }

  set(at: number, r: Recorded): void {
    const base = at * PLACE_BYTES;
    const b = this.bytes;
    let off = base + HEAD_BYTES;
    this.flags = 0;
    const m = this.putText(b, r.method, off, METHOD_MAX, this.methods, METHOD_KNOWN, 1);
    if ((this.flags & METHOD_KNOWN) === 0) off += m;
    const a = this.putText(b, r.authority, off, AUTHORITY_MAX, this.authorities, AUTHORITY_KNOWN, 2);
    if ((this.flags & AUTHORITY_KNOWN) === 0) off += a;
    const p = this.putText(b, r.path, off, base + PLACE_BYTES - off, this.paths, PATH_KNOWN, 4);
    b[base] = m;
    b[base + 1] = a;
    b[base + 2] = p;
    putLength(b, base + 3, r.method.length);
    putLength(b, base + 5, r.authority.length);
    putLength(b, base + 7, r.path.length);
    b[base + 9] = this.flags;
    this.numbers[at * 2] = typeof r.time === 'number' ? r.time : Number.NaN;
    this.numbers[at * 2 + 1] = r.durationMs;
  }

  /** The texts at `at`; one cut to fit ends with '…'. */
  texts(at: number): RequestTexts {
    const base = at * PLACE_BYTES;
    const b = this.bytes;
    let off = base + HEAD_BYTES;
    const flags = b[base + 9]!;
    const read = (k: number, known: KnownTexts, knownBit: number, utf8Bit: number): string => {
      if (flags & knownBit) return known.text(b[base + k]!);
      const bytes = b[base + k]!;
      const s = b.toString(flags & utf8Bit ? 'utf8' : 'latin1', off, off + bytes);
      off += bytes;
      return s.length < b.readUInt16LE(base + 3 + 2 * k) ? `${s}${CUT}` : s;
    };
    const method = read(0, this.methods, METHOD_KNOWN, 1);
    const authority = read(1, this.authorities, AUTHORITY_KNOWN, 2);
    const path = read(2, this.paths, PATH_KNOWN, 4);
    return { method, authority, path };
  }

  /**
   * Writes `text` at `off`: as its number when it is a known text of `known` (setting `knownBit` in
   * `flags`); otherwise as its bytes, at most `max`, setting `utf8Bit` when they are UTF-8. Answers
   * the number, or the bytes written.
   */
  private putText(b: Buffer, text: string, off: number, max: number, known: KnownTexts, knownBit: number, utf8Bit: number): number {
    const n = known.numberOf(text, max);
    if (n >= 0) {
      this.flags |= knownBit;
      return n;
    }
    const written = putLatin1(b, text, off, max);
    if (written >= 0) return written;
    this.flags |= utf8Bit;
    return b.write(text, off, max, 'utf8');
  }

  /** The start time in ms at `at`; NaN when it was recorded as text. */
  timeMs(at: number): number {
    return this.numbers[at * 2]!;
  }

  durationMs(at: number): number {
    return this.numbers[at * 2 + 1]!;
  }
}

/** Texts of one kind kept by number (KNOWN_MAX at most), the last one asked for first. */
class KnownTexts {
  private readonly texts: string[] = [];
  private readonly numbers = new Map<string, number>();
  /** The last number answered (-1: none). */
  private last = -1;

  /** The text of number `n`. */
  text(n: number): string {
    return this.texts[n]!;
  }

  /**
   * The number of `text`, made known if there is room; -1: it is copied instead (no room, longer
   * than `max`, or not latin-1).
   */
  numberOf(text: string, max: number): number {
    const last = this.last;
    if (last >= 0 && this.texts[last] === text) return last;
    // Full: only the last one is looked for (a client sending a new path each time would otherwise
    // pay the hashing of every path on top of its copy).
    if (this.texts.length >= KNOWN_MAX) return -1;
    let n = this.numbers.get(text);
    if (n === undefined) {
      if (text.length > max || !isLatin1(text)) return -1;
      // A copy of its own: the request's text may be a slice of the whole head, which it would keep.
      const own = Buffer.from(text, 'latin1').toString('latin1');
      n = this.texts.length;
      this.texts.push(own);
      this.numbers.set(own, n);
    }
    this.last = n;
    return n;
  }
}

/** Copies latin-1 `s` (at most `max` characters) to `b` at `off`: the bytes written, or -1 if `s` is not latin-1. */
function putLatin1(b: Uint8Array, s: string, off: number, max: number): number {
  const n = s.length < max ? s.length : max;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff) return -1;
    b[off + i] = c;
  }
  return n;
}

function isLatin1(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0xff) return false;
  return true;
}

/** A length in two bytes (little-endian), LENGTH_MAX at most. */
function putLength(b: Uint8Array, off: number, n: number): void {
  const v = n < LENGTH_MAX ? n : LENGTH_MAX;
  b[off] = v & 0xff;
  b[off + 1] = v >>> 8;
}
