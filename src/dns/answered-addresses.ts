// The addresses a forwarded DNS answer gave for a name (A and AAAA records), read with dns2's
// Packet. The sidecar uses them to know a connection's destination by name: a DestinationRule for
// `*.example.com` then meets a TCP connection to an address the pod resolved as api.example.com.
// Pure; a message that does not parse gives nothing.
import { Packet } from 'dns2';
import { QTYPE } from './wire.js';

export function answeredAddresses(answer: Uint8Array): string[] {
  try {
    const packet = Packet.parse(Buffer.from(answer.buffer, answer.byteOffset, answer.byteLength)) as { answers?: { type: number; address?: string }[] };
    return (packet.answers ?? [])
      .filter((r) => (r.type === QTYPE.A || r.type === QTYPE.AAAA) && typeof r.address === 'string')
      .map((r) => r.address!);
  } catch {
    return [];
  }
}
