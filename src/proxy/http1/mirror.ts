// Mirroring (a route's `mirror` / `mirrors`): a copy of a request — the head as forwarded, the same
// body — goes to another destination, fire and forget. The copy is sent once the client's request
// is complete (its body held, at most MIRROR_BODY_LIMIT: a larger body is not mirrored, and that
// is counted), over HTTP/1.1 on the worker's upstream pool, to an endpoint its cluster picks (the
// same balancing, limits and TLS as a routed request; no retries). Its answer is read and dropped;
// nothing of it — its time, its failure, its refusal — reaches the client's exchange. Copies in
// flight are bounded per cluster (and per worker) by the cluster's connection pool limits; over
// the bound a copy is dropped and counted, never queued.
import { scope } from '../../log/logger.js';
import { isPickFailure, type ClusterRuntime, type Endpoint } from '../../traffic/cluster.js';
import { OUTCOME, responseOutcome, type AttemptOutcome } from '../../traffic/retry.js';
import type { MirrorTarget } from '../decider.js';
import type { Endpoint as Address } from '../socket-options.js';
import type { UpstreamTls } from '../tls/origination.js';
import { sourceFor } from '../upstream.js';
import { isConnectFailure } from './replies.js';
import type { DirectionStats } from '../stats.js';
import type { UpstreamMode } from '../upstream.js';
import type { ResponseHead } from './response-parser.js';
import { clusterConnectionPolicy, poolKey, UpstreamPool, type ResponseSink, type UpstreamConnection } from './upstream-pool.js';

const log = scope('default');

/**
 * The largest request body mirrored (64 KiB, the bound the retries hold a body to): a copy is held
 * whole until the request ends, so this bounds what mirroring can hold per request.
 */
export const MIRROR_BODY_LIMIT = 64 * 1024;
/** A copy not answered within this (and no route timeout says otherwise) is given up: its slots come back. */
export const MIRROR_TIMEOUT_MS = 15_000;
/**
 * Copies in flight per destination and worker when the cluster's pool sets no lower limit
 * (Envoy's own default circuit-breaker thresholds are 1024).
 */
export const MIRROR_MAX_IN_FLIGHT = 1024;

const LAST_CHUNK = '0\r\n\r\n';

/** The copy's head: the request head as forwarded upstream (framing lines included). */
export interface MirrorHead {
  readonly text: string;
  readonly chunked: boolean;
  readonly headRequest: boolean;
}

/** One request's copies: fed the body as it comes, sent when it ends. */
export class MirrorCopy {
  private chunks: Buffer[] | undefined = [];
  private bytes = 0;

  constructor(private readonly sender: MirrorSender, private readonly targets: readonly MirrorTarget[], private readonly head: MirrorHead) {}

  /** A body chunk; `copy`: it is a view of a read buffer, kept as a copy. */
  body(b: Buffer, copy: boolean): void {
    const chunks = this.chunks;
    if (chunks === undefined || b.length === 0) return;
    this.bytes += b.length;
    if (this.bytes > MIRROR_BODY_LIMIT) {
      this.chunks = undefined;
      this.sender.tooLarge(this.targets);
      return;
    }
    chunks.push(copy ? Buffer.from(b) : b);
  }

  /** The request is complete: the copies go. */
  end(): void {
    const chunks = this.chunks;
    if (chunks === undefined) return;
    this.chunks = undefined;
    for (const t of this.targets) this.sender.send(t, this.head, chunks, this.bytes);
  }
}

/** What one worker's mirrored copies share: the upstream pool, and the count of copies in flight per destination. */
export class MirrorSender {
  private readonly inFlight = new Map<string, number>();
  private warnedTooLarge = false;

  constructor(private readonly pool: UpstreamPool) {}

  /** The body passed MIRROR_BODY_LIMIT: no copy (counted; logged once per worker). */
  tooLarge(targets: readonly MirrorTarget[]): void {
    this.pool.stats.mirrorRqTooLarge += targets.length;
    if (!this.warnedTooLarge) {
      this.warnedTooLarge = true;
      log.warn(`mirror: a request body over ${MIRROR_BODY_LIMIT} bytes is not mirrored (to ${targets.map((t) => t.name).join(', ')}); `
        + 'counted in mirror_rq_too_large, logged once');
    }
  }

