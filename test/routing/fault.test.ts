// The pure part of fault injection: per-request rolls on a per-million share, and what an abort answers.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { HttpFault } from '../../src/config/resources/types.js';
import { faultAbort, faultDelayMs, rolls } from '../../src/routing/fault.js';
import { seeded } from '../helpers/seeded.js';

it('rolls: 0 never, a million always, whatever the random value; in between by share', () => {
  for (const r of [0, 0.5, 0.999999]) {
    assert.equal(rolls(0, () => r), false);
    assert.equal(rolls(1_000_000, () => r), true);
  }
  assert.equal(rolls(1, () => 0), true, 'the lowest draw is within a share of one per million');
  assert.equal(rolls(1, () => 0.000001), false);
  assert.equal(rolls(250_000, () => 0.2499), true);
  assert.equal(rolls(250_000, () => 0.25), false);
  // 100,000 draws at 25%: mean 25,000, sd 137; ±4.5 sd is [24,384, 25,616] (a seeded generator: the
  // count is the same every run; the bound says the generator and the roll are not biased).
  const random = seeded(29);
  let n = 0;
  for (let i = 0; i < 100_000; i++) if (rolls(250_000, random)) n++;
  assert.ok(n >= 24_384 && n <= 25_616, `${n} of 100000`);
});

it('a delay is its fixed delay when rolled, else 0; no delay configured: 0', () => {
  const f: HttpFault = { delay: { fixedDelayMs: 150, perMillion: 500_000 } };
  assert.equal(faultDelayMs(f, () => 0.1), 150);
  assert.equal(faultDelayMs(f, () => 0.9), 0);
  assert.equal(faultDelayMs({ abort: { perMillion: 1_000_000, httpStatus: 500 } }, () => 0), 0);
});

it('an abort answers its HTTP status; a gRPC status answers a gRPC call trailers-only, anything else with gRPC\'s HTTP status', () => {
  const http: HttpFault = { abort: { perMillion: 1_000_000, httpStatus: 418 } };
  assert.deepEqual(faultAbort(http, false, Math.random), { status: 418, body: 'fault filter abort' });
  assert.deepEqual(faultAbort(http, true, Math.random), { status: 418, body: 'fault filter abort' }, 'the engine answers a gRPC call with the gRPC status of 418');
  const grpc: HttpFault = { abort: { perMillion: 1_000_000, grpcStatus: 14 } };
  assert.deepEqual(faultAbort(grpc, true, Math.random), {
    status: 200, body: '', grpcStatus: 14,
    headers: { 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': 'fault filter abort' },
  });
  assert.deepEqual(faultAbort(grpc, false, Math.random), { status: 503, body: 'fault filter abort' }, 'UNAVAILABLE is 503 to a client that is not gRPC');
  assert.equal(faultAbort({ abort: { perMillion: 0, httpStatus: 500 } }, false, () => 0), undefined, 'no share: never');
  assert.equal(faultAbort({ delay: { fixedDelayMs: 1, perMillion: 1_000_000 } }, false, () => 0), undefined);
});
