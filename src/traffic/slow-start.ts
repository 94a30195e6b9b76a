// Envoy's slow start (Istio's `warmup`): an endpoint that joins a cluster gets a share of its weight
// that grows over the window, so a cold instance is not handed its full share at once. Pure: the
// time since it joined comes in.
import type { SlowStartSpec } from './spec.js';

/** The share of its weight (minWeight..1) an endpoint gets `sinceJoinMs` after joining. */
export function slowStartFactor(s: SlowStartSpec, sinceJoinMs: number): number {
  if (sinceJoinMs >= s.windowMs) return 1;
  // Envoy counts at least 1 ms, so a just-joined endpoint is not at 0.
  const t = Math.max(sinceJoinMs, 1) / s.windowMs;
  const ramp = s.aggression === 1 ? t : t ** (1 / s.aggression);
  return Math.max(s.minWeight, ramp);
}
