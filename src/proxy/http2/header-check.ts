// Follows the frames one peer sends on an HTTP/2 connection, ahead of node:http2, and judges every
// header block (HEADERS + CONTINUATION: requests, responses, trailers) by RFC 9113 8.2.1 with its
// own HPACK decoder (hpack/decoder.ts). A block holding a field nghttp2 would drop silently marks
// its stream: the handler resets that stream with PROTOCOL_ERROR when node shows it, so nothing of
// it is forwarded. Other frames are skipped by their length, their payload never copied. Pure: it
// is fed bytes and answers questions; whatever feeds it does the I/O (a socket tap in front of
// node:http2 was measured, too dear to keep: docs/PERFORMANCE.md, "HTTP/2 strictness").
// The HPACK table's limit is the default SETTINGS_HEADER_TABLE_SIZE (4096): node:http2 advertises it
// and the proxy never changes it; a side that did would have to give its value here.
import { CLIENT_PREFACE } from './preface.js';
import { HpackDecoder, HpackError } from './hpack/decoder.js';

const FRAME_HEADER = 9;
const TYPE_HEADERS = 0x1;
const TYPE_PUSH_PROMISE = 0x5;
const TYPE_CONTINUATION = 0x9;
const FLAG_END_HEADERS = 0x4;
const FLAG_PADDED = 0x8;
const FLAG_PRIORITY = 0x20;
/**
 * The most header block bytes gathered for one block: nghttp2 takes at most 8 CONTINUATION frames
 * after a HEADERS frame (its CVE-2024-27983 cap) of at most 16 KiB each (node's
 * SETTINGS_MAX_FRAME_SIZE); a larger block has its connection closed by nghttp2 anyway.
 */
export const MAX_BLOCK_BYTES = 9 * 16_384;
/** Malformed blocks a connection may send before it is closed (as nghttp2's invalid-frame cap). */
export const MAX_MALFORMED_BLOCKS = 100;

/** What the checker found: a malformed stream, or a connection that cannot be followed any more. */
export interface HeaderCheckEvents {
  /** `stream`'s header block holds a field RFC 9113 calls malformed (`why`). */
  malformed(stream: number, why: string): void;
  /** Not valid HPACK, or not HTTP/2 framing as it must be: the connection must close. */
  broken(why: string): void;
}

export class HeaderCheck {
  private readonly hpack: HpackDecoder;
  /** Preface bytes still to skip (a server's side: the client's 24). */
  private preface: number;
  /** The frame header being read (it may come in pieces). */
  private readonly head = Buffer.alloc(FRAME_HEADER);
  private headFill = 0;
  /** Payload bytes of the current frame still to come. */
  private left = 0;
  /** The current frame's payload is gathered (a HEADERS or CONTINUATION), not skipped. */
  private gathering = false;
  private frame: Buffer[] = [];
  private frameFlags = 0;
  private frameType = 0;
  /** The header block being assembled and its stream (0: none open). */
  private block: Buffer[] = [];
  private blockBytes = 0;
  private blockStream = 0;
  private malformedCount = 0;
  private dead = false;

  /** `server`: the bytes are a client's (they begin with the preface; requests are judged). */
  constructor(server: boolean, private readonly events: HeaderCheckEvents) {
    this.hpack = new HpackDecoder(server);
    this.preface = server ? CLIENT_PREFACE.length : 0;
  }

