// HTTP/2 connections to upstreams, shared: one per destination (address, port, source address, TLS
// plan) carries many streams, and another opens only when the peer's SETTINGS_MAX_CONCURRENT_STREAMS
// is reached. Each session runs on the frame layer of our own (codec-session.ts), not node:http2's
// client: most of an HTTP/2 request's cost was there, and responses are judged by RFC 9113 there.
// A stream is given a session once the peer's SETTINGS have arrived: before that nothing
// of the request has left, so a peer that turns out not to speak HTTP/2 (an HTTP/1.1 server answers
// the preface with a 400, which reads as a broken frame) costs nothing but a retry over HTTP/1.1. That
// answer is remembered for the destination for a while (HTTP1_MEMORY_MS), so the probe is not paid
// on every request. TLS to a service outside the mesh offers `h2` and `http/1.1` in ALPN; the
// server's choice decides. Mutual TLS to another sidecar offers `istio-h2`, as Istio's sidecars do
// for HTTP/2 (the peer sniffs the preface inside all the same). A peer's GOAWAY takes its session out of use; its open streams finish, then it closes.
// A traffic cluster's sessions are its own (another cluster's requests to the same endpoint open
// their own), and follow its DestinationRule connectionPool, read once per session (sessionPolicy):
// maxConcurrentStreams caps the streams of one session (beyond it, another session to the endpoint),
// maxRequestsPerConnection and maxConnectionDuration drain a session (no new stream; it closes, with
// a GOAWAY, when its last stream ends), idleTimeout closes it idle, tcpKeepalive sets its socket's
// keep-alive, connectTimeout and maxConnections bound its connection. A session of a replaced
// cluster (a new configuration) is drained the same way; an idle session of a limited cluster closes
// when a request anywhere waits for the cluster's slots. A session this pool closes without streams
// gives its maxConnections slot back as it closes, not when its socket is gone: a request right
// behind it is not refused for a connection that is on its way out.
import { H2 } from './node-http2.js';
import { CodecClientSession } from './codec-session.js';
import { DEFAULT_SETTINGS } from './codec/connection.js';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { scope } from '../../log/logger.js';
import type { Endpoint, TcpKeepalive } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import { MESH_ALPN_H2 } from '../tls/mesh-alpn.js';
import { connectTls, type TlsHandshakeError, type UpstreamTls } from '../tls/origination.js';
import { peerOf } from '../tls/peer-identity.js';
import { applyConnectPolicy, connectUpstream, trackUpstream, type UpstreamMode } from '../upstream.js';
import type { ClusterRuntime, Endpoint as TrafficEndpoint } from '../../traffic/cluster.js';
import { UNLIMITED, type ConnectionPoolSpec } from '../../traffic/spec.js';
import { closeWhenIdle } from './idle-close.js';

const log = scope('default');

/** How long a destination found to speak only HTTP/1.1 is sent HTTP/1.1 without asking again. */
export const HTTP1_MEMORY_MS = 60_000;
/** An upstream session without streams this long is closed (a cluster's http.idleTimeout replaces it). */
export const IDLE_SESSION_MS = 60_000;
/** Streams a session is given when the peer's SETTINGS name no limit (RFC 9113 advises at least 100). */
const INITIAL_STREAMS = 100;
/** How often idle sessions of traffic clusters look for a replaced cluster or requests waiting for its slots (as the HTTP/1.1 pool does). */
const WAITERS_CHECK_MS = 200;
/** The longest delay a node timer takes (about 24.8 days): a longer duration waits this long. */
const MAX_TIMER_MS = 2_147_483_647;

/** What a cluster's connectionPool says of one HTTP/2 session: read once, when the session opens. */
export interface SessionPolicy {
  /** http.idleTimeout: without streams this long, the session closes (IDLE_SESSION_MS when unset). */
  readonly idleMs: number;
  /** http.maxConcurrentStreams: streams one session carries at most (with the peer's own limit); Infinity: the peer's. */
  readonly maxStreams: number;
  /** http.maxRequestsPerConnection: streams a session is given in all, then it drains; Infinity: no limit. */
  readonly maxRequests: number;
  /** tcp.maxConnectionDuration: from its connection, the session drains after this long; undefined: no limit. */
  readonly maxDurationMs: number | undefined;
  /** tcp.tcpKeepalive: SO_KEEPALIVE on the session's socket once connected. */
  readonly keepalive: TcpKeepalive | undefined;
  /** tcp.connectTimeout: not connected by then (TLS included), the session fails (ETIMEDOUT). */
  readonly connectTimeoutMs: number;
  /** tcp.maxConnections is set: an idle session is closed when a request anywhere waits for one of the cluster's slots. */
  readonly limited: boolean;
}

