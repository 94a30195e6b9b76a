// One HTTP/2 connection's frame layer (RFC 9113), either side: the preface, SETTINGS and their
// acknowledgement, PING, streams and their states, header blocks (HEADERS + CONTINUATION, HPACK
// both ways), DATA with flow control both ways, RST_STREAM and GOAWAY. It is fed the bytes read and
// hands what it writes to `write`, batched: everything a read (or a turn of the event loop) makes
// goes out in one write. No I/O of its own and no timers: the owner reads, writes, times out.
//
// Strict by construction: every header block is decoded here, so a malformed message (RFC 9113
// 8.1.1: field names and values, connection-specific fields, pseudo-header fields, content-length
// against the DATA received) is refused with RST_STREAM PROTOCOL_ERROR before its owner sees any of
// it, and a connection that breaks the framing rules gets GOAWAY with the error and is closed.
//
// The defences are counted here, where the frames are: concurrent streams (REFUSED_STREAM past the
// cap, the connection closed after too many), a header block's size and CONTINUATION frames, a
// decoded header list's size (an HPACK bomb decodes to nothing kept past it), control frames and
// empty DATA frames per second (PING, SETTINGS, PRIORITY floods), and streams reset early — by the
// peer or by us for its malformed frames — against the streams it opened (rapid reset and its
// "made you reset" variant). Each ends the connection with GOAWAY ENHANCE_YOUR_CALM.
//
// What the owner does, since only it has the socket and the clock: after closed(), end the socket
// (end, not destroy: the GOAWAY must leave); stop reading while the socket's write buffer is over
// its limit (a peer that never reads cannot make answers to its PINGs and SETTINGS pile up); time
// out idle connections, streams whose window stays shut, and a peer that never sends its SETTINGS.
import { HpackDecoder, HpackError } from '../hpack/decoder.js';
import { HpackEncoder } from '../hpack/encoder.js';
import { CLIENT_PREFACE } from '../preface.js';
import {
  DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Flag, FRAME_HEADER, LARGEST_FRAME_SIZE, MAX_WINDOW, Setting, Type,
  errorName, typeName, writeFrameHeader,
} from './frames.js';
import { judgeBlock, type BlockFacts } from './message-rules.js';

/** What the owner of a connection is told. Buffers given are views of the bytes read, and `facts` is reused: valid during the call only. */
export interface H2Events {
  /** A header block on a stream: a request (server side), a response (client side), or trailers. */
  headers(stream: H2Stream, fields: string[], facts: BlockFacts, endStream: boolean): void;
  /** DATA for a stream (`data` may be empty when only `endStream` is news). Give the bytes back with consumed() once passed on. */
  data(stream: H2Stream, data: Buffer, endStream: boolean): void;
  /** The stream ended without finishing: reset by the peer, or by this side (malformed, refused, flow control). */
  reset(stream: H2Stream, code: number, byPeer: boolean, why: string): void;
  /** The stream's queued DATA went out (its window opened): more may be sent. */
  writable?(stream: H2Stream): void;
  /** The stream ended whole, both ways (not reset): it is forgotten. */
  done?(stream: H2Stream): void;
  /** The peer's SETTINGS were applied (its SETTINGS_MAX_CONCURRENT_STREAMS, undefined: none said). */
  settings?(maxConcurrentStreams: number | undefined): void;
  /** The peer sent GOAWAY: streams above `lastStream` were not processed and may go elsewhere. */
  goaway?(lastStream: number, code: number): void;
  /** The connection is over (`error`: why, when this side or the peer ended it with an error). Every stream was reset first. */
  closed(error: H2ConnectionError | undefined): void;
}

/** The connection broke a rule of the protocol (or this side's limits): GOAWAY with `code` was sent. */
export class H2ConnectionError extends Error {
  constructor(readonly code: number, why: string, readonly byPeer = false) {
    super(`HTTP/2 connection error ${errorName(code)}: ${why}`);
  }
}

export interface H2Settings {
  /** SETTINGS_MAX_CONCURRENT_STREAMS this side allows the peer to open (servers). */
  readonly maxConcurrentStreams: number;
  /** SETTINGS_INITIAL_WINDOW_SIZE this side advertises: what one stream may have in flight to it. */
  readonly streamWindow: number;
  /** The connection's receive window (raised from 65,535 at the start). */
  readonly connectionWindow: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE: a decoded header list above it refuses its stream. */
  readonly maxHeaderListSize: number;
}

export const DEFAULT_SETTINGS: H2Settings = {
  maxConcurrentStreams: 256,
  streamWindow: 65_535,
  connectionWindow: 1 << 20,
  maxHeaderListSize: 64 * 1024,
};

/** CONTINUATION frames one header block may take (nghttp2's cap since CVE-2024-27983 is 8). */
const MAX_CONTINUATIONS = 8;
/** Control frames (PING, SETTINGS, PRIORITY) and empty DATA frames a peer may send per second. */
const MAX_CHEAP_FRAMES_PER_SECOND = 1000;
/** Settings one SETTINGS frame may hold (nghttp2's default cap: 32; each INITIAL_WINDOW_SIZE would walk every stream). */
const MAX_SETTINGS = 32;
/** Streams the peer may reset at once, and how many a second after that (nghttp2's defaults, CVE-2023-44487). */
const RESET_BURST = 1000;
const RESET_RATE = 33;
/** Streams refused over the concurrency cap before the connection is closed. */
const MAX_REFUSED_STREAMS = 100;
/** Streams opened before the share of early resets is judged; closed when more than half were. */
const MIN_STREAMS_FOR_RESET_CHECK = 100;
/** Where frames are written before a flush (a new slab when full: bytes handed to a write are never overwritten). */
const SLAB = 64 * 1024;

