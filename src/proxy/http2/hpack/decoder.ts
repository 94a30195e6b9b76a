// An HPACK decoder (RFC 7541) that follows one direction of a connection exactly as the peer's
// encoder drives it: the static table, the dynamic table with its size updates and evictions,
// integers, string literals plain or Huffman coded. Every block must be decoded whole, refused or
// not, or the dynamic table drifts from the one nghttp2 keeps for the same bytes. Each field is
// judged as it is decoded (field-validity.ts); a dynamic table entry keeps its verdict, so a field
// sent again by index costs no second look. Pure (no I/O); not valid HPACK throws HpackError.
import { fieldFault, strictFieldFault, type FieldFault } from '../field-validity.js';
import { huffmanDecode } from './huffman.js';

/** The block is not valid HPACK: the connection cannot go on (COMPRESSION_ERROR, RFC 9113 4.3). */
export class HpackError extends Error {
  readonly code = 'ERR_HPACK_COMPRESSION';
  constructor(message: string) {
    super(`HPACK: ${message}`);
  }
}

/** SETTINGS_HEADER_TABLE_SIZE when neither side says otherwise (node:http2 keeps it). */
export const DEFAULT_TABLE_SIZE = 4096;
/** RFC 7541 4.1: an entry's size is its name's and value's lengths plus 32. */
const ENTRY_OVERHEAD = 32;
/** The largest integer taken (a length or index beyond it cannot be within a block anyway). */
const MAX_INTEGER = 2 ** 31 - 1;

interface Entry {
  readonly name: string;
  readonly value: string;
  readonly size: number;
  readonly fault: FieldFault;
}

export const STATIC: ReadonlyArray<readonly [string, string]> = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''],
  ['etag', ''], ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''],
  ['if-modified-since', ''], ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''],
  ['last-modified', ''], ['link', ''], ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''],
  ['proxy-authorization', ''], ['range', ''], ['referer', ''], ['refresh', ''], ['retry-after', ''],
  ['server', ''], ['set-cookie', ''], ['strict-transport-security', ''], ['transfer-encoding', ''],
  ['user-agent', ''], ['vary', ''], ['via', ''], ['www-authenticate', ''],
];
/** The static table's entries (RFC 7541 Appendix A), index 1 first; every one of them valid. */
const STATIC_ENTRIES: readonly Entry[] = STATIC.map(([name, value]) => ({ name, value, size: name.length + value.length + ENTRY_OVERHEAD, fault: undefined }));

/** Where decoded Huffman strings land before they become strings (grown on demand, never shrunk past a block's need). */
let scratch = Buffer.allocUnsafeSlow(4096);

/** The longest literal (its strings' encoded bytes) remembered (see `recent`). */
const RECENT_MAX_BYTES = 128;
/** How many literals with a name of their own are remembered (the oldest replaced). */
const RECENT_NEW_NAMES = 8;

/** A literal as last decoded for a static name: its encoded bytes and the entry they gave. */
interface Recent {
  readonly raw: Uint8Array;
  readonly entry: Entry;
}

/** Whether `block[at..end)` holds exactly the bytes of `raw`. */
function sameBytes(raw: Uint8Array, block: Buffer, at: number, end: number): boolean {
  if (raw.length !== end - at) return false;
  for (let i = 0; i < raw.length; i++) if (raw[i] !== block[at + i]) return false;
  return true;
}

/** Called for each field of a block in order (tests, and whoever wants the list). */
export type FieldSink = (name: string, value: string) => void;

/** The block being decoded when there is none (not a new empty buffer per block). */
const NO_BLOCK = Buffer.alloc(0);

export class HpackDecoder {
  /** Newest last: dynamic index 1 is the last element. */
  private readonly table: Entry[] = [];
  /** The table's entries before this one are evicted (removed from the array in bulk, see evict). */
  private oldest = 0;
  private size = 0;
  /** The table's size as the peer's last update set it, within `limit`. */
  private maxSize: number;
  private pos = 0;
  /** Where the block being decoded ends in `block` (a block may be a range of a larger buffer). */
  private end = 0;
  private block: Buffer = NO_BLOCK;
  /** decodeList()'s list and its limit, while it runs. */
  private list: string[] | undefined;
  private listLimit = 0;
  /** The size of the list the last decodeList() decoded, as SETTINGS_MAX_HEADER_LIST_SIZE counts it (name + value + 32 per field). */
  listSize = 0;
  /** Where the string string() or stringBounds() last read begins in `block`. */
  private strStart = 0;
  /**
   * Per static name, the literal last decoded with it: servers send the same fields as literals in
   * every response (nginx: server, date, content-type, content-length, last-modified, each put in
   * the table again and again), so the same bytes give back the same entry, already decoded and
   * judged, instead of a new string and a new verdict each time.
   */
  private readonly recent: (Recent | undefined)[] = [];
  /** The same for literals that carry their name (nginx: etag, accept-ranges, a trailer's grpc-status). */
  private readonly recentNew: Recent[] = [];
  private nextNew = 0;