/** The session policy of a cluster's connection pool (pure). */
export function sessionPolicy(cp: ConnectionPoolSpec): SessionPolicy {
  const h = cp.http;
  return {
    idleMs: Math.min(h.idleTimeoutMs ?? IDLE_SESSION_MS, MAX_TIMER_MS),
    maxStreams: h.maxConcurrentStreams !== undefined && h.maxConcurrentStreams > 0 ? h.maxConcurrentStreams : Infinity,
    maxRequests: h.maxRequestsPerConnection > 0 ? h.maxRequestsPerConnection : Infinity,
    maxDurationMs: cp.tcp.maxConnectionDurationMs === undefined ? undefined : Math.min(cp.tcp.maxConnectionDurationMs, MAX_TIMER_MS),
    keepalive: cp.tcp.tcpKeepalive,
    connectTimeoutMs: Math.min(cp.tcp.connectTimeoutMs, MAX_TIMER_MS),
    limited: cp.tcp.maxConnections < UNLIMITED,
  };
}

/** How many streams a session takes now: the peer's SETTINGS_MAX_CONCURRENT_STREAMS (none yet: INITIAL_STREAMS) within the policy's. */
export function sessionCapacity(peerMaxConcurrentStreams: number | undefined, policyMaxStreams: number): number {
  return Math.min(peerMaxConcurrentStreams ?? INITIAL_STREAMS, policyMaxStreams);
}

export interface UpstreamTarget {
  readonly address: string;
  readonly port: number;
  readonly tls?: UpstreamTls | undefined;
  /** The source address to bind (inbound passthrough and TPROXY). */
  readonly source?: string | undefined;
  /**
   * Traffic management: the endpoint's cluster, whose maxConnections a new session counts against
   * (none left: the stream fails with EOVERFLOW, 503 UO) and whose connectTimeout it keeps.
   */
  readonly cluster?: { readonly runtime: ClusterRuntime; readonly endpoint: TrafficEndpoint } | undefined;
}

/** Why a stream could not get a session: its cluster's maxConnections. */
export function overflowError(): NodeJS.ErrnoException {
  return Object.assign(new Error('upstream overflow: the cluster\'s maxConnections'), { code: 'EOVERFLOW' });
}

export type UpstreamRoute =
  | { readonly kind: 'h2'; readonly session: CodecClientSession; readonly local: string | undefined;
    /** The upstream sidecar's verified principal (mutual TLS); undefined otherwise. */
    readonly principal: string | undefined; release(): void }
  | { readonly kind: 'http1' }
  | { readonly kind: 'failed'; readonly error: NodeJS.ErrnoException; readonly transportFailure?: string | undefined };

type Waiter = (route: UpstreamRoute) => void;

/** One stream's hold on a session: a record, not a closure, since one is made per request. */
class SessionRoute {
  readonly kind = 'h2';
  readonly session: CodecClientSession;
  readonly local: string | undefined;
  readonly principal: string | undefined;
  private released = false;

  constructor(private readonly pool: Http2UpstreamPool, private readonly entry: SessionEntry) {
    this.session = entry.session!;
    this.local = entry.local;
    this.principal = entry.principal;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.pool.streamDone(this.entry);
  }
}

class SessionEntry {
  session: CodecClientSession | undefined;
  /** Streams given to it and not yet released (those waiting for its SETTINGS included). */
  streams = 0;
  /** When `streams` last went to 0 (performance.now()). */
  idleSince = performance.now();
  ready = false;
  /** GOAWAY received, failed or closing: no new streams, and waiters are not served by it. */
  retired = false;
  /** Drained (its policy's limits, or its cluster replaced): no new streams; closes once its streams are done. */
  draining = false;
  /**
   * Streams it takes at once: before the peer's SETTINGS, the policy's maxConcurrentStreams (none:
   * every stream waits for this session); after, the peer's limit within it.
   */
  capacity: number;
  /** Streams it may still be given (maxRequestsPerConnection; Infinity: no limit). */
  left: number;
  local: string | undefined;
  /** At the last idle check, requests elsewhere waited for a connection slot while this session had room. */
  blocking = false;
  principal: string | undefined = undefined;
  /** Gives back its connection slot in the cluster's maxConnections (at most once); undefined: none held. */
  releaseSlot: (() => void) | undefined;
  readonly waiters: Waiter[] = [];

