// HTTP/2 connections to upstreams, shared: one per destination (address, port, source address, TLS
// plan) carries many streams, and another opens only when the peer's SETTINGS_MAX_CONCURRENT_STREAMS
// is reached. A stream is given a session once the peer's SETTINGS have arrived: before that nothing
// of the request has left, so a peer that turns out not to speak HTTP/2 (an HTTP/1.1 server answers
// the preface with a 400: nghttp2's protocol error) costs nothing but a retry over HTTP/1.1. That
// answer is remembered for the destination for a while (HTTP1_MEMORY_MS), so the probe is not paid
// on every request. TLS to a service outside the mesh offers `h2` and `http/1.1` in ALPN; the
// server's choice decides. Mutual TLS to another sidecar offers `istio-h2`, as Istio's sidecars do
// for HTTP/2 (the peer sniffs the preface inside all the same). A peer's GOAWAY takes its session out of use; its open streams finish.
import type { ClientHttp2Session } from 'node:http2';
import { H2, http2 } from './node-http2.js';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { scope } from '../../log/logger.js';
import type { Endpoint } from '../socket-options.js';
import type { DirectionStats } from '../stats.js';
import { MESH_ALPN_H2 } from '../tls/mesh-alpn.js';
import { connectTls, type TlsHandshakeError, type UpstreamTls } from '../tls/origination.js';
import { connectUpstream, trackUpstream, type UpstreamMode } from '../upstream.js';
import type { ClusterRuntime, Endpoint as TrafficEndpoint } from '../../traffic/cluster.js';

const log = scope('default');

/** How long a destination found to speak only HTTP/1.1 is sent HTTP/1.1 without asking again. */
export const HTTP1_MEMORY_MS = 60_000;
/** An upstream session without streams this long is closed. */
const IDLE_SESSION_MS = 60_000;
/** Streams a session is given when the peer's SETTINGS name no limit (RFC 9113 advises at least 100). */
const INITIAL_STREAMS = 100;

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
  | { readonly kind: 'h2'; readonly session: ClientHttp2Session; readonly local: string | undefined; release(): void }
  | { readonly kind: 'http1' }
  | { readonly kind: 'failed'; readonly error: NodeJS.ErrnoException; readonly transportFailure?: string | undefined };

type Waiter = (route: UpstreamRoute) => void;

class SessionEntry {
  session: ClientHttp2Session | undefined;
  streams = 0;
  ready = false;
  /** GOAWAY received or closing: no new streams. */
  retired = false;
  local: string | undefined;
  readonly waiters: Waiter[] = [];

  get capacity(): number {
    return this.session?.remoteSettings.maxConcurrentStreams ?? INITIAL_STREAMS;
  }
}

const keyOf = (t: UpstreamTarget): string => `${t.address}|${t.port}|${t.source ?? ''}|${t.tls?.key ?? ''}`;
const destinationKey = (t: UpstreamTarget): string => `${t.address}|${t.port}|${t.tls?.key ?? ''}`;

