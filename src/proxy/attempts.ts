// The attempts of one request sent to a cluster (traffic management): which endpoint each attempt
// goes to, how it ended, whether it is retried, after what back-off, within which time-outs, and
// what the client is answered when no attempt can succeed. The protocol paths (HTTP/1.1's
// connection, HTTP/2's exchange) only send and report; this decides, the same way for both.
// The decisions themselves are traffic/'s (balancer, retry policy, outlier detection, limits): this
// is the engine's side of that contract (src/traffic/README.md "Engine API"), and it keeps the trail
// of what happened for the access log and /debug/decisions.
import { FLAG } from '../log/access-record.js';
import { isPickFailure, OVERFLOW, type Endpoint, type PickFailure } from '../traffic/cluster.js';
import { isKeepAliveRace, OUTCOME, responseOutcome, statusMayRetry, type AttemptOutcome } from '../traffic/retry.js';
import type { ClusterTarget, LocalReply } from './decider.js';
import { UPSTREAM_FAILURE } from './http1/replies.js';
import type { DirectionStats } from './stats.js';
import type { UpstreamTls } from './tls/origination.js';

/** What a protocol path does for its request's attempts. */
export interface AttemptSender {
  /**
   * Sends the request (its head and the body held so far) to `endpoint` (its address and port) with
   * `tls` (undefined: plain text); `fresh`: on a new connection.
   */
  send(endpoint: Endpoint, tls: UpstreamTls | undefined, fresh: boolean): void;
  /** The attempt in flight is given up (retried, timed out): its connection or stream closes, nothing of it is read. */
  drop(): void;
  /** The client is answered locally: no endpoint, a limit, the route's time-out, every retry spent before a response. */
  answer(reply: LocalReply): void;
  /** The request's body sent so far is held whole (none, or at most REPLAYABLE_BODY_LIMIT): it may go again. */
  readonly replayable: boolean;
}

/** How an attempt failed before its response head: the protocol path says, Attempts classifies. */
export interface AttemptFailure {
  readonly outcome: AttemptOutcome;
  /**
   * The request provably never reached the application, so it may go again whatever the policy: it
   * went on a connection used before (pooled) and nothing came back (the keep-alive race), or an
   * HTTP/2 upstream refused its stream.
   */
  readonly reused: boolean;
  /** Envoy's flag for the answer if this ends the request: UF (never connected), UC (connection ended), UPE (malformed). */
  readonly flag: 'UF' | 'UC' | 'UPE';
  /** The 503's reason (`connection failure`, `connection termination`, the socket's code...). */
  readonly reason: string;
  /** RESPONSE_CODE_DETAILS for it. */
  readonly details: string;
  /** Why TLS to the endpoint failed, for the log. */
  readonly transportFailure?: string | undefined;
}

const TIMED_OUT: LocalReply = { kind: 'reply', status: 504, body: 'upstream request timeout\n', flag: 'UT', details: 'response_timeout' };
const PER_TRY_TIMED_OUT: LocalReply = { kind: 'reply', status: 504, body: 'upstream request timeout\n', flag: 'UT', details: 'upstream_per_try_timeout' };

/** The local reply for a pick that found no endpoint (UH) or a limit reached (UO, x-envoy-overloaded). */
export function pickFailureReply(f: PickFailure): LocalReply {
  return f.overloaded
    ? { kind: 'reply', status: f.status, body: `${f.body}\n`, flag: f.flag, details: 'upstream_overflow', headers: { 'x-envoy-overloaded': 'true' } }
    : { kind: 'reply', status: f.status, body: `${f.body}\n`, flag: f.flag, details: 'no_healthy_upstream' };
}

export class Attempts {
  /** Retries sent so far (attempts = retries + 1). */
  retries = 0;
  /** FLAG bits for the request's log (URX, UO, UT...). */
  flags = 0;
  /** The endpoint of the attempt in flight (or of the answer). */
  endpoint: Endpoint | undefined;
  /**
   * One line per attempt and decision, for /debug/decisions: made only when something beyond one
   * plain attempt happened (a retry, a failure, an endpoint passed over, a wait). A request answered
   * by its first attempt has none: its record names the endpoint (`upstream`) and the status, and
   * the common request allocates nothing for it.
   */
  trail: string[] | undefined;
  private tried: Endpoint[] | undefined;
  /** The endpoints of the earlier attempts, kept only for retryRemoteLocalities (their priorities are left out). */
  private attempted: Endpoint[] | undefined;
  private final: AttemptOutcome | undefined;
  private perTry: NodeJS.Timeout | undefined;
  private backoff: NodeJS.Timeout | undefined;
  private inFlight = false;
  private over = false;

  constructor(private readonly t: ClusterTarget, private readonly sender: AttemptSender, private readonly stats: DirectionStats,
    private readonly record: boolean) {
    stats.routedRqTotal++; // a request of a traffic cluster's, not the passthrough cluster's
  }

