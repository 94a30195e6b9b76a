// Outlier detection: Envoy's consecutive-error detectors as Istio configures them (success-rate and
// failure-percentage detection are off: Istio sets their enforcement to 0). Per endpoint, in
// shared memory, so an endpoint ejected after failures seen by one worker is skipped by all:
//
// - Each result updates the endpoint's counters with one or two Atomics. An HTTP status from the
//   upstream: a 5xx adds to the 5xx counter, a 502/503/504 also to the gateway counter (another
//   5xx resets the gateway counter); anything else resets both. A local-origin result (connect
//   failure, time-out, reset): without splitExternalLocalOriginErrors it counts as a 503 (a time-out
//   as a 504); with it, it counts only to the local-origin counter, which a connection made resets.
// - The result that brings a counter exactly to its threshold detects (Atomics.add returns a
//   distinct value to each thread, so one detection per run of errors). Under the cluster's eject
//   lock: the endpoint is ejected at once if the ejected share stays within maxEjectionPercent, or
//   if none is ejected yet (at least one endpoint may always be ejected); the counter restarts.
// - An ejection lasts baseEjectionTime × the endpoint's ejection multiplier, capped at
//   maxEjectionTime; the multiplier grows by one per ejection (up to where the cap is passed by one
//   base time) and shrinks by one per interval the endpoint stays healthy after an unejection.
//   Unejection happens at the interval sweep, so an ejection lasts up to one interval more.
//   Every ejection and unejection bumps the cluster's health version: balancers rebuild.
import type { Clock } from './clock.js';
import type { OutlierEjectionType, OutlierEvent } from './outlier-event.js';
import { EP, type ClusterCounter, type ClusterSlot, type EndpointSlot } from './shared-state.js';
import type { OutlierDetectionSpec } from './spec.js';

/** Results that are not an HTTP status (an HTTP status is reported as itself, 100..599). */
export const LOCAL_ORIGIN = Object.freeze({
  /** The connection failed, or was reset before a response (Envoy's LocalOriginConnectFailed). */
  CONNECT_FAILED: -1,
  /** A connect, per-try or route time-out (LocalOriginTimeout). */
  TIMEOUT: -2,
  /** A connection was made for an HTTP request; the response's status follows (LocalOriginConnectSuccess). */
  CONNECT_SUCCESS: -3,
  /** A TCP connection was made and that is the whole transaction (LocalOriginConnectSuccessFinal). */
  CONNECT_SUCCESS_FINAL: -4,
});

/** What the detector needs of a member of the cluster. */
export interface OutlierMember {
  readonly slot: EndpointSlot;
  /** `address:port` as Envoy prints it (upstream_url). */
  readonly hostPort: string;
}

const DETECTED: Record<OutlierEjectionType, ClusterCounter> = {
  CONSECUTIVE_5XX: 'outlier_detection.ejections_detected_consecutive_5xx',
  CONSECUTIVE_GATEWAY_FAILURE: 'outlier_detection.ejections_detected_consecutive_gateway_failure',
  CONSECUTIVE_LOCAL_ORIGIN_FAILURE: 'outlier_detection.ejections_detected_consecutive_local_origin_failure',
};
const ENFORCED: Record<OutlierEjectionType, ClusterCounter> = {
  CONSECUTIVE_5XX: 'outlier_detection.ejections_enforced_consecutive_5xx',
  CONSECUTIVE_GATEWAY_FAILURE: 'outlier_detection.ejections_enforced_consecutive_gateway_failure',
  CONSECUTIVE_LOCAL_ORIGIN_FAILURE: 'outlier_detection.ejections_enforced_consecutive_local_origin_failure',
};
const COUNTER_WORD: Record<OutlierEjectionType, number> = {
  CONSECUTIVE_5XX: EP.CONSECUTIVE_5XX,
  CONSECUTIVE_GATEWAY_FAILURE: EP.CONSECUTIVE_GATEWAY,
  CONSECUTIVE_LOCAL_ORIGIN_FAILURE: EP.CONSECUTIVE_LOCAL,
};

