// What the scrape of Istio's standard metrics needs to know of this pod (src/metrics/standard-labels.ts):
// its own metadata and identity, the service its inbound requests are for, the service of each
// outbound cluster, a peer's exchanged metadata decoded (once per distinct value).
import { metadataOfHeader, UNKNOWN_WORKLOAD, type WorkloadMetadata } from '../metrics/peer-metadata.js';
import { hostOfCluster, PASSTHROUGH_SERVICE, serviceOfHost, type LocalFacts, type ServiceLabels } from '../metrics/standard-labels.js';
import { selects, serviceEntriesFor } from '../config/resources/workload.js';
import type { DataPlane } from './data-plane.js';

/** Decoded peers kept; past it the cache starts again (the series themselves are bounded by the data plane). */
const MAX_DECODED_PEERS = 4096;

export function metricsFacts(plane: DataPlane, clusterDomain: string): () => LocalFacts {
  const decoded = new Map<string, WorkloadMetadata>();
  const peerOf = (key: string): WorkloadMetadata => {
    if (key === '') return UNKNOWN_WORKLOAD;
    let m = decoded.get(key);
    if (m === undefined) {
      if (decoded.size >= MAX_DECODED_PEERS) decoded.clear();
      m = metadataOfHeader(key) ?? UNKNOWN_WORKLOAD;
      decoded.set(key, m);
    }
    return m;
  };
  const own = plane.ownMetadata.metadata;
  /**
   * The service of the inbound side: a ServiceEntry (visible here) whose workloadSelector selects
   * this pod, else the Kubernetes convention of a service named as the pod's canonical service.
   */
  const inboundService = (): ServiceLabels => {
    const snapshot = plane.resources.snapshot;
    const workload = plane.resources.workload;
    if (snapshot !== undefined) {
      for (const se of serviceEntriesFor(snapshot.serviceEntries, workload.namespace)) {
        if (se.workloadSelector !== undefined && se.hosts.length > 0 && selects(se.workloadSelector, workload.labels)) {
          return serviceOfHost(se.hosts[0]!, se.meta.namespace);
        }
      }
    }
    if (own.canonicalService === 'unknown') return { host: 'unknown', name: 'unknown', namespace: own.namespace };
    return { host: `${own.canonicalService}.${own.namespace}.svc.${clusterDomain}`, name: own.canonicalService, namespace: own.namespace };
  };
  const serviceOf = (cluster: string): ServiceLabels => {
    const host = hostOfCluster(cluster);
    if (host === undefined) return PASSTHROUGH_SERVICE;
    // A ServiceEntry's host that is not a Kubernetes name belongs to the entry's namespace (`ServiceEntry ns/name`).
    const origin = plane.clusters.get(cluster)?.spec.origin;
    const ns = origin !== undefined ? /^ServiceEntry ([^/]+)\//.exec(origin)?.[1] : undefined;
    return serviceOfHost(host, ns ?? own.namespace);
  };
  return () => ({
    own, ownPrincipal: plane.credentials.current?.certificate.spiffeId, inboundService: inboundService(), serviceOf, peerOf,
  });
}
