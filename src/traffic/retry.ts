// Whether an attempt that ended is retried, why, and after what back-off: Envoy's router retry
// state as Istio configures it, decided purely from the attempt's outcome. Also Istio's retryOn
// text parser and the one re-send that happens whatever the policy (the keep-alive race).
// The idempotency rule is in README.md ("Retries").
import { FieldError, show } from '../config/resources/fields.js';
import type { RetryCondition, RetrySpec } from './spec.js';

/** Request bodies are kept for a retry up to this size (Linkerd's bound); a larger one is not retried once its first byte left. */
export const REPLAYABLE_BODY_LIMIT = 64 * 1024;

/** Envoy's default max back-off: 10 × the base interval. */
export const MAX_BACKOFF_FACTOR = 10;

export type OutcomeKind =
  /** Response headers arrived (status, maybe grpc-status). */
  | 'response'
  /** The TCP (or TLS) connection could not be made. */
  | 'connect-failure'
  /** connectTimeout passed while connecting. */
  | 'connect-timeout'
  /** The connection or stream was reset or closed before a complete response head (Envoy's upstream reset). */
  | 'reset'
  /** HTTP/2 RST_STREAM REFUSED_STREAM (or a stream above GOAWAY's last id): the server did not process it. */
  | 'refused-stream'
  /** The route's perTryTimeout fired before the response head. */
  | 'per-try-timeout'
  /** The route's overall timeout fired (never retried). */
  | 'timeout'
  /** A TCP-proxied connection was made (the outcome of a TCP "attempt"). */
  | 'connected';

/** How one attempt ended, as the engine reports it (to decideRetry and to ClusterRuntime.attemptEnded). */
export interface AttemptOutcome {
  readonly kind: OutcomeKind;
  /** `response`: the HTTP status. */
  readonly status?: number | undefined;
  /** gRPC status of a gRPC response, when known. */
  readonly grpcStatus?: number | undefined;
  /**
   * True when grpcStatus came in trailers after the response head (Envoy retries and ejects on
   * grpc-status only when it is in the headers, a trailers-only response).
   */
  readonly grpcInTrailers?: boolean | undefined;
  /** The response carried `x-envoy-ratelimited` (only envoy-ratelimited retries it, then). */
  readonly rateLimited?: boolean | undefined;
  /** Whether any byte of the request went upstream (reset-before-request retries only when none did). */
  readonly requestStarted?: boolean | undefined;
}

/** Outcomes without detail, shared (no allocation on the failure paths either). */
export const OUTCOME = Object.freeze({
  connectFailure: Object.freeze({ kind: 'connect-failure' }) as AttemptOutcome,
  connectTimeout: Object.freeze({ kind: 'connect-timeout' }) as AttemptOutcome,
  resetBeforeRequest: Object.freeze({ kind: 'reset', requestStarted: false }) as AttemptOutcome,
  reset: Object.freeze({ kind: 'reset', requestStarted: true }) as AttemptOutcome,
  refusedStream: Object.freeze({ kind: 'refused-stream', requestStarted: true }) as AttemptOutcome,
  perTryTimeout: Object.freeze({ kind: 'per-try-timeout', requestStarted: true }) as AttemptOutcome,
  timeout: Object.freeze({ kind: 'timeout', requestStarted: true }) as AttemptOutcome,
  connected: Object.freeze({ kind: 'connected' }) as AttemptOutcome,
});

// Response outcomes are few (a status, perhaps a gRPC status): made once each and shared. A plain
// status (every answer of an HTTP upstream) is found by index, without hashing; with a gRPC status,
// by a key (status × 64 + gRPC status × 2 + in trailers).
const responseOutcomes = new Map<number, AttemptOutcome>();
const plainOutcomes: (AttemptOutcome | undefined)[] = new Array<AttemptOutcome | undefined>(1000).fill(undefined);

/**
 * The outcome of a response with this status (and gRPC status, from the headers or the trailers),
 * the same frozen object every time: reporting an attempt allocates nothing. A response carrying
 * `x-envoy-ratelimited` needs its own object ({ kind: 'response', status, rateLimited: true }).
 */