  /** `runtime`: the traffic cluster it was opened for (its policy read once, here). */
  constructor(readonly runtime: ClusterRuntime | undefined, readonly policy: SessionPolicy | undefined) {
    this.capacity = policy?.maxStreams ?? Infinity;
    this.left = policy?.maxRequests ?? Infinity;
  }
}

// A traffic cluster's sessions are its own: `|name` at the end.
const keyOf = (t: UpstreamTarget): string => `${t.address}|${t.port}|${t.source ?? ''}|${t.tls?.key ?? ''}|${t.cluster?.runtime.name ?? ''}`;
const destinationKey = (t: UpstreamTarget): string => `${t.address}|${t.port}|${t.tls?.key ?? ''}`;

export class Http2UpstreamPool {
  private readonly entries = new Map<string, SessionEntry[]>();
  private readonly http1Until = new Map<string, number>();
  /** Drained sessions still carrying streams (out of `entries`): closeAll reaches them too. */
  private readonly drained = new Set<SessionEntry>();

  constructor(private readonly mode: UpstreamMode, private readonly stats: DirectionStats,
    private readonly settings: { readonly maxHeaderListSize: number }) {}

  /** A session for one stream (or why there is none, or that the destination speaks HTTP/1.1 only). */
  acquire(t: UpstreamTarget, done: Waiter): void {
    // A cluster whose port declares HTTP speaks HTTP/1.1 to its endpoints (Istio's cluster has no HTTP/2 options).
    if (t.cluster?.runtime.spec.http1Upstream === true) {
      done({ kind: 'http1' });
      return;
    }
    const until = this.http1Until.size === 0 ? undefined : this.http1Until.get(destinationKey(t));
    if (until !== undefined) {
      if (until > performance.now()) {
        done({ kind: 'http1' });
        return;
      }
      this.http1Until.delete(destinationKey(t));
    }
    const key = this.keyFor(t);
    let list = this.entries.get(key);
    if (!list) this.entries.set(key, (list = []));
    // One connection is opened at a time: streams wait for it (however many, unless the cluster's
    // maxConcurrentStreams says) until the peer's SETTINGS say how many it takes; beyond that, another one.
    const runtime = t.cluster?.runtime;
    let entry: SessionEntry | undefined;
    for (let i = 0; i < list.length; i++) {
      const e = list[i]!;
      if (e.runtime !== runtime) {
        // Another version of the cluster: once it is replaced, its sessions' streams finish and they take no more.
        if (e.runtime?.isClosed === true) {
          this.drain(key, e);
          i--;
        }
        continue;
      }
      if (e.streams < e.capacity) {
        entry = e;
        break;
      }
    }
    if (!entry) {
      entry = new SessionEntry(runtime, runtime === undefined ? undefined : sessionPolicy(runtime.spec.policy.connectionPool));
      list.push(entry);
      this.entries.set(key, list); // drain() may have let go of an emptied list
      if (runtime !== undefined) this.watchIdle();
      this.open(key, entry, t);
    }
    entry.streams++;
    // maxRequestsPerConnection: its last stream given, the session drains (Infinity never reaches 0).
    if (--entry.left === 0) this.drain(key, entry);
    if (entry.ready) done(this.route(entry));
    else entry.waiters.push(done);
  }

  // The last target's key: kept while the next streams go the same way (most do), so that no key
  // string is built and hashed per stream.
  private lastAddress = '';
  private lastPort = -1;
  private lastSource: string | undefined;
  private lastTls: UpstreamTarget['tls'];
  private lastRuntime: ClusterRuntime | undefined;
  private lastKey = '';

  private keyFor(t: UpstreamTarget): string {
    const runtime = t.cluster?.runtime;
    if (t.address !== this.lastAddress || t.port !== this.lastPort || t.source !== this.lastSource || t.tls !== this.lastTls || runtime !== this.lastRuntime) {
      this.lastAddress = t.address;
      this.lastPort = t.port;
      this.lastSource = t.source;
      this.lastTls = t.tls;
      this.lastRuntime = runtime;
      this.lastKey = keyOf(t);
    }
    return this.lastKey;
  }

  /** Sessions without streams close now; the others after their last stream (GOAWAY first). */
  closeIdle(): void {
    for (const [key, list] of this.entries) {
      for (const e of [...list]) if (e.streams === 0) this.closeIdleEntry(key, e);
    }
  }

  closeAll(): void {
    for (const list of this.entries.values()) for (const e of list) e.session?.destroy();
    for (const e of this.drained) e.session?.destroy();
    if (this.waitersTimer !== undefined) clearInterval(this.waitersTimer);
    this.waitersTimer = undefined;
  }

