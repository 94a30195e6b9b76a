// Who the client is behind the gateway (Istio's `gatewayTopology.numTrustedProxies`). Each proxy in
// front of the gateway appends the address it saw to X-Forwarded-For, so the entry N from the right
// is the one the N-th trusted proxy saw: the client. Anything further left was written by the
// client itself and proves nothing. With no trusted proxy (the default), the client is the peer of
// the connection, whatever the header says. Pure.
import { isIP } from 'node:net';

/** The client address policies judge (`remoteIpBlocks`, `remote.ip`): the trusted XFF entry, else the peer. */
export function clientAddress(forwardedFor: string | undefined, peer: string, trustedProxies: number): string {
  if (trustedProxies <= 0 || forwardedFor === undefined) return peer;
  const hops = forwardedFor.split(',').map((h) => h.trim()).filter((h) => h !== '');
  const entry = hops.length >= trustedProxies ? hops[hops.length - trustedProxies]! : undefined;
  return entry !== undefined && isIP(entry) !== 0 ? entry : peer;
}

/** The peer as Node reports it, without the IPv4-mapped prefix (`::ffff:10.0.0.1` → `10.0.0.1`). */
export function plainAddress(address: string | undefined): string {
  return address?.replace(/^::ffff:(?=\d+\.)/, '') ?? '';
}
