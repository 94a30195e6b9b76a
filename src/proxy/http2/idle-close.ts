// An HTTP/2 session, client's or upstream's, closes after a time without streams. Not with node's
// session.setTimeout: Node 20 cannot clear that timer once the session is destroyed (closing marks
// the session destroyed first, then its setTimeout(0) returns early on a destroyed session), so a
// session that went away stays in memory, with its socket and buffers, until the timer fires: five
// minutes for a client's connection. A soak of clients that come and go grew a sidecar by tens of MB
// that way. node's timer also moves on every frame read or written; this one wakes once per period.
/** A session that says when it closes (node:http2's, or an upstream one of our frame layer). */
interface Closing { once(event: 'close', fn: () => void): unknown }

/**
 * Calls `onIdle` once `idleFor()` (ms without a stream open; 0 while one is) reaches `ms`, and again
 * each further `ms` while the session stays (onIdle closes it, gracefully or not). The timer is
 * cleared when the session closes, and never keeps the process alive.
 */
export function closeWhenIdle(session: Closing, ms: number, idleFor: () => number, onIdle: () => void): void {
  let timer: NodeJS.Timeout;
  const check = (): void => {
    const idle = idleFor();
    if (idle >= ms) onIdle();
    timer = setTimeout(check, idle >= ms || idle === 0 ? ms : ms - idle).unref();
  };
  timer = setTimeout(check, ms).unref();
  session.once('close', () => clearTimeout(timer));
}