  send(t: MirrorTarget, head: MirrorHead, body: readonly Buffer[], bytes: number): void {
    const stats = this.pool.stats;
    const limit = inFlightLimit(t.cluster?.cluster);
    const count = this.inFlight.get(t.name) ?? 0;
    if (count >= limit) {
      stats.mirrorRqDropped++;
      return;
    }
    const c = t.cluster?.cluster;
    let ep: Endpoint | undefined;
    let to: Address = t;
    let tls: UpstreamTls | undefined = t.tls;
    if (c !== undefined) {
      const picked = c.pick();
      if (isPickFailure(picked)) {
        stats.mirrorRqDropped++;
        return;
      }
      ep = picked;
      const made = t.cluster!.tlsFor(ep.spec);
      if (made?.kind === 'reply') {
        c.attemptAbandoned(ep);
        stats.mirrorRqDropped++;
        return;
      }
      tls = made;
      to = ep;
    }
    const source = sourceFor(this.pool.mode, to, undefined);
    const key = poolKey(to, source, tls);
    let conn = this.pool.idle(key);
    if (conn === undefined) {
      if (c !== undefined && ep !== undefined && !c.tryAcquireConnection(ep)) {
        c.attemptAbandoned(ep); // the cluster's maxConnections: a copy never waits for a slot
        stats.mirrorRqDropped++;
        return;
      }
      try {
        conn = this.pool.open(key, to, source, tls, c !== undefined && ep !== undefined ? clusterConnectionPolicy(c, ep) : undefined);
      } catch (err) {
        if (c !== undefined && ep !== undefined) c.attemptAbandoned(ep);
        stats.mirrorRqFailed++;
        log.debug('mirror: no connection', { to: t.name, error: (err as Error).message });
        return;
      }
    }
    this.inFlight.set(t.name, count + 1);
    stats.mirrorRqTotal++;
    const sink = new MirrorExchange(this, t.name, c, ep, conn, head.headRequest, t.timeoutMs ?? MIRROR_TIMEOUT_MS);
    conn.attach(sink);
    const s = conn.socket;
    s.cork();
    s.write(head.text, 'latin1');
    if (head.chunked) {
      if (bytes > 0) s.write(`${bytes.toString(16)}\r\n`, 'latin1');
      for (const b of body) s.write(b);
      s.write(bytes > 0 ? `\r\n${LAST_CHUNK}` : LAST_CHUNK, 'latin1');
    } else {
      for (const b of body) s.write(b);
    }
    s.uncork();
  }

  /** A copy is over (answered, failed, timed out). */
  ended(name: string, failed: boolean): void {
    const n = (this.inFlight.get(name) ?? 1) - 1;
    if (n <= 0) this.inFlight.delete(name);
    else this.inFlight.set(name, n);
    if (failed) this.pool.stats.mirrorRqFailed++;
  }

  release(conn: UpstreamConnection): void {
    this.pool.release(conn);
  }
}

/** Copies in flight per destination and worker: the cluster's connection and request limits, at most MIRROR_MAX_IN_FLIGHT. */
function inFlightLimit(c: ClusterRuntime | undefined): number {
  if (c === undefined) return MIRROR_MAX_IN_FLIGHT;
  const cp = c.spec.policy.connectionPool;
  return Math.min(MIRROR_MAX_IN_FLIGHT, cp.tcp.maxConnections, cp.http.http2MaxRequests);
}

/** One copy on its upstream connection: the answer is read to its end (so the connection can be reused) and dropped. */
class MirrorExchange implements ResponseSink {
  readonly switching = undefined;
  private status = 0;
  private over = false;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly sender: MirrorSender, private readonly name: string, private readonly cluster: ClusterRuntime | undefined,
    private readonly ep: Endpoint | undefined, private readonly conn: UpstreamConnection, readonly headRequest: boolean, timeoutMs: number) {
    this.timer = setTimeout(() => {
      this.conn.destroy();
      this.finish(OUTCOME.timeout, true);
    }, timeoutMs);
    this.timer.unref();
  }

  onResponseHead(head: ResponseHead): void {
    if (head.status >= 200) this.status = head.status;
  }

  onResponseBody(): void { /* the answer is discarded */ }

  onResponseEnd(): void {
    this.finish(responseOutcome(this.status), false);
    this.sender.release(this.conn);
  }

  onUpstreamError(err: NodeJS.ErrnoException): void {
    this.finish(isConnectFailure(err.code) ? OUTCOME.connectFailure : OUTCOME.reset, true);
  }

  onReadDone(): boolean {
    return true; // never held back: nobody waits for these bytes
  }

  private finish(outcome: AttemptOutcome, failed: boolean): void {
    if (this.over) return;
    this.over = true;
    clearTimeout(this.timer);
    this.sender.ended(this.name, failed);
    // The copy counts in its cluster as a request (Envoy's shadow does): stats and outlier detection.
    if (this.cluster !== undefined && this.ep !== undefined) this.cluster.attemptEnded(this.ep, outcome);
  }
}

const senders = new WeakMap<object, MirrorSender>();

/** The worker's mirror sender for an HTTP/1.1 handler's `pool` (made on the first mirrored request). */
export function mirrorSender(pool: UpstreamPool): MirrorSender {
  let s = senders.get(pool);
  if (s === undefined) senders.set(pool, (s = new MirrorSender(pool)));
  return s;
}

/** The mirror sender of an owner without an HTTP/1.1 pool of its own (the HTTP/2 handler): a pool of its own, made on first use. */
export function mirrorSenderOf(owner: object, mode: UpstreamMode, stats: DirectionStats): MirrorSender {
  let s = senders.get(owner);
  if (s === undefined) senders.set(owner, (s = new MirrorSender(new UpstreamPool(mode, stats))));
  return s;
}

/** An HTTP/1.1 head from a method, a target and header lines (an HTTP/2 request's copy). */
export function http1HeadText(method: string, path: string, headers: Readonly<Record<string, string | number | readonly string[] | undefined>>): MirrorHead {
  let text = `${method} ${path} HTTP/1.1\r\n`;
  for (const name of Object.keys(headers)) {
    const v = headers[name];
    if (v === undefined) continue;
    if (typeof v === 'object') for (const one of v) text += `${name}: ${one}\r\n`;
    else text += `${name}: ${v}\r\n`;
  }
  return { text: `${text}\r\n`, chunked: headers['transfer-encoding'] === 'chunked', headRequest: method === 'HEAD' };
}
