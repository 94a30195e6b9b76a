// The upstream side of the HTTP/1.1 path: a keep-alive pool of connections per destination and
// source address (opened the listener's way: direct, passthrough from 127.0.0.6 / ::6, or
// transparent from the client's address), each with its own response parser. Reads land in one
// shared buffer (`onread`: no Buffer and no 'data' event per read); the parser hands on views of
// it, and what one read produced goes to the client in one write (which copies it out). After a
// protocol switch a connection carries raw bytes for a tunnel (`carryRaw`) and is never pooled.
import type { Socket } from 'node:net';
import { MAX_HEAD_BYTES, ResponseParser, type ResponseHead, type SwitchRequest } from './response-parser.js';
import type { Endpoint, TcpKeepalive } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import { connectTls, type UpstreamTls } from '../tls/origination.js';
import { applyConnectPolicy, connectUpstream, trackUpstream, type UpstreamMode } from '../upstream.js';
// Every upstream read lands in the thread's shared read buffer, as the downstream reads do. Handlers
// run synchronously and copy what they keep before the next read.
import { sharedReadBuffer } from '../read-buffers.js';
import { DirectWriter } from '../direct-write.js';
import type { ClusterRuntime, Endpoint as TrafficEndpoint } from '../../traffic/cluster.js';
import { UNLIMITED } from '../../traffic/spec.js';

/** What the pool keeps at most idle per destination (and source address). */
export const MAX_IDLE_PER_KEY = 1024;
/**
 * An upstream that said `Keep-Alive: timeout=N` closes an idle connection after N s: the pool stops
 * reusing it this much earlier, so a request is not written just as the upstream closes (the
 * keep-alive race Envoy and Linkerd guard against the same way).
 */
export const KEEP_ALIVE_MARGIN_MS = 1_000;
/** How often idle connections of a limited cluster look for waiting requests elsewhere. */
const WAITERS_CHECK_MS = 200;

/**
 * What a cluster's connection policy says of one connection (DestinationRule connectionPool), and
 * what to call when it closes (its slot in the cluster's maxConnections).
 */
export interface ConnectionPolicy {
  /** connectTimeout: not connected by then, the connection fails (ETIMEDOUT). */
  readonly connectTimeoutMs?: number | undefined;
  /** http.idleTimeout: idle this long in the pool, it is closed. */
  readonly idleTimeoutMs?: number | undefined;
  /** http.maxRequestsPerConnection (0: no limit). */
  readonly maxRequests?: number | undefined;
  /** tcp.maxConnectionDuration: not reused once this old. */
  readonly maxDurationMs?: number | undefined;
  /** Other workers wait for this cluster's connection slots: close rather than pool. */
  readonly othersWaiting?: (() => boolean) | undefined;
  /** Called once when the connection closes (or never opened). */
  readonly released?: (() => void) | undefined;
  /** The cluster version it was opened for is gone (a configuration change): not reused, as Envoy drains an old cluster's pools. */
  readonly retired?: (() => boolean) | undefined;
  /** tcp.tcpKeepalive: SO_KEEPALIVE with these settings once connected. */
  readonly keepalive?: TcpKeepalive | undefined;
}

/**
 * A cluster's connection settings for a new connection to `ep` (and its slot back when it closes):
 * this pool's, and the HTTP/1.1 leg's of HTTP/2 clients (../http2/http1-upstream.ts).
 */
export function clusterConnectionPolicy(cluster: ClusterRuntime, ep: TrafficEndpoint): ConnectionPolicy {
  const cp = cluster.spec.policy.connectionPool;
  return {
    connectTimeoutMs: cp.tcp.connectTimeoutMs,
    idleTimeoutMs: cp.http.idleTimeoutMs,
    maxRequests: cp.http.maxRequestsPerConnection,
    maxDurationMs: cp.tcp.maxConnectionDurationMs,
    // Only a cluster with a connection limit has anyone to wait for a slot.
    ...(cp.tcp.maxConnections < UNLIMITED ? { othersWaiting: () => cluster.connectionWaiters() > 0 } : {}),
    released: () => cluster.releaseConnection(ep),
    retired: () => cluster.isClosed,
    keepalive: cp.tcp.tcpKeepalive,
  };
}