  private route(e: SessionEntry): UpstreamRoute {
    return new SessionRoute(this, e);
  }

  /** A stream of `e` is over (its route's release, once). */
  streamDone(e: SessionEntry): void {
    if (--e.streams !== 0) return;
    e.idleSince = performance.now();
    if (e.draining) this.closeDrained(e);
  }

  private waitersTimer: NodeJS.Timeout | undefined;

  /**
   * While a traffic cluster has a session here (started once per session, not per request), looks a
   * few times a second whether an idle one's cluster was replaced (its slots belong to the new
   * version), or, for a limited one (tcp.maxConnections), whether a request anywhere (another worker,
   * an HTTP/1.1 client) waits for one of its slots: such a session is closed, so the limit serves
   * every worker in turn (the HTTP/1.1 pool's rule).
   */
  private watchIdle(): void {
    this.waitersTimer ??= setInterval(() => {
      let watched = 0;
      for (const [key, list] of this.entries) {
        for (const e of [...list]) {
          if (e.runtime === undefined) continue;
          const waiters = e.policy!.limited && e.ready && e.runtime.connectionWaiters() > 0;
          if (e.ready && e.streams === 0 && (e.runtime.isClosed || waiters)) {
            this.closeIdleEntry(key, e);
            continue;
          }
          // A busy session never idles: requests waiting for a slot while it has room for their
          // streams wait for another endpoint or worker. Seen at two checks in a row (a waiter for
          // this session would have joined it by then), it drains, so its slot changes hands.
          const blocking = waiters && !e.draining && e.streams < e.capacity;
          if (blocking && e.blocking) this.drain(key, e);
          e.blocking = blocking;
          watched++;
        }
      }
      if (watched === 0 && this.waitersTimer !== undefined) {
        clearInterval(this.waitersTimer);
        this.waitersTimer = undefined;
      }
    }, WAITERS_CHECK_MS).unref();
  }

  /** Out of the list for `key`: no request finds it any more. */
  private unlist(key: string, e: SessionEntry): void {
    const list = this.entries.get(key);
    if (!list) return;
    const i = list.indexOf(e);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.entries.delete(key);
  }

  private forget(key: string, e: SessionEntry): void {
    e.retired = true;
    this.unlist(key, e);
  }

  /**
   * The session takes no new stream (its maxRequestsPerConnection given, its maxConnectionDuration
   * reached, its cluster replaced); the streams it has (those waiting for its SETTINGS included)
   * finish, then it closes with a GOAWAY, as Envoy drains a connection.
   */
  private drain(key: string, e: SessionEntry): void {
    if (e.draining || e.retired) return;
    e.draining = true;
    this.unlist(key, e);
    if (e.ready && e.streams === 0) this.closeDrained(e);
    else this.drained.add(e);
  }

  private closeDrained(e: SessionEntry): void {
    this.drained.delete(e);
    e.retired = true;
    e.releaseSlot?.();
    e.session?.close();
  }

  /** An idle session closes now (GOAWAY), its slot given back at once. */
  private closeIdleEntry(key: string, e: SessionEntry): void {
    this.forget(key, e);
    e.releaseSlot?.();
    e.session?.close();
  }

  /** Everyone waiting gets `route`; the entry is dropped. */
  private fail(key: string, e: SessionEntry, route: UpstreamRoute): void {
    this.forget(key, e);
    this.drained.delete(e);
    for (const w of e.waiters.splice(0)) w(route);
  }

  private markHttp1(key: string, e: SessionEntry, t: UpstreamTarget, why: string): void {
    log.debug(`upstream ${t.address}:${t.port} does not speak HTTP/2 (${why}): HTTP/1.1 for ${HTTP1_MEMORY_MS / 1000}s`);
    this.http1Until.set(destinationKey(t), performance.now() + HTTP1_MEMORY_MS);
    // The probe's connection is of no further use: its slot in maxConnections goes back now, before
    // the waiting streams open their HTTP/1.1 connections (its close comes later).
    e.releaseSlot?.();
    this.fail(key, e, { kind: 'http1' });
  }

