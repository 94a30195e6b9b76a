// Resetting a connection (an RST, not a FIN) whatever socket carries it. node's resetAndDestroy()
// works on a plain TCP socket only: on a TLS socket it throws ("This handle type cannot be sent"),
// and a relay that resets one side because the other was reset would then leave both open.
import type { Socket } from 'node:net';

/**
 * Resets `socket`'s connection: a TCP socket at once, a TLS socket made around a TCP socket (the
 * proxy's terminated connections) through that TCP socket. A TLS socket node opened itself has no
 * TCP socket to reach: it is closed (a FIN), which ends it just as surely.
 */
export function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  const under = (socket as Socket & { _parent?: Socket | null })._parent;
  if (under && under !== socket && typeof under.resetAndDestroy === 'function') {
    resetSocket(under);
    socket.destroy();
    return;
  }
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

/**
 * Whether the peer of `socket`'s TCP connection (itself, or the TCP socket a TLS socket was made
 * around) reset it: the kernel has no peer address for it any more (ENOTCONN). False when it cannot
 * tell (a socket without a handle, already closed).
 */
export function peerReset(socket: Socket): boolean {
  const under = (socket as Socket & { _parent?: Socket | null })._parent;
  const tcp = under && under !== socket ? under : socket;
  const handle = (tcp as unknown as { _handle?: { getpeername?: (out: object) => number } | null })._handle;
  return typeof handle?.getpeername === 'function' && handle.getpeername({}) !== 0;
}
