// Listening for the agent's own servers (status, metrics, admin API) and the proxy's listeners.
import type { Server } from 'node:net';
import type { ListenerOptions } from '../proxy/socket-options.js';

/**
 * Listens on one address; rejects with the bind error (the server is left unbound). An IPv6
 * address is bound here, through libc, and handed to node as a socket: node's listen would look
 * the address up, and its IPv6 check compiles a pattern for ~9 ms on a sidecar's start.
 */
export async function listenOnce(server: Server, port: number, host: string, o: ListenerOptions = {}): Promise<void> {
  if (!host.includes(':') && !o.transparent && !o.reusePort) return listenWith(server, { port, host });
  // libc (koffi) only where node cannot bind by itself: the iptables validation listens without it.
  const { listenerFd } = await import('../proxy/socket-options.js');
  return listenWith(server, { fd: listenerFd({ address: host, port }, o) });
}

/**
 * Listens on `host`, or without one on every address: node binds `::` (both families) and falls
 * back to 0.0.0.0 by itself where IPv6 is off. Given no host, node also skips the address lookup,
 * whose IPv6 check compiles a pattern for ~9 ms on a sidecar's start.
 */
export function listenAll(server: Server, port: number, host?: string): Promise<void> {
  return host === undefined ? listenWith(server, { port }) : listenOnce(server, port, host);
}

/** Connections the kernel queues before they are accepted (node's default: 511). */
const BACKLOG = 1024;

function listenWith(server: Server, options: { port: number; host?: string } | { fd: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    const done = (): void => {
      server.off('error', onError);
      resolve();
    };
    // Node takes a socket's backlog as an argument only (not from the options).
    if ('fd' in options) server.listen(options, BACKLOG, done);
    else server.listen({ ...options, backlog: BACKLOG }, done);
  });
}
