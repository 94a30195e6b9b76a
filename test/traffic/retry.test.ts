import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FieldError } from '../../src/config/resources/fields.js';
import {
  backoffMs, decideRetry, isKeepAliveRace, NO_RETRY, OUTCOME, parseRetryOn, responseOutcome, retryCondition, statusMayRetry, type AttemptOutcome,
} from '../../src/traffic/retry.js';
import { DEFAULT_RETRY, DEFAULT_RETRY_WITH_503, type RetryCondition, type RetrySpec } from '../../src/traffic/spec.js';
import { SOURCES, Z_1E4 } from './support.js';

function policy(retryOn: string, o: Partial<RetrySpec> = {}): RetrySpec {
  const parsed = parseRetryOn(retryOn)!;
  return { ...DEFAULT_RETRY, retryOn: parsed.retryOn, retriableStatusCodes: parsed.retriableStatusCodes, ...o };
}

const response = (status: number, o: Partial<AttemptOutcome> = {}): AttemptOutcome => ({ kind: 'response', status, ...o });
const grpc = (grpcStatus: number, o: Partial<AttemptOutcome> = {}): AttemptOutcome => ({ kind: 'response', status: 200, grpcStatus, ...o });

describe('retryCondition', () => {
  const cases: [retryOn: string, outcome: AttemptOutcome, expected: string | undefined][] = [
    // responses
    ['5xx', response(500), '5xx'],
    ['5xx', response(503), '5xx'],
    ['5xx', response(599), '5xx'],
    ['5xx', response(404), undefined],
    ['gateway-error', response(502), 'gateway-error'],
    ['gateway-error', response(504), 'gateway-error'],
    ['gateway-error', response(500), undefined],
    ['retriable-4xx', response(409), 'retriable-4xx'],
    ['retriable-4xx', response(400), undefined],
    ['503', response(503), 'retriable-status-codes (503)'],
    ['retriable-status-codes', response(503), undefined], // no code given: nothing matches (Istio's default)
    ['connect-failure', response(503), undefined],
    ['retriable-headers', response(503), undefined],
    ['envoy-ratelimited', response(429, { rateLimited: true }), 'envoy-ratelimited'],
    ['5xx', response(503, { rateLimited: true }), undefined], // a rate-limited answer only by name
    // gRPC, from the headers of a trailers-only response
    ['unavailable', grpc(14), 'unavailable'],
    ['cancelled', grpc(1), 'cancelled'],
    ['deadline-exceeded', grpc(4), 'deadline-exceeded'],
    ['internal', grpc(13), 'internal'],
    ['resource-exhausted', grpc(8), 'resource-exhausted'],
    ['unavailable', grpc(13), undefined],
    ['unavailable', grpc(14, { grpcInTrailers: true }), undefined],
    ['5xx', grpc(14), undefined], // 5xx looks at the HTTP status (200)
    // connections and resets
    ['connect-failure', OUTCOME.connectFailure, 'connect-failure'],
    ['connect-failure', OUTCOME.connectTimeout, 'connect-failure'],
    ['connect-failure', OUTCOME.reset, undefined],
    ['connect-failure', OUTCOME.perTryTimeout, undefined],
    ['reset', OUTCOME.reset, 'reset'],
    ['reset', OUTCOME.connectFailure, 'reset'],
    ['reset', OUTCOME.perTryTimeout, 'reset'],
    ['reset-before-request', OUTCOME.resetBeforeRequest, 'reset-before-request'],
    ['reset-before-request', OUTCOME.reset, undefined],
    ['reset-before-request', OUTCOME.connectFailure, 'reset-before-request'],
    ['5xx', OUTCOME.reset, '5xx'],
    ['5xx', OUTCOME.connectFailure, '5xx'],
    ['5xx', OUTCOME.perTryTimeout, '5xx'],
    ['gateway-error', OUTCOME.perTryTimeout, 'gateway-error'],
    ['gateway-error', OUTCOME.refusedStream, 'gateway-error'],
    ['refused-stream', OUTCOME.refusedStream, 'refused-stream'],
    ['refused-stream', OUTCOME.reset, undefined],
    ['refused-stream', OUTCOME.perTryTimeout, undefined],
    ['unavailable', OUTCOME.perTryTimeout, undefined],
    ['5xx,reset,connect-failure,gateway-error', OUTCOME.timeout, undefined], // the route timeout: never
    ['5xx', OUTCOME.connected, undefined],
  ];
  for (const [retryOn, outcome, expected] of cases) {
    it(`${retryOn} × ${outcome.kind}${outcome.status !== undefined ? ` ${outcome.status}` : ''}${outcome.grpcStatus !== undefined ? ` grpc ${outcome.grpcStatus}` : ''} → ${expected ?? 'no'}`, () => {
      assert.equal(retryCondition(policy(retryOn), outcome), expected);
    });
  }

  it('Istio\'s default policy: connection failures, refused streams, gRPC UNAVAILABLE and CANCELLED; a 503 is not retried', () => {
    assert.equal(retryCondition(DEFAULT_RETRY, response(503)), undefined);
    assert.equal(retryCondition(DEFAULT_RETRY, OUTCOME.connectFailure), 'connect-failure');
    assert.equal(retryCondition(DEFAULT_RETRY, OUTCOME.refusedStream), 'refused-stream');
    assert.equal(retryCondition(DEFAULT_RETRY, grpc(14)), 'unavailable');
    assert.equal(retryCondition(DEFAULT_RETRY, grpc(1)), 'cancelled');
    assert.equal(retryCondition(DEFAULT_RETRY, OUTCOME.reset), undefined);
    assert.equal(retryCondition(DEFAULT_RETRY, OUTCOME.perTryTimeout), undefined);
  });

  it('with EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY=false: a 503 is retried too (retriable-status-codes), any other status not', () => {
    assert.equal(retryCondition(DEFAULT_RETRY_WITH_503, response(503)), 'retriable-status-codes (503)');
    assert.equal(retryCondition(DEFAULT_RETRY_WITH_503, response(500)), undefined);
    assert.equal(retryCondition(DEFAULT_RETRY_WITH_503, OUTCOME.connectFailure), 'connect-failure');
  });
});

