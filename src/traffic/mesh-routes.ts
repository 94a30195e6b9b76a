// The VirtualServices that route this sidecar's outbound requests, as Istio selects them: bound to
// the mesh gateway, exported to the sidecar's namespace, their hosts read in their own namespace,
// and each route's matches narrowed to those that can apply to this workload (a match bound to
// other gateways, or whose sourceLabels / sourceNamespace this workload does not have, never
// applies; a route left with no match that applies is dropped; a route without matches stays).
// Pure; build once per configuration. Matching requests against them is the route matcher's job.
import type { HttpMatchRequest, HttpRoute, VirtualService, Workload } from '../config/resources/types.js';
import { exportedTo, selects } from '../config/resources/workload.js';
import { DEFAULT_CLUSTER_DOMAIN } from '../security/mtls/host-names.js';
import { resolveShortName } from './clusters.js';

export const MESH = 'mesh';

export interface MeshRoutesContext {
  readonly workload: Workload;
  readonly clusterDomain?: string;
}

/** True when a match can apply to this workload's outbound requests. */
export function matchAppliesTo(m: HttpMatchRequest, vsGateways: readonly string[], workload: Workload): boolean {
  if (!(m.gateways ?? vsGateways).includes(MESH)) return false;
  if (m.sourceNamespace !== undefined && m.sourceNamespace !== workload.namespace) return false;
  return m.sourceLabels === undefined || selects(m.sourceLabels, workload.labels);
}

function narrow(route: HttpRoute, vsGateways: readonly string[], workload: Workload): HttpRoute | undefined {
  if (route.match.length === 0) return route;
  const match = route.match.filter((m) => matchAppliesTo(m, vsGateways, workload));
  if (match.length === 0) return undefined;
  return match.length === route.match.length ? route : { ...route, match };
}

/** The mesh VirtualServices for this sidecar, in snapshot order, hosts expanded (`reviews` → `reviews.<ns>.svc.<domain>`). */
export function meshVirtualServices(virtualServices: readonly VirtualService[], ctx: MeshRoutesContext): VirtualService[] {
  const domain = ctx.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
  const out: VirtualService[] = [];
  for (const vs of virtualServices) {
    if (!vs.gateways.includes(MESH) || !exportedTo(vs.exportTo, ctx.workload.namespace)) continue;
    const http = vs.http.flatMap((r) => narrow(r, vs.gateways, ctx.workload) ?? []);
    if (http.length === 0) continue;
    const hosts = vs.hosts.map((h) => resolveShortName(h, vs.meta.namespace, domain));
    out.push(Object.freeze({ ...vs, hosts: Object.freeze(hosts), http: Object.freeze(http) }));
  }
  return out;
}
