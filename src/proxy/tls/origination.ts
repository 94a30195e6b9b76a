// The outbound side of TLS to an upstream: mutual TLS to another sidecar (ISTIO_MUTUAL, with the
// workload's certificate, the mesh root and Istio's ALPN and SNI), or TLS to a service outside the
// mesh (a DestinationRule's SIMPLE or MUTUAL). A plan says how; this opens the socket. Verification
// is never skipped silently: the chain always, and the peer's names when they are known. A failed
// handshake fails the connection (the request gets 503): nothing falls back to plaintext.
import type { PeerCertificate, SecureContext, TLSSocket } from 'node:tls'; // the module: on first use (process.getBuiltinModule)
import { isIP, type OnReadOpts } from 'node:net';
import type { Endpoint } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import { isCertificateError } from './inbound-mtls.js';
import { peerFromSocket, setPeer, uriSans } from './peer-identity.js';

/** How to speak TLS to one upstream (made by the outbound decider from a plan; the engine only applies it). */
export interface UpstreamTls {
  readonly kind: 'tls';
  /** Connections are pooled per destination and per this key (plan and certificate). */
  readonly key: string;
  readonly secureContext: SecureContext;
  /** SNI; undefined: none (an IP-only destination, or ENABLE_AUTO_SNI false and no sni in the rule). */
  readonly servername: string | undefined;
  /** SIMPLE/MUTUAL without subjectAltNames: the name the certificate must hold (the SNI, or the destination's name when none is sent). */
  readonly verifyName?: string | undefined;
  readonly alpn: readonly string[];
  /** The peer must hold one of these as a URI, DNS or IP SAN; empty: the chain alone (and, for SIMPLE/MUTUAL, the SNI name). */
  readonly subjectAltNames: readonly string[];
  /** SIMPLE/MUTUAL with insecureSkipVerify: the chain is not checked (the operator said so). */
  readonly insecureSkipVerify: boolean;
  /** Mutual TLS between sidecars (counted as mTLS). */
  readonly mesh: boolean;
  /** For the logs and /debug/decisions: `ISTIO_MUTUAL (DestinationRule default/reviews)`. */
  readonly describe: string;
}

/** Set on an error that ended the TLS handshake (after TCP connected): a transport failure, Envoy's "TLS error". */
export interface TlsHandshakeError extends NodeJS.ErrnoException {
  tlsHandshake?: true;
}

function sans(cert: PeerCertificate, prefix: 'DNS:' | 'IP Address:'): string[] {
  return (cert.subjectaltname ?? '').split(', ').filter((s) => s.startsWith(prefix)).map((s) => s.slice(prefix.length));
}

/** An address in the list is an IP SAN, compared as node compares addresses (any IPv6 spelling). */
const holdsIp = (want: string, cert: PeerCertificate): boolean =>
  isIP(want) !== 0 && process.getBuiltinModule('node:tls').checkServerIdentity(want, cert) === undefined;

/** The identity check after the chain: a SAN from the list, or (TLS to a named service) the SNI name. */
function identityCheck(t: UpstreamTls) {
  return (_host: string, cert: PeerCertificate): Error | undefined => {
    if (t.subjectAltNames.length > 0) {
      const held = [...uriSans(cert), ...sans(cert, 'DNS:')];
      if (t.subjectAltNames.some((want) => held.includes(want) || holdsIp(want, cert))) return undefined;
      held.push(...sans(cert, 'IP Address:'));
      return Object.assign(new Error(`the upstream's certificate names ${held.join(', ') || 'nothing'}, none of ${t.subjectAltNames.join(', ')}`),
        { code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
    }
    const name = t.verifyName ?? t.servername;
    if (t.mesh || t.insecureSkipVerify || name === undefined) return undefined;
    // Node's `host` is the SNI, else the address: the name the plan expects is checked, SNI or not.
    return process.getBuiltinModule('node:tls').checkServerIdentity(name, cert);
  };
}

/** Opens a TLS connection to `dst` (connecting; errors arrive as 'error' events, handshake ones marked). */
export function connectTls(dst: Endpoint, t: UpstreamTls, stats: DirectionStats, reading: { readonly onread?: OnReadOpts } = {}): TLSSocket {
  const socket = process.getBuiltinModule('node:tls').connect({
    host: dst.address, port: dst.port, secureContext: t.secureContext, ALPNProtocols: [...t.alpn],
    ...(t.servername !== undefined ? { servername: t.servername } : {}),
    rejectUnauthorized: !t.insecureSkipVerify, checkServerIdentity: identityCheck(t), ...reading,
  });
  socket.setNoDelay(true); // a proxy forwards what it has at once
  let connected = false;
  let secured = false;
  socket.once('connect', () => { connected = true; });
  socket.once('secureConnect', () => {
    secured = true;
    if (t.mesh) {
      stats.mtlsHandshakes++;
      // The upstream sidecar's verified identity: the source reporter's destination_principal.
      const peer = peerFromSocket(socket);
      if (typeof peer !== 'string') setPeer(socket, peer);
    }
  });
  // First listener: the mark is there before the pool or the relay sees the error.
  socket.on('error', (err: TlsHandshakeError) => {
    if (!connected || secured) return;
    err.tlsHandshake = true;
    if (t.mesh) stats.countMtlsFailure(isCertificateError(err.code) ? 'peer_certificate' : 'handshake');
  });
  return socket;
}
