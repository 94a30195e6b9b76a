// google.protobuf.Struct on the wire, by hand: the one protobuf message Istio's metadata exchange
// carries (its HTTP header and its TCP prefix). Only what the exchange uses is written (strings and
// nested structs); the reader skips numbers, booleans, nulls and lists, and is bounded (depth, size)
// because the bytes come from a peer.

/** A Struct as the exchange uses it: string values, or a nested Struct of them (LABELS). */
export interface StructValue {
  readonly [key: string]: string | StructValue;
}

const MAX_DEPTH = 4;

function varint(n: number, out: number[]): void {
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
}

/** Appends a length-delimited field (`tag`: field number and wire type 2, one byte) to `out`. */
export function lengthDelimited(tag: number, body: Buffer, out: Buffer[]): void {
  const head: number[] = [tag];
  varint(body.length, head);
  out.push(Buffer.from(head), body);
}

function encodeValue(v: string | StructValue): Buffer {
  const out: Buffer[] = [];
  if (typeof v === 'string') lengthDelimited(0x1a /* 3: string_value */, Buffer.from(v, 'utf8'), out);
  else lengthDelimited(0x2a /* 5: struct_value */, encodeStruct(v), out);
  return Buffer.concat(out);
}

/** Serialises a Struct (keys in the order given: the bytes are stable for one input). */
export function encodeStruct(s: StructValue): Buffer {
  const out: Buffer[] = [];
  for (const [key, value] of Object.entries(s)) {
    const entry: Buffer[] = [];
    lengthDelimited(0x0a /* map key */, Buffer.from(key, 'utf8'), entry);
    lengthDelimited(0x12 /* map value */, encodeValue(value), entry);
    lengthDelimited(0x0a /* 1: fields */, Buffer.concat(entry), out);
  }
  return Buffer.concat(out);
}

/** Thrown for bytes that are not a well-formed Struct (the caller treats the peer as unknown). */
export class StructDecodeError extends Error {}

/** Reads protobuf wire format within `end`; malformed bytes throw StructDecodeError. */
export class ProtoReader {
  at = 0;
  constructor(readonly buf: Buffer, readonly end = buf.length) {}

  varint(): number {
    let n = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.at >= this.end) throw new StructDecodeError('truncated varint');
      const b = this.buf[this.at++]!;
      n += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return n;
      scale *= 128;
    }
    throw new StructDecodeError('varint too long');
  }

  /** The bounds of a length-delimited field's body. */
  span(): [number, number] {
    const len = this.varint();
    const start = this.at;
    if (len > this.end - start) throw new StructDecodeError('field runs past the end');
    this.at = start + len;
    return [start, start + len];
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.advance(8);
    else if (wireType === 2) this.span();
    else if (wireType === 5) this.advance(4);
    else throw new StructDecodeError(`wire type ${wireType} not expected`);
  }

  private advance(n: number): void {
    if (this.at + n > this.end) throw new StructDecodeError('truncated field');
    this.at += n;
  }
}

function decodeValue(buf: Buffer, start: number, end: number, depth: number): string | StructValue | undefined {
  const r = new ProtoReader(buf, end);
  r.at = start;
  let value: string | StructValue | undefined;
  while (r.at < end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    if (field === 3 && (tag & 7) === 2) {
      const [s, e] = r.span();
      value = buf.toString('utf8', s, e);
    } else if (field === 5 && (tag & 7) === 2) {
      const [s, e] = r.span();
      value = decodeFields(buf, s, e, depth + 1);
    } else {
      r.skip(tag & 7);
    }
  }
  return value;
}

function decodeFields(buf: Buffer, start: number, end: number, depth: number): StructValue {
  if (depth > MAX_DEPTH) throw new StructDecodeError('nested too deep');
  // No prototype: a key named __proto__ is a key like any other.
  const out = Object.create(null) as Record<string, string | StructValue>;
  const r = new ProtoReader(buf, end);
  r.at = start;
  while (r.at < end) {
    const tag = r.varint();
    if (tag !== 0x0a) {
      r.skip(tag & 7);
      continue;
    }
    const [s, e] = r.span();
    const entry = new ProtoReader(buf, e);
    entry.at = s;
    let key: string | undefined;
    let value: string | StructValue | undefined;
    while (entry.at < e) {
      const t = entry.varint();
      if (t === 0x0a) {
        const [ks, ke] = entry.span();
        key = buf.toString('utf8', ks, ke);
      } else if (t === 0x12) {
        const [vs, ve] = entry.span();
        value = decodeValue(buf, vs, ve, depth);
      } else {
        entry.skip(t & 7);
      }
    }
    if (key !== undefined && value !== undefined) out[key] = value;
  }
  return out;
}

/** Parses a serialised Struct; throws StructDecodeError when the bytes are not one. */
export function decodeStruct(buf: Buffer): StructValue {
  return decodeFields(buf, 0, buf.length, 0);
}