  /** Judges a field's name and value (by field-validity.ts), once per table entry. */
  private readonly judge: typeof fieldFault;

  /**
   * `limit`: the SETTINGS_HEADER_TABLE_SIZE this side advertised (the most an update may ask);
   * `server`: this side receives requests (a `host` field is judged as an authority); `strict`:
   * upper case in a name is a fault too (no nghttp2 behind to refuse it).
   */
  constructor(private readonly server: boolean, private readonly limit = DEFAULT_TABLE_SIZE, strict = false) {
    this.judge = strict ? strictFieldFault : fieldFault;
    this.maxSize = limit;
  }

  /** The dynamic table's size now (RFC 7541 4.1), for tests. */
  get tableSize(): number {
    return this.size;
  }

  /**
   * Decodes one whole header block: the first field fault of the block (undefined: none). Throws
   * HpackError when the block is not valid HPACK; the table is then of no further use.
   */
  decode(block: Buffer, sink?: FieldSink, start = 0, end = block.length): FieldFault {
    this.block = block;
    this.pos = start;
    this.end = end;
    let fault: FieldFault;
    let fieldsSeen = false;
    while (this.pos < end) {
      const b = block[this.pos]!;
      let entry: Entry;
      if (b >= 0x80) { // indexed field (6.1)
        entry = this.entry(this.integer(7));
        sink?.(entry.name, entry.value);
        fieldsSeen = true;
        fault ??= entry.fault;
        continue;
      }
      if (b >= 0x40) { // literal with incremental indexing (6.2.1)
        entry = this.literal(6);
        this.insert(entry);
      } else if (b >= 0x20) { // dynamic table size update (6.3): only before the first field
        if (fieldsSeen) throw new HpackError('a dynamic table size update after a field');
        const size = this.integer(5);
        if (size > this.limit) throw new HpackError(`a table size update to ${size}, above the ${this.limit} allowed`);
        this.maxSize = size;
        this.evict(0);
        continue;
      } else { // literal without indexing (6.2.2) or never indexed (6.2.3): both 4-bit prefixes
        entry = this.literal(4);
      }
      sink?.(entry.name, entry.value);
      fieldsSeen = true;
      fault ??= entry.fault;
    }
    this.block = NO_BLOCK;
    return fault;
  }

  /**
   * decode(), the fields pushed onto `out` (name, value...) while the list's size (`listSize`)
   * stays within `limit`: the fields past it are decoded all the same (the table follows the peer),
   * not kept. No function made per block. `start`, `end`: the block's range in `block` (no view made).
   */
  decodeList(block: Buffer, out: string[], limit: number, start = 0, end = block.length): FieldFault {
    this.list = out;
    this.listLimit = limit;
    this.listSize = 0;
    try {
      return this.decode(block, this.keep, start, end);
    } finally {
      this.list = undefined;
    }
  }

  private readonly keep = (name: string, value: string): void => {
    this.listSize += name.length + value.length + ENTRY_OVERHEAD;
    if (this.listSize <= this.listLimit) this.list!.push(name, value);
  };

  private entry(index: number): Entry {
    if (index === 0) throw new HpackError('index 0');
    if (index <= STATIC_ENTRIES.length) return STATIC_ENTRIES[index - 1]!;
    const i = this.table.length - (index - STATIC_ENTRIES.length);
    if (i < this.oldest) throw new HpackError(`index ${index} beyond the table`);
    return this.table[i]!;
  }

  /** A literal field whose first byte has an `prefix`-bit name index (0: the name follows as a string). */
  private literal(prefix: number): Entry {
    const index = this.integer(prefix);
    if (index === 0) return this.newNamed();
    if (index <= STATIC_ENTRIES.length) return this.staticNamed(index);
    return this.made(this.entry(index).name, this.string());
  }