export function responseOutcome(status: number, grpcStatus?: number, grpcInTrailers = false): AttemptOutcome {
  const statusInRange = Number.isInteger(status) && status >= 0 && status < 1000;
  if (grpcStatus === undefined) {
    if (statusInRange) return plainOutcomes[status] ??= Object.freeze({ kind: 'response', status }) as AttemptOutcome;
    return Object.freeze({ kind: 'response', status }) as AttemptOutcome; // a status no upstream sends: not kept
  }
  const cacheable = statusInRange && Number.isInteger(grpcStatus) && grpcStatus >= 0 && grpcStatus < 32;
  const key = status * 64 + grpcStatus * 2 + (grpcInTrailers ? 1 : 0);
  let o = cacheable ? responseOutcomes.get(key) : undefined;
  if (o === undefined) {
    o = Object.freeze({ kind: 'response', status, grpcStatus, grpcInTrailers }) as AttemptOutcome;
    if (cacheable) responseOutcomes.set(key, o);
  }
  return o;
}

export interface RetryFacts {
  /** The request body is held in full (at most REPLAYABLE_BODY_LIMIT) or there is none. */
  readonly bodyReplayable: boolean;
}

/** Where the maxRetries circuit breaker is asked (ClusterLimits); absent: unlimited. */
export interface RetryBudget {
  tryAcquireRetry(): boolean;
}

export interface RetryDecision {
  readonly retry: boolean;
  /** retry: the retryOn condition that matched (`5xx`, `retriable-status-codes (503)`...); otherwise why not. */
  readonly reason: string;
  /** retry: wait this long before the next attempt. */
  readonly delayMs: number;
  /** A retry was wanted and not sent: URX (attempts exhausted) or UO (maxRetries overflow), Envoy's response flags. */
  readonly flag?: 'URX' | 'UO' | undefined;
  /** Stat to count (Envoy's): upstream_rq_retry, ..._limit_exceeded, ..._overflow; undefined: none. */
  readonly stat?: 'upstream_rq_retry' | 'upstream_rq_retry_limit_exceeded' | 'upstream_rq_retry_overflow' | undefined;
}

const NO = (reason: string): RetryDecision => Object.freeze({ retry: false, reason, delayMs: 0 });
/** The common answers, shared: a success costs no allocation. */
export const NO_RETRY = Object.freeze({
  notRetriable: NO('no retryOn condition matched'),
  disabled: NO('retries disabled (attempts 0)'),
  overallTimeout: NO('the route timeout is never retried'),
  bodyNotReplayable: NO('request body not replayable'),
});

/** gRPC status → the retryOn name that retries it (the five Envoy knows). */
const GRPC_CONDITIONS: ReadonlyMap<number, RetryCondition> = new Map([
  [1, 'cancelled'], [4, 'deadline-exceeded'], [8, 'resource-exhausted'], [13, 'internal'], [14, 'unavailable'],
]);

// The reason text of a status-code match (cached: one string per code ever seen).
const statusReasons = new Map<number, string>();
function statusReason(code: number): string {
  let r = statusReasons.get(code);
  if (r === undefined) statusReasons.set(code, (r = `retriable-status-codes (${code})`));
  return r;
}

// The condition a response matches, in Envoy's order.
function matchResponse(spec: RetrySpec, o: AttemptOutcome): string | undefined {
  const on = spec.retryOn;
  // A rate-limited answer from an upstream Envoy is retried only when asked for by name.
  if (o.rateLimited === true) return on.has('envoy-ratelimited') ? 'envoy-ratelimited' : undefined;
  const status = o.status ?? 0;
  // Each test looks at the status before the set: most answers (a 200) match none, at no lookup.
  if (status >= 500 && status <= 599 && on.has('5xx')) return '5xx';
  if (status >= 502 && status <= 504 && on.has('gateway-error')) return 'gateway-error';
  if (status === 409 && on.has('retriable-4xx')) return 'retriable-4xx';
  if (spec.retriableStatusCodes.length > 0 && spec.retriableStatusCodes.includes(status) && on.has('retriable-status-codes')) return statusReason(status);
  // retriable-headers: Istio's HTTPRetry has no field for the header list, so it never matches.
  if (o.grpcStatus !== undefined && o.grpcInTrailers !== true) {
    const c = GRPC_CONDITIONS.get(o.grpcStatus);
    if (c !== undefined && on.has(c)) return c;
  }
  return undefined;
}