export class Http2UpstreamPool {
  private readonly entries = new Map<string, SessionEntry[]>();
  private readonly http1Until = new Map<string, number>();

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
    const key = keyOf(t);
    let list = this.entries.get(key);
    if (!list) this.entries.set(key, (list = []));
    // One connection is opened at a time: streams wait for it (however many) until the peer's SETTINGS
    // say how many it takes; beyond that, another one.
    let entry = list.find((e) => !e.retired && (!e.ready || e.streams < e.capacity));
    if (!entry) {
      entry = new SessionEntry();
      list.push(entry);
      this.open(key, entry, t);
    }
    entry.streams++;
    if (entry.ready) done(this.route(entry));
    else entry.waiters.push(done);
  }

  /** Sessions without streams close now; the others after their last stream (GOAWAY first). */
  closeIdle(): void {
    for (const list of this.entries.values()) {
      for (const e of list) if (e.streams === 0) e.session?.close();
    }
  }

  closeAll(): void {
    for (const list of this.entries.values()) for (const e of list) e.session?.destroy();
  }

  private route(e: SessionEntry): UpstreamRoute {
    let released = false;
    return {
      kind: 'h2', session: e.session!, local: e.local,
      release: () => {
        if (released) return;
        released = true;
        e.streams--;
      },
    };
  }

  private forget(key: string, e: SessionEntry): void {
    e.retired = true;
    const list = this.entries.get(key);
    if (!list) return;
    const i = list.indexOf(e);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.entries.delete(key);
  }

  /** Everyone waiting gets `route`; the entry is dropped. */
  private fail(key: string, e: SessionEntry, route: UpstreamRoute): void {
    this.forget(key, e);
    for (const w of e.waiters.splice(0)) w(route);
  }

  private markHttp1(key: string, e: SessionEntry, t: UpstreamTarget, why: string): void {
    log.debug(`upstream ${t.address}:${t.port} does not speak HTTP/2 (${why}): HTTP/1.1 for ${HTTP1_MEMORY_MS / 1000}s`);
    this.http1Until.set(destinationKey(t), performance.now() + HTTP1_MEMORY_MS);
    this.fail(key, e, { kind: 'http1' });
  }

  private open(key: string, e: SessionEntry, t: UpstreamTarget): void {
    const dst: Endpoint = { address: t.address, port: t.port };
    const c = t.cluster;
    if (c && !c.runtime.tryAcquireConnection(c.endpoint)) {
      queueMicrotask(() => this.fail(key, e, { kind: 'failed', error: overflowError() }));
      return;
    }
    let socket: Socket | TLSSocket;
    try {
      socket = t.tls
        ? connectTls(dst, { ...t.tls, alpn: t.tls.mesh ? MESH_ALPN_H2 : ['h2', 'http/1.1'] }, this.stats)
        : connectUpstream(this.mode, dst, t.source);
    } catch (err) { // a socket libc would not make
      c?.runtime.releaseConnection(c.endpoint);
      this.stats.upstreamCxConnectFail++;
      queueMicrotask(() => this.fail(key, e, { kind: 'failed', error: err as NodeJS.ErrnoException }));
      return;
    }
    trackUpstream(socket, this.stats);
    if (c) {
      socket.once('close', () => c.runtime.releaseConnection(c.endpoint));
      const ms = c.runtime.spec.policy.connectionPool.tcp.connectTimeoutMs;
      const timer = setTimeout(() => {
        socket.destroy(Object.assign(new Error(`upstream connect timeout (${ms} ms)`), { code: 'ETIMEDOUT', connectTimeout: true }));
      }, ms);
      socket.once(t.tls ? 'secureConnect' : 'connect', () => clearTimeout(timer));
      socket.once('close', () => clearTimeout(timer));
    }
    let connected = false;
    socket.once('error', (err: TlsHandshakeError) => {
      if (connected) return; // the session reports it
      this.stats.upstreamCxConnectFail++;
      this.fail(key, e, { kind: 'failed', error: err, transportFailure: err.tlsHandshake ? err.message : undefined });
    });
    socket.once(t.tls ? 'secureConnect' : 'connect', () => {
      connected = true;
      e.local = socket.localAddress !== undefined ? `${socket.localAddress}:${socket.localPort ?? 0}` : undefined;
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
    const authority = t.address.includes(':') ? `[${t.address}]:${t.port}` : `${t.address}:${t.port}`;
    const session = http2().connect(`http://${authority}`, {
      createConnection: () => socket,
      maxHeaderListPairs: 256,
      settings: { enablePush: false, maxHeaderListSize: this.settings.maxHeaderListSize },
    });
    e.session = session;
    session.once('remoteSettings', () => {
      if (e.retired) return;
      e.ready = true;
      for (const w of e.waiters.splice(0)) w(this.route(e));
    });
    session.on('error', (err: NodeJS.ErrnoException) => {
      if (!e.ready && err.code === 'ERR_HTTP2_ERROR') this.markHttp1(key, e, t, err.message);
      else if (!e.ready) this.fail(key, e, { kind: 'failed', error: err });
    });
    session.on('goaway', () => { this.forget(key, e); });
    session.once('close', () => {
      if (!e.ready) this.fail(key, e, { kind: 'failed', error: Object.assign(new Error('upstream closed the connection'), { code: 'ECONNRESET' }) });
      else this.forget(key, e);
    });
    session.setTimeout(IDLE_SESSION_MS, () => {
      if (e.streams === 0) {
        this.forget(key, e);
        session.close();
      }
    });
  }
}

/** RST_STREAM codes an upstream's reset maps to for the client's stream (the same code, or INTERNAL_ERROR). */
export function resetCodeFor(code: number | undefined): number {
  return code === undefined || code === H2.NO_ERROR ? H2.INTERNAL_ERROR : code;
}
