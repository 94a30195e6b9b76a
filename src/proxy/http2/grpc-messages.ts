// Counts gRPC messages in a body as it passes (Istio's request_messages_total and
// response_messages_total): each message is a 5-byte prefix (compressed flag, 32-bit big-endian
// length) and that many bytes. Only the prefixes are read; the bytes go on untouched. Made only for
// gRPC calls, so plain HTTP/2 pays nothing.

export class GrpcMessageCounter {
  /** Messages whose prefix has been read. */
  messages = 0;
  /** Bytes of the current message still to skip; -1 while reading a prefix. */
  private remaining = -1;
  /** Prefix bytes read so far, and the length they give. */
  private prefixRead = 0;
  private length = 0;

  feed(chunk: Buffer): void {
    let at = 0;
    const end = chunk.length;
    while (at < end) {
      if (this.remaining < 0) {
        const b = chunk[at++]!;
        // Byte 0 is the compressed flag; bytes 1-4 the length.
        if (this.prefixRead > 0) this.length = this.length * 256 + b;
        if (++this.prefixRead === 5) {
          this.messages++;
          this.remaining = this.length;
          this.prefixRead = 0;
          this.length = 0;
        }
        continue;
      }
      const skip = Math.min(this.remaining, end - at);
      at += skip;
      this.remaining -= skip;
      if (this.remaining === 0) this.remaining = -1;
    }
  }
}
