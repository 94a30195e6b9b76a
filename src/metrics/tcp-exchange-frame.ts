// The frame of Istio's TCP metadata exchange (ALPN `istio-peer-exchange`): what each sidecar writes
// first on a mutual TLS connection carried as TCP, before the application's bytes. On the wire:
//   magic        4 bytes, big-endian 0x3D230467
//   data_size    4 bytes, big-endian: the length of what follows
//   data         a google.protobuf.Any: type_url `type.googleapis.com/google.protobuf.Struct`,
//                value: a Struct of two fields, `x-envoy-peer-metadata` (a nested Struct: the node
//                metadata the HTTP header carries in base64) and `x-envoy-peer-metadata-id` (the node id)
// Pure: bytes in, a verdict out; the socket side is src/proxy/tcp/metadata-exchange.ts.
import { PEER_METADATA_HEADER, PEER_METADATA_ID_HEADER } from './peer-metadata.js';
import { decodeStruct, encodeStruct, lengthDelimited, ProtoReader, StructDecodeError, type StructValue } from './proto-struct.js';

export const EXCHANGE_MAGIC = 0x3d230467;
/** Magic and data_size. */
export const EXCHANGE_PREFIX_BYTES = 8;
/**
 * A peer's data larger than this is not read (skipped unread, the peer unknown). Envoy sets no
 * limit; an Istio sidecar's frame is a few hundred bytes, an older one's (all pod labels) a few KiB.
 */
export const MAX_EXCHANGE_DATA_BYTES = 16 * 1024;

const STRUCT_TYPE_URL = 'type.googleapis.com/google.protobuf.Struct';

/** The frame this sidecar writes (made once at start: the pod's metadata does not change). */
export function encodeExchangeFrame(metadata: StructValue, id: string): Buffer {
  // Keys in sorted order, as Envoy's deterministic serialisation writes a map.
  const data = encodeStruct({ [PEER_METADATA_HEADER]: metadata, [PEER_METADATA_ID_HEADER]: id });
  const fields: Buffer[] = [];
  lengthDelimited(0x0a /* 1: type_url */, Buffer.from(STRUCT_TYPE_URL), fields);
  lengthDelimited(0x12 /* 2: value */, data, fields);
  const any = Buffer.concat(fields);
  const prefix = Buffer.alloc(EXCHANGE_PREFIX_BYTES);
  prefix.writeUInt32BE(EXCHANGE_MAGIC, 0);
  prefix.writeUInt32BE(any.length, 4);
  return Buffer.concat([prefix, any]);
}

/** What the bytes read so far from a peer that selected the exchange are. */
export type ExchangeRead =
  /** Not enough yet to say. */
  | { readonly kind: 'incomplete' }
  /** Not a frame (the magic does not match): the bytes are the application's, as they came. */
  | { readonly kind: 'not-exchange' }
  /** A frame announcing more than MAX_EXCHANGE_DATA_BYTES: its `frameBytes` are skipped, the peer unknown. */
  | { readonly kind: 'oversized'; readonly frameBytes: number }
  /**
   * A whole frame of `frameBytes`; `peerKey`: the peer's metadata Struct in base64 (the HTTP header's
   * form, what the metrics key on), undefined when the data does not decode (the frame is dropped all the same).
   */
  | { readonly kind: 'frame'; readonly frameBytes: number; readonly peerKey: string | undefined; readonly id: string | undefined };

const INCOMPLETE: ExchangeRead = Object.freeze({ kind: 'incomplete' });
const NOT_EXCHANGE: ExchangeRead = Object.freeze({ kind: 'not-exchange' });

const MAGIC_BYTES = Buffer.from([0x3d, 0x23, 0x04, 0x67]);

/** Reads the start of what a peer sent (everything read so far, from its first byte). */
export function readExchangeFrame(buf: Buffer): ExchangeRead {
  const seen = Math.min(buf.length, 4);
  // Fewer than four bytes that could begin the magic: wait; anything else is the application's.
  if (buf.compare(MAGIC_BYTES, 0, seen, 0, seen) !== 0) return NOT_EXCHANGE;
  if (buf.length < EXCHANGE_PREFIX_BYTES) return INCOMPLETE;
  const size = buf.readUInt32BE(4);
  const frameBytes = EXCHANGE_PREFIX_BYTES + size;
  if (size > MAX_EXCHANGE_DATA_BYTES) return { kind: 'oversized', frameBytes };
  if (buf.length < frameBytes) return INCOMPLETE;
  const decoded = decodeAny(buf.subarray(EXCHANGE_PREFIX_BYTES, frameBytes));
  return { kind: 'frame', frameBytes, peerKey: decoded?.peerKey, id: decoded?.id };
}

/** The peer's metadata and id from the Any; undefined when it is not an Any of a Struct holding them. */
function decodeAny(any: Buffer): { peerKey: string | undefined; id: string | undefined } | undefined {
  let typeUrl: string | undefined;
  let value: Buffer | undefined;
  try {
    // An Any's two fields, both length-delimited (read as a Struct's they would not be).
    const r = new ProtoReader(any);
    while (r.at < r.end) {
      const tag = r.varint();
      if (tag !== 0x0a && tag !== 0x12) return undefined;
      const [start, end] = r.span();
      if (tag === 0x0a) typeUrl = any.toString('utf8', start, end);
      else value = any.subarray(start, end);
    }
    if (typeUrl !== STRUCT_TYPE_URL || value === undefined) return undefined;
    const data = decodeStruct(value);
    const metadata = data[PEER_METADATA_HEADER];
    const id = data[PEER_METADATA_ID_HEADER];
    return {
      peerKey: metadata !== undefined && typeof metadata !== 'string' ? encodeStruct(metadata).toString('base64') : undefined,
      id: typeof id === 'string' ? id : undefined,
    };
  } catch (err) {
    if (err instanceof StructDecodeError) return undefined;
    throw err;
  }
}
