// Raw HTTP/2 frames as the unit tests write and read them by hand (the fixture scripts have theirs
// in test/fixtures/h2-frame.mjs).

/** One frame: 9-byte header (length, type, flags, stream), then the payload. */
export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}

export interface Frame { type: number; flags: number; stream: number; payload: Buffer }

/** Splits the whole frames off `buf` (payloads are views of it); returns them and what is left. */
export function splitFrames(buf: Buffer): { frames: Frame[]; rest: Buffer } {
  const out: Frame[] = [];
  let at = 0;
  while (buf.length - at >= 9) {
    const len = buf.readUIntBE(at, 3);
    if (buf.length - at < 9 + len) break;
    out.push({ type: buf[at + 3]!, flags: buf[at + 4]!, stream: buf.readUInt32BE(at + 5) & 0x7fffffff, payload: buf.subarray(at + 9, at + 9 + len) });
    at += 9 + len;
  }
  return { frames: out, rest: buf.subarray(at) };
}