const enum State { Open, HalfClosedRemote, HalfClosedLocal, Closed }

export class H2Stream {
  /** The owner's (the exchange this stream belongs to). */
  ctx: unknown = undefined;
  /** What this side may still send on it (the peer's window), and what the peer may still send. */
  sendWindow: number;
  recvWindow: number;
  /** Bytes passed on (consumed) and not yet given back to the peer with WINDOW_UPDATE. */
  credit = 0;
  state = State.Open;
  /** DATA waiting for window, and whether END_STREAM follows it. */
  queue: Buffer[] | undefined = undefined;
  queued = 0;
  queuedEnd = false;
  /** Trailers sent while DATA waited: they go after it. */
  trailers: readonly string[] | undefined = undefined;
  /** A request's or response's content-length (-1: none) and the DATA bytes received against it. */
  expect = -1;
  received = 0;
  /** A message's header block arrived (the next one is trailers, or a final response after a 1xx). */
  headed = false;
  /** This side sent its headers (a server: the response began: a reset after it is no early one). */
  answered = false;
  /** A request this side sent was HEAD: its response's content-length says nothing of its DATA. */
  head = false;

  constructor(readonly id: number, sendWindow: number, recvWindow: number) {
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }

  /** Both sides ended it (or it was reset). */
  get closed(): boolean {
    return this.state === State.Closed;
  }
}

export class H2Connection {
  readonly streams = new Map<number, H2Stream>();
  /** The peer's settings as they apply to what this side sends. */
  private peerMaxFrame = DEFAULT_MAX_FRAME_SIZE;
  private peerStreamWindow = DEFAULT_WINDOW;
  private peerMaxStreams = Number.POSITIVE_INFINITY;
  private sendWindow = DEFAULT_WINDOW;
  private recvWindow = DEFAULT_WINDOW;
  private recvCredit = 0;
  private readonly decoder: HpackDecoder;
  private readonly encoder = new HpackEncoder();
  /** Bytes of a frame cut by the end of a read, gathered in a buffer of the frame's size (`partialFill` of them so far). */
  private partial: Buffer | undefined;
  private partialFill = 0;
  private prefaceLeft: number;
  private sawSettings = false;
  /** The stream whose header block is being assembled (0: none), its fragments and its frame's flags. */
  private blockStream = 0;
  private block: Buffer[] = [];
  private blockBytes = 0;
  private blockFrames = 0;
  private blockEndStream = false;
  /** Why the block's stream is refused whatever the block holds (a HEADERS frame that broke a stream rule). */
  private blockRefuse: string | undefined;
  /** Highest stream id the peer opened, and the next id this side opens. */
  private lastPeerStream = 0;
  private nextStream: number;
  private goawaySent = false;
  private goawayReceived = false;
  private done = false;
  /** Counters of the defences. */
  private opened = 0;
  private earlyResets = 0;
  private refused = 0;
  private cheapFrames = 0;
  private cheapSince = 0;
  private resetTokens = RESET_BURST;
  private resetAt = 0;
  /** Streams with DATA queued for window. */
  private readonly blocked = new Set<H2Stream>();
  /** Output: the slab frames are written into, the part of it not yet handed to `write`, and larger buffers between. */
  private slab = Buffer.allocUnsafe(SLAB);
  private slabStart = 0;
  private slabEnd = 0;
  private out: Buffer[] = [];
  private flushQueued = false;
  private readonly facts: BlockFacts = { contentLength: -1, status: 0, connect: false, informational: false };
  private readonly flushBound = (): void => this.flush();

  constructor(
    readonly server: boolean,
    private readonly write: (chunks: Buffer[]) => void,
    private readonly events: H2Events,
    private readonly settings: H2Settings = DEFAULT_SETTINGS,
  ) {
    // A stream window below the RFC's initial one would be enforced before the peer has our SETTINGS.
    if (settings.streamWindow < DEFAULT_WINDOW || settings.streamWindow > MAX_WINDOW) throw new RangeError(`a stream window of ${settings.streamWindow} (65,535 to 2^31-1)`);
    this.decoder = new HpackDecoder(server, undefined, true);
    this.prefaceLeft = server ? CLIENT_PREFACE.length : 0;
    this.nextStream = server ? 2 : 1;
    if (!server) this.put(CLIENT_PREFACE);
    this.sendSettings();
    if (settings.connectionWindow > DEFAULT_WINDOW) {
      this.windowUpdate(0, settings.connectionWindow - DEFAULT_WINDOW);
      this.recvWindow = settings.connectionWindow;
    }
  }

  /** Streams open now (both sides' not yet closed). */
  get openStreams(): number {
    return this.streams.size;
  }

  /** Streams with DATA waiting for window (what the owner holds for a peer that does not read). */
  get waitingStreams(): number {
    return this.blocked.size;
  }