/** Envoy's grpcToHttpStatus: the HTTP status outlier detection counts for a gRPC status in the response headers. */
export function grpcToHttpStatus(grpcStatus: number): number {
  switch (grpcStatus) {
    case 0: return 200;
    case 1: return 499;
    case 3: case 9: case 11: return 400;
    case 4: return 504;
    case 5: return 404;
    case 6: case 10: return 409;
    case 7: return 403;
    case 8: return 429;
    case 12: return 501;
    case 14: return 503;
    case 16: return 401;
    default: return 500; // 2 UNKNOWN, 13 INTERNAL, 15 DATA_LOSS, anything else
  }
}

export class OutlierDetector {
  constructor(
    readonly spec: OutlierDetectionSpec,
    private readonly cluster: ClusterSlot,
    private readonly clusterName: string,
    private readonly clock: Clock,
    private readonly emit: (e: OutlierEvent) => void,
  ) {}

  /** One result for `member` (an HTTP status, or a LOCAL_ORIGIN value); `members`: the cluster's endpoints now. */
  report(member: OutlierMember, result: number, members: readonly OutlierMember[]): void {
    if (result >= 0) {
      this.httpStatus(member, result, members);
      return;
    }
    const split = this.spec.splitExternalLocalOriginErrors;
    const words = member.slot.words;
    const base = member.slot.base;
    switch (result) {
      case LOCAL_ORIGIN.CONNECT_FAILED:
      case LOCAL_ORIGIN.TIMEOUT:
        if (!split) {
          this.httpStatus(member, result === LOCAL_ORIGIN.TIMEOUT ? 504 : 503, members);
        } else if (Atomics.add(words, base + EP.CONSECUTIVE_LOCAL, 1) + 1 === this.spec.consecutiveLocalOriginFailures) {
          this.detected(member, 'CONSECUTIVE_LOCAL_ORIGIN_FAILURE', members);
        }
        return;
      case LOCAL_ORIGIN.CONNECT_SUCCESS:
        if (split) Atomics.store(words, base + EP.CONSECUTIVE_LOCAL, 0);
        return;
      case LOCAL_ORIGIN.CONNECT_SUCCESS_FINAL:
        if (split) Atomics.store(words, base + EP.CONSECUTIVE_LOCAL, 0);
        else this.httpStatus(member, 200, members);
        return;
    }
  }

  // Envoy's putHttpResponseCode.
  private httpStatus(member: OutlierMember, status: number, members: readonly OutlierMember[]): void {
    const words = member.slot.words;
    const base = member.slot.base;
    if (status < 500 || status > 599) {
      // Stores, not read-modify-writes: cheap, and the common case (a success) never contends.
      if (Atomics.load(words, base + EP.CONSECUTIVE_5XX) !== 0) Atomics.store(words, base + EP.CONSECUTIVE_5XX, 0);
      if (Atomics.load(words, base + EP.CONSECUTIVE_GATEWAY) !== 0) Atomics.store(words, base + EP.CONSECUTIVE_GATEWAY, 0);
      return;
    }
    if (status === 502 || status === 503 || status === 504) {
      if (Atomics.add(words, base + EP.CONSECUTIVE_GATEWAY, 1) + 1 === this.spec.consecutiveGatewayErrors) {
        this.detected(member, 'CONSECUTIVE_GATEWAY_FAILURE', members);
      }
    } else {
      Atomics.store(words, base + EP.CONSECUTIVE_GATEWAY, 0);
    }
    if (Atomics.add(words, base + EP.CONSECUTIVE_5XX, 1) + 1 === this.spec.consecutive5xxErrors) {
      this.detected(member, 'CONSECUTIVE_5XX', members);
    }
  }

  // A counter reached its threshold: eject if allowed, then restart that counter (Envoy's onConsecutiveErrorWorker).
  private detected(member: OutlierMember, type: OutlierEjectionType, members: readonly OutlierMember[]): void {
    const slot = member.slot;
    this.cluster.lockEjections();
    let event: OutlierEvent | undefined;
    try {
      if (slot.isEjected()) return;
      this.cluster.count(DETECTED[type]);
      event = this.eject(member, type, members);
      if (type === 'CONSECUTIVE_5XX') this.cluster.count('outlier_detection.ejections_consecutive_5xx');
      Atomics.store(slot.words, slot.base + COUNTER_WORD[type], 0);
    } finally {
      this.cluster.unlockEjections();
    }
    if (event !== undefined) this.emit(event);
  }