  get cluster(): string {
    return this.t.cluster.name;
  }

  /** The first attempt. */
  start(): void {
    this.next();
  }

  /**
   * A response head arrived for the attempt in flight: true when it goes to the client, false when
   * it is retried instead (the sender drops it: drop() is called before this returns).
   */
  head(status: number, grpcStatus?: number, rateLimited = false): boolean {
    if (!this.inFlight) return true;
    this.clearPerTry();
    if (this.retries === 0 && grpcStatus === undefined && !rateLimited && !statusMayRetry(this.t.retry, status)) {
      // A first attempt's answer no condition can retry (a 200): nothing to decide, nothing to count.
      this.final = responseOutcome(status);
      if (this.trail !== undefined) this.note(`${this.endpoint!.hostPort}: ${status}`);
      return true;
    }
    const outcome = rateLimited ? { kind: 'response' as const, status, grpcStatus, rateLimited } : responseOutcome(status, grpcStatus);
    const ep = this.endpoint!;
    const d = this.t.cluster.decideRetry(this.t.retry, outcome, this.retries, this.facts());
    if (d.retry) {
      this.note(`${ep.hostPort}: ${status}${grpcStatus !== undefined ? ` grpc-status ${grpcStatus}` : ''}, retried (${d.reason})`);
      this.inFlight = false;
      this.t.cluster.attemptEnded(ep, outcome);
      this.sender.drop();
      this.retry(d.delayMs);
      return false;
    }
    if (d.flag) this.flags |= FLAG[d.flag];
    if (this.trail !== undefined || d.flag) this.note(`${ep.hostPort}: ${status}${grpcStatus !== undefined ? ` grpc-status ${grpcStatus}` : ''}${d.flag ? ` (${d.reason})` : ''}`);
    this.final = outcome;
    return true;
  }

  /** The response forwarded ended (whole, or cut after its head): the attempt is over. */
  ended(cut: boolean): void {
    if (!this.inFlight) return;
    this.inFlight = false;
    this.clearPerTry();
    if (cut) this.note(`${this.endpoint!.hostPort}: cut after the response head`);
    this.t.cluster.attemptEnded(this.endpoint!, cut ? OUTCOME.reset : this.final ?? OUTCOME.reset);
    this.over = true;
  }

  /**
   * The attempt failed before any response head. Handled here: sent again (the keep-alive race),
   * retried, or answered with 503 and the failure's flag.
   */
  failed(f: AttemptFailure): void {
    if (!this.inFlight) return;
    this.inFlight = false;
    this.clearPerTry();
    const ep = this.endpoint!;
    const c = this.t.cluster;
    if (isKeepAliveRace(f.outcome, { reusedConnection: f.reused, responseBytes: 0, bodyReplayable: this.sender.replayable })) {
      // The request never reached the application: a pooled connection closed by it as it was
      // reused, or an HTTP/2 stream it refused.
      c.attemptResent(ep);
      this.note(`${ep.hostPort}: ${f.reason} before any answer, never processed: sent again`);
      const again = c.startAttempt(ep);
      if (isPickFailure(again)) {
        this.finish(pickFailureReply(again));
        return;
      }
      this.dispatch(ep, true);
      return;
    }
    c.attemptEnded(ep, f.outcome);
    const d = c.decideRetry(this.t.retry, f.outcome, this.retries, this.facts());
    if (d.retry) {
      this.note(`${ep.hostPort}: ${f.reason}, retried (${d.reason})`);
      this.retry(d.delayMs);
      return;
    }
    if (d.flag) this.flags |= FLAG[d.flag];
    this.note(`${ep.hostPort}: ${f.reason}${d.flag ? ` (${d.reason})` : ''}`);
    if (f.outcome.kind === 'per-try-timeout') {
      this.stats.upstreamRqTimeouts++;
      this.finish(PER_TRY_TIMED_OUT);
      return;
    }
    this.stats.upstreamRqErrors++;
    if (f.flag === 'UF') {
      this.stats.upstreamCxConnectFail++;
      this.stats.routedCxConnectFail++;
    }
    this.finish({
      kind: 'reply', status: 503, body: `${UPSTREAM_FAILURE}${f.reason}\n`, flag: f.flag, details: f.details,
    });
  }

  /** The attempt could not even get a connection (a limit of the cluster): 503 UO, nothing held against the endpoint. */
  overflowed(what: string): void {
    if (!this.inFlight) return;
    this.inFlight = false;
    this.clearPerTry();
    this.t.cluster.attemptAbandoned(this.endpoint!);
    this.note(`${this.endpoint!.hostPort}: overflow: ${what}`);
    this.finish(pickFailureReply(OVERFLOW));
  }