  /** Whether the connection can take a new stream from this side (client): not closing, below the peer's cap. */
  get canOpen(): boolean {
    return !this.done && !this.goawayReceived && !this.goawaySent && this.streams.size < this.peerMaxStreams && this.nextStream < 2 ** 31;
  }

  // ---- receiving

  /** Bytes read from the peer (the buffer may be reused after this returns). */
  receive(chunk: Buffer): void {
    if (this.done) return;
    let buf = chunk;
    if (this.partial !== undefined) {
      // Filled up to the whole frame (its header said how long), never copied again per read.
      const want = this.partial.length - this.partialFill;
      const take = Math.min(want, chunk.length);
      chunk.copy(this.partial, this.partialFill, 0, take);
      this.partialFill += take;
      if (take < want) return;
      const whole = this.partial;
      this.partial = undefined;
      buf = take === chunk.length ? whole : Buffer.concat([whole, chunk.subarray(take)]);
    }
    try {
      let at = 0;
      if (this.prefaceLeft > 0) at = this.readPreface(buf);
      const end = buf.length;
      while (at >= 0 && end - at >= FRAME_HEADER) {
        const length = (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!;
        if (length > DEFAULT_MAX_FRAME_SIZE) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `a ${typeName(buf[at + 3]!)} frame of ${length} bytes`);
        if (end - at < FRAME_HEADER + length) break;
        const type = buf[at + 3]!;
        const flags = buf[at + 4]!;
        const stream = buf.readUInt32BE(at + 5) & 0x7fffffff;
        const start = at + FRAME_HEADER;
        at = start + length;
        this.frame(type, flags, stream, buf, start, at);
        if (this.done) return;
      }
      if (at >= 0 && at < end) this.keepPartial(buf.subarray(at));
    } catch (err) {
      if (err instanceof H2ConnectionError) this.fail(err);
      else if (err instanceof HpackError) this.fail(new H2ConnectionError(ErrorCode.COMPRESSION_ERROR, err.message));
      else throw err;
    }
  }

  /** Keeps the start of a frame: a buffer of the whole frame's size when its header is in, else of the header's. */
  private keepPartial(rest: Buffer): void {
    const size = rest.length >= FRAME_HEADER ? FRAME_HEADER + ((rest[0]! << 16) | (rest[1]! << 8) | rest[2]!) : FRAME_HEADER;
    this.partial = Buffer.allocUnsafe(size);
    rest.copy(this.partial);
    this.partialFill = rest.length;
  }

  /** The socket ended or failed: every stream is reset, the owner told. */
  end(error?: H2ConnectionError): void {
    if (this.done) return;
    this.flush(); // what this read made (acknowledgements, a GOAWAY) leaves before the owner ends the socket
    this.done = true;
    for (const s of [...this.streams.values()]) this.closeStream(s, ErrorCode.CANCEL, error?.byPeer ?? true, error?.message ?? 'the connection closed');
    this.events.closed(error);
  }

  private readPreface(buf: Buffer): number {
    const have = Math.min(this.prefaceLeft, buf.length);
    const from = CLIENT_PREFACE.length - this.prefaceLeft;
    if (buf.compare(CLIENT_PREFACE, from, from + have, 0, have) !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'not the client preface');
    this.prefaceLeft -= have;
    return have;
  }

