// Which Telemetry resources apply to a workload (Istio: the root namespace's without a selector, its
// namespace's without one, and those of its namespace whose selector matches), and what they leave of
// the access log. Only turning it off is accepted (validate-telemetry.ts), so a direction is off when
// any applicable Telemetry turns it off. Pure.
import { ROOT_NAMESPACE, type Telemetry, type Workload } from './types.js';
import { selects } from './workload.js';

function applies(t: Telemetry, workload: Workload): boolean {
  const ns = t.meta.namespace;
  const hasLabels = t.selector !== undefined && Object.keys(t.selector).length > 0;
  if (ns === workload.namespace) return !hasLabels || selects(t.selector, workload.labels);
  return ns === ROOT_NAMESPACE && !hasLabels;
}

/** Whether the workload writes access log lines for its outbound (client) and inbound (server) traffic. */
export function accessLogDirections(telemetries: readonly Telemetry[], workload: Workload): { client: boolean; server: boolean } {
  let client = true;
  let server = true;
  for (const t of telemetries) {
    if (t.accessLogOff === undefined || !applies(t, workload)) continue;
    if (t.accessLogOff.client) client = false;
    if (t.accessLogOff.server) server = false;
  }
  return { client, server };
}
