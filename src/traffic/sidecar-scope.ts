// Which Sidecar resource applies to a sidecar workload, and what it changes: the ServiceEntries and
// mesh VirtualServices the workload sees (`egress[].hosts`), and what happens to a destination none
// of its services covers (`outboundTrafficPolicy.mode`, else the mesh config's). Istio's choice of
// Sidecar: one in the workload's namespace whose selector matches its labels, else the namespace's
// Sidecar without a selector, else the root namespace's Sidecar without a selector (the mesh default);
// several candidates: the first in file order (Istio takes the oldest). Gateways are not scoped. Pure.
import { intersectHosts } from '../routing/hosts.js';
import { ROOT_NAMESPACE, type OutboundTrafficMode, type ResourceSnapshot, type Sidecar, type SidecarEgressHost, type Workload } from '../config/resources/types.js';
import { selects } from '../config/resources/workload.js';

const hasLabels = (s: Sidecar): boolean => s.selector !== undefined && Object.keys(s.selector).length > 0;

/** The Sidecar that applies to `workload`, if any. */
export function sidecarFor(sidecars: readonly Sidecar[], workload: Workload): Sidecar | undefined {
  const own = sidecars.filter((s) => s.meta.namespace === workload.namespace);
  return own.find((s) => hasLabels(s) && selects(s.selector, workload.labels))
    ?? own.find((s) => !hasLabels(s))
    ?? sidecars.find((s) => s.meta.namespace === ROOT_NAMESPACE && !hasLabels(s));
}

/** A resource of `namespace` with these hosts is seen through `egress` (any host of it, any egress entry). */
function seen(egress: readonly SidecarEgressHost[], namespace: string, hosts: readonly string[]): boolean {
  for (const e of egress) {
    if (e.namespace !== '*' && e.namespace !== namespace) continue;
    for (const h of hosts) if (intersectHosts(e.host, h) !== undefined) return true;
  }
  return false;
}

/** A VirtualService's short host (`reviews`) is its namespace's service: compare its full name too. */
function vsHosts(hosts: readonly string[], namespace: string, clusterDomain: string): string[] {
  return hosts.flatMap((h) => (h.includes('.') || h === '*' ? [h] : [h, `${h}.${namespace}.svc.${clusterDomain}`]));
}

/**
 * The snapshot as the workload's Sidecar scopes it: ServiceEntries and mesh-bound VirtualServices
 * outside its `egress[].hosts` left out (a gateway-bound VirtualService stays: it is not the
 * sidecar's). No Sidecar, or one without egress: the snapshot itself.
 */
export function scopeSnapshot(snapshot: ResourceSnapshot, workload: Workload, clusterDomain = 'cluster.local'): ResourceSnapshot {
  const egress = sidecarFor(snapshot.sidecars, workload)?.egressHosts;
  if (egress === undefined) return snapshot;
  return Object.freeze({
    ...snapshot,
    serviceEntries: Object.freeze(snapshot.serviceEntries.filter((se) => seen(egress, se.meta.namespace, se.hosts))),
    virtualServices: Object.freeze(snapshot.virtualServices.filter((vs) =>
      !vs.gateways.includes('mesh') || seen(egress, vs.meta.namespace, vsHosts(vs.hosts, vs.meta.namespace, clusterDomain)))),
  });
}

/** What the workload does with a destination no service covers: its Sidecar's mode, else the mesh config's. */
export function outboundTrafficMode(snapshot: ResourceSnapshot | undefined, workload: Workload, meshDefault: OutboundTrafficMode): OutboundTrafficMode {
  return (snapshot && sidecarFor(snapshot.sidecars, workload)?.outboundTrafficPolicy) ?? meshDefault;
}