  /** One frame: its payload is `buf` from `start` to `end` (a view is made only for the frames that keep or pass one on). */
  private frame(type: number, flags: number, id: number, buf: Buffer, start: number, end: number): void {
    if (!this.sawSettings && type !== Type.SETTINGS) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `${typeName(type)} before the peer's SETTINGS`);
    if (this.blockStream !== 0 && (type !== Type.CONTINUATION || id !== this.blockStream)) {
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `${typeName(type)} in the middle of a header block`);
    }
    // The frequent frames are read where they lie: no view of the whole payload for them.
    switch (type) {
      case Type.HEADERS: this.onHeaders(flags, id, buf, start, end); return;
      case Type.DATA: this.onData(flags, id, buf, start, end); return;
      case Type.WINDOW_UPDATE: this.onWindowUpdate(id, buf, start, end); return;
    }
    const payload = buf.subarray(start, end);
    switch (type) {
      case Type.CONTINUATION: this.onContinuation(flags, id, payload); return;
      case Type.PRIORITY:
        if (id === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        if (payload.length !== 5) this.streamError(id, ErrorCode.FRAME_SIZE_ERROR, 'a PRIORITY frame not of 5 bytes');
        this.cheap();
        return;
      case Type.RST_STREAM: this.onReset(id, payload); return;
      case Type.SETTINGS: this.onSettings(flags, id, payload); return;
      case Type.PUSH_PROMISE: throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PUSH_PROMISE (push is disabled)');
      case Type.PING:
        if (id !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PING on a stream');
        if (payload.length !== 8) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a PING frame not of 8 bytes');
        this.cheap();
        if ((flags & Flag.ACK) === 0) this.frameOut(Type.PING, Flag.ACK, 0, payload);
        return;
      case Type.GOAWAY: this.onGoaway(id, payload); return;
      default: return; // unknown types are ignored (RFC 9113 4.1)
    }
  }

  /** One more control frame or empty DATA frame: too many in a second ends the connection (floods). */
  private cheap(): void {
    if (++this.cheapFrames <= MAX_CHEAP_FRAMES_PER_SECOND) return;
    const now = performance.now();
    if (now - this.cheapSince >= 1000) {
      this.cheapSince = now;
      this.cheapFrames = 1;
      return;
    }
    throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `more than ${MAX_CHEAP_FRAMES_PER_SECOND} control or empty DATA frames in a second`);
  }

  private onSettings(flags: number, id: number, p: Buffer): void {
    if (id !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if ((flags & Flag.ACK) !== 0) {
      if (p.length !== 0) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a SETTINGS acknowledgement with a payload');
      this.cheap();
      return;
    }
    if (p.length % 6 !== 0) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a SETTINGS frame not a multiple of 6 bytes');
    if (p.length > MAX_SETTINGS * 6) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `a SETTINGS frame of more than ${MAX_SETTINGS} settings`);
    if (this.sawSettings) this.cheap();
    this.sawSettings = true;
    let window = -1;
    for (let i = 0; i < p.length; i += 6) {
      const key = p.readUInt16BE(i);
      const value = p.readUInt32BE(i + 2);
      switch (key) {
        case Setting.HEADER_TABLE_SIZE: this.encoder.setPeerTableSize(value); break;
        case Setting.ENABLE_PUSH:
          if (value > 1 || (value === 1 && !this.server)) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH ${value}`);
          break;
        case Setting.MAX_CONCURRENT_STREAMS: this.peerMaxStreams = value; break;
        case Setting.INITIAL_WINDOW_SIZE:
          if (value > MAX_WINDOW) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, `SETTINGS_INITIAL_WINDOW_SIZE ${value}`);
          window = value; // the last one of the frame applies, with one walk over the streams
          break;
        case Setting.MAX_FRAME_SIZE:
          if (value < DEFAULT_MAX_FRAME_SIZE || value > LARGEST_FRAME_SIZE) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${value}`);
          this.peerMaxFrame = value;
          break;
        default: break; // MAX_HEADER_LIST_SIZE is advisory; unknown settings are ignored
      }
    }
    if (window >= 0 && window !== this.peerStreamWindow) {
      const delta = window - this.peerStreamWindow;
      this.peerStreamWindow = window;
      for (const st of this.streams.values()) {
        st.sendWindow += delta;
        if (st.sendWindow > MAX_WINDOW) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'a stream window above 2^31-1');
      }
    }
    this.frameOut(Type.SETTINGS, Flag.ACK, 0, undefined);
    if (this.blocked.size > 0) this.drainBlocked();
    this.events.settings?.(this.peerMaxStreams === Number.POSITIVE_INFINITY ? undefined : this.peerMaxStreams);
  }

  /** A WINDOW_UPDATE, its payload `buf` from `from` to `to`. */
  private onWindowUpdate(id: number, buf: Buffer, from: number, to: number): void {
    if (to - from !== 4) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a WINDOW_UPDATE frame not of 4 bytes');
    const inc = buf.readUInt32BE(from) & 0x7fffffff;
    if (id === 0) {
      if (inc === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a connection WINDOW_UPDATE of 0');
      this.sendWindow += inc;
      if (this.sendWindow > MAX_WINDOW) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'the connection window above 2^31-1');
      if (this.blocked.size > 0) this.drainBlocked();
      return;
    }
    const s = this.streams.get(id);
    if (s === undefined) {
      this.checkKnown(id, 'WINDOW_UPDATE');
      return;
    }
    if (inc === 0) {
      this.streamError(id, ErrorCode.PROTOCOL_ERROR, 'a stream WINDOW_UPDATE of 0');
      return;
    }
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) {
      this.streamError(id, ErrorCode.FLOW_CONTROL_ERROR, 'a stream window above 2^31-1');
      return;
    }
    if (s.queue !== undefined) this.drain(s);
  }

  private onReset(id: number, p: Buffer): void {
    if (id === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
    if (p.length !== 4) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a RST_STREAM frame not of 4 bytes');
    const s = this.streams.get(id);
    if (s === undefined) {
      this.checkKnown(id, 'RST_STREAM');
      return;
    }
    if (this.server && !s.answered) this.earlyReset();
    this.resetRate();
    this.closeStream(s, p.readUInt32BE(0), true, 'reset by the peer');
  }

  private onGoaway(id: number, p: Buffer): void {
    if (id !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'GOAWAY on a stream');
    if (p.length < 8) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a GOAWAY frame under 8 bytes');
    this.cheap();
    const last = p.readUInt32BE(0) & 0x7fffffff;
    const code = p.readUInt32BE(4);
    this.goawayReceived = true;
    // The owner first: a stream refused below may be sent again at once, and must not find this
    // connection still offered for new streams.
    this.events.goaway?.(last, code);
    // Streams this side opened above `last` were never processed: reset so their owners may retry them.
    for (const s of this.streams.values()) {
      if (s.id > last && (s.id & 1) === (this.server ? 0 : 1)) this.closeStream(s, ErrorCode.REFUSED_STREAM, true, 'not processed (GOAWAY)');
    }
    if (code !== ErrorCode.NO_ERROR) this.end(new H2ConnectionError(code, `GOAWAY from the peer${p.length > 8 ? `: ${p.toString('latin1', 8, Math.min(p.length, 136))}` : ''}`, true));
  }

  /** A HEADERS frame, its payload `p` from `from` to `to`. */
  private onHeaders(flags: number, id: number, p: Buffer, from: number, to: number): void {
    if (id === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS on stream 0');
    let refuse: string | undefined;
    let start = from;
    let end = to;
    if ((flags & Flag.PADDED) !== 0) {
      if (to - from < 1) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a padded HEADERS frame without its pad length');
      end -= p[from]!;
      start = from + 1;
    }
    if ((flags & Flag.PRIORITY) !== 0) {
      if (end - start < 5) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a HEADERS frame too short for its priority');
      if ((p.readUInt32BE(start) & 0x7fffffff) === id) refuse = 'a stream depending on itself';
      start += 5;
    }
    if (end < start) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'padding longer than the HEADERS frame');
    const endStream = (flags & Flag.END_STREAM) !== 0;
    if ((flags & Flag.END_HEADERS) !== 0) {
      this.headerBlock(id, p, start, end, endStream, refuse);
      return;
    }
    this.blockRefuse = refuse;
    this.blockStream = id;
    this.block = [Buffer.from(p.subarray(start, end))];
    this.blockBytes = end - start;
    this.blockFrames = 0;
    this.blockEndStream = endStream;
  }

  private onContinuation(flags: number, id: number, p: Buffer): void {
    if (this.blockStream === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'CONTINUATION without HEADERS');
    this.blockBytes += p.length;
    if (++this.blockFrames > MAX_CONTINUATIONS || this.blockBytes > this.settings.maxHeaderListSize) {
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `a header block of more than ${MAX_CONTINUATIONS} CONTINUATION frames or ${this.settings.maxHeaderListSize} bytes`);
    }
    this.block.push(Buffer.from(p));
    if ((flags & Flag.END_HEADERS) === 0) return;
    const block = Buffer.concat(this.block, this.blockBytes);
    this.blockStream = 0;
    this.block = [];
    this.headerBlock(id, block, 0, block.length, this.blockEndStream, this.blockRefuse);
  }

  /** A whole header block for stream `id` (`block` from `start` to `end`): decoded (always: the HPACK table must follow), judged, handed on. */
  private headerBlock(id: number, block: Buffer, start: number, end: number, endStream: boolean, refuse?: string): void {
    const fields: string[] = [];
    const limit = this.settings.maxHeaderListSize;
    const fault = this.decoder.decodeList(block, fields, limit, start, end);
    const size = this.decoder.listSize;
    let s = this.streams.get(id);
    if (refuse !== undefined) {
      // Decoded all the same (the table must follow the peer); the stream is not opened, or is ended.
      if (s === undefined) {
        if ((id & 1) === (this.server ? 1 : 0) && id > this.lastPeerStream) {
          this.lastPeerStream = id;
          if (this.server) this.earlyReset();
        }
        this.rstOut(id, ErrorCode.PROTOCOL_ERROR);
      } else {
        this.malformed(s, refuse);
      }
      return;
    }
    if (s === undefined) {
      s = this.openByPeer(id);
      if (s === undefined) return;
    } else if (s.state === State.HalfClosedRemote || s.state === State.Closed) {
      this.streamError(id, ErrorCode.STREAM_CLOSED, 'HEADERS after the end of the stream');
      return;
    }
    const kind = !s.headed ? (this.server ? 'request' : 'response') : 'trailers';
    if (kind === 'trailers' && !endStream) {
      this.malformed(s, 'trailers without END_STREAM');
      return;
    }
    if (size > limit) {
      this.malformed(s, `a header list of ${size} bytes, above ${limit}`);
      return;
    }
    const facts = this.facts;
    // The decoder judged each field's name and value (8.2.1) as it decoded it; the block's rules remain.
    const why = fault !== undefined ? `${fault}` : judgeBlock(fields, kind, facts, true);
    if (why !== undefined) {
      this.malformed(s, why);
      return;
    }
    if (kind === 'trailers') {
      if (s.expect >= 0 && s.received !== s.expect) {
        this.malformed(s, `content-length ${s.expect} but ${s.received} bytes of DATA`);
        return;
      }
    } else if (facts.informational) {
      if (endStream) {
        this.malformed(s, 'a 1xx response ending the stream');
        return;
      }
    } else {
      s.headed = true;
      // A response to HEAD, and 204 and 304, have no content whatever their content-length says.
      // Their DATA is none at all (expect 0), whatever content-length says; any byte is malformed.
      s.expect = this.server || (!s.head && facts.status !== 204 && facts.status !== 304) ? facts.contentLength : 0;
      if (endStream && s.expect > 0) {
        this.malformed(s, `content-length ${s.expect} but no DATA`);
        return;
      }
    }
    if (endStream) this.remoteEnded(s);
    this.events.headers(s, fields, facts, endStream);
    if (endStream && s.closed) this.finished(s);
  }

  /** A new stream the peer opens with HEADERS; undefined when it is refused (REFUSED_STREAM) or a frame for a closed one. */
  private openByPeer(id: number): H2Stream | undefined {
    if (!this.server) {
      // A server opens nothing here (push is off): a late block for a stream of ours already closed
      // is dropped (its block was decoded), anything else is a protocol error.
      if ((id & 1) === 1 && id < this.nextStream) return undefined;
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on stream ${id}, which this side never opened`);
    }
    if ((id & 1) !== 1) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS opening stream ${id}, not the peer's to open`);
    if (id <= this.lastPeerStream) {
      // A closed stream: after this side reset it, frames may still be on their way (RFC 9113 5.4.2).
      return undefined;
    }
    this.lastPeerStream = id;
    if (this.goawaySent) return undefined;
    if (this.streams.size >= this.settings.maxConcurrentStreams) {
      this.rstOut(id, ErrorCode.REFUSED_STREAM);
      if (++this.refused > MAX_REFUSED_STREAMS) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `more than ${MAX_REFUSED_STREAMS} streams over the concurrency cap`);
      return undefined;
    }
    this.opened++;
    const s = new H2Stream(id, this.peerStreamWindow, this.settings.streamWindow);
    this.streams.set(id, s);
    return s;
  }

  /** A DATA frame, its payload `p` from `from` to `to` (one view made: of its data, without padding). */
  private onData(flags: number, id: number, p: Buffer, from: number, to: number): void {
    if (id === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
    const length = to - from;
    this.recvWindow -= length;
    if (this.recvWindow < 0) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'DATA beyond the connection window');
    // The connection's window is given back at once: the streams' windows are what holds a peer back.
    this.creditConnection(length);
    let start = from;
    let end = to;
    if ((flags & Flag.PADDED) !== 0) {
      if (length < 1) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'a padded DATA frame without its pad length');
      end -= p[from]!;
      start = from + 1;
      if (end < start) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'padding longer than the DATA frame');
    }
    const endStream = (flags & Flag.END_STREAM) !== 0;
    const s = this.streams.get(id);
    if (s === undefined) {
      this.checkKnown(id, 'DATA');
      return;
    }
    if (s.state === State.HalfClosedRemote || s.state === State.Closed) {
      this.streamError(id, ErrorCode.STREAM_CLOSED, 'DATA after the end of the stream');
      return;
    }
    if (!s.headed) {
      this.malformed(s, 'DATA before the header block');
      return;
    }
    s.recvWindow -= length;
    if (s.recvWindow < 0) {
      this.streamError(id, ErrorCode.FLOW_CONTROL_ERROR, 'DATA beyond the stream window');
      return;
    }
    const data = p.subarray(start, end);
    if (data.length === 0 && !endStream) this.cheap();
    s.received += data.length;
    // Padding is flow controlled but never handed on: its share of the window comes back now.
    if (data.length !== length) this.creditStream(s, length - data.length);
    if (s.expect >= 0 && (s.received > s.expect || (endStream && s.received !== s.expect))) {
      this.malformed(s, `content-length ${s.expect} but ${s.received}${endStream ? '' : ' or more'} bytes of DATA`);
      return;
    }
    if (endStream) this.remoteEnded(s);
    this.events.data(s, data, endStream);
    if (endStream && s.closed) this.finished(s);
  }

  /** A frame for a stream not open: a closed one is tolerated (5.1), an idle one is a protocol error. */
  private checkKnown(id: number, what: string): void {
    const mine = (id & 1) === (this.server ? 0 : 1);
    if (mine ? id >= this.nextStream : id > this.lastPeerStream) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `${what} on idle stream ${id}`);
  }

  // ---- the owner's side

  /** Opens a stream with a request (client side). The stream, or undefined when the connection cannot take one now (canOpen). */
  request(fields: readonly string[], endStream: boolean, head = false): H2Stream | undefined {
    if (!this.canOpen || this.server) return undefined;
    const id = this.nextStream;
    this.nextStream += 2;
    const s = new H2Stream(id, this.peerStreamWindow, this.settings.streamWindow);
    s.head = head;
    this.streams.set(id, s);
    this.headersOut(s, fields, endStream);
    return s;
  }

  /** Sends a header block on `s`: a response (server side), or trailers (with endStream). */
  headers(s: H2Stream, fields: readonly string[], endStream: boolean): void {
    if (s.state === State.Closed || s.state === State.HalfClosedLocal || this.done) return;
    if (s.queue !== undefined) { // trailers behind DATA waiting for window
      s.trailers = fields;
      s.queuedEnd = true;
      return;
    }
    this.headersOut(s, fields, endStream);
  }

  /**
   * Sends DATA on `s` within the windows; what does not fit waits for WINDOW_UPDATE (copied). Returns
   * the bytes now waiting on the stream: the owner stops reading its source while there are some.
   */
  data(s: H2Stream, data: Buffer, endStream: boolean): number {
    if (s.state === State.Closed || s.state === State.HalfClosedLocal || this.done) return 0;
    if (s.queue !== undefined) {
      if (data.length > 0) s.queue.push(Buffer.from(data));
      s.queued += data.length;
      s.queuedEnd = endStream;
      return s.queued;
    }
    let at = 0;
    const n = data.length;
    while (at < n) {
      const room = Math.min(this.sendWindow, s.sendWindow, this.peerMaxFrame);
      if (room <= 0) break;
      const take = Math.min(room, n - at);
      this.sendWindow -= take;
      s.sendWindow -= take;
      const last = at + take === n;
      this.frameOut(Type.DATA, last && endStream ? Flag.END_STREAM : 0, s.id, data.subarray(at, at + take));
      at += take;
    }
    if (at < n) {
      s.queue = [Buffer.from(data.subarray(at))];
      s.queued = n - at;
      s.queuedEnd = endStream;
      this.blocked.add(s);
      return s.queued;
    }
    if (n === 0) this.frameOut(Type.DATA, endStream ? Flag.END_STREAM : 0, s.id, undefined);
    if (endStream) this.localEnded(s);
    return 0;
  }

  /** `n` bytes of DATA received on `s` were passed on: the peer may send that much more. */
  consumed(s: H2Stream, n: number): void {
    if (s.state !== State.Closed && s.state !== State.HalfClosedRemote) this.creditStream(s, n);
  }

  /** Resets `s` (CANCEL when the owner gives it up, INTERNAL_ERROR...). */
  reset(s: H2Stream, code: number, why = 'reset by this side'): void {
    if (s.state === State.Closed) return;
    this.rstOut(s.id, code);
    this.closeStream(s, code, false, why);
  }

  /** Sends GOAWAY (NO_ERROR: a drain; streams open go on, new ones are refused) and, with an error, ends the connection. */
  goaway(code = ErrorCode.NO_ERROR, why?: string): void {
    if (this.done) return;
    if (!this.goawaySent) {
      this.goawaySent = true;
      const debug = why === undefined ? undefined : Buffer.from(why.slice(0, 128), 'latin1');
      const p = Buffer.allocUnsafe(8 + (debug?.length ?? 0));
      p.writeUInt32BE(this.lastPeerStream, 0);
      p.writeUInt32BE(code, 4);
      debug?.copy(p, 8);
      this.frameOut(Type.GOAWAY, 0, 0, p);
      this.flush();
    }
    if (code !== ErrorCode.NO_ERROR) this.end(new H2ConnectionError(code, why ?? errorName(code)));
  }

  /** Whether a drain (GOAWAY sent or received) left no stream open: the owner may close the socket. */
  get drained(): boolean {
    return (this.goawaySent || this.goawayReceived) && this.streams.size === 0;
  }

  // ---- stream states

  private remoteEnded(s: H2Stream): void {
    s.state = s.state === State.HalfClosedLocal ? State.Closed : State.HalfClosedRemote;
  }

  private localEnded(s: H2Stream): void {
    s.state = s.state === State.HalfClosedRemote ? State.Closed : State.HalfClosedLocal;
    if (s.state === State.Closed) this.finished(s);
  }

  /** A stream ended both ways: forgotten, its owner told (once: a stream forgotten already is not). */
  private finished(s: H2Stream): void {
    if (!this.streams.has(s.id)) return;
    this.forget(s);
    this.events.done?.(s);
  }

  private forget(s: H2Stream): void {
    this.streams.delete(s.id);
    this.blocked.delete(s);
  }

  private closeStream(s: H2Stream, code: number, byPeer: boolean, why: string): void {
    if (s.state === State.Closed && !this.streams.has(s.id)) return;
    this.blocked.delete(s);
    s.trailers = undefined;
    s.state = State.Closed;
    s.queue = undefined;
    s.queued = 0;
    this.forget(s);
    this.events.reset(s, code, byPeer, why);
  }

  /** The peer's message on `s` is malformed: the stream is reset (PROTOCOL_ERROR), counted as a reset the peer made us send. */
  private malformed(s: H2Stream, why: string): void {
    if (this.server && !s.answered) this.earlyReset();
    this.rstOut(s.id, ErrorCode.PROTOCOL_ERROR);
    this.closeStream(s, ErrorCode.PROTOCOL_ERROR, false, `malformed: ${why}`);
  }

  private streamError(id: number, code: number, why: string): void {
    const s = this.streams.get(id);
    if (s === undefined) {
      this.checkKnown(id, typeName(Type.RST_STREAM)); // RST_STREAM on an idle stream is not allowed: a connection error then
      this.rstOut(id, code);
      return;
    }
    if (this.server && !s.answered) this.earlyReset();
    this.rstOut(id, code);
    this.closeStream(s, code, false, why);
  }

  /** Streams the peer resets, answered or not: a burst of RESET_BURST, then RESET_RATE a second (as nghttp2 by default). */
  private resetRate(): void {
    const now = performance.now();
    this.resetTokens = Math.min(RESET_BURST, this.resetTokens + ((now - this.resetAt) * RESET_RATE) / 1000);
    this.resetAt = now;
    if (--this.resetTokens < 0) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `streams reset faster than ${RESET_RATE} a second after a burst of ${RESET_BURST}`);
  }

  private earlyReset(): void {
    this.earlyResets++;
    if (this.opened >= MIN_STREAMS_FOR_RESET_CHECK && this.earlyResets * 2 > this.opened) {
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `${this.earlyResets} of ${this.opened} streams reset before an answer (rapid reset)`);
    }
  }

  private fail(err: H2ConnectionError): void {
    this.goaway(err.code, err.message.replace(/^HTTP\/2 connection error [A-Z_0-9]+: /, ''));
  }

  // ---- flow control

  private creditConnection(n: number): void {
    this.recvCredit += n;
    if (this.recvCredit >= this.settings.connectionWindow >> 1) {
      this.recvWindow += this.recvCredit;
      this.windowUpdate(0, this.recvCredit);
      this.recvCredit = 0;
    }
  }

  private creditStream(s: H2Stream, n: number): void {
    // Given back by halves of the window, as nghttp2 does: one WINDOW_UPDATE per half window of DATA.
    s.credit += n;
    if (s.credit > 0 && s.credit >= this.settings.streamWindow >> 1) {
      s.recvWindow += s.credit;
      this.windowUpdate(s.id, s.credit);
      s.credit = 0;
    }
  }

  private drainBlocked(): void {
    for (const s of [...this.blocked]) {
      if (this.sendWindow <= 0) return;
      // An owner's callback during this walk may have reset one (its queue gone).
      if (s.queue !== undefined) this.drain(s);
    }
  }

  private drain(s: H2Stream): void {
    const queue = s.queue!;
    while (queue.length > 0) {
      const room = Math.min(this.sendWindow, s.sendWindow, this.peerMaxFrame);
      if (room <= 0) return;
      const head = queue[0]!;
      const take = Math.min(room, head.length);
      this.sendWindow -= take;
      s.sendWindow -= take;
      s.queued -= take;
      const last = take === head.length && queue.length === 1;
      this.frameOut(Type.DATA, last && s.queuedEnd && s.trailers === undefined ? Flag.END_STREAM : 0, s.id, head.subarray(0, take));
      if (take === head.length) queue.shift();
      else queue[0] = head.subarray(take);
    }
    s.queue = undefined;
    this.blocked.delete(s);
    // END_STREAM went with the last frame when the queue ended the stream, or goes with the trailers.
    if (s.trailers !== undefined) {
      const trailers = s.trailers;
      s.trailers = undefined;
      this.headersOut(s, trailers, true);
    } else if (s.queuedEnd) {
      this.localEnded(s);
    } else {
      this.events.writable?.(s);
    }
  }

  // ---- writing

  private sendSettings(): void {
    const st = this.settings;
    const entries: Array<[number, number]> = [
      [Setting.MAX_CONCURRENT_STREAMS, this.server ? st.maxConcurrentStreams : 0],
      [Setting.INITIAL_WINDOW_SIZE, st.streamWindow],
      [Setting.MAX_HEADER_LIST_SIZE, st.maxHeaderListSize],
    ];
    if (!this.server) entries[0] = [Setting.ENABLE_PUSH, 0];
    const p = Buffer.allocUnsafe(entries.length * 6);
    entries.forEach(([k, v], i) => {
      p.writeUInt16BE(k, i * 6);
      p.writeUInt32BE(v, i * 6 + 2);
    });
    this.frameOut(Type.SETTINGS, 0, 0, p);
  }

  private windowUpdate(id: number, n: number): void {
    const at = this.reserve(FRAME_HEADER + 4);
    writeFrameHeader(this.slab, at, 4, Type.WINDOW_UPDATE, 0, id);
    this.slab.writeUInt32BE(n, at + FRAME_HEADER);
    this.queueFlush();
  }

  private rstOut(id: number, code: number): void {
    const at = this.reserve(FRAME_HEADER + 4);
    writeFrameHeader(this.slab, at, 4, Type.RST_STREAM, 0, id);
    this.slab.writeUInt32BE(code, at + FRAME_HEADER);
    this.queueFlush();
  }

  private headersOut(s: H2Stream, fields: readonly string[], endStream: boolean): void {
    if (this.server) s.answered = true;
    const block = this.encoder.encode(fields);
    const max = this.peerMaxFrame;
    let at = 0;
    let type = Type.HEADERS;
    do {
      const take = Math.min(max, block.length - at);
      const last = at + take === block.length;
      const flags = (last ? Flag.END_HEADERS : 0) | (type === Type.HEADERS && endStream ? Flag.END_STREAM : 0);
      this.frameOut(type, flags, s.id, block.subarray(at, at + take));
      at += take;
      type = Type.CONTINUATION;
    } while (at < block.length);
    if (endStream) this.localEnded(s);
  }

  /** Writes one frame (its payload copied) into the output. */
  private frameOut(type: number, flags: number, id: number, payload: Buffer | undefined): void {
    const n = payload === undefined ? 0 : payload.length;
    const at = this.reserve(FRAME_HEADER + n);
    writeFrameHeader(this.slab, at, n, type, flags, id);
    if (n > 0) payload!.copy(this.slab, at + FRAME_HEADER);
    this.queueFlush();
  }

  private put(bytes: Buffer): void {
    const at = this.reserve(bytes.length);
    bytes.copy(this.slab, at);
    this.queueFlush();
  }

  /** Room for `n` bytes at the slab's end: the offset to write them at. */
  private reserve(n: number): number {
    if (this.slabEnd + n > this.slab.length) {
      if (this.slabEnd > this.slabStart) this.out.push(this.slab.subarray(this.slabStart, this.slabEnd));
      this.slab = Buffer.allocUnsafe(Math.max(SLAB, n));
      this.slabStart = 0;
      this.slabEnd = 0;
    }
    const at = this.slabEnd;
    this.slabEnd += n;
    return at;
  }

  private queueFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    queueMicrotask(this.flushBound);
  }

  /** Hands everything written so far to `write` (normally at the end of the turn; at once before a close). */
  flush(): void {
    this.flushQueued = false;
    if (this.done) return;
    if (this.slabEnd > this.slabStart) {
      this.out.push(this.slab.subarray(this.slabStart, this.slabEnd));
      this.slabStart = this.slabEnd;
    }
    if (this.out.length === 0) return;
    const chunks = this.out;
    this.out = [];
    this.write(chunks);
  }
}
