// Who is at the other end of a connection whose mutual TLS handshake the proxy completed: the
// peer's SPIFFE id and what policy and telemetry derive from it. Kept beside the socket (a weak
// map: nothing to clean up), so the request path and the TCP path read it the same way.
import type { PeerCertificate, TLSSocket } from 'node:tls';

export interface PeerIdentity {
  /** `spiffe://cluster.local/ns/default/sa/sleep`. */
  readonly spiffeId: string;
  /** Istio's principal: the id without `spiffe://` (what `source.principals` matches). */
  readonly principal: string;
  readonly trustDomain: string;
  /** The `ns/<namespace>` part (what `source.namespaces` matches); undefined for another id shape. */
  readonly namespace: string | undefined;
  /** SHA-256 of the peer's leaf certificate (DER), hex: XFCC's `Hash`. */
  readonly certHash: string;
}

const peers = new WeakMap<object, PeerIdentity>();

export function peerOf(socket: object): PeerIdentity | undefined {
  return peers.get(socket);
}

export function setPeer(socket: object, peer: PeerIdentity): void {
  peers.set(socket, peer);
}

/** The URI SANs of a certificate as Node reports them (`URI:spiffe://...`, comma separated). */
export function uriSans(cert: PeerCertificate): string[] {
  const sans = cert.subjectaltname;
  if (!sans) return [];
  return sans.split(', ').filter((s) => s.startsWith('URI:')).map((s) => s.slice(4));
}

const SPIFFE = /^spiffe:\/\/([^/]+)(\/.*)$/;

/** The peer of a verified TLS socket, from its leaf's single spiffe:// URI SAN; a reason when it has none usable. */
export function peerFromSocket(tls: TLSSocket): PeerIdentity | string {
  const cert = tls.getPeerCertificate();
  if (!cert || !cert.raw) return 'no client certificate';
  const ids = uriSans(cert).filter((u) => u.startsWith('spiffe://'));
  if (ids.length !== 1) return ids.length === 0 ? 'the certificate has no spiffe:// URI SAN' : 'the certificate has several spiffe:// URI SANs';
  const m = SPIFFE.exec(ids[0]!);
  if (!m) return `malformed SPIFFE id ${JSON.stringify(ids[0])}`;
  const ns = /^\/ns\/([^/]+)\//.exec(m[2]!);
  return {
    spiffeId: ids[0]!, principal: ids[0]!.slice('spiffe://'.length), trustDomain: m[1]!, namespace: ns?.[1],
    certHash: process.getBuiltinModule('node:crypto').createHash('sha256').update(cert.raw).digest('hex'),
  };
}