// The condition a reset, a connection failure or a per-try timeout matches, in Envoy's order.
function matchReset(spec: RetrySpec, o: AttemptOutcome): string | undefined {
  const on = spec.retryOn;
  const connecting = o.kind === 'connect-failure' || o.kind === 'connect-timeout';
  if (connecting && on.has('connect-failure')) return 'connect-failure';
  // A connection that was never made carried no byte of the request.
  const started = connecting ? false : o.requestStarted !== false;
  if (on.has('reset-before-request') && !started) return 'reset-before-request';
  if (on.has('reset')) return 'reset';
  // Envoy counts a reset (and a per-try timeout, which resets the stream) as a 5xx: it becomes a 503/504.
  if (on.has('5xx')) return '5xx';
  if (on.has('gateway-error')) return 'gateway-error';
  if (o.kind === 'refused-stream' && on.has('refused-stream')) return 'refused-stream';
  return undefined;
}

/**
 * Whether a plain response (no gRPC status, not rate-limited) with `status` may match a retryOn
 * condition of `spec` (false: it cannot, whatever the rest; true: decideRetry says): the engine's
 * shortcut for the answer nearly every request gets.
 */
export function statusMayRetry(spec: RetrySpec, status: number): boolean {
  return status >= 500 || status === 409 || spec.retriableStatusCodes.length > 0;
}

/** The retryOn condition `outcome` matches under `spec`, or undefined: not retriable. */
export function retryCondition(spec: RetrySpec, outcome: AttemptOutcome): string | undefined {
  switch (outcome.kind) {
    case 'response': return matchResponse(spec, outcome);
    case 'connect-failure': case 'connect-timeout': case 'reset': case 'refused-stream': case 'per-try-timeout':
      return matchReset(spec, outcome);
    case 'timeout': case 'connected': return undefined;
  }
}

/**
 * Envoy's fully jittered exponential back-off: retry `n` (1-based) waits a uniform random time in
 * [0, min(base × (2^n − 1), 10 × base)) ms, whole milliseconds (25 ms base: under 25, 75, 175, 250...).
 */
export function backoffMs(n: number, baseMs: number, random: () => number): number {
  const cap = Math.min(baseMs * (2 ** Math.min(n, 52) - 1), baseMs * MAX_BACKOFF_FACTOR);
  return Math.floor(random() * cap);
}

/**
 * Whether the attempt that just ended is retried. `retriesDone`: retries already sent for this
 * request (0 after the first try). Envoy's order: a condition must match; then the request must
 * still be replayable; then attempts must remain (else URX); then the cluster's maxRetries must
 * admit one more retry in flight (else UO, upstream_rq_retry_overflow). A yes holds one retry of
 * the budget until the retried attempt ends (ClusterRuntime does the bookkeeping).
 */
export function decideRetry(spec: RetrySpec | undefined, outcome: AttemptOutcome, retriesDone: number, facts: RetryFacts,
  random: () => number, budget?: RetryBudget): RetryDecision {
  if (outcome.kind === 'timeout') return NO_RETRY.overallTimeout;
  if (spec === undefined || spec.attempts <= 0) return NO_RETRY.disabled;
  const reason = retryCondition(spec, outcome);
  if (reason === undefined) return NO_RETRY.notRetriable;
  if (!facts.bodyReplayable) return NO_RETRY.bodyNotReplayable;
  if (retriesDone >= spec.attempts) {
    return { retry: false, reason: `${reason}, but the ${spec.attempts} retries are spent`, delayMs: 0, flag: 'URX', stat: 'upstream_rq_retry_limit_exceeded' };
  }
  if (budget !== undefined && !budget.tryAcquireRetry()) {
    return { retry: false, reason: `${reason}, but the cluster's retries in flight are at its limit (maxRetries, or its retryBudget)`, delayMs: 0, flag: 'UO', stat: 'upstream_rq_retry_overflow' };
  }
  return { retry: true, reason, delayMs: backoffMs(retriesDone + 1, spec.backoffBaseMs, random), stat: 'upstream_rq_retry' };
}

