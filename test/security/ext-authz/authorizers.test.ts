import assert from 'node:assert/strict';
import { it, mock } from 'node:test';
import { readExtAuthzProviders } from '../../../src/config/ext-authz-providers.js';
import { Authorizers } from '../../../src/security/ext-authz/authorizers.js';
import type { Authorizer, CheckAnswer, CheckInput } from '../../../src/security/ext-authz/check.js';

const { providers } = readExtAuthzProviders([{ name: 'slow', envoyExtAuthzGrpc: { service: 'a', port: 1, timeout: '50ms' } }]);
const input = {} as CheckInput;

/** A client that answers when told to, or when its signal aborts (as the real ones do). */
function pending(): { client: Authorizer; signals: AbortSignal[]; answer: (a: CheckAnswer) => void } {
  const signals: AbortSignal[] = [];
  let answer: (a: CheckAnswer) => void = () => {};
  return {
    signals,
    answer: (a) => answer(a),
    client: {
      check: (_i, signal) => new Promise((resolve) => {
        signals.push(signal);
        answer = resolve;
        signal.addEventListener('abort', () => resolve({ kind: 'error', reason: 'aborted' }));
      }),
      close: () => {},
    },
  };
}

it('a check not answered within the provider\'s time-out is a failed one, its request aborted', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const fake = pending();
    const authorizers = new Authorizers(providers, () => fake.client);
    const answer = authorizers.check(authorizers.provider('slow')!, input);
    mock.timers.tick(49);
    assert.equal(fake.signals[0]!.aborted, false);
    mock.timers.tick(1);
    assert.deepEqual(await answer, { kind: 'error', reason: 'no answer within 50ms (timeout)' });
    assert.equal(fake.signals[0]!.aborted, true);
  } finally {
    mock.timers.reset();
  }
});

it('an answer in time is passed on; a client leaving aborts the check; one client per provider', async () => {
  const fake = pending();
  let made = 0;
  const authorizers = new Authorizers(providers, () => { made++; return fake.client; });
  const p = authorizers.provider('slow')!;
  const first = authorizers.check(p, input);
  fake.answer({ kind: 'deny', status: 401, body: '', headers: [] });
  assert.deepEqual(await first, { kind: 'deny', status: 401, body: '', headers: [] });
  const gone = new AbortController();
  const second = authorizers.check(p, input, gone.signal);
  gone.abort();
  assert.deepEqual(await second, { kind: 'error', reason: 'aborted' });
  assert.equal(made, 1);
  assert.equal(authorizers.provider('other'), undefined);
});
