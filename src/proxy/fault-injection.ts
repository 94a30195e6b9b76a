// Fault injection, the engine side (the pure part is src/routing/fault.ts): a delayed request waits
// on a timer (no worker held), then is aborted or sent on as decided. A client whose connection
// closes during the delay has its timer cleared: nothing is opened upstream, nothing is held. One
// 'close' listener per connection however many of its requests wait (HTTP/2 streams share it).
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpFault } from '../config/resources/types.js';
import { FAULT_ABORT_DETAILS, faultAbort, faultDelayMs } from '../routing/fault.js';
import type { LocalReply, Verdict } from './decider.js';
import { isGrpc } from './http2/grpc.js';

/** The timers of each connection's delayed requests, cleared when it closes. */
const waiting = new WeakMap<Socket, Set<NodeJS.Timeout>>();

function clearAll(this: Socket): void {
  const timers = waiting.get(this);
  if (timers === undefined) return;
  for (const t of timers) clearTimeout(t);
  waiting.delete(this);
}

/**
 * `then()` after `ms`, unless the connection closes first (the promise then never settles: the
 * engine has already dropped the request, and the closure is collected with it).
 */
export function afterDelay<T>(socket: Socket | undefined, ms: number, then: () => T): Promise<T> {
  return new Promise((resolve) => {
    if (socket === undefined || socket.destroyed) {
      if (socket === undefined) setTimeout(() => resolve(then()), ms);
      return;
    }
    let timers = waiting.get(socket);
    if (timers === undefined) {
      waiting.set(socket, (timers = new Set()));
      socket.once('close', clearAll);
    }
    const set = timers;
    const timer = setTimeout(() => {
      set.delete(timer);
      resolve(then());
    }, ms);
    set.add(timer);
  });
}

/** What the caller learns of the faults it injected (for the log: DI on the request). */
export type OnDelayed = () => void;

/**
 * The verdict for a request whose route has `fault`: maybe delayed, then maybe aborted (FI, never
 * reaching the application, never retried: the answer is local), else `verdict` as it was.
 * Rolled per request, the abort after the delay (as Envoy's filter does).
 */
export function injectFault(fault: HttpFault, req: IncomingMessage, verdict: Verdict, onDelayed: OnDelayed, random: () => number = Math.random): Verdict | Promise<Verdict> {
  const ms = faultDelayMs(fault, random);
  if (ms === 0) return abortOr(fault, req, verdict, random);
  onDelayed();
  return afterDelay(req.socket as Socket | undefined, ms, () => abortOr(fault, req, verdict, random));
}

function abortOr(fault: HttpFault, req: IncomingMessage, verdict: Verdict, random: () => number): Verdict {
  if (fault.abort === undefined) return verdict;
  const a = faultAbort(fault, isGrpc(firstHeader(req.headers['content-type'])), random);
  if (a === undefined) return verdict;
  const reply: LocalReply = {
    kind: 'reply', status: a.status, body: a.body, flag: 'FI', details: FAULT_ABORT_DETAILS,
    ...(a.headers !== undefined ? { headers: a.headers } : {}),
    ...(a.grpcStatus !== undefined ? { grpcStatus: a.grpcStatus } : {}),
  };
  return reply;
}

function firstHeader(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