  // Envoy's ejectHost, under the eject lock; the event to log, or undefined when maxEjectionPercent refused it.
  private eject(member: OutlierMember, type: OutlierEjectionType, members: readonly OutlierMember[]): OutlierEvent | undefined {
    let ejected = 0;
    for (const m of members) if (m.slot.isEjected()) ejected++;
    const allowed = ejected === 0 || (ejected + 1) * 100 <= this.spec.maxEjectionPercent * members.length;
    if (!allowed) {
      this.cluster.count('outlier_detection.ejections_overflow');
      return undefined;
    }
    if (type === 'CONSECUTIVE_5XX') this.cluster.count('outlier_detection.ejections_total');
    const slot = member.slot;
    const now = this.clock.now();
    const lastUnejection = slot.lastUnejection();
    Atomics.store(slot.words, slot.base + EP.EJECTED, 1);
    const numEjections = Atomics.add(slot.words, slot.base + EP.NUM_EJECTIONS, 1) + 1;
    slot.setLastEjection(now);
    const backoff = Atomics.load(slot.words, slot.base + EP.BACKOFF);
    // The multiplier stops growing once base × multiplier passes the cap by a base time.
    if (backoff * this.spec.baseEjectionTimeMs < this.spec.maxEjectionTimeMs + this.spec.baseEjectionTimeMs) {
      Atomics.store(slot.words, slot.base + EP.BACKOFF, backoff + 1);
    }
    this.cluster.bumpHealthVersion();
    this.cluster.count('outlier_detection.ejections_enforced_total');
    this.cluster.count(ENFORCED[type]);
    return {
      action: 'EJECT', type, clusterName: this.clusterName, upstreamUrl: member.hostPort, numEjections, enforced: true,
      timestampMs: this.clock.wall(),
      secsSinceLastAction: lastUnejection === undefined ? undefined : Math.floor((now - lastUnejection) / 1000),
    };
  }

  /** How long an ejection of `member` lasts now: base × multiplier, capped. */
  ejectionTimeMs(member: OutlierMember): number {
    const backoff = Atomics.load(member.slot.words, member.slot.base + EP.BACKOFF);
    return Math.min(this.spec.baseEjectionTimeMs * backoff, this.spec.maxEjectionTimeMs);
  }

  /**
   * The interval sweep (Envoy's onIntervalTimer): unejects the endpoints whose time is up, then
   * shrinks the multiplier of those healthy for an interval since their unejection. The caller runs
   * it once per interval for the whole process (ClusterSlot.claimSweep).
   */
  sweep(members: readonly OutlierMember[]): void {
    const now = this.clock.now();
    const events: OutlierEvent[] = [];
    this.cluster.lockEjections();
    try {
      for (const m of members) {
        const slot = m.slot;
        if (!slot.isEjected()) continue;
        const since = slot.lastEjection();
        if (since !== undefined && this.ejectionTimeMs(m) > now - since) continue;
        Atomics.store(slot.words, slot.base + EP.EJECTED, 0);
        // Counters restart, so that a few errors right after coming back do not eject again.
        Atomics.store(slot.words, slot.base + EP.CONSECUTIVE_5XX, 0);
        Atomics.store(slot.words, slot.base + EP.CONSECUTIVE_GATEWAY, 0);
        Atomics.store(slot.words, slot.base + EP.CONSECUTIVE_LOCAL, 0);
        slot.setLastUnejection(now);
        this.cluster.bumpHealthVersion();
        events.push({
          action: 'UNEJECT', clusterName: this.clusterName, upstreamUrl: m.hostPort, enforced: false,
          numEjections: slot.word(EP.NUM_EJECTIONS), timestampMs: this.clock.wall(),
          secsSinceLastAction: since === undefined ? undefined : Math.floor((now - since) / 1000),
        });
      }
      for (const m of members) {
        const slot = m.slot;
        if (slot.isEjected()) continue;
        const unejected = slot.lastUnejection();
        if (unejected === undefined || now - unejected < this.spec.intervalMs) continue;
        const backoff = Atomics.load(slot.words, slot.base + EP.BACKOFF);
        if (backoff > 0) Atomics.store(slot.words, slot.base + EP.BACKOFF, backoff - 1);
      }
    } finally {
      this.cluster.unlockEjections();
    }
    for (const e of events) this.emit(e);
  }
}
