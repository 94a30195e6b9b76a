// How the proxy reaches a connection's original destination, per listener:
// outbound plainly (its uid is exempt from capture); inbound REDIRECT from 127.0.0.6 / ::6, which
// the rules exempt; inbound TPROXY from the client's own address (IP_TRANSPARENT, marked).
import { Agent, type AgentOptions } from 'node:http';
import { Socket, connect, type OnReadOpts } from 'node:net';
import type { Duplex } from 'node:stream';
import { INBOUND_PASSTHROUGH_ADDR_V4, INBOUND_PASSTHROUGH_ADDR_V6 } from '../iptables/constants.js';
import { boundConnectFd, isV6Address, setTcpKeepalive, type Endpoint, type TcpKeepalive } from './socket-options.js';
import type { DirectionStats } from './stats.js';


/**
 * The owner of the proxy's TPROXY connections to the app. The capture rules send the proxy's own
 * (uid 1337) loopback connections to the pod's address back to 15006 (MESH_OUTPUT `-o lo ! -d
 * 127.0.0.1 --uid-owner 1337 -j MESH_IN_REDIRECT`); a socket owned by root passes (`! --uid-owner
 * 1337 -j RETURN`). Istio runs TPROXY sidecars as uid 0 / gid 1337 for this reason; a uid-1337
 * sidecar needs CAP_SETUID and CAP_SETGID to create these sockets as root.
 */
export const TRANSPARENT_OWNER = { uid: 0, gid: 0 } as const;

export type UpstreamMode =
  | { readonly kind: 'direct' }
  | { readonly kind: 'passthrough' }
  | { readonly kind: 'transparent'; readonly mark: number };

/** The source address to bind for a connection from `client` to `dst`, if any. */
export function sourceFor(mode: UpstreamMode, dst: Endpoint, client: string | undefined): string | undefined {
  switch (mode.kind) {
    case 'direct': return undefined;
    case 'passthrough': return isV6Address(dst.address) ? INBOUND_PASSTHROUGH_ADDR_V6 : INBOUND_PASSTHROUGH_ADDR_V4;
    case 'transparent': return client?.replace(/^::ffff:(?=\d+\.)/, '');
  }
}

/** How the caller reads the connection: `onread` delivers every read into one reused buffer (no 'data' events). */
export interface UpstreamReading {
  readonly onread?: OnReadOpts;
}

/**
 * Opens an upstream connection (connecting; errors arrive as 'error' events). The transparent and
 * IPv6 passthrough sockets are made through libc and may throw (SocketOptionError) right here.
 */
export function connectUpstream(mode: UpstreamMode, dst: Endpoint, source: string | undefined, reading: UpstreamReading = {}): Socket {
  // Nagle off: a proxy forwards what it has at once (small writes must not wait for ACKs).
  if (mode.kind === 'direct' || source === undefined) return connect({ host: dst.address, port: dst.port, noDelay: true, ...reading });
  if (mode.kind === 'passthrough' && !isV6Address(dst.address)) {
    // 127.0.0.6 is a loopback address the kernel owns already: a plain bind works.
    return connect({ host: dst.address, port: dst.port, localAddress: source, noDelay: true, ...reading });
  }
  const fd = boundConnectFd(source, dst, mode.kind === 'transparent'
    ? { transparent: true, mark: mode.mark, owner: TRANSPARENT_OWNER } : { freebind: true });
  // `onread` is a constructor option of net.Socket too; @types/node only lists it for connect().
  const options = { fd, readable: true, writable: true, ...reading } as ConstructorParameters<typeof Socket>[0];
  return new Socket(options).setNoDelay(true);
}

/** Counts an upstream connection in the stats for as long as it is open; `routed`: one of a traffic cluster's. */
export function trackUpstream(socket: Socket, stats: DirectionStats, routed = false): Socket {
  stats.upstreamCxTotal++;
  stats.upstreamCxActive++;
  if (routed) {
    stats.routedCxTotal++;
    stats.routedCxActive++;
    socket.once('close', () => { stats.upstreamCxActive--; stats.routedCxActive--; });
  } else {
    socket.once('close', () => { stats.upstreamCxActive--; });
  }
  return socket;
}

/** A keep-alive pool per destination (and per source address), opening connections the mode's way. */
export class UpstreamAgent extends Agent {
  constructor(private readonly mode: UpstreamMode, private readonly stats: DirectionStats, options: AgentOptions) {
    super(options);
  }

  override createConnection(options: { host?: string; port?: number | string; localAddress?: string }): Duplex {
    const dst = { address: options.host ?? '', port: Number(options.port) };
    return trackUpstream(connectUpstream(this.mode, dst, options.localAddress), this.stats);
  }
}

/**
 * A cluster's connection settings on a new upstream socket: not made (TLS included: `made` is
 * 'secureConnect') within `connectTimeoutMs`, it fails as a connect time-out (Envoy's
 * connect_timeout, ETIMEDOUT); `keepalive`: the kernel's TCP keep-alive once connected (its own
 * settings stay when these cannot be set), then `afterKeepalive`.
 */
export function applyConnectPolicy(socket: Socket, made: 'connect' | 'secureConnect', connectTimeoutMs: number | undefined,
  keepalive: TcpKeepalive | undefined, afterKeepalive?: () => void): void {
  if (connectTimeoutMs !== undefined) {
    const timer = setTimeout(() => {
      socket.destroy(Object.assign(new Error(`upstream connect timeout (${connectTimeoutMs} ms)`), { code: 'ETIMEDOUT', connectTimeout: true }));
    }, connectTimeoutMs);
    socket.once(made, () => clearTimeout(timer));
    socket.once('close', () => clearTimeout(timer));
  }
  if (keepalive !== undefined) {
    socket.once('connect', () => {
      try {
        setTcpKeepalive(socket, keepalive);
      } catch { /* the kernel's keep-alive settings stay */ }
      afterKeepalive?.();
    });
  }
}