  private open(key: string, e: SessionEntry, t: UpstreamTarget): void {
    const dst: Endpoint = { address: t.address, port: t.port };
    const c = t.cluster;
    if (c && !c.runtime.tryAcquireConnection(c.endpoint)) {
      queueMicrotask(() => this.fail(key, e, { kind: 'failed', error: overflowError() }));
      return;
    }
    if (c) {
      let held = true;
      e.releaseSlot = () => {
        if (!held) return;
        held = false;
        c.runtime.releaseConnection(c.endpoint);
      };
    }
    let socket: Socket | TLSSocket;
    try {
      socket = t.tls
        ? connectTls(dst, { ...t.tls, alpn: t.tls.mesh ? MESH_ALPN_H2 : ['h2', 'http/1.1'] }, this.stats)
        : connectUpstream(this.mode, dst, t.source);
    } catch (err) { // a socket libc would not make
      e.releaseSlot?.();
      this.stats.upstreamCxConnectFail++;
      if (e.runtime !== undefined) this.stats.routedCxConnectFail++;
      queueMicrotask(() => this.fail(key, e, { kind: 'failed', error: err as NodeJS.ErrnoException }));
      return;
    }
    trackUpstream(socket, this.stats, e.runtime !== undefined);
    const p = e.policy;
    if (e.releaseSlot) socket.once('close', e.releaseSlot);
    if (p) applyConnectPolicy(socket, t.tls ? 'secureConnect' : 'connect', p.connectTimeoutMs, p.keepalive);
    let connected = false;
    socket.once('error', (err: TlsHandshakeError) => {
      if (connected) return; // the session reports it
      this.stats.upstreamCxConnectFail++;
      if (e.runtime !== undefined) this.stats.routedCxConnectFail++;
      this.fail(key, e, { kind: 'failed', error: err, transportFailure: err.tlsHandshake ? err.message : undefined });
    });
    socket.once(t.tls ? 'secureConnect' : 'connect', () => {
      connected = true;
      e.local = socket.localAddress !== undefined ? `${socket.localAddress}:${socket.localPort ?? 0}` : undefined;
      if (t.tls?.mesh) e.principal = peerOf(socket)?.principal;
      const alpn = (socket as TLSSocket).alpnProtocol;
      if (t.tls && !t.tls.mesh && alpn !== 'h2') {
        socket.destroy();
        this.markHttp1(key, e, t, `ALPN ${alpn || 'none'}`);
        return;
      }
      this.session(key, e, t, socket);
    });
  }

  private session(key: string, e: SessionEntry, t: UpstreamTarget, socket: Socket): void {
    // Our own frame layer, not node:http2's client (most of an HTTP/2 request's cost through the
    // proxy: docs/PERFORMANCE.md); responses are judged by RFC 9113 there.
    const session = new CodecClientSession(socket, { ...DEFAULT_SETTINGS, maxHeaderListSize: this.settings.maxHeaderListSize });
    e.session = session;
    const maxStreams = e.policy?.maxStreams ?? Infinity;
    // Every SETTINGS frame of the peer may change its limit; the first one makes the session ready.
    session.on('remoteSettings', (settings: { maxConcurrentStreams: number | undefined }) => {
      e.capacity = sessionCapacity(settings.maxConcurrentStreams, maxStreams);
      if (e.ready || e.retired) return;
      e.ready = true;
      for (const w of e.waiters.splice(0)) w(this.route(e));
    });
    session.on('error', (err: NodeJS.ErrnoException) => {
      if (!e.ready && err.code === 'ERR_HTTP2_ERROR') this.markHttp1(key, e, t, err.message);
      else if (!e.ready) this.fail(key, e, { kind: 'failed', error: err });
    });
    // The peer's GOAWAY: no new stream; the session closes once its last stream is over (the peer may
    // keep it open, as node's server does for a stream above the GOAWAY's last one).
    session.on('goaway', () => { this.drain(key, e); });
    let lifetime: NodeJS.Timeout | undefined;
    if (e.policy?.maxDurationMs !== undefined) {
      // tcp.maxConnectionDuration, from the connection: then the session drains.
      lifetime = setTimeout(() => this.drain(key, e), e.policy.maxDurationMs);
      lifetime.unref();
    }
    session.once('close', () => {
      if (lifetime !== undefined) clearTimeout(lifetime);
      this.drained.delete(e);
      if (!e.ready) this.fail(key, e, { kind: 'failed', error: Object.assign(new Error('upstream closed the connection'), { code: 'ECONNRESET' }) });
      else this.forget(key, e);
    });
    closeWhenIdle(session, e.policy?.idleMs ?? IDLE_SESSION_MS, () => (e.streams === 0 ? performance.now() - e.idleSince : 0), () => this.closeIdleEntry(key, e));
  }
}

/** RST_STREAM codes an upstream's reset maps to for the client's stream (the same code, or INTERNAL_ERROR). */
export function resetCodeFor(code: number | undefined): number {
  return code === undefined || code === H2.NO_ERROR ? H2.INTERNAL_ERROR : code;
}