describe('decideRetry', () => {
  const facts = { bodyReplayable: true };
  const yes = () => true;

  it('retries a matching outcome while attempts remain, then says URX', () => {
    const p = policy('5xx', { attempts: 2 });
    const d0 = decideRetry(p, response(503), 0, facts, () => 0.5, { tryAcquireRetry: yes });
    assert.equal(d0.retry, true);
    assert.equal(d0.reason, '5xx');
    assert.equal(d0.stat, 'upstream_rq_retry');
    assert.equal(decideRetry(p, response(503), 1, facts, () => 0.5).retry, true);
    const d2 = decideRetry(p, response(503), 2, facts, () => 0.5);
    assert.deepEqual([d2.retry, d2.flag, d2.stat], [false, 'URX', 'upstream_rq_retry_limit_exceeded']);
    assert.match(d2.reason, /5xx, but the 2 retries are spent/);
  });

  it('does not retry past the cluster\'s maxRetries (UO), and does not ask it when nothing matched or attempts are spent', () => {
    let asked = 0;
    const budget = { tryAcquireRetry: () => { asked++; return false; } };
    const d = decideRetry(policy('5xx'), response(502), 0, facts, Math.random, budget);
    assert.deepEqual([d.retry, d.flag, d.stat], [false, 'UO', 'upstream_rq_retry_overflow']);
    assert.equal(decideRetry(policy('5xx'), response(200), 0, facts, Math.random, budget), NO_RETRY.notRetriable);
    assert.equal(decideRetry(policy('5xx', { attempts: 1 }), response(500), 1, facts, Math.random, budget).flag, 'URX');
    assert.equal(asked, 1);
  });

  it('never retries the route timeout, a disabled policy, or a body it cannot replay', () => {
    assert.equal(decideRetry(policy('5xx,reset'), OUTCOME.timeout, 0, facts, Math.random), NO_RETRY.overallTimeout);
    assert.equal(decideRetry(policy('5xx', { attempts: 0 }), response(500), 0, facts, Math.random), NO_RETRY.disabled);
    assert.equal(decideRetry(undefined, response(500), 0, facts, Math.random), NO_RETRY.disabled);
    assert.equal(decideRetry(policy('5xx'), response(500), 0, { bodyReplayable: false }, Math.random), NO_RETRY.bodyNotReplayable);
  });

  it('follows retryOn whatever the method (an operator who lists 5xx has POSTs retried): only replayability limits it', () => {
    const post = { bodyReplayable: true };
    assert.equal(decideRetry(policy('5xx'), response(500), 0, post, Math.random, { tryAcquireRetry: yes }).retry, true);
    assert.equal(decideRetry(policy('connect-failure'), response(500), 0, post, Math.random, { tryAcquireRetry: yes }).retry, false);
  });

  it('waits the jittered back-off of the retry it decides (retry n: under min(25 × (2^n − 1), 250) ms)', () => {
    const p = policy('5xx');
    const top = () => 0.999999;
    assert.equal(decideRetry(p, response(500), 0, facts, top).delayMs, 24);
    assert.equal(decideRetry(p, response(500), 1, facts, top).delayMs, 74);
    assert.equal(decideRetry(policy('5xx', { attempts: 9, backoffBaseMs: 100 }), response(500), 4, facts, top).delayMs, 999);
  });
});

