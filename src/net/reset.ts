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
