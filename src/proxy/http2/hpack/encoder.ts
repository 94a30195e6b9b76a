// An HPACK encoder (RFC 7541) for our own HTTP/2 frame layer: it runs for every request and
// response header block on the data path, so it does no Huffman coding and allocates next to
// nothing per block. Plain literals (H bit 0, 5.2) are valid HPACK: every decoder must take them, and
// skipping the Huffman code costs a few bytes per new string but no bit twiddling per char; strings
// seen before go by index anyway. Pure (no I/O).
//
// How each field goes out (the checks in this order):
//  - name and value an entry of the static table: indexed (6.1), one byte;
//  - name and value an entry of the dynamic table: indexed (6.1);
//  - otherwise a literal, its name by index when the name is in the static table (its lowest index:
//    the smallest integer) or else the dynamic table (its newest entry), a string when in neither:
//    - `authorization`, `proxy-authorization`, and `cookie` values under 20 bytes (the rule
//      nghttp2 keeps; longer cookies are hard to guess, and usually the same per connection):
//      never indexed (6.2.3), so neither our table nor any intermediary's holds a secret that a
//      compression oracle could probe (RFC 7541 7.1);
//    - an entry that fits the table (name + value + 32 bytes, 4.1) with a value of 256 bytes at
//      most (one huge cookie must not flush every useful entry): with incremental indexing (6.2.1),
//      the oldest entries evicted first to make room (4.4). Values that differ per message
//      (`:path`, `content-length`, `date`, `etag`) are indexed too: one simple rule, and the
//      eviction of the stale ones costs no more than a skipped index would save;
//    - anything else (too large): without indexing (6.2.2).
//
// Lookups are O(1), and allocate only when a name first enters a table: the static table becomes a
// Map of names at module load (each with its one to seven values: :method GET and POST); the
// dynamic table is a ring of names and values plus one Map per encoder, name -> { the name's static
// entries, its newest dynamic entry's sequence number, Map value -> newest sequence number of that
// pair }, so a field costs one lookup by name for both tables. Entries are numbered in insertion
// order (0, 1, ...), so an entry's index is `inserted - seq + 61` (the newest, seq inserted - 1, is
// 62); no number changes when one is added. An evicted entry leaves the Maps only where they still
// point at its own sequence number (a newer entry of the same name or pair keeps its place). A
// value is looked for in the dynamic table only when it could have been inserted: V8 hashes a
// string not hashed before at ~1.6 ns a char, and a 4 KiB cookie is never in the table anyway.
//
// The dynamic table size (4.2, 6.3): the encoder starts at min(its cap, 4096), 4096 being what the
// peer's decoder holds until its SETTINGS say otherwise (using more before would evict differently
// than the peer does); a smaller cap is signaled by an update at the start of the first block. When
// setPeerTableSize changes the size, the table is trimmed at once, and the next block begins with
// an update: the smallest size of the interval first when it went below the final one, then the
// final one.
//
// Output: one Buffer per encoder, reused by every block (4 KiB at first, doubled as a block needs),
// the block returned as a view of it.
import { DEFAULT_TABLE_SIZE, STATIC } from './decoder.js';

/** RFC 7541 4.1: an entry's size is its name's and value's lengths plus 32. */
const ENTRY_OVERHEAD = 32;
/** Dynamic index 1 is absolute index 62. */
const STATIC_COUNT = STATIC.length;
/** The longest value entered into the dynamic table. */
const MAX_INDEXED_VALUE = 256;
/** `cookie` values shorter than this are never indexed. */
const SHORT_COOKIE = 20;
/**
 * Strings shorter than this are written by a charCodeAt loop, longer ones by latin1Write: measured
 * on node 20, the loop takes ~10-20 ns up to 8 chars and ~65 ns at 32, latin1Write ~65-75 ns at any
 * length up to 128 (a call into C++ per string); they cross at about 32.
 */
