// Istio's HTTP metadata exchange on the data path: the lines this sidecar adds toward a mesh peer
// (requests to an upstream sidecar over mutual TLS, responses to a client sidecar over mutual TLS),
// and the peer's lines taken out of what reaches the application. Made once at start (the pod's
// metadata does not change); the per-request work is only on mesh connections.
import { PEER_METADATA_HEADER, PEER_METADATA_ID_HEADER } from '../metrics/peer-metadata.js';
import type { StructValue } from '../metrics/proto-struct.js';
import { encodeExchangeFrame } from '../metrics/tcp-exchange-frame.js';

export interface PeerExchange {
  /** `x-envoy-peer-metadata: ...\r\nx-envoy-peer-metadata-id: ...\r\n`, for an HTTP/1.1 head. */
  readonly lines: string;
  /** The same as header pairs (HTTP/2), and as a header record (a local answer's). */
  readonly pairs: readonly (readonly [string, string])[];
  readonly headers: Readonly<Record<string, string>>;
  /**
   * The TCP exchange's frame (ALPN `istio-peer-exchange`): the same metadata and id. Undefined: the TCP
   * exchange is neither offered nor selected (PILOT_DISABLE_MX_ALPN).
   */
  readonly frame: Buffer | undefined;
}

export function peerExchangeOf(own: { readonly header: string; readonly id: string; readonly struct: StructValue }, tcp = true): PeerExchange {
  return {
    frame: tcp ? encodeExchangeFrame(own.struct, own.id) : undefined,
    lines: `${PEER_METADATA_HEADER}: ${own.header}\r\n${PEER_METADATA_ID_HEADER}: ${own.id}\r\n`,
    pairs: [[PEER_METADATA_HEADER, own.header], [PEER_METADATA_ID_HEADER, own.id]],
    headers: { [PEER_METADATA_HEADER]: own.header, [PEER_METADATA_ID_HEADER]: own.id },
  };
}

/** Any peer-metadata line of an HTTP/1 head, whatever its case (the first line never matches: it has no `\n` before it). */
const PEER_LINE = /\nx-envoy-peer-metadata(?:-id)?[ \t]*:[^\n]*(?=\n)/gi;
/** Cheap first look (not global: no lastIndex to carry between calls). */
const PEER_NAME = /\nx-envoy-peer-metadata/i;
const PEER_VALUE = /\nx-envoy-peer-metadata[ \t]*:[ \t]*([^\r\n]*?)[ \t]*\r?(?=\n)/i;

/**
 * A request head (`...\r\n\r\n`) for a mesh upstream: whatever peer-metadata lines the application
 * wrote are dropped (it cannot speak for this sidecar), then this sidecar's lines go before the end.
 */
export function withExchangeLines(head: string, lines: string): string {
  const own = head.slice(0, -2);
  return `${PEER_NAME.test(own) ? own.replace(PEER_LINE, '') : own}${lines}\r\n`;
}

/**
 * A response head's parts (`200 OK\r\nName: value\r\n...`, no final empty line) without its
 * peer-metadata lines, and the peer's `x-envoy-peer-metadata` value; undefined when it has none
 * (the parts go on as they are).
 */
export function takePeerMetadata(parts: readonly Buffer[]): { parts: Buffer[]; value: string | undefined } | undefined {
  const text = parts.length === 1 ? parts[0]!.toString('latin1') : Buffer.concat(parts).toString('latin1');
  if (!PEER_NAME.test(text)) return undefined;
  const value = PEER_VALUE.exec(text)?.[1];
  return { parts: [Buffer.from(text.replace(PEER_LINE, ''), 'latin1')], value: value === '' ? undefined : value };
}

/**
 * An HTTP/2 request's header lines (name, value, ...) for a mesh upstream: the application's
 * peer-metadata lines dropped, this sidecar's added.
 */
export function withExchangePairs(lines: readonly string[], pairs: readonly (readonly [string, string])[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < lines.length; i += 2) {
    const name = lines[i]!;
    if (name.length >= 21 && /^x-envoy-peer-metadata(?:-id)?$/i.test(name)) continue;
    out.push(name, lines[i + 1]!);
  }
  for (const [name, value] of pairs) out.push(name, value);
  return out;
}