/** The request a connection is carrying the response of. */
export interface ResponseSink {
  /** The request was HEAD: its response has no body. */
  readonly headRequest: boolean;
  /** The protocol switch the request asked for (a 101 or a 2xx to CONNECT starts a tunnel). */
  readonly switching: SwitchRequest;
  /** A head (1xx ones included): views of the read buffer, to copy before the read is done. */
  onResponseHead(head: ResponseHead): void;
  /** Body bytes as they go to the client (a view, likewise); `payload`: content bytes among them. */
  onResponseBody(bytes: Buffer, payload: number): void;
  /** The final response is complete. */
  onResponseEnd(): void;
  /**
   * The connection failed or closed before the response ended. `retryable`: a reused connection
   * that had not answered anything (the upstream closed it while idle: the request may go again).
   */
  onUpstreamError(err: NodeJS.ErrnoException, retryable: boolean): void;
  /** One read is parsed: write out what it produced. False: the client is not keeping up, stop reading. */
  onReadDone(): boolean;
}

/** Where a tunnel's upstream bytes and end go, once the connection carries raw bytes. */
export interface RawSink {
  /** A read (a view of the shared buffer: copy what is kept). False: stop reading until resume(). */
  onData(bytes: Buffer): boolean;
  /** The upstream sent its FIN. */
  onEnd(): void;
  /** The connection is gone. */
  onClose(err: Error | undefined): void;
}

/**
 * The upstream ended the connection (its FIN) before the response did. Unlike a reset, a FIN does not
 * prove the request went unread (an app may read it, then close): `closedByPeer` tells them apart.
 */
function closedError(): NodeJS.ErrnoException & { closedByPeer: true } {
  return Object.assign(new Error('upstream closed the connection'), { code: 'ECONNRESET', closedByPeer: true as const });
}

export class UpstreamConnection {
  sink: ResponseSink | undefined;
  /** The last response allows reuse (HTTP/1.1 without `Connection: close`, not delimited by the close). */
  keepAlive = false;
  /** Requests carried before the current one. */
  uses = 0;
  idle = false;
  /** When it went idle (performance.now()), and until when it may be reused. */
  idleSince = 0;
  private reuseUntil = Infinity;
  private readonly born: number;
  readonly socket: Socket;
  /** A request's head goes through this (straight to the socket's handle once connected: direct-write.ts). */
  readonly writer: DirectWriter;
  /** Bytes of the current response arrived. */
  private answered = false;
  /** A 1xx head was the last one: its end is not the response's. */
  private interim = false;
  private paused = false;
  private raw: RawSink | undefined;
  /** Carrying a request (or the tunnel it became): counted in upstream_rq_active until it ends. */
  private busy = false;
  private readonly parser: ResponseParser;