const LOOP_WRITE_BELOW = 32;
/** SETTINGS values are 32-bit; the integer writer relies on it (>>> 7). */
const MAX_TABLE_SIZE = 0xffffffff;
/** A field's worst case beyond its name's and value's bytes: three integers of 6 bytes each. */
const FIELD_OVERHEAD = 18;
const INITIAL_OUTPUT = 4096;
/** The ring's first capacity (doubled when full; 4096 / 32 = 128 entries at most in a 4 KiB table). */
const INITIAL_RING = 64;
/**
 * Buffer.prototype.latin1Write: what buf.write(s, at, n, 'latin1') calls after dispatching on the
 * encoding name (~17 ns more per string, measured); node has it on every Buffer but its typings
 * do not declare it.
 */
type Latin1Writer = Buffer & { latin1Write(s: string, offset: number, length: number): number };

const NOT_SENSITIVE = 0;
const SENSITIVE = 1;
const SENSITIVE_IF_SHORT = 2;

interface StaticName {
  /** The name's lowest index. */
  readonly index: number;
  /**
   * The name's entries, `values[i]` at index `index + i` (a name's entries are adjacent): one
   * for most names, 7 at most (:status). Compared by ===, not hashed: a string fresh from a decoder
   * has no hash yet, and V8 hashes at ~1.6 ns a char (a 60-byte :path, ~100 ns), where === against
   * a few short constants costs a few ns (lengths differ, or a short memcmp).
   */
  readonly values: readonly string[];
  readonly sensitive: number;
}

const STATIC_NAMES: ReadonlyMap<string, StaticName> = (() => {
  const out = new Map<string, { index: number; values: string[]; sensitive: number }>();
  STATIC.forEach(([name, value], i) => {
    const known = out.get(name);
    if (known !== undefined) {
      if (known.index + known.values.length !== i + 1) throw new Error(`HPACK: static entries of ${name} apart`);
      known.values.push(value);
      return;
    }
    const sensitive = name === 'authorization' || name === 'proxy-authorization' ? SENSITIVE : name === 'cookie' ? SENSITIVE_IF_SHORT : NOT_SENSITIVE;
    out.set(name, { index: i + 1, values: [value], sensitive });
  });
  return out;
})();

/**
 * What the encoder knows of a name: its static entries, and its entries in the dynamic table. Kept
 * while the name is in either table, so a field costs one Map lookup by name, not one per table.
 */
interface NameRecord {
  readonly st: StaticName | undefined;
  /** The newest dynamic entry's sequence number; -1: none (a name not static then leaves the Map). */
  newest: number;
  /** Each value's newest dynamic entry (made at the name's first insertion). */
  values: Map<string, number> | undefined;
}

function checkSize(size: number): void {
  if (!Number.isInteger(size) || size < 0 || size > MAX_TABLE_SIZE) throw new RangeError(`HPACK: a table size of ${size}`);
}

/** An integer with a `prefix`-bit prefix (RFC 7541 5.1), the first byte's other bits `first`. */
function writeInteger(buf: Buffer, pos: number, first: number, prefix: number, value: number): number {
  const max = (1 << prefix) - 1;
  if (value < max) {
    buf[pos] = first | value;
    return pos + 1;
  }
  buf[pos++] = first | max;
  let rest = value - max;
  while (rest >= 0x80) {
    buf[pos++] = (rest & 0x7f) | 0x80;
    rest >>>= 7;
  }
  buf[pos] = rest;
  return pos + 1;
}

/** A string literal (RFC 7541 5.2), H 0, a byte per char (a Uint8Array store keeps the low byte, as latin1Write does). */
function writeString(buf: Buffer, pos: number, s: string): number {
  const len = s.length;
  if (len < 0x7f) buf[pos++] = len;
  else pos = writeInteger(buf, pos, 0, 7, len);
  if (len < LOOP_WRITE_BELOW) {
    for (let i = 0; i < len; i++) buf[pos + i] = s.charCodeAt(i);
    return pos + len;
  }
  return pos + (buf as Latin1Writer).latin1Write(s, pos, len);
}

