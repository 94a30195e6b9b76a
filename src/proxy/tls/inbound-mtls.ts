// The inbound side of mutual TLS between sidecars: a connection whose ClientHello carries a mesh
// ALPN is taken through a TLS handshake with the workload's certificate; the peer must present a
// certificate that chains to the mesh root (OpenSSL checks chain and dates), names one SPIFFE id,
// and belongs to this trust domain. After that the app gets the plaintext inside, exactly as it
// would have without mTLS, and the peer's identity stays beside the socket for policy.
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls'; // the module: on first use (process.getBuiltinModule)
import type { DirectionStats, MtlsFailureReason } from '../stats.js';
import { adoptTlsReads } from '../read-buffers.js';
import { MESH_ALPN_SERVER } from './mesh-alpn.js';
import type { MeshContexts } from './mesh-credentials.js';
import { peerFromSocket, setPeer, type PeerIdentity } from './peer-identity.js';

export interface MeshHandshakeOptions {
  readonly contexts: MeshContexts;
  readonly stats: DirectionStats;
  /** From the first byte to the end of the handshake (MESH_TLS_HANDSHAKE_TIMEOUT); 0: none. */
  readonly handshakeTimeoutMs: number;
  /** What the server selects from (MESH_ALPN_SERVER, or the list without the TCP metadata exchange). */
  readonly alpn?: readonly string[] | undefined;
  /** The handshake completed and the peer is known: the TLS socket carries the plaintext from here. */
  readonly onSecure: (tls: TLSSocket, peer: PeerIdentity) => void;
  /** It did not: why (the connection is closed already). */
  readonly onFailed: (reason: string) => void;
}

/** OpenSSL's and Node's codes for a certificate that does not verify (as opposed to a TLS failure). */
export function isCertificateError(code: string | undefined): boolean {
  return code !== undefined && /CERT|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED|ALTNAME|PEER_DID_NOT_RETURN/.test(code);
}

/**
 * What OpenSSL's verification of the peer's chain said (undefined: it holds: the chain leads to the
 * mesh root, every certificate in its dates). A TLS socket made outside a tls.Server asks for the
 * certificate but never refuses one: tls.Server's own secure handler reads this same verify result
 * and destroys the socket, so it is read here the same way. Fails closed: should Node ever stop
 * exposing it, every peer is refused (and the log says why) rather than accepted unchecked.
 */
function chainError(tls: TLSSocket): string | undefined {
  const handle = (tls as unknown as { _handle?: { verifyError?: () => (Error & { code?: string }) | null } })._handle;
  if (typeof handle?.verifyError !== 'function') return 'this Node cannot report the verification of peer certificates';
  const err = handle.verifyError();
  if (!tls.getPeerCertificate()?.raw) return 'no client certificate';
  return err ? `${err.code ?? 'VERIFY_FAILED'}: ${err.message}` : undefined;
}

/** Takes `raw` (whose first bytes `head` were read already) through the server side of a mesh handshake. */
export function acceptMeshTls(raw: Socket, head: Buffer, o: MeshHandshakeOptions): void {
  raw.unshift(head);
  const tls = new (process.getBuiltinModule('node:tls').TLSSocket)(raw, {
    isServer: true, secureContext: o.contexts.context, requestCert: true, rejectUnauthorized: true, ALPNProtocols: [...(o.alpn ?? MESH_ALPN_SERVER)],
  });
  adoptTlsReads(tls);
  let secured = false;
  let ended = false;
  const fail = (reason: string, kind: MtlsFailureReason): void => {
    if (ended) return;
    ended = true;
    clearTimeout(deadline);
    o.stats.countMtlsFailure(kind);
    tls.destroy();
    raw.destroy();
    o.onFailed(reason);
  };
  const deadline = o.handshakeTimeoutMs > 0
    ? setTimeout(() => fail(`handshake not complete within ${o.handshakeTimeoutMs}ms`, 'timeout'), o.handshakeTimeoutMs).unref() : undefined;
  tls.on('error', (err: NodeJS.ErrnoException) => {
    if (!secured) fail(`TLS handshake: ${err.message}`, isCertificateError(err.code) ? 'peer_certificate' : 'handshake');
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
    const refused = chainError(tls);
    if (refused !== undefined) {
      secured = false;
      fail(`peer certificate: ${refused}`, 'peer_certificate');
      return;
    }
    const peer = peerFromSocket(tls);
    if (typeof peer === 'string') {
      secured = false;
      fail(`peer certificate: ${peer}`, 'peer_certificate');
      return;
    }
    if (peer.trustDomain !== o.contexts.trustDomain) {
      secured = false;
      fail(`peer ${peer.spiffeId} is not in the trust domain ${o.contexts.trustDomain}`, 'peer_certificate');
      return;
    }
    ended = true;
    o.stats.mtlsHandshakes++;
    // The TLS socket's end is the connection's: destroying it (a policy refusal) must close the TCP
    // connection under it too, or the peer sidecar waits for a FIN that never comes.
    tls.once('close', () => raw.destroy());
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
