// Envoy's outlier detection event log (`--outlierLogPath`): one JSON object per line, the
// OutlierDetectionEvent message as Envoy prints it (proto field names, fields in field-number
// order, enums as names, the uint64 secs_since_last_action as a string and absent when there was
// no earlier action). Pure: the engine appends the line to the file.

export type OutlierEjectionType = 'CONSECUTIVE_5XX' | 'CONSECUTIVE_GATEWAY_FAILURE' | 'CONSECUTIVE_LOCAL_ORIGIN_FAILURE';

export interface OutlierEvent {
  readonly action: 'EJECT' | 'UNEJECT';
  /** The ejection's type; an UNEJECT has none and prints the enum's first value, as Envoy's does. */
  readonly type?: OutlierEjectionType | undefined;
  readonly clusterName: string;
  /** `10.0.0.1:80`, `[fd00::1]:80`. */
  readonly upstreamUrl: string;
  /** Ejections of the endpoint so far (this one included). */
  readonly numEjections: number;
  /** EJECT: whether the endpoint was actually ejected (Istio enforces every detection it configures). */
  readonly enforced: boolean;
  /** Wall-clock time of the event, ms since the epoch. */
  readonly timestampMs: number;
  /** Whole seconds since the endpoint's previous ejection (UNEJECT) or unejection (EJECT), if any. */
  readonly secsSinceLastAction?: number | undefined;
}

/** A protobuf Timestamp in JSON: RFC 3339 in UTC, with 0, 3, 6 or 9 fractional digits as needed. */
function protoTimestamp(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2024-05-01T10:00:00.123Z
  return iso.endsWith('.000Z') ? `${iso.slice(0, -5)}Z` : iso;
}

/** The event as one line of Envoy's outlier log (no newline). */
export function formatOutlierEvent(e: OutlierEvent): string {
  const o: Record<string, unknown> = { type: e.type ?? 'CONSECUTIVE_5XX', timestamp: protoTimestamp(e.timestampMs) };
  if (e.secsSinceLastAction !== undefined) o['secs_since_last_action'] = String(Math.max(0, Math.floor(e.secsSinceLastAction)));
  o['cluster_name'] = e.clusterName;
  o['upstream_url'] = e.upstreamUrl;
  o['action'] = e.action;
  o['num_ejections'] = e.numEjections;
  o['enforced'] = e.action === 'EJECT' && e.enforced;
  if (e.action === 'EJECT') o['eject_consecutive_event'] = {};
  return JSON.stringify(o);
}
