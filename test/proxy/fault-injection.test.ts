// The engine side of fault injection: a delay is a timer that a closing connection clears (nothing
// is decided for a client that left), an abort is a local answer flagged FI.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { it, mock } from 'node:test';
import type { Verdict } from '../../src/proxy/decider.js';
import { injectFault } from '../../src/proxy/fault-injection.js';

const FORWARD: Verdict = { kind: 'forward', address: '10.0.0.1', port: 80 };

function fakeRequest(contentType?: string): { req: IncomingMessage; socket: EventEmitter & { destroyed: boolean } } {
  const socket = Object.assign(new EventEmitter(), { destroyed: false });
  const req = { socket, headers: contentType ? { 'content-type': contentType } : {} } as unknown as IncomingMessage;
  return { req, socket };
}

it('no fault rolled: the verdict as it was, synchronously (no timer, no promise)', () => {
  const { req } = fakeRequest();
  let delayed = false;
  const v = injectFault({ delay: { fixedDelayMs: 100, perMillion: 0 }, abort: { perMillion: 0, httpStatus: 500 } }, req, FORWARD, () => { delayed = true; });
  assert.equal(v, FORWARD);
  assert.equal(delayed, false);
});

it('an abort: a local answer with flag FI and details fault_filter_abort; a gRPC call gets its grpc-status', () => {
  const { req } = fakeRequest();
  assert.deepEqual(injectFault({ abort: { perMillion: 1_000_000, httpStatus: 418 } }, req, FORWARD, () => {}),
    { kind: 'reply', status: 418, body: 'fault filter abort', flag: 'FI', details: 'fault_filter_abort' });
  const grpc = fakeRequest('application/grpc+proto').req;
  const v = injectFault({ abort: { perMillion: 1_000_000, grpcStatus: 14 } }, grpc, FORWARD, () => {}) as Verdict;
  assert.equal(v.kind === 'reply' && v.grpcStatus, 14);
  assert.equal(v.kind === 'reply' && v.status, 200);
});

it('a delay waits on a timer, then aborts or forwards; a connection that closes during it clears the timer', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const { req, socket } = fakeRequest();
    let delayed = 0;
    const p = injectFault({ delay: { fixedDelayMs: 200, perMillion: 1_000_000 } }, req, FORWARD, () => { delayed++; });
    assert.ok(p instanceof Promise);
    assert.equal(delayed, 1, 'marked DI at once');
    let settled: Verdict | undefined;
    void (p as Promise<Verdict>).then((v) => { settled = v; });
    mock.timers.tick(199);
    await Promise.resolve();
    assert.equal(settled, undefined);
    mock.timers.tick(1);
    await Promise.resolve();
    assert.equal(settled, FORWARD);
    assert.equal(socket.listenerCount('close'), 1, 'one listener per connection, however many requests waited');

    // Two requests delayed on one connection (HTTP/2 streams): the connection closes, neither goes on.
    const other = fakeRequest();
    let decided = 0;
    for (let i = 0; i < 2; i++) {
      void (injectFault({ delay: { fixedDelayMs: 500, perMillion: 1_000_000 }, abort: { perMillion: 1_000_000, httpStatus: 503 } }, other.req, FORWARD, () => {}) as Promise<Verdict>)
        .then(() => { decided++; });
    }
    assert.equal(other.socket.listenerCount('close'), 1);
    other.socket.emit('close');
    mock.timers.tick(1000);
    await Promise.resolve();
    assert.equal(decided, 0, 'nothing decided for a client that left');
  } finally {
    mock.timers.reset();
  }
});
