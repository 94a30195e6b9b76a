// What the access log says of a client connection (Envoy's DOWNSTREAM_* operators), read from its
// socket once, when the first request to be logged on it begins: shared by the HTTP/1.x and HTTP/2
// paths, so a connection whose log is off never reads it.
import type { Socket } from 'node:net';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { hostPort, type LoggedDownstream } from '../log/access-record.js';
import type { Endpoint } from './socket-options.js';
import { uriSans, type PeerIdentity } from './tls/peer-identity.js';

/** `dst`: the sidecar's original destination (the gateway has none: its own port is the local side). */
export function loggedDownstream(socket: Socket, dst: Endpoint | undefined, peer: PeerIdentity | undefined): LoggedDownstream {
  return {
    remoteText: hostPort(socket.remoteAddress, socket.remotePort),
    localText: dst ? hostPort(dst.address, dst.port) : hostPort(socket.localAddress, socket.localPort),
    serverName: (socket as Partial<TLSSocket>).servername || undefined,
    peer,
    localUriSan: peer ? uriSans((socket as TLSSocket).getCertificate() as PeerCertificate)[0] : undefined,
  };
}
