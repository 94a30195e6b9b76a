// A raw HTTP/2 frame as the unit tests write one by hand (the fixture scripts have theirs in
// test/fixtures/h2-frame.mjs).

/** One frame: 9-byte header (length, type, flags, stream), then the payload. */
export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}
