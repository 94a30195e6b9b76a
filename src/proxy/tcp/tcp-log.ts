// The access log of one connection carried as TCP: the sidecar's and the gateway's alike.
import type { Socket } from 'node:net';
import { clusterName, connectionRecord, detailsWord, FLAG, hostPort, type AccessLogSink, type DecisionNote, type ListenerRole } from '../../log/access-record.js';
import type { Endpoint } from '../socket-options.js';
import { readClientHello } from '../tls/client-hello.js';
import type { PeerIdentity } from '../tls/peer-identity.js';

/**
 * The access log of one connection carried as TCP (made only with an access log): its start, the
 * upstream connection's local address (read while it is open), one record when it ends.
 */
export class TcpLog {
  private upstreamLocal: string | undefined;
  private connected = false;
  /** Read while the socket is open (a closed one may not say any more). */
  private readonly remote: string | undefined;

  constructor(private readonly log: AccessLogSink, private readonly role: ListenerRole, private readonly downstream: Socket,
    private readonly dst: Endpoint, private readonly started: number, private readonly tlsHead: Buffer | undefined,
    private readonly decision: DecisionNote | undefined, private readonly peer?: PeerIdentity, private readonly localId?: string,
    private readonly routed?: { readonly host: Endpoint | undefined; readonly cluster: string | undefined }) {
    this.remote = hostPort(downstream.remoteAddress, downstream.remotePort);
  }

  /** The relay's end: an error from the upstream before it connected is UF, after it UC; from the client DC. */
  relayed(upstream: Socket): (error: Error | undefined, fromUpstream: boolean) => void {
    const opened = (): void => {
      this.connected = true;
      this.upstreamLocal = hostPort(upstream.localAddress, upstream.localPort);
    };
    if (upstream.connecting) upstream.once('connect', opened);
    else opened();
    return (error, fromUpstream) => {
      const flags = error === undefined ? 0 : !fromUpstream ? FLAG.DC : this.connected ? FLAG.UC : FLAG.UF;
      this.write(flags, error ? (error as NodeJS.ErrnoException).code ?? error.message : undefined);
    };
  }

  write(flags: number, terminationDetails?: string): void {
    const now = performance.now();
    const sni = this.tlsHead ? readClientHello(this.tlsHead) : undefined;
    this.log.write(connectionRecord({
      role: this.role, startMs: performance.timeOrigin + this.started, durationMs: now - this.started, flags,
      terminationDetails: terminationDetails === undefined ? undefined : detailsWord(terminationDetails),
      bytesReceived: this.downstream.bytesRead, bytesSent: this.downstream.bytesWritten,
      // A routed connection refused before any upstream was chosen (the gateway's NR, RBAC): `-` for both.
      upstreamHost: this.routed !== undefined && this.routed.host === undefined ? undefined
        : hostPort((this.routed?.host ?? this.dst).address, (this.routed?.host ?? this.dst).port),
      upstreamCluster: this.routed !== undefined && this.routed.host === undefined ? this.routed.cluster
        : this.routed?.cluster ?? clusterName(this.role, this.dst.address, this.dst.port),
      upstreamLocal: this.upstreamLocal, downstreamLocal: hostPort(this.dst.address, this.dst.port),
      downstreamRemote: this.remote, serverName: sni?.kind === 'hello' ? sni.serverName : undefined, decision: this.decision,
      ...(this.peer ? { downstreamPeerUriSan: this.peer.spiffeId, downstreamPeerFingerprint: this.peer.certHash, downstreamLocalUriSan: this.localId } : {}),
    }));
  }
}