describe('backoffMs', () => {
  const cases: [n: number, base: number, cap: number][] = [[1, 25, 25], [2, 25, 75], [3, 25, 175], [4, 25, 250], [10, 25, 250], [60, 25, 250], [2, 100, 300]];
  for (const [n, base, cap] of cases) {
    it(`retry ${n}, base ${base}: in [0, ${cap})`, () => {
      assert.equal(backoffMs(n, base, () => 0), 0);
      assert.equal(backoffMs(n, base, () => 0.9999999), cap - 1);
    });
  }

  for (const { name, make } of SOURCES) {
    it(`is uniform over [0, cap) (${name}; the mean of 20000 draws within 3.89 standard errors, p < 1e-4)`, () => {
      const random = make();
      const n = 20_000;
      let sum = 0;
      for (let k = 0; k < n; k++) sum += backoffMs(4, 25, random);
      // Uniform on the integers 0..249: mean 124.5, variance (250² − 1) / 12.
      const se = Math.sqrt((250 ** 2 - 1) / 12 / n);
      assert.ok(Math.abs(sum / n - 124.5) < Z_1E4 * se, `mean ${sum / n}`);
    });
  }
});

describe('responseOutcome', () => {
  it('gives one shared object per status and gRPC status (nothing allocated per attempt)', () => {
    assert.equal(responseOutcome(200), responseOutcome(200));
    assert.deepEqual(responseOutcome(503), { kind: 'response', status: 503 });
    assert.equal(responseOutcome(200, 14), responseOutcome(200, 14));
    assert.notEqual(responseOutcome(200, 14), responseOutcome(200, 14, true));
    assert.deepEqual(responseOutcome(200, 14, true), { kind: 'response', status: 200, grpcStatus: 14, grpcInTrailers: true });
    assert.notEqual(responseOutcome(200), responseOutcome(200, 0));
    assert.ok(Object.isFrozen(responseOutcome(404)));
    assert.equal(retryCondition(policy('unavailable'), responseOutcome(200, 14)), 'unavailable');
    assert.equal(retryCondition(policy('unavailable'), responseOutcome(200, 14, true)), undefined);
  });
});

