// The socket options Node does not expose, through libc (koffi, prebuilt, no compiler):
// SO_ORIGINAL_DST on an accepted socket (REDIRECT), IP_TRANSPARENT listeners and upstream sockets
// bound to a foreign address (TPROXY). Linux only, like the iptables rules that need them.
import type { Server, Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { koffi } from '../native/koffi.js';

const AF_INET = 2;
const AF_INET6 = 10;
const SOCK_STREAM = 1;
const SOCK_NONBLOCK = 0o4000;
const SOCK_CLOEXEC = 0o2000000;
const SOL_SOCKET = 1;
const SO_REUSEADDR = 2;
const SO_REUSEPORT = 15;
const SO_MARK = 36;
const SOL_IP = 0;
const SOL_IPV6 = 41;
const SO_ORIGINAL_DST = 80; // also IP6T_SO_ORIGINAL_DST
const IP_TRANSPARENT = 19;
const IPV6_TRANSPARENT = 75;
const IPV6_V6ONLY = 26;
const IP_FREEBIND = 15;
const IPV6_FREEBIND = 78;
const EINPROGRESS = 115;

/**
 * Whether an address the kernel gave or a listener was configured with (an IP address already) is
 * IPv6. node:net's isIPv6 validates with a pattern that costs ~9 ms to compile the first time,
 * which a sidecar's start or first connection would pay.
 */
export function isV6Address(address: string): boolean {
  return address.includes(':');
}

const libc = koffi.load('libc.so.6');
const c = {
  socket: libc.func('int socket(int domain, int type, int protocol)'),
  setsockopt: libc.func('int setsockopt(int fd, int level, int name, const void *value, uint32_t len)'),
  getsockopt: libc.func('int getsockopt(int fd, int level, int name, _Out_ uint8_t *value, _Inout_ uint32_t *len)'),
  bind: libc.func('int bind(int fd, const void *addr, uint32_t len)'),
  connect: libc.func('int connect(int fd, const void *addr, uint32_t len)'),
  close: libc.func('int close(int fd)'),
  strerror: libc.func('const char *strerror(int errnum)'),
  setfsuid: libc.func('int setfsuid(uint32_t fsuid)'),
  setfsgid: libc.func('int setfsgid(uint32_t fsgid)'),
};

const ERRNO_NAMES = new Map(Object.entries(osConstants.errno).map(([name, n]) => [n, name]));

export class SocketOptionError extends Error {
  /** The errno's name (`EADDRINUSE`), as node's own socket errors carry it. */
  readonly code: string | undefined;

  constructor(call: string, readonly errno: number) {
    const code = ERRNO_NAMES.get(errno);
    super(`${call}: ${String(c.strerror(errno))} (${code ?? `errno ${errno}`})`);
    this.name = 'SocketOptionError';
    this.code = code;
  }
}

function check(rc: number, call: string): void {
  if (rc < 0) throw new SocketOptionError(call, koffi.errno());
}

export interface Endpoint {
  readonly address: string;
  readonly port: number;
}

/** The file descriptor behind a Node socket or server (libuv keeps it on the handle). */
export function fdOf(handleOwner: Socket | Server): number {
  const fd = (handleOwner as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('socket has no file descriptor');
  return fd;
}

function parseSockaddr(buf: Buffer): Endpoint | undefined {
  const family = buf.readUInt16LE(0);
  const port = buf.readUInt16BE(2);
  if (family === AF_INET) return { address: [...buf.subarray(4, 8)].join('.'), port };
  if (family === AF_INET6) {
    const groups: string[] = [];
    for (let i = 8; i < 24; i += 2) groups.push(buf.readUInt16BE(i).toString(16));
    // The URL parser prints IPv6 in its canonical compressed form.
    return { address: new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1), port };
  }
  return undefined;
}

function sockaddr(ep: Endpoint): Buffer {
  if (isV6Address(ep.address)) {
    const buf = Buffer.alloc(28);
    buf.writeUInt16LE(AF_INET6, 0);
    buf.writeUInt16BE(ep.port, 2);
    ipv6Bytes(ep.address).copy(buf, 8);
    return buf;
  }
  const buf = Buffer.alloc(16);
  buf.writeUInt16LE(AF_INET, 0);
  buf.writeUInt16BE(ep.port, 2);
  ep.address.split('.').forEach((octet, i) => buf.writeUInt8(Number(octet), 4 + i));
  return buf;
}

function ipv6Bytes(address: string): Buffer {
  const mapped = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  let text = address;
  if (mapped) {
    const [a, b, c2, d] = mapped[2]!.split('.').map(Number) as [number, number, number, number];
    text = `${mapped[1]}${((a << 8) | b).toString(16)}:${((c2 << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...new Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const buf = Buffer.alloc(16);
  groups.forEach((g, i) => buf.writeUInt16BE(parseInt(g, 16), i * 2));
  return buf;
}

/**
 * Where a REDIRECTed connection was going: the conntrack entry's original destination.
 * Undefined when the connection was not NATed (a direct connection to the listener).
 */
export function originalDestination(socket: Socket): Endpoint | undefined {
  const fd = fdOf(socket);
  const v6 = socket.localFamily === 'IPv6' && !(socket.localAddress ?? '').startsWith('::ffff:');
  const buf = Buffer.alloc(28);
  const len = [buf.length];
  const rc = c.getsockopt(fd, v6 ? SOL_IPV6 : SOL_IP, SO_ORIGINAL_DST, buf, len) as number;
  if (rc < 0) return undefined;
  return parseSockaddr(buf);
}

function setInt(fd: number, level: number, name: number, value: number, call: string): void {
  const buf = Buffer.alloc(4);
  buf.writeInt32LE(value, 0);
  check(c.setsockopt(fd, level, name, buf, 4) as number, call);
}

export interface ListenerOptions {
  /** IP_TRANSPARENT (TPROXY: connections to any address arrive here). Needs CAP_NET_ADMIN. */
  readonly transparent?: boolean;
  /** SO_REUSEPORT: every worker binds its own socket on the port; the kernel spreads connections. */
  readonly reusePort?: boolean;
}

/**
 * A bound, not yet listening, socket for a listener Node cannot make itself (Node 20 has no
 * reusePort, nor IP_TRANSPARENT); hand it to `server.listen({ fd })`. `::` is dual-stack unless
 * transparent (TPROXY needs a socket per family).
 */
export function listenerFd(ep: Endpoint, o: ListenerOptions): number {
  const v6 = isV6Address(ep.address);
  const fd = c.socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) as number;
  check(fd, 'socket');
  try {
    setInt(fd, SOL_SOCKET, SO_REUSEADDR, 1, 'setsockopt(SO_REUSEADDR)');
    if (o.reusePort) setInt(fd, SOL_SOCKET, SO_REUSEPORT, 1, 'setsockopt(SO_REUSEPORT)');
    if (v6) setInt(fd, SOL_IPV6, IPV6_V6ONLY, o.transparent ? 1 : 0, 'setsockopt(IPV6_V6ONLY)');
    if (o.transparent) {
      if (v6) setInt(fd, SOL_IPV6, IPV6_TRANSPARENT, 1, 'setsockopt(IPV6_TRANSPARENT)');
      else setInt(fd, SOL_IP, IP_TRANSPARENT, 1, 'setsockopt(IP_TRANSPARENT)');
    }
    const addr = sockaddr(ep);
    check(c.bind(fd, addr, addr.length) as number, `bind(${ep.address}:${ep.port})`);
    return fd;
  } catch (err) {
    c.close(fd);
    throw err;
  }
}

export interface BindOptions {
  /** IP_TRANSPARENT: bind a foreign address (the client's, in TPROXY mode). Needs CAP_NET_ADMIN. */
  readonly transparent?: boolean;
  /** IP_FREEBIND: bind an address not configured on any interface (::6). */
  readonly freebind?: boolean;
  /** SO_MARK, so the TPROXY rules route the app's replies back to the proxy. Needs CAP_NET_ADMIN. */
  readonly mark?: number;
  /**
   * Create the socket under this filesystem uid/gid (per thread, for this one call): iptables'
   * owner match sees the socket as theirs. Needs CAP_SETUID/CAP_SETGID, else the socket stays ours.
   */
  readonly owner?: { readonly uid: number; readonly gid: number };
}

/** socket(), under another filesystem uid/gid if asked; false in `switched` when that was refused. */
function ownedSocket(domain: number, owner: BindOptions['owner']): { fd: number; switched: boolean } {
  if (!owner) return { fd: c.socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) as number, switched: true };
  const uid = c.setfsuid(owner.uid) as number;
  const gid = c.setfsgid(owner.gid) as number;
  // setfsuid answers the previous value; asking again (with an invalid id) tells whether it took.
  const switched = (c.setfsuid(0xffffffff) as number) === owner.uid && (c.setfsgid(0xffffffff) as number) === owner.gid;
  try {
    return { fd: c.socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) as number, switched };
  } finally {
    c.setfsuid(uid);
    c.setfsgid(gid);
  }
}

/** Whether this process can create sockets under another owner (CAP_SETUID and CAP_SETGID). */
export function canSwitchSocketOwner(owner: { uid: number; gid: number }): boolean {
  const { fd, switched } = ownedSocket(AF_INET, owner);
  if (fd >= 0) c.close(fd);
  return switched;
}

/**
 * Starts a non-blocking connection to `to` from `from` (port chosen by the kernel). Returns the fd
 * for `new net.Socket({ fd })`; a refused connection shows up as an error on that socket.
 */
export function boundConnectFd(from: string, to: Endpoint, opts: BindOptions): number {
  const v6 = isV6Address(to.address);
  const { fd } = ownedSocket(v6 ? AF_INET6 : AF_INET, opts.owner);
  check(fd, 'socket');
  try {
    if (opts.transparent) {
      if (v6) setInt(fd, SOL_IPV6, IPV6_TRANSPARENT, 1, 'setsockopt(IPV6_TRANSPARENT)');
      else setInt(fd, SOL_IP, IP_TRANSPARENT, 1, 'setsockopt(IP_TRANSPARENT)');
    }
    if (opts.freebind) {
      if (v6) setInt(fd, SOL_IPV6, IPV6_FREEBIND, 1, 'setsockopt(IPV6_FREEBIND)');
      else setInt(fd, SOL_IP, IP_FREEBIND, 1, 'setsockopt(IP_FREEBIND)');
    }
    if (opts.mark !== undefined) setInt(fd, SOL_SOCKET, SO_MARK, opts.mark, 'setsockopt(SO_MARK)');
    const local = sockaddr({ address: from, port: 0 });
    check(c.bind(fd, local, local.length) as number, `bind(${from})`);
    const remote = sockaddr(to);
    const rc = c.connect(fd, remote, remote.length) as number;
    if (rc < 0 && koffi.errno() !== EINPROGRESS) throw new SocketOptionError(`connect(${to.address}:${to.port})`, koffi.errno());
    return fd;
  } catch (err) {
    c.close(fd);
    throw err;
  }
}

const SOL_TCP = 6;
const TCP_KEEPIDLE = 4;
const TCP_KEEPINTVL = 5;
const TCP_KEEPCNT = 6;

/** DestinationRule connectionPool.tcp.tcpKeepalive: what is not given keeps the kernel's value (Istio's rule). */
export interface TcpKeepalive {
  readonly probes?: number | undefined;
  readonly timeMs?: number | undefined;
  readonly intervalMs?: number | undefined;
}

/**
 * SO_KEEPALIVE on a connected socket, with the idle time, interval and probe count given (node
 * sets only the idle time). A socket libc refuses them on is left with node's keep-alive alone.
 */
export function setTcpKeepalive(socket: Socket, k: TcpKeepalive): void {
  socket.setKeepAlive(true, k.timeMs ?? 0);
  let fd: number;
  try {
    fd = fdOf(socket);
  } catch {
    return; // a TLS socket's fd is its TCP socket's: set on that one
  }
  const seconds = (ms: number): number => Math.max(1, Math.round(ms / 1000));
  if (k.timeMs !== undefined) setInt(fd, SOL_TCP, TCP_KEEPIDLE, seconds(k.timeMs), 'setsockopt(TCP_KEEPIDLE)');
  if (k.intervalMs !== undefined) setInt(fd, SOL_TCP, TCP_KEEPINTVL, seconds(k.intervalMs), 'setsockopt(TCP_KEEPINTVL)');
  if (k.probes !== undefined) setInt(fd, SOL_TCP, TCP_KEEPCNT, k.probes, 'setsockopt(TCP_KEEPCNT)');
}
