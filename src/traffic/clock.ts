// The two side effects the traffic core needs, passed in so that tests freeze them: a clock and a
// random source. Nothing in src/traffic/ reads Date.now(), performance.now() or Math.random() by
// itself.

/**
 * Time in milliseconds. `now()` is compared across worker threads (ejection times live in shared
 * memory), so it must have one origin for the whole process: `performance.now()` alone does not
 * (each thread counts from its own start). `wall()` is only printed (event log timestamps).
 */
export interface Clock {
  now(): number;
  wall(): number;
}

/** A uniform number in [0, 1), as Math.random gives. */
export type Random = () => number;

/** The process's clock: monotonic within a thread, one origin for every thread (timeOrigin is wall time at thread start). */
export const processClock: Clock = Object.freeze({
  now: () => performance.timeOrigin + performance.now(),
  wall: () => Date.now(),
});
