// The inbound side of mutual TLS between sidecars: a connection whose ClientHello carries a mesh
// ALPN is taken through a TLS handshake with the workload's certificate; the peer must present a
// certificate that chains to the mesh root (OpenSSL checks chain and dates), names one SPIFFE id,
// and belongs to this trust domain. After that the app gets the plaintext inside, exactly as it
// would have without mTLS, and the peer's identity stays beside the socket for policy.
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { DirectionStats } from '../stats.js';
import { MESH_ALPN_SERVER } from './mesh-alpn.js';
import type { MeshContexts } from './mesh-credentials.js';
import { peerFromSocket, setPeer, type PeerIdentity } from './peer-identity.js';

export interface MeshHandshakeOptions {
  readonly contexts: MeshContexts;
  readonly stats: DirectionStats;
  /** From the first byte to the end of the handshake (MESH_TLS_HANDSHAKE_TIMEOUT); 0: none. */
  readonly handshakeTimeoutMs: number;
  /** The handshake completed and the peer is known: the TLS socket carries the plaintext from here. */
  readonly onSecure: (tls: TLSSocket, peer: PeerIdentity) => void;
  /** It did not: why (the connection is closed already). */
  readonly onFailed: (reason: string) => void;
}

/** Takes `raw` (whose first bytes `head` were read already) through the server side of a mesh handshake. */
export function acceptMeshTls(raw: Socket, head: Buffer, o: MeshHandshakeOptions): void {
  raw.unshift(head);
  const tls = new TLSSocket(raw, {
    isServer: true, secureContext: o.contexts.context, requestCert: true, rejectUnauthorized: true, ALPNProtocols: [...MESH_ALPN_SERVER],
  });
  let secured = false;
  let ended = false;
  const fail = (reason: string): void => {
    if (ended) return;
    ended = true;
    clearTimeout(deadline);
    o.stats.mtlsHandshakeFailures++;
    tls.destroy();
    raw.destroy();
    o.onFailed(reason);
  };
  const deadline = o.handshakeTimeoutMs > 0
    ? setTimeout(() => fail(`handshake not complete within ${o.handshakeTimeoutMs}ms`), o.handshakeTimeoutMs).unref() : undefined;
  tls.on('error', (err: NodeJS.ErrnoException) => {
    if (!secured) fail(`TLS handshake: ${err.message}`);
  });
  tls.once('close', () => clearTimeout(deadline));
  tls.on('secure', () => {
    if (secured) { // a renegotiation (TLS 1.2): never allowed between sidecars
      o.stats.tlsRenegotiations++;
      tls.destroy();
      raw.destroy();
      return;
    }
    secured = true;
    clearTimeout(deadline);
    const peer = peerFromSocket(tls);
    if (typeof peer === 'string') {
      secured = false;
      fail(`peer certificate: ${peer}`);
      return;
    }
    if (peer.trustDomain !== o.contexts.trustDomain) {
      secured = false;
      fail(`peer ${peer.spiffeId} is not in the trust domain ${o.contexts.trustDomain}`);
      return;
    }
    ended = true;
    o.stats.mtlsHandshakes++;
    setPeer(tls, peer);
    o.onSecure(tls, peer);
  });
}

/** PeerAuthentication's mode for a port (Istio's; UNSET resolved already). */
export type MtlsMode = 'DISABLE' | 'PERMISSIVE' | 'STRICT';

/** What an inbound capture listener needs to serve mutual TLS. */
export interface InboundMeshTls {
  /** The contexts of the certificate in force; undefined: no identity held. */
  contexts(): MeshContexts | undefined;
  /** The mode for a connection to this (app) port. */
  modeFor(port: number): MtlsMode;
  readonly handshakeTimeoutMs: number;
}