  constructor(private readonly pool: UpstreamPool, readonly key: string, dst: Endpoint, source: string | undefined, tls: UpstreamTls | undefined,
    readonly policy: ConnectionPolicy | undefined = undefined) {
    this.born = policy === undefined ? 0 : performance.now();
    this.parser = new ResponseParser({
      onHead: (head) => {
        this.interim = head.status < 200;
        if (!this.interim) {
          this.keepAlive = head.keepAlive;
          if (head.keepAliveTimeoutMs !== undefined) this.reuseUntilIdle = head.keepAliveTimeoutMs - KEEP_ALIVE_MARGIN_MS;
        }
        this.sink?.onResponseHead(head);
      },
      onBody: (bytes, payload) => this.sink?.onResponseBody(bytes, payload),
      onEnd: () => {
        if (this.interim) this.interim = false;
        else this.sink?.onResponseEnd();
      },
    }, pool.maxHeadBytes);
    const onread = { buffer: sharedReadBuffer, callback: (n: number): boolean => this.onRead(n) };
    // May throw (transparent/IPv6 sockets are made through libc): the caller answers 503.
    try {
      this.socket = trackUpstream(tls ? connectTls(dst, tls, pool.stats, { onread }) : connectUpstream(pool.mode, dst, source, { onread }), pool.stats, policy !== undefined);
    } catch (err) {
      policy?.released?.();
      throw err;
    }
    this.writer = new DirectWriter(this.socket);
    if (policy?.released) this.socket.once('close', policy.released);
    if (policy !== undefined) applyConnectPolicy(this.socket, tls ? 'secureConnect' : 'connect', policy.connectTimeoutMs, policy.keepalive);
    this.socket.on('error', (err: NodeJS.ErrnoException) => {
      if (this.raw) this.raw.onClose(err);
      else this.fail(err);
    });
    this.socket.on('end', () => {
      if (this.raw) {
        this.raw.onEnd();
        return;
      }
      this.pool.remove(this); // idle: the upstream closed it (its 'close' comes later)
      // A body delimited by the close ends here; anything else was cut short.
      const sink = this.sink;
      if (sink) {
        const err = this.parser.finish();
        if (err) this.fail(err);
        else sink.onReadDone();
      }
      if (this.sink) this.fail(closedError());
    });
    this.socket.on('close', () => {
      this.idleNow();
      if (this.raw) {
        this.raw.onClose(undefined);
        return;
      }
      this.pool.remove(this);
      if (this.sink) this.fail(closedError());
    });
  }

  /** Idle time after which the upstream said it closes the connection (less the margin). */
  private reuseUntilIdle = Infinity;

  /** Goes idle in the pool; false when it may not carry another request (its limits, its age, others waiting). */
  goIdle(now: number): boolean {
    const p = this.policy;
    if (p !== undefined) {
      if (p.maxRequests !== undefined && p.maxRequests > 0 && this.uses + 1 >= p.maxRequests) return false;
      if (p.maxDurationMs !== undefined && now - this.born >= p.maxDurationMs) return false;
      if (p.othersWaiting?.() === true || p.retired?.() === true) return false;
    }
    this.idleSince = now;
    this.reuseUntil = now + Math.min(this.reuseUntilIdle, p?.idleTimeoutMs ?? Infinity);
    return true;
  }

  /** Whether an idle connection may still be reused at `now` (the upstream's Keep-Alive timeout, the policy's idle time and age). */
  reusable(now: number): boolean {
    if (now >= this.reuseUntil) return false;
    const max = this.policy?.maxDurationMs;
    return max === undefined || now - this.born < max;
  }

  /** From now on reads go to `raw` as they come (a tunnel); the connection is never pooled again. */
  carryRaw(raw: RawSink): void {
    this.sink = undefined; // the request goes on as the tunnel: still busy until the connection closes
    this.keepAlive = false;
    this.raw = raw;
    this.resume();
  }

  /** Takes the response of the request about to be written. */
  attach(sink: ResponseSink): void {
    if (!this.busy) {
      this.busy = true;
      this.pool.stats.upstreamRqActive++;
    }
    this.sink = sink;
    this.answered = false;
    this.interim = false;
    this.parser.reset(sink.headRequest, sink.switching);
    if (this.paused) this.resume();
  }

  /** The client drained: read on. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.socket.resume();
  }

  destroy(): void {
    this.sink = undefined;
    this.idleNow();
    this.socket.destroy();
  }

  /** Its request is over (answered, cut, or the connection gone): no longer counted as active. */
  idleNow(): void {
    if (!this.busy) return;
    this.busy = false;
    this.pool.stats.upstreamRqActive--;
  }

