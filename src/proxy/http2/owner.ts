// What an HTTP/2 stream needs from the handler that owns its connection (handler.ts), and what it
// knows of the connection: kept apart so exchange.ts does not depend on the handler.
import type { Socket } from 'node:net';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { hostPort, type AccessLogSink, type ListenerRole } from '../../log/access-record.js';
import type { RequestDecider, Verdict } from '../decider.js';
import type { PathNormalization } from '../path-normalization.js';
import type { Endpoint } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import { uriSans, type PeerIdentity } from '../tls/peer-identity.js';
import type { UpstreamMode } from '../upstream.js';
import type { Http1Upstream } from './http1-upstream.js';
import type { Http2UpstreamPool } from './upstream-sessions.js';
import type { PeerExchange } from '../peer-exchange.js';
import type { StandardSeries } from '../standard-series.js';

export interface Http2Owner {
  readonly stats: DirectionStats;
  readonly upstreamMode: UpstreamMode;
  readonly pool: Http2UpstreamPool;
  readonly http1: Http1Upstream;
  /** Undefined: every request to the connection's original destination. */
  readonly decider: RequestDecider | undefined;
  readonly settings: { readonly normalization: PathNormalization };
  /** Read when a stream begins (logNow): undefined or not `on`, nothing is measured or built for a log. */
  readonly accessLog: AccessLogSink | undefined;
  readonly role: ListenerRole;
  /** The sidecar's metadata-exchange headers for mesh peers; undefined: none (the gateway). */
  readonly peerExchange: PeerExchange | undefined;
  /** Where Istio's standard metrics are counted (the reporter's series). */
  readonly standard: StandardSeries;
}

/** One client connection, as its streams see it. */
export interface Http2ConnectionFacts {
  /** The accepted socket (TLS when the client's TLS was terminated): what deciders read the peer from. */
  readonly socket: Socket | TLSSocket;
  readonly dst: Endpoint | undefined;
  readonly defaultVerdict: Verdict;
  readonly peer: PeerIdentity | undefined;
  /** For the access log: read from the socket by describeForLog when the first stream to be logged begins. */
  described: boolean;
  remoteText: string | undefined;
  localText: string | undefined;
  serverName: string | undefined;
  localUriSan: string | undefined;
}

/** The access log if it is on now (the connection's addresses read for it the first time); undefined: off. */
export function logNow(log: AccessLogSink | undefined, conn: Http2ConnectionFacts): AccessLogSink | undefined {
  if (log === undefined || !log.on) return undefined;
  if (!conn.described) describeForLog(conn);
  return log;
}

function describeForLog(conn: Http2ConnectionFacts): void {
  const { socket, dst, peer } = conn;
  conn.described = true;
  conn.remoteText = hostPort(socket.remoteAddress, socket.remotePort);
  // The sidecar's: where the client was going (Envoy's original destination); the gateway's: its own port.
  conn.localText = dst ? hostPort(dst.address, dst.port) : hostPort(socket.localAddress, socket.localPort);
  conn.serverName = (socket as Partial<TLSSocket>).servername || undefined;
  conn.localUriSan = peer ? uriSans((socket as TLSSocket).getCertificate() as PeerCertificate)[0] : undefined;
}