export interface KeepAliveRaceFacts {
  /** The attempt went on a pooled connection that had already carried a request. */
  readonly reusedConnection: boolean;
  /** Bytes read back from the upstream on this attempt. */
  readonly responseBytes: number;
  readonly bodyReplayable: boolean;
}

/**
 * Whether the attempt provably never reached the application, so that it is sent again on a fresh
 * connection whatever the retry policy, without counting as a retry: a reused keep-alive connection
 * the upstream closed as we wrote (reset or refused, nothing read back). A fresh connection never
 * qualifies, so the re-send cannot loop.
 */
export function isKeepAliveRace(outcome: AttemptOutcome, facts: KeepAliveRaceFacts): boolean {
  return (outcome.kind === 'reset' || outcome.kind === 'refused-stream')
    && facts.reusedConnection && facts.responseBytes === 0 && facts.bodyReplayable;
}

// ---- Istio's retryOn text

/** Every retryOn name Istio's validation accepts. */
export const RETRY_CONDITIONS: readonly RetryCondition[] = [
  '5xx', 'gateway-error', 'reset', 'reset-before-request', 'connect-failure', 'retriable-4xx', 'refused-stream',
  'retriable-status-codes', 'retriable-headers', 'envoy-ratelimited', 'http3-post-connect-failure',
  'cancelled', 'deadline-exceeded', 'internal', 'resource-exhausted', 'unavailable',
];
const CONDITION_SET: ReadonlySet<string> = new Set(RETRY_CONDITIONS);

/** The codes Go's net/http has a text for: Istio takes an integer in retryOn as a status code only if it is one of them. */
const HTTP_STATUS_CODES: ReadonlySet<number> = new Set([
  100, 101, 102, 103,
  200, 201, 202, 203, 204, 205, 206, 207, 208, 226,
  300, 301, 302, 303, 304, 305, 307, 308,
  400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 421, 422, 423, 424,
  425, 426, 428, 429, 431, 451,
  500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
]);

export interface ParsedRetryOn {
  readonly retryOn: ReadonlySet<RetryCondition>;
  readonly retriableStatusCodes: readonly number[];
}

/**
 * Istio's `retries.retryOn`: comma-separated Envoy condition names and HTTP status codes. Codes go
 * to retriableStatusCodes and imply retriable-status-codes (Istio's ConvertPolicy). Validated as
 * Istio's webhook does, parts untrimmed: an unknown name (or ` 5xx`, or an empty part) is a
 * FieldError at `field`. Empty text: undefined (keep the default policy's conditions, as Istio does).
 */
export function parseRetryOn(text: string, field = 'retryOn'): ParsedRetryOn | undefined {
  if (text === '') return undefined;
  const retryOn = new Set<RetryCondition>();
  const codes: number[] = [];
  for (const part of text.split(',')) {
    // Go's strconv.Atoi: optional sign, decimal digits.
    if (/^[+-]?\d+$/.test(part)) {
      const code = Number(part);
      if (HTTP_STATUS_CODES.has(code)) {
        if (!codes.includes(code)) codes.push(code);
        continue;
      }
      throw new FieldError(field, `${show(part)} is not a valid retryOn policy: ${code} is not an HTTP status code`);
    }
    if (!CONDITION_SET.has(part)) {
      const hint = part.trim() !== part && CONDITION_SET.has(part.trim()) ? ' (no spaces around the commas)' : '';
      throw new FieldError(field, `${show(part)} is not a valid retryOn policy${hint}; expected HTTP status codes and `
        + `${RETRY_CONDITIONS.join(', ')}`);
    }
    retryOn.add(part as RetryCondition);
  }
  if (codes.length > 0) retryOn.add('retriable-status-codes');
  return { retryOn, retriableStatusCodes: codes };
}