  private onRead(n: number): boolean {
    if (this.raw) {
      if (this.raw.onData(sharedReadBuffer.subarray(0, n))) return true;
      this.paused = true;
      return false;
    }
    const sink = this.sink;
    if (!sink) { // an idle connection has nothing to say: not one to reuse
      this.socket.destroy();
      return false;
    }
    this.answered = true;
    const err = this.parser.execute(sharedReadBuffer, n);
    if (err) {
      this.fail(err);
      sink.onReadDone();
      return false;
    }
    const more = sink.onReadDone();
    // The response may have ended in this read (the connection back in the pool, or carrying the
    // client's next request): only a connection still owed a response is held back.
    if (more || this.sink === undefined) return true;
    this.paused = true;
    return false;
  }

  private fail(err: NodeJS.ErrnoException): void {
    const sink = this.sink;
    this.sink = undefined;
    this.idleNow();
    this.socket.destroy();
    sink?.onUpstreamError(err, this.uses > 0 && !this.answered);
  }
}

export function poolKey(dst: Endpoint, source: string | undefined, tls?: UpstreamTls): string {
  return `${dst.address}|${dst.port}|${source ?? ''}${tls ? `|${tls.key}` : ''}`;
}

/** endpointKey's answers found by identity (a WeakMap lookup costs its hashing, per request). */
const RECENT_ENDPOINT_KEYS = 4;

/** Idle connections per `address|port|source`, last in first out (the warmest first). */
export class UpstreamPool {
  private readonly idleByKey = new Map<string, UpstreamConnection[]>();
  /**
   * The keys of traffic endpoints reached from no particular source, made once per endpoint and TLS
   * setting: a key built for every request cost the string and its hashing in the lookup (~0.3 µs).
   */
  private readonly endpointKeys = new WeakMap<TrafficEndpoint, { readonly tls: UpstreamTls | undefined; readonly key: string }>();

  /** `maxHeadBytes`: the largest response head taken (MESH_MAX_HEADERS_KB). */
  constructor(readonly mode: UpstreamMode, readonly stats: DirectionStats, readonly maxHeadBytes = MAX_HEAD_BYTES, private readonly maxIdlePerKey = MAX_IDLE_PER_KEY) {}

  /**
   * A pooled connection to `dst` from `source` (`key`: poolKey of both and of `tls`), or a new one
   * (`fresh`: always new). May throw (see connectUpstream).
   */
  acquire(key: string, dst: Endpoint, source: string | undefined, fresh = false, tls?: UpstreamTls): UpstreamConnection {
    return this.idle(key, fresh) ?? this.open(key, dst, source, tls);
  }

  /** endpointKey's last answers, looked up by identity before the WeakMap (a small cluster's endpoints, round after round). */
  private readonly recentKeys = new Array<{ readonly endpoint: TrafficEndpoint; readonly tls: UpstreamTls | undefined; readonly key: string } | undefined>(RECENT_ENDPOINT_KEYS).fill(undefined);
  private recentNext = 0;

  /** poolKey(endpoint, no source, tls) for a traffic endpoint (an object that lives as long as its membership). */
  endpointKey(endpoint: TrafficEndpoint, tls: UpstreamTls | undefined): string {
    const recent = this.recentKeys;
    for (let k = 0; k < RECENT_ENDPOINT_KEYS; k++) {
      const r = recent[k];
      if (r !== undefined && r.endpoint === endpoint && r.tls === tls) return r.key;
    }
    let known = this.endpointKeys.get(endpoint);
    if (known === undefined || known.tls !== tls) {
      known = { tls, key: poolKey(endpoint, undefined, tls) };
      this.endpointKeys.set(endpoint, known);
    }
    recent[this.recentNext] = { endpoint, tls, key: known.key };
    this.recentNext = (this.recentNext + 1) % RECENT_ENDPOINT_KEYS;
    return known.key;
  }