  /** A literal that carries its name: the entry of a recent one when name and value are the same bytes. */
  private newNamed(): Entry {
    const at = this.pos;
    const nameHuffman = this.stringBounds();
    const nameStart = this.strStart;
    const nameEnd = this.pos;
    const valueHuffman = this.stringBounds();
    const end = this.pos;
    const recent = this.recentNew;
    for (let i = 0; i < recent.length; i++) if (sameBytes(recent[i]!.raw, this.block, at, end)) return recent[i]!.entry;
    const name = this.text(nameHuffman, nameStart, nameEnd);
    const entry = this.made(name, this.text(valueHuffman, this.strStart, end));
    if (end - at <= RECENT_MAX_BYTES) {
      recent[this.nextNew] = { raw: Uint8Array.prototype.slice.call(this.block, at, end), entry };
      this.nextNew = (this.nextNew + 1) % RECENT_NEW_NAMES;
    }
    return entry;
  }

  /** A literal whose name is the static table's `index`: the entry of its last time when its value's bytes are the same. */
  private staticNamed(index: number): Entry {
    const at = this.pos;
    const huffman = this.stringBounds();
    const end = this.pos;
    const seen = this.recent[index];
    if (seen !== undefined && sameBytes(seen.raw, this.block, at, end)) return seen.entry;
    const entry = this.made(STATIC_ENTRIES[index - 1]!.name, this.text(huffman, this.strStart, end));
    if (end - at <= RECENT_MAX_BYTES) this.recent[index] = { raw: Uint8Array.prototype.slice.call(this.block, at, end), entry };
    return entry;
  }

  private made(name: string, value: string): Entry {
    return { name, value, size: name.length + value.length + ENTRY_OVERHEAD, fault: this.judge(name, value, this.server) };
  }

  private insert(e: Entry): void {
    // An entry larger than the table empties it and is not added (RFC 7541 4.4).
    this.evict(e.size);
    if (e.size > this.maxSize) return;
    this.table.push(e);
    this.size += e.size;
  }

  /** Evicts the oldest entries until `room` more fits. */
  private evict(room: number): void {
    let drop = this.oldest;
    while (this.size + room > this.maxSize && drop < this.table.length) this.size -= this.table[drop++]!.size;
    this.oldest = drop;
    // Evicted entries leave the array in bulk: a splice per insertion would move the whole table each time.
    if (drop > 64 && drop * 2 > this.table.length) {
      this.table.splice(0, drop);
      this.oldest = 0;
    }
  }

  /** An integer with an N-bit prefix (RFC 7541 5.1), the prefix byte's other bits ignored. */
  private integer(prefixBits: number): number {
    const block = this.block;
    const max = (1 << prefixBits) - 1;
    let value = block[this.pos++]! & max;
    if (value < max) return value;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new HpackError('an integer cut short');
      const b = block[this.pos++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (value > MAX_INTEGER) throw new HpackError('an integer too large');
      if (b < 0x80) return value;
      shift += 7;
      // Zero bytes with the continuation bit add nothing: past 31 bits they are padding (and at
      // 2^1024, 0 * Infinity would make the value NaN, which passes every comparison).
      if (shift > 28) throw new HpackError('an integer of too many bytes');
    }
  }

  /** A string literal (RFC 7541 5.2) as latin1 (a char per byte). */
  private string(): string {
    const huffman = this.stringBounds();
    return this.text(huffman, this.strStart, this.pos);
  }

  /** Reads a string literal's length, checks it lies within the block, and moves past it: whether it is Huffman coded (its bytes from `strStart`). */
  private stringBounds(): boolean {
    const block = this.block;
    if (this.pos >= this.end) throw new HpackError('a string missing');
    const huffman = block[this.pos]! >= 0x80;
    const length = this.integer(7);
    const start = this.pos;
    const end = start + length;
    if (end > this.end) throw new HpackError('a string cut short');
    this.strStart = start;
    this.pos = end;
    return huffman;
  }

  /** The string in `block[start..end)`, Huffman coded or plain. */
  private text(huffman: boolean, start: number, end: number): string {
    const block = this.block;
    if (!huffman) return block.toString('latin1', start, end);
    const need = Math.ceil(((end - start) * 8) / 5);
    if (scratch.length < need) scratch = Buffer.allocUnsafeSlow(Math.max(need, scratch.length * 2));
    const n = huffmanDecode(block, start, end, scratch);
    if (typeof n !== 'number') throw new HpackError(n === 'eos' ? 'a Huffman string holding EOS' : 'a Huffman string with bad padding');
    return scratch.toString('latin1', 0, n);
  }
}
