// What an HTTP/2 stream needs from the handler that owns its connection (handler.ts), and what it
// knows of the connection: kept apart so exchange.ts does not depend on the handler.
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { AccessLogSink, ListenerRole, LoggedDownstream } from '../../log/access-record.js';
import { loggedDownstream } from '../logged-downstream.js';
import type { RequestDecider, Verdict } from '../decider.js';
import type { PathNormalization } from '../path-normalization.js';
import type { Endpoint } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import type { PeerIdentity } from '../tls/peer-identity.js';
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
  readonly settings: { readonly normalization: PathNormalization; readonly limits: { readonly maxHeaders: number } };
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
  /** For the access log: read from the socket by logNow when the first stream to be logged begins. */
  logged: LoggedDownstream | undefined;
}

/** The access log if it is on now (the connection's addresses read for it the first time); undefined: off. */
export function logNow(log: AccessLogSink | undefined, conn: Http2ConnectionFacts): AccessLogSink | undefined {
  if (log === undefined || !log.on) return undefined;
  conn.logged ??= loggedDownstream(conn.socket, conn.dst, conn.peer);
  return log;
}
