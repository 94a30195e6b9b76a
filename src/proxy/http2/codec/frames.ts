// HTTP/2 framing (RFC 9113 4 and 6): the frame types, flags, error codes and settings the codec
// uses, and the writing of frame headers. Pure.

export const FRAME_HEADER = 9;

export const enum Type {
  DATA = 0x0,
  HEADERS = 0x1,
  PRIORITY = 0x2,
  RST_STREAM = 0x3,
  SETTINGS = 0x4,
  PUSH_PROMISE = 0x5,
  PING = 0x6,
  GOAWAY = 0x7,
  WINDOW_UPDATE = 0x8,
  CONTINUATION = 0x9,
}

export const enum Flag {
  END_STREAM = 0x1,
  ACK = 0x1,
  END_HEADERS = 0x4,
  PADDED = 0x8,
  PRIORITY = 0x20,
}

/** RFC 9113 7. */
export const enum ErrorCode {
  NO_ERROR = 0x0,
  PROTOCOL_ERROR = 0x1,
  INTERNAL_ERROR = 0x2,
  FLOW_CONTROL_ERROR = 0x3,
  SETTINGS_TIMEOUT = 0x4,
  STREAM_CLOSED = 0x5,
  FRAME_SIZE_ERROR = 0x6,
  REFUSED_STREAM = 0x7,
  CANCEL = 0x8,
  COMPRESSION_ERROR = 0x9,
  CONNECT_ERROR = 0xa,
  ENHANCE_YOUR_CALM = 0xb,
  INADEQUATE_SECURITY = 0xc,
  HTTP_1_1_REQUIRED = 0xd,
}

/** RFC 9113 6.5.2. */
export const enum Setting {
  HEADER_TABLE_SIZE = 0x1,
  ENABLE_PUSH = 0x2,
  MAX_CONCURRENT_STREAMS = 0x3,
  INITIAL_WINDOW_SIZE = 0x4,
  MAX_FRAME_SIZE = 0x5,
  MAX_HEADER_LIST_SIZE = 0x6,
}

/** The frame size every peer must take (SETTINGS_MAX_FRAME_SIZE's initial value). */
export const DEFAULT_MAX_FRAME_SIZE = 16_384;
/** The largest SETTINGS_MAX_FRAME_SIZE a peer may advertise. */
export const LARGEST_FRAME_SIZE = 16_777_215;
/** Both windows' size before any SETTINGS or WINDOW_UPDATE. */
export const DEFAULT_WINDOW = 65_535;
export const MAX_WINDOW = 2 ** 31 - 1;

const NAMES = ['DATA', 'HEADERS', 'PRIORITY', 'RST_STREAM', 'SETTINGS', 'PUSH_PROMISE', 'PING', 'GOAWAY', 'WINDOW_UPDATE', 'CONTINUATION'];
const ERROR_NAMES = ['NO_ERROR', 'PROTOCOL_ERROR', 'INTERNAL_ERROR', 'FLOW_CONTROL_ERROR', 'SETTINGS_TIMEOUT', 'STREAM_CLOSED',
  'FRAME_SIZE_ERROR', 'REFUSED_STREAM', 'CANCEL', 'COMPRESSION_ERROR', 'CONNECT_ERROR', 'ENHANCE_YOUR_CALM', 'INADEQUATE_SECURITY',
  'HTTP_1_1_REQUIRED'];

/** A frame type's name for messages (`type 0x1a` for an extension's). */
export function typeName(type: number): string {
  return NAMES[type] ?? `type 0x${type.toString(16)}`;
}

/** An error code's name for messages. */
export function errorName(code: number): string {
  return ERROR_NAMES[code] ?? `error 0x${code.toString(16)}`;
}

/** Writes a frame header at `at` of `buf`. */
export function writeFrameHeader(buf: Buffer, at: number, length: number, type: number, flags: number, stream: number): void {
  buf[at] = length >>> 16;
  buf[at + 1] = (length >>> 8) & 0xff;
  buf[at + 2] = length & 0xff;
  buf[at + 3] = type;
  buf[at + 4] = flags;
  buf.writeUInt32BE(stream, at + 5);
}