export class HpackEncoder {
  /** The most the encoder uses, whatever the peer allows. */
  private readonly cap: number;
  /** The table's maximum size now (min of the peer's setting and `cap`). */
  private max: number;
  private size = 0;
  /** The maximum the peer's decoder holds: as last signaled, or assumed (4096) before any. */
  private signaled = DEFAULT_TABLE_SIZE;
  private updatePending = false;
  /** The smallest maximum since the last block (meaningful while an update is pending). */
  private pendingMin = 0;

  // The dynamic table: a ring, oldest entry at `head`.
  private names: string[] = new Array<string>(INITIAL_RING).fill('');
  private values: string[] = new Array<string>(INITIAL_RING).fill('');
  private mask = INITIAL_RING - 1;
  private head = 0;
  private count = 0;
  /** Entries ever inserted: the next entry's sequence number. */
  private inserted = 0;
  private readonly byName = new Map<string, NameRecord>();

  private buf: Buffer = Buffer.allocUnsafeSlow(INITIAL_OUTPUT);

  /** `tableSize`: the dynamic table size the encoder uses at most (<= the peer's SETTINGS_HEADER_TABLE_SIZE; default 4096). */
  constructor(tableSize = DEFAULT_TABLE_SIZE) {
    checkSize(tableSize);
    this.cap = tableSize;
    this.max = Math.min(tableSize, DEFAULT_TABLE_SIZE);
    if (this.max < this.signaled) {
      this.updatePending = true;
      this.pendingMin = this.max;
    }
  }

  /** The dynamic table's size now (RFC 7541 4.1), for tests. */
  get tableSize(): number {
    return this.size;
  }

  /**
   * The peer's SETTINGS_HEADER_TABLE_SIZE changed: the encoder's table becomes min(size, its own
   * cap), and the next block begins with a dynamic table size update (RFC 7541 6.3, 4.2).
   */
  setPeerTableSize(size: number): void {
    checkSize(size);
    const next = Math.min(size, this.cap);
    if (next === this.max) return;
    if (!this.updatePending) {
      this.updatePending = true;
      this.pendingMin = next;
    } else if (next < this.pendingMin) {
      this.pendingMin = next;
    }
    this.max = next;
    this.evict(0);
  }

  /**
   * Encodes one header block. `fields`: a flat list [name0, value0, name1, value1, ...], names
   * already lower case, strings latin1 (one char per byte; a char above 0xff is the caller's bug,
   * its low byte is written). Returns the block: a Buffer that stays valid until the next encode()
   * call (the encoder reuses its output buffer; callers copy or write it before encoding again).
   */
  encode(fields: readonly string[]): Buffer {
    const n = fields.length;
    if ((n & 1) !== 0) throw new TypeError('HPACK: a field list of name, value pairs has an even length');
    let buf = this.buf;
    let pos = 0;
    if (this.updatePending) {
      // At most two updates of 6 bytes each: the output is never smaller than 4 KiB.
      this.updatePending = false;
      const final = this.max;
      if (this.pendingMin < final) pos = writeInteger(buf, pos, 0x20, 5, this.pendingMin);
      if (pos > 0 || final !== this.signaled) pos = writeInteger(buf, pos, 0x20, 5, final);
      this.signaled = final;
    }
    for (let i = 0; i < n; i += 2) {
      const name = fields[i]!;
      const value = fields[i + 1]!;
      if (pos + name.length + value.length + FIELD_OVERHEAD > buf.length) buf = this.grow(pos, pos + name.length + value.length + FIELD_OVERHEAD);
      let nameIndex = 0;
      let sensitive = false;
      let rec = this.byName.get(name);
      if (rec === undefined) { // a name not seen yet, or out of the dynamic table since
        const st = STATIC_NAMES.get(name);
        if (st !== undefined) this.byName.set(name, rec = { st, newest: -1, values: undefined });
      }
      if (rec !== undefined) {
        const st = rec.st;
        if (st !== undefined) {
          const values = st.values;
          let k = 0;
          while (k < values.length && values[k] !== value) k++;
          if (k < values.length) { // <= 61: one byte
            buf[pos++] = 0x80 | (st.index + k);
            continue;
          }
          nameIndex = st.index;
          if (st.sensitive !== NOT_SENSITIVE) sensitive = st.sensitive === SENSITIVE || value.length < SHORT_COOKIE;
        }
        if (rec.newest >= 0) {
          // Only a field that could have been inserted is looked for (hashing a 4 KiB cookie costs µs).
          if (!sensitive && value.length <= MAX_INDEXED_VALUE && name.length + value.length + ENTRY_OVERHEAD <= this.max) {
            const seq = rec.values!.get(value);
            if (seq !== undefined) {
              pos = writeInteger(buf, pos, 0x80, 7, this.inserted - seq + STATIC_COUNT);
              continue;
            }
          }
          if (nameIndex === 0) nameIndex = this.inserted - rec.newest + STATIC_COUNT;
        }
      }
      const entrySize = name.length + value.length + ENTRY_OVERHEAD;
      if (sensitive) {
        pos = writeInteger(buf, pos, 0x10, 4, nameIndex);
      } else if (value.length <= MAX_INDEXED_VALUE && entrySize <= this.max) {
        // The name index was taken before the insertion evicts: it may name the entry evicted (4.4).
        pos = writeInteger(buf, pos, 0x40, 6, nameIndex);
        this.insert(name, value, entrySize, rec);
      } else {
        pos = writeInteger(buf, pos, 0x00, 4, nameIndex);
      }
      if (nameIndex === 0) pos = writeString(buf, pos, name);
      pos = writeString(buf, pos, value);
    }
    return buf.subarray(0, pos);
  }