describe('statusMayRetry', () => {
  it('says no only where no retryOn condition can match a plain response with that status (the engine skips decideRetry then)', () => {
    const everyCondition = '5xx,gateway-error,reset,reset-before-request,connect-failure,envoy-ratelimited,retriable-4xx,refused-stream,'
      + 'retriable-status-codes,retriable-headers,cancelled,deadline-exceeded,internal,resource-exhausted,unavailable';
    const policies = [DEFAULT_RETRY, DEFAULT_RETRY_WITH_503, policy(everyCondition), policy('retriable-status-codes,200,404'), policy('5xx'), policy('retriable-4xx')];
    let shortcuts = 0;
    for (const p of policies) {
      for (let status = 100; status < 600; status++) {
        if (statusMayRetry(p, status)) continue;
        shortcuts++;
        assert.equal(retryCondition(p, responseOutcome(status)), undefined, `${status} under ${[...p.retryOn].join(',')}`);
      }
    }
    assert.ok(shortcuts > 1000, 'the shortcut is taken for most statuses');
    assert.equal(statusMayRetry(DEFAULT_RETRY, 200), false);
    assert.equal(statusMayRetry(DEFAULT_RETRY_WITH_503, 200), true, 'a status list: decideRetry looks');
  });
});

describe('isKeepAliveRace', () => {
  const cases: [name: string, outcome: AttemptOutcome, reused: boolean, responseBytes: number, replayable: boolean, expected: boolean][] = [
    ['reset on a reused connection, nothing read', OUTCOME.reset, true, 0, true, true],
    ['refused on a reused connection', OUTCOME.refusedStream, true, 0, true, true],
    ['a fresh connection never qualifies (no loop)', OUTCOME.reset, false, 0, true, false],
    ['something was read back', OUTCOME.reset, true, 12, true, false],
    ['the body cannot be replayed', OUTCOME.reset, true, 0, false, false],
    ['a time-out is not a race', OUTCOME.perTryTimeout, true, 0, true, false],
    ['a response is not a race', response(503), true, 0, true, false],
  ];
  for (const [name, outcome, reusedConnection, responseBytes, bodyReplayable, expected] of cases) {
    it(name, () => assert.equal(isKeepAliveRace(outcome, { reusedConnection, responseBytes, bodyReplayable }), expected));
  }
});

describe('parseRetryOn', () => {
  const ok: [text: string, on: RetryCondition[], codes: number[]][] = [
    ['5xx', ['5xx'], []],
    ['gateway-error,connect-failure,refused-stream', ['gateway-error', 'connect-failure', 'refused-stream'], []],
    ['503', ['retriable-status-codes'], [503]],
    ['5xx,503,409', ['5xx', 'retriable-status-codes'], [503, 409]],
    ['retriable-status-codes,503,503', ['retriable-status-codes'], [503]],
    ['reset,reset-before-request,retriable-4xx,envoy-ratelimited,retriable-headers', ['reset', 'reset-before-request', 'retriable-4xx', 'envoy-ratelimited', 'retriable-headers'], []],
    ['cancelled,deadline-exceeded,internal,resource-exhausted,unavailable', ['cancelled', 'deadline-exceeded', 'internal', 'resource-exhausted', 'unavailable'], []],
  ];
  for (const [text, on, codes] of ok) {
    it(`${text} → ${on.join('+')} ${codes.join(' ')}`, () => {
      const p = parseRetryOn(text)!;
      assert.deepEqual([...p.retryOn].sort(), [...on].sort());
      assert.deepEqual(p.retriableStatusCodes, codes);
    });
  }

  it('empty text keeps the default conditions (as Istio does)', () => assert.equal(parseRetryOn(''), undefined));

  const bad: [text: string, message: RegExp][] = [
    ['5xx,bogus', /"bogus" is not a valid retryOn policy; expected HTTP status codes and 5xx, gateway-error/],
    ['5xx, connect-failure', /" connect-failure" is not a valid retryOn policy \(no spaces around the commas\)/],
    ['5xx,', /"" is not a valid retryOn policy/],
    ['599', /"599" is not a valid retryOn policy: 599 is not an HTTP status code/],
    ['5XX', /"5XX" is not a valid retryOn policy/],
  ];
  for (const [text, message] of bad) {
    it(`refuses ${JSON.stringify(text)}, naming the part and the field`, () => {
      assert.throws(() => parseRetryOn(text, 'spec.http[0].retries.retryOn'), (e: unknown) => {
        assert.ok(e instanceof FieldError);
        assert.equal(e.field, 'spec.http[0].retries.retryOn');
        assert.match(e.message, message);
        return true;
      });
    });
  }
});
