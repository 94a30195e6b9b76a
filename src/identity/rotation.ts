// When to renew a certificate and how long to wait after a failure: plain arithmetic over
// milliseconds and an injected random source, so the timing is unit-tested without timers.

export interface RotationPolicy {
  /** SECRET_GRACE_PERIOD_RATIO: renew once the remaining life falls below this share of the lifetime. */
  readonly graceRatio: number;
  /** SECRET_GRACE_PERIOD_RATIO_JITTER: the ratio moves up or down by up to this much, per certificate. */
  readonly graceJitter: number;
}

export const DEFAULT_ROTATION: RotationPolicy = { graceRatio: 0.5, graceJitter: 0.01 };

const clamp = (x: number, low: number, high: number): number => Math.min(high, Math.max(low, x));

/**
 * The grace ratio for one certificate: `graceRatio ± random × graceJitter`, up or down with equal
 * chance, kept within [0, 1]. The jitter spreads the renewals of pods started together (a rollout)
 * so they do not all reach the CA at the same moment a day later.
 */
export function jitteredGraceRatio(policy: RotationPolicy, random: () => number = Math.random): number {
  const amount = random() * policy.graceJitter;
  const ratio = random() < 0.5 ? policy.graceRatio - amount : policy.graceRatio + amount;
  return clamp(Number.isFinite(ratio) ? ratio : DEFAULT_ROTATION.graceRatio, 0, 1);
}

/** The moment the remaining life equals `graceRatio` of the lifetime: notAfter − lifetime × ratio. */
export function renewalTimeMs(notBeforeMs: number, notAfterMs: number, graceRatio: number): number {
  return notAfterMs - (notAfterMs - notBeforeMs) * clamp(graceRatio, 0, 1);
}

/** How long from `nowMs` until the renewal (0 when already due). */
export function renewalDelayMs(
  validity: { readonly notBeforeMs: number; readonly notAfterMs: number }, nowMs: number,
  policy: RotationPolicy, random: () => number = Math.random,
): number {
  return Math.max(0, renewalTimeMs(validity.notBeforeMs, validity.notAfterMs, jitteredGraceRatio(policy, random)) - nowMs);
}

export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  /** Each delay is scaled by a random factor in [1 − jitter, 1 + jitter], then capped at maxMs. */
  readonly jitter: number;
}

/** 1 s doubling to a 60 s cap, ±20 %: a CA that is down is asked about once a minute per pod. */
export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 60_000, jitter: 0.2 };

/** The wait before retry number `failures` (1 after the first failure). */
export function backoffDelayMs(failures: number, policy: BackoffPolicy = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(failures - 1, 0), 30);
  const base = Math.min(policy.maxMs, policy.initialMs * 2 ** exponent);
  const factor = 1 - policy.jitter + 2 * policy.jitter * random();
  return Math.round(Math.min(policy.maxMs, base * factor));
}