  /** A new output buffer of at least `need` bytes, the block's first `pos` bytes copied. */
  private grow(pos: number, need: number): Buffer {
    let len = this.buf.length * 2;
    while (len < need) len *= 2;
    const next = Buffer.allocUnsafeSlow(len);
    this.buf.copy(next, 0, 0, pos);
    this.buf = next;
    return next;
  }

  /** Adds an entry that fits the table; `rec`: its name's record as found before (its entries maybe evicted since). */
  private insert(name: string, value: string, entrySize: number, rec: NameRecord | undefined): void {
    this.evict(entrySize);
    if (this.count === this.mask + 1) this.growRing();
    const slot = (this.head + this.count) & this.mask;
    this.names[slot] = name;
    this.values[slot] = value;
    this.count++;
    this.size += entrySize;
    const seq = this.inserted++;
    if (rec === undefined) {
      rec = { st: undefined, newest: seq, values: new Map() };
      this.byName.set(name, rec);
    } else {
      // A name not static whose entries were all evicted (maybe just now) left the Map: back in.
      if (rec.newest < 0 && rec.st === undefined) this.byName.set(name, rec);
      rec.newest = seq;
      rec.values ??= new Map();
    }
    rec.values!.set(value, seq);
  }

  /** Evicts the oldest entries until `room` more bytes fit (all of them if it never does). */
  private evict(room: number): void {
    while (this.count > 0 && this.size + room > this.max) {
      const slot = this.head;
      const name = this.names[slot]!;
      const value = this.values[slot]!;
      const seq = this.inserted - this.count;
      this.names[slot] = ''; // no string kept alive by a free slot
      this.values[slot] = '';
      this.head = (slot + 1) & this.mask;
      this.count--;
      this.size -= name.length + value.length + ENTRY_OVERHEAD;
      const rec = this.byName.get(name)!;
      const values = rec.values!;
      if (values.get(value) === seq) values.delete(value);
      if (rec.newest === seq) { // every entry of the name is older: all gone (values is empty)
        rec.newest = -1;
        if (rec.st === undefined) this.byName.delete(name);
      }
    }
  }

  /** Doubles the ring, oldest entry first. */
  private growRing(): void {
    const len = (this.mask + 1) * 2;
    const names = new Array<string>(len).fill('');
    const values = new Array<string>(len).fill('');
    for (let i = 0; i < this.count; i++) {
      const slot = (this.head + i) & this.mask;
      names[i] = this.names[slot]!;
      values[i] = this.values[slot]!;
    }
    this.names = names;
    this.values = values;
    this.mask = len - 1;
    this.head = 0;
  }
}