  /** The attempt waits for a connection slot of the cluster (a limit reached): for the trail. */
  waiting(what: string): void {
    if (this.record && this.endpoint !== undefined) this.note(`${this.endpoint.hostPort}: waits: ${what}`);
  }

  /** Whether the attempt in flight is (still) the one to `ep` (a request waiting for a connection slot asks). */
  waitingOn(ep: Endpoint): boolean {
    return this.inFlight && this.endpoint === ep;
  }

  /** The route's time-out: whatever is in flight or waiting ends, the client gets 504 (UT) if nothing went out yet. */
  timedOut(): void {
    if (this.over) return;
    this.stats.upstreamRqTimeouts++;
    if (this.inFlight) {
      this.inFlight = false;
      this.t.cluster.attemptEnded(this.endpoint!, OUTCOME.timeout);
      this.sender.drop();
    }
    if (this.backoff !== undefined) this.t.cluster.retryAbandoned();
    this.note('route timeout');
    this.finish(TIMED_OUT);
  }

  /** The client went away: the attempt in flight ends without blaming the endpoint, a pending retry is not sent. */
  abandoned(): void {
    if (this.over) return;
    this.over = true;
    this.clearPerTry();
    if (this.backoff !== undefined) {
      clearTimeout(this.backoff);
      this.backoff = undefined;
      this.t.cluster.retryAbandoned();
    }
    if (this.inFlight) {
      this.inFlight = false;
      this.t.cluster.attemptAbandoned(this.endpoint!);
    }
  }

  private facts(): { bodyReplayable: boolean } {
    return this.sender.replayable ? REPLAYABLE : NOT_REPLAYABLE;
  }

  private retry(delayMs: number): void {
    this.retries++;
    this.stats.upstreamRqRetries++;
    const ep = this.endpoint;
    if (ep !== undefined && this.t.retry.ignorePreviousHosts) (this.tried ??= []).push(ep);
    if (ep !== undefined && this.t.retry.retryRemoteLocalities) (this.attempted ??= []).push(ep);
    this.backoff = setTimeout(() => {
      this.backoff = undefined;
      if (!this.over) this.next();
    }, delayMs);
  }

  private next(): void {
    const c = this.t.cluster;
    const picked = c.pick(this.t.hash === undefined && this.tried === undefined && this.attempted === undefined ? undefined
      : { hash: this.t.hash, tried: this.tried, attempted: this.attempted });
    if (this.record) {
      const ejected = c.ejectedEndpoints();
      if (ejected.length > 0) this.note(`passed over as ejected: ${ejected.join(' ')}`);
      if (c.panic) this.note('panic: every endpoint is a candidate (minHealthPercent)');
      // Locality failover: the pick left the first priority (its endpoints are ejected or too few are healthy).
      const priority = c.lastPickPriority;
      if (priority !== undefined && priority > 0 && !isPickFailure(picked)) {
        this.note(`locality failover: priority ${priority} (${picked.spec.locality || 'no locality'}: ${picked.hostPort})`);
      }
    }
    if (isPickFailure(picked)) {
      this.note(`no endpoint: ${picked.failure === 'overflow' ? 'the cluster\'s request limit (maxRequests)' : 'every endpoint is ejected or none is known'}`);
      this.finish(pickFailureReply(picked));
      return;
    }
    this.dispatch(picked, false);
  }

  private dispatch(ep: Endpoint, fresh: boolean): void {
    this.endpoint = ep;
    const tls = this.t.tlsFor(ep.spec);
    if (tls?.kind === 'reply') {
      this.t.cluster.attemptAbandoned(ep);
      this.note(`${ep.hostPort}: ${tls.body.trim()}`);
      this.finish(tls);
      return;
    }
    this.inFlight = true;
    const perTry = this.t.retry.perTryTimeoutMs;
    if (perTry !== undefined && this.t.retry.attempts > 0) this.perTry = setTimeout(() => this.perTryTimedOut(), perTry);
    this.sender.send(ep, tls, fresh);
  }

  private perTryTimedOut(): void {
    this.perTry = undefined;
    if (!this.inFlight) return;
    this.sender.drop();
    // drop() closes the attempt's connection: its failure report must not count twice.
    this.failed({ outcome: OUTCOME.perTryTimeout, reused: false, flag: 'UC', reason: 'per-try timeout', details: 'upstream_per_try_timeout' });
  }

  private clearPerTry(): void {
    if (this.perTry !== undefined) {
      clearTimeout(this.perTry);
      this.perTry = undefined;
    }
  }

  private finish(reply: LocalReply): void {
    this.over = true;
    this.clearPerTry();
    this.sender.answer(reply);
  }

  private note(line: string): void {
    if (this.record) (this.trail ??= []).push(`attempt ${this.retries + 1} ${line}`);
  }
}

const REPLAYABLE = Object.freeze({ bodyReplayable: true });
const NOT_REPLAYABLE = Object.freeze({ bodyReplayable: false });
