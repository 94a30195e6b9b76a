// What `/config_dump` shows of a traffic cluster in force: what it is (name, host, port, subset,
// Envoy's discovery type, the ServiceEntry it serves), the policy it runs with once Istio's merge and
// defaults are applied (and the DestinationRule it came from), and its endpoints now, with their
// labels, locality, weight and health. Pure: plain data in, JSON-able data out.
import { hostPortOf, type ClusterStatus } from './cluster-status.js';
import type { ClusterSpec, EndpointSpec } from './spec.js';

/** An endpoint's health as Envoy's admin names it: `FAILED_OUTLIER_CHECK` while ejected. */
export type EndpointHealth = 'HEALTHY' | 'FAILED_OUTLIER_CHECK';

/** The `/config_dump` entry of one cluster; `status` gives the endpoints' health (matched by address:port). */
export function clusterConfigDump(spec: ClusterSpec, endpoints: readonly EndpointSpec[], status: ClusterStatus): Record<string, unknown> {
  const ejected = new Set(status.hosts.filter((h) => h.ejected).map((h) => h.hostPort));
  const byHostPort = new Map(status.hosts.map((h) => [h.hostPort, h]));
  const p = spec.policy;
  return {
    name: spec.name,
    type: spec.discovery ?? 'EDS',
    host: spec.host,
    port: spec.port,
    subset: spec.subset ?? null,
    ...(spec.subsetLabels !== undefined ? { subset_labels: spec.subsetLabels } : {}),
    service: spec.origin,
    rule: p.rule ?? null,
    policy: {
      loadBalancer: p.loadBalancer,
      connectionPool: p.connectionPool,
      outlierDetection: p.outlierDetection ?? null,
      tls: p.tls ?? null,
      // The proxy's labels are its own business: its locality is what the plan was made against.
      locality: p.locality === undefined ? null : { ...p.locality, proxy: { locality: p.locality.proxy.locality } },
    },
    endpoints: endpoints.map((e) => {
      const hostPort = hostPortOf(e.address, e.port);
      const health: EndpointHealth = ejected.has(hostPort) ? 'FAILED_OUTLIER_CHECK' : 'HEALTHY';
      const host = byHostPort.get(hostPort);
      return {
        address: e.address, port: e.port, labels: e.labels, locality: e.locality ?? '', weight: e.weight,
        priority: host?.priority ?? 0,
        ...(host?.localityWeight !== undefined ? { locality_weight: host.localityWeight } : {}),
        ...(e.serviceAccount !== undefined ? { service_account: e.serviceAccount } : {}),
        origin: e.origin, health,
      };
    }),
  };
}
