// The server name a client asked for in its TLS ClientHello (SNI), read from the TLS socket whose
// handshake this proxy completed: what policy's `connection.sni` matches (Envoy's
// requestedServerName). Node reports `false` for a client that sent none, and a plaintext socket
// has no such field: both are undefined here.
import type { TLSSocket } from 'node:tls';

export function requestedServerName(socket: object): string | undefined {
  const name = (socket as Partial<TLSSocket>).servername;
  return typeof name === 'string' && name !== '' ? name : undefined;
}
