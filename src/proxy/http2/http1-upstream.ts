// The HTTP/1.1 leg of an HTTP/2 request, for destinations that do not speak HTTP/2 (found by
// upstream-sessions.ts): node:http's client with a keep-alive agent whose connections are opened the
// listener's way (plain, passthrough source, TPROXY, or TLS by the request's plan). The response is
// read by node:http's parser; what reaches the client is re-framed by HTTP/2, so no byte of the
// upstream's framing is relayed.
//
// A traffic cluster's connections are its own (pooled per cluster name) and follow its
// DestinationRule connectionPool as the HTTP/1.1 pool's do (../http1/upstream-pool.ts, the same
// ConnectionPolicy, read once per connection): a new one takes a slot of the cluster's
// maxConnections, shared by every worker (none left: the stream waits as a pending request, as with
// the cluster's HTTP/2 sessions: exchange.ts waitForConnection), and gives it back when it
// closes; connectTimeout, tcpKeepalive; maxRequestsPerConnection, maxConnectionDuration, a replaced
// cluster or a request anywhere waiting for a slot: not kept for another request (and a kept one is
// closed, looked at a few times a second); idleTimeout (and what is left of maxConnectionDuration):
// a kept connection closes idle after it.
import { Agent, request, type ClientRequest, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { clusterConnectionPolicy, type ConnectionPolicy } from '../http1/upstream-pool.js';
import type { DirectionStats } from '../stats.js';
import { connectTls, type UpstreamTls } from '../tls/origination.js';
import { applyConnectPolicy, connectUpstream, trackUpstream, type UpstreamMode } from '../upstream.js';
import { overflowError, type UpstreamTarget } from './upstream-sessions.js';

interface LegOptions {
  readonly host?: string | null | undefined;
  readonly port?: number | string | null | undefined;
  readonly localAddress?: string | undefined;
  readonly upstreamTls?: UpstreamTls | undefined;
  readonly cluster?: UpstreamTarget['cluster'];
}

/** An error of a leg's connection before it was made (TLS included): a connect failure, not a reset. */
export interface LegConnectError extends NodeJS.ErrnoException {
  connecting?: true;
  connectTimeout?: true;
  tlsHandshake?: true;
}

const LEG = Symbol('leg');
/** How often kept connections of traffic clusters look for a replaced cluster or requests waiting for its slots (as the HTTP/1.1 pool does). */
const WAITERS_CHECK_MS = 200;

/** A cluster's connection on the leg: its policy and what it has done, beside node's own socket state. */
export class LegConnection {
  /** Requests done on it. */
  uses = 0;

  constructor(readonly policy: ConnectionPolicy, readonly born: number) {}

  /** A request is done on it: whether it may go back to the agent's free list for another (pure but for the count). */
  done(now: number): boolean {
    const p = this.policy;
    this.uses++;
    if (p.maxRequests !== undefined && p.maxRequests > 0 && this.uses >= p.maxRequests) return false;
    if (p.maxDurationMs !== undefined && now - this.born >= p.maxDurationMs) return false;
    return p.othersWaiting?.() !== true && p.retired?.() !== true;
  }

  /** How long it may stay idle from `now` (idleTimeout, what is left of maxConnectionDuration); Infinity: no limit of the policy's. */
  idleLimit(now: number): number {
    const p = this.policy;
    const left = p.maxDurationMs === undefined ? Infinity : Math.max(1, p.maxDurationMs - (now - this.born));
    return Math.min(p.idleTimeoutMs ?? Infinity, left);
  }
}

type LegSocket = Socket & { [LEG]?: LegConnection };

/** The agent's own keep-alive setting (per response) does nothing on a socket whose cluster set tcpKeepalive. */
function keepClusterKeepalive(this: Socket): Socket {
  return this;
}

class LegAgent extends Agent {
  constructor(private readonly mode: UpstreamMode, private readonly stats: DirectionStats) {
    super({ keepAlive: true, maxFreeSockets: 64, scheduling: 'lifo' });
  }

  override createConnection(options: LegOptions, oncreate?: (err: Error | null, socket: Duplex) => void): Duplex | undefined {
    const c = options.cluster;
    if (c !== undefined && !c.runtime.tryAcquireConnection(c.endpoint)) {
      oncreate!(overflowError(), undefined as unknown as Duplex); // the request's 'error' (on the next tick): 503 UO
      return undefined;
    }
    const policy = c === undefined ? undefined : clusterConnectionPolicy(c.runtime, c.endpoint);
    const dst = { address: options.host ?? '', port: Number(options.port) };
    const t = options.upstreamTls;
    let socket: Socket;
    try {
      socket = t ? connectTls(dst, { ...t, alpn: t.mesh ? t.alpn : ['http/1.1'] }, this.stats) : connectUpstream(this.mode, dst, options.localAddress);
    } catch (err) { // a socket libc would not make: the caller answers 503
      policy?.released?.();
      throw err;
    }
    trackUpstream(socket, this.stats, c !== undefined);
    // Errors before the connection is made are marked (first listener): the exchange counts them as connect failures.
    const made = t ? 'secureConnect' : 'connect';
    let connected = false;
    socket.once(made, () => { connected = true; });
    socket.once('error', (err: LegConnectError) => { if (!connected) err.connecting = true; });
    if (policy !== undefined) this.govern(socket as LegSocket, policy, made);
    return socket;
  }

  /** A cluster's connection: its slot back when it closes, connectTimeout, tcpKeepalive, and its record for keepSocketAlive. */
  private govern(socket: LegSocket, policy: ConnectionPolicy, made: 'connect' | 'secureConnect'): void {
    if (policy.released) socket.once('close', policy.released);
    // node's agent sets its own keep-alive on every response: a socket with the cluster's keeps that.
    applyConnectPolicy(socket, made, policy.connectTimeoutMs, policy.keepalive, () => { socket.setKeepAlive = keepClusterKeepalive; });
    socket[LEG] = new LegConnection(policy, performance.now());
    this.watchFree();
  }

  // Called by node when a response is done and the socket could carry another request.
  override keepSocketAlive(socket: Duplex): boolean {
    const leg = (socket as LegSocket)[LEG];
    if (leg === undefined) return super.keepSocketAlive(socket) as unknown as boolean;
    const now = performance.now();
    if (!leg.done(now)) return false;
    if (!(super.keepSocketAlive(socket) as unknown as boolean)) return false;
    // node's agent destroys a free socket at its time-out: the policy's idle limit, unless the upstream's Keep-Alive hint is sooner.
    const limit = leg.idleLimit(now);
    const s = socket as Socket;
    if (limit !== Infinity && (s.timeout === undefined || s.timeout === 0 || limit < s.timeout)) s.setTimeout(limit);
    return true;
  }

  private watchTimer: NodeJS.Timeout | undefined;

  /**
   * While the agent has connections of traffic clusters (started once per connection, not per
   * request), looks a few times a second whether a kept one's cluster was replaced (its slot belongs
   * to the new version) or a request anywhere waits for one of its slots (the limit serves every
   * worker in turn): such a kept connection is closed.
   */
  private watchFree(): void {
    this.watchTimer ??= setInterval(() => {
      let watched = 0;
      for (const list of Object.values(this.freeSockets)) {
        for (const socket of [...(list ?? [])]) {
          const leg = (socket as LegSocket)[LEG];
          if (leg === undefined) continue;
          if (leg.policy.retired?.() === true || leg.policy.othersWaiting?.() === true) socket.destroy();
          else watched++;
        }
      }
      for (const list of Object.values(this.sockets)) { // carrying a request: looked at once kept
        for (const socket of list ?? []) if ((socket as LegSocket)[LEG] !== undefined) watched++;
      }
      if (watched === 0 && this.watchTimer !== undefined) {
        clearInterval(this.watchTimer);
        this.watchTimer = undefined;
      }
    }, WAITERS_CHECK_MS).unref();
  }

  // A free socket taken for a request: the idle time-out is the free list's, not the request's.
  override reuseSocket(socket: Duplex, req: ClientRequest): void {
    super.reuseSocket(socket, req);
    const s = socket as LegSocket;
    if (s[LEG] !== undefined && s.timeout !== undefined && s.timeout > 0) s.setTimeout(0);
  }

  // Pooled per TLS plan too: a plaintext connection must never carry a request meant for TLS; and
  // per traffic cluster: a connection counts against its own cluster's limits and follows its policy.
  override getName(options: LegOptions): string {
    return `${super.getName(options as Parameters<Agent['getName']>[0])}:${options.upstreamTls?.key ?? ''}:${options.cluster?.runtime.name ?? ''}`;
  }
}

export class Http1Upstream {
  private readonly agent: LegAgent;

  constructor(mode: UpstreamMode, stats: DirectionStats) {
    this.agent = new LegAgent(mode, stats);
  }

  request(t: UpstreamTarget, method: string, path: string, headers: OutgoingHttpHeaders): ClientRequest {
    return request({
      agent: this.agent, host: t.address, port: t.port, method, path, headers, setHost: false,
      ...(t.source !== undefined ? { localAddress: t.source } : {}),
      upstreamTls: t.tls, cluster: t.cluster,
    } as unknown as Parameters<typeof request>[0]);
  }

  /** Keep-alive connections not carrying a request close now. */
  closeIdle(): void {
    for (const list of Object.values(this.agent.freeSockets)) for (const socket of list ?? []) socket.destroy();
  }
}
