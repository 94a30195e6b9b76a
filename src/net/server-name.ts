// The server name a TLS client sends (SNI) for the name it expects the server's certificate to hold.
// RFC 6066 §3: a DNS host name, without a trailing dot; IP address literals are not permitted. So a
// client that connects to an address sends no SNI and checks the certificate against the address
// (an IP SAN) or a configured name; the check never depends on what was sent. Go's crypto/tls and
// gRPC's C core do the same. Node sends whatever `servername` it is given, an address included, and
// only warns (DEP0123), so every TLS client here asks this function first.
import { isIP } from 'node:net';

/** The SNI to send for `name` (a DNS name, an address, `[v6]`); undefined: send none. */
export function serverNameIndication(name: string): string | undefined {
  const host = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
  if (isIP(host) !== 0) return undefined;
  const bare = host.endsWith('.') ? host.slice(0, -1) : host;
  return bare === '' ? undefined : bare;
}
