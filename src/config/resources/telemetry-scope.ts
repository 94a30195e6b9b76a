// Which Telemetry resources apply to a workload and what they make of its access log, as Istio
// merges them: at most one per level, in this order (a later entry overrides an earlier one):
// the root namespace's first Telemetry without a selector, the workload's namespace's first one
// without a selector, and the first of its namespace whose selector matches the workload ("first":
// file order here; Istio: the oldest). An entry counts only once a provider is named (by it, an
// entry before it, or the mesh config's defaultProviders); when no counted entry speaks of a
// direction, the default providers log it, or without them the mesh config's accessLogFile decides. Pure.
import { ROOT_NAMESPACE, type AccessLoggingEntry, type Telemetry, type Workload } from './types.js';
import { selects } from './workload.js';

/**
 * One direction's access log: `mesh`: as the mesh config says (no Telemetry decides); `on`: the
 * `envoy` provider (stdout, the mesh config's format); `off`.
 */
export type AccessLogChoice = 'mesh' | 'on' | 'off';

export interface AccessLogChoices {
  /** A sidecar's outbound, and all of a gateway's traffic (Istio reads a gateway as a client). */
  readonly client: AccessLogChoice;
  /** A sidecar's inbound. */
  readonly server: AccessLogChoice;
  /** The Telemetries that decide, root first ("namespace/name"), for the log and the tests. */
  readonly from: readonly string[];
}

function namespaceWide(t: Telemetry): boolean {
  return t.selector === undefined || Object.keys(t.selector).length === 0;
}

/** The Telemetries in force for the workload: root, namespace, workload (each at most one). */
export function applicableTelemetries(telemetries: readonly Telemetry[], workload: Workload): Telemetry[] {
  const root = telemetries.find((t) => t.meta.namespace === ROOT_NAMESPACE && namespaceWide(t));
  const ns = workload.namespace === ROOT_NAMESPACE ? undefined : telemetries.find((t) => t.meta.namespace === workload.namespace && namespaceWide(t));
  const own = telemetries.find((t) => t.meta.namespace === workload.namespace && !namespaceWide(t) && selects(t.selector, workload.labels));
  return [root, ns, own].filter((t): t is Telemetry => t !== undefined);
}

/**
 * Istio's merge of the entries (root first): the last counted entry of each direction wins.
 * `defaultOn`: the mesh config's defaultProviders.accessLogging names envoy.
 */
export function mergeAccessLogging(entries: readonly AccessLoggingEntry[], defaultOn = false): { client: AccessLogChoice; server: AccessLogChoice } {
  let client: AccessLogChoice = defaultOn ? 'on' : 'mesh';
  let server: AccessLogChoice = client;
  // Before any entry names a provider, entries take the mesh's default providers.
  let provider = defaultOn;
  for (const e of entries) {
    provider ||= e.namesProvider;
    if (!provider) continue;
    const choice = e.disabled ? 'off' : 'on';
    if (e.client) client = choice;
    if (e.server) server = choice;
  }
  return { client, server };
}

/** What the Telemetries in force make of the workload's access log, per direction. */
export function accessLogChoices(telemetries: readonly Telemetry[], workload: Workload, defaultOn = false): AccessLogChoices {
  const applied = applicableTelemetries(telemetries, workload).filter((t) => t.accessLogging !== undefined);
  const merged = mergeAccessLogging(applied.flatMap((t) => t.accessLogging ?? []), defaultOn);
  return { ...merged, from: applied.map((t) => `${t.meta.namespace}/${t.meta.name}`) };
}