  /** The next bytes the peer sent, in order. Nothing of `bytes` is kept past the call but copies. */
  feed(bytes: Buffer): void {
    if (this.dead) return;
    let at = 0;
    const n = bytes.length;
    if (this.preface > 0) {
      at = Math.min(this.preface, n);
      this.preface -= at;
    }
    while (at < n) {
      if (this.left > 0) {
        const take = Math.min(this.left, n - at);
        const whole = take === this.left && this.frame.length === 0;
        // A frame wholly within this read is judged from the read itself, not copied.
        if (this.gathering && !whole) this.frame.push(Buffer.from(bytes.subarray(at, at + take)));
        this.left -= take;
        if (this.left === 0 && this.gathering) this.frameDone(whole ? bytes.subarray(at, at + take) : undefined);
        at += take;
        if (this.dead) return;
        continue;
      }
      const take = Math.min(FRAME_HEADER - this.headFill, n - at);
      bytes.copy(this.head, this.headFill, at, at + take);
      this.headFill += take;
      at += take;
      if (this.headFill < FRAME_HEADER) return;
      this.headFill = 0;
      this.frameStart();
      if (this.dead) return;
    }
  }

  private frameStart(): void {
    const h = this.head;
    const length = (h[0]! << 16) | (h[1]! << 8) | h[2]!;
    const type = h[3]!;
    const stream = h.readUInt32BE(5) & 0x7fffffff;
    this.left = length;
    this.frameType = type;
    this.frameFlags = h[4]!;
    if (this.blockStream !== 0 && (type !== TYPE_CONTINUATION || stream !== this.blockStream)) {
      // RFC 9113 6.10: nothing may come between a block's frames; nghttp2 closes the connection.
      this.fail('a frame inside a header block');
      return;
    }
    if (type === TYPE_PUSH_PROMISE) {
      // Push is disabled by both of the proxy's sides: nghttp2 closes the connection.
      this.fail('PUSH_PROMISE');
      return;
    }
    this.gathering = type === TYPE_HEADERS || type === TYPE_CONTINUATION;
    if (!this.gathering) return;
    if (type === TYPE_CONTINUATION && this.blockStream === 0) {
      this.fail('CONTINUATION without a header block');
      return;
    }
    if (type === TYPE_HEADERS) this.blockStream = stream;
    if (stream === 0) {
      this.fail('a header block on stream 0');
      return;
    }
    if (this.blockBytes + length > MAX_BLOCK_BYTES) {
      this.fail('a header block too large');
      return;
    }
    if (length === 0) this.frameDone(Buffer.alloc(0));
  }

  /** A HEADERS or CONTINUATION frame's whole payload: `view` (valid during the call only), else what `frame` gathered. */
  private frameDone(view: Buffer | undefined): void {
    let payload = view ?? (this.frame.length === 1 ? this.frame[0]! : Buffer.concat(this.frame));
    this.frame = [];
    if (this.frameType === TYPE_HEADERS) {
      let start = 0;
      let pad = 0;
      if (this.frameFlags & FLAG_PADDED) {
        pad = payload[0] ?? 0;
        start = 1;
      }
      if (this.frameFlags & FLAG_PRIORITY) start += 5;
      if (start + pad > payload.length) {
        this.fail('HEADERS padding or priority beyond the frame');
        return;
      }
      payload = payload.subarray(start, payload.length - pad);
    }
    if ((this.frameFlags & FLAG_END_HEADERS) === 0) {
      // More frames to come: what is kept must outlive this read.
      this.block.push(view === undefined ? payload : Buffer.from(payload));
      this.blockBytes += payload.length;
      return;
    }
    this.block.push(payload);
    const block = this.block.length === 1 ? this.block[0]! : Buffer.concat(this.block);
    const stream = this.blockStream;
    this.block = [];
    this.blockBytes = 0;
    this.blockStream = 0;
    let why: string | undefined;
    try {
      why = this.hpack.decode(block);
    } catch (err) {
      this.fail(err instanceof HpackError ? err.message : String(err));
      return;
    }
    if (why === undefined) return;
    if (++this.malformedCount > MAX_MALFORMED_BLOCKS) {
      this.fail(`more than ${MAX_MALFORMED_BLOCKS} malformed header blocks`);
      return;
    }
    this.events.malformed(stream, why);
  }

  private fail(why: string): void {
    this.dead = true;
    this.frame = [];
    this.block = [];
    this.events.broken(why);
  }
}