  /**
   * A pooled connection for `key` still fit to carry a request, if any (`fresh`: none wanted). `now`:
   * a performance.now() the caller read this turn (0: read here, if a connection's limits need it).
   */
  idle(key: string, fresh = false, now = 0): UpstreamConnection | undefined {
    const list = fresh ? undefined : this.idleByKey.get(key);
    if (!list) return undefined;
    for (let c = list.pop(); c; c = list.pop()) {
      c.idle = false;
      // Closing, or idle past the time the upstream (or the policy) keeps it: not one to write to.
      if (!c.socket.writable || (c.policy !== undefined || c.idleSince > 0) && !c.reusable(now ||= performance.now()) || c.policy?.retired?.() === true) {
        c.destroy();
        continue;
      }
      c.uses++;
      return c;
    }
    return undefined;
  }

  /** A new connection (may throw: see connectUpstream); `policy`: its cluster's connection settings. */
  open(key: string, dst: Endpoint, source: string | undefined, tls?: UpstreamTls, policy?: ConnectionPolicy): UpstreamConnection {
    return new UpstreamConnection(this, key, dst, source, tls, policy);
  }

  /** Back to the pool after a complete response, if it may carry another (`now`: performance.now()). */
  release(c: UpstreamConnection, now = performance.now()): void {
    c.sink = undefined;
    c.idleNow();
    if (!c.keepAlive || c.socket.destroyed) {
      c.destroy();
      return;
    }
    let list = this.idleByKey.get(c.key);
    if (!list) this.idleByKey.set(c.key, (list = []));
    if (list.length >= this.maxIdlePerKey) {
      c.destroy();
      return;
    }
    if (!c.goIdle(now)) {
      c.destroy();
      return;
    }
    c.idle = true;
    c.resume(); // an idle connection reads, to see the upstream close it
    list.push(c);
    if (c.policy !== undefined) this.watchClusterConnections();
  }

  /** Idle connections of traffic clusters: closed when their cluster is replaced or another worker waits for a slot. */
  private clusterTimer: NodeJS.Timeout | undefined;

  /**
   * While the pool holds idle connections of traffic clusters, looks a few times a second whether
   * one's cluster was replaced (a new configuration: its slots belong to the new version, as Envoy
   * drains a replaced cluster's pools) or a request anywhere waits for one of its slots (the limit
   * serves every worker in turn: 1 means 1, across workers): such a connection is closed.
   */
  private watchClusterConnections(): void {
    this.clusterTimer ??= setInterval(() => {
      let watched = 0;
      for (const list of this.idleByKey.values()) {
        for (const c of [...list]) {
          const p = c.policy;
          if (p === undefined) continue;
          if (p.retired?.() === true || p.othersWaiting?.() === true) c.destroy();
          else watched++;
        }
      }
      if (watched === 0 && this.clusterTimer !== undefined) {
        clearInterval(this.clusterTimer);
        this.clusterTimer = undefined;
      }
    }, WAITERS_CHECK_MS).unref();
  }

  /** Closes idle connections past their reuse time (the handler's periodic sweep). */
  sweep(now: number): void {
    for (const list of this.idleByKey.values()) {
      for (const c of [...list]) if (!c.reusable(now)) c.destroy();
    }
  }

  remove(c: UpstreamConnection): void {
    if (!c.idle) return;
    c.idle = false;
    const list = this.idleByKey.get(c.key);
    const i = list ? list.indexOf(c) : -1;
    if (i >= 0) list!.splice(i, 1);
    if (list && list.length === 0) this.idleByKey.delete(c.key);
  }

  /** Closes the idle connections (drain); busy ones finish their response first. */
  closeIdle(): void {
    for (const list of this.idleByKey.values()) for (const c of [...list]) c.destroy();
    this.idleByKey.clear();
  }

  get idleCount(): number {
    let n = 0;
    for (const list of this.idleByKey.values()) n += list.length;
    return n;
  }
}
