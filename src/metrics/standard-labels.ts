// The label values of Istio's standard metrics, worked out at scrape time from a series' key (the
// data plane keeps only the key: src/proxy/standard-series.ts). Pure: what this pod is, what the
// peer said of itself, where the request went, in; Istio's labels, out.
import { flagsText } from '../log/access-record.js';
import { unpackRequest } from '../proxy/standard-series.js';
import { UNKNOWN, UNKNOWN_WORKLOAD, type WorkloadMetadata } from './peer-metadata.js';

/** Istio's labels of the HTTP metrics, in Istio's order. */
export const HTTP_LABELS = [
  'reporter', 'source_workload', 'source_canonical_service', 'source_canonical_revision', 'source_workload_namespace',
  'source_principal', 'source_app', 'source_version', 'source_cluster', 'destination_workload', 'destination_workload_namespace',
  'destination_principal', 'destination_app', 'destination_version', 'destination_service', 'destination_canonical_service',
  'destination_canonical_revision', 'destination_service_name', 'destination_service_namespace', 'destination_cluster',
  'request_protocol', 'response_code', 'grpc_response_status', 'response_flags', 'connection_security_policy',
] as const;

/** The TCP metrics carry the same but the response code and gRPC status (request_protocol is `tcp`). */
export const TCP_LABELS = HTTP_LABELS.filter((l) => l !== 'response_code' && l !== 'grpc_response_status');

export type HttpLabel = (typeof HTTP_LABELS)[number];
export type LabelValues = Record<HttpLabel, string>;

/** The service a request went to: its host, short name and namespace. */
export interface ServiceLabels {
  readonly host: string;
  readonly name: string;
  readonly namespace: string;
}

export const UNKNOWN_SERVICE: ServiceLabels = { host: UNKNOWN, name: UNKNOWN, namespace: UNKNOWN };
/** Envoy's name for the original destination's cluster (a destination no ServiceEntry declares). */
export const PASSTHROUGH_SERVICE: ServiceLabels = { host: UNKNOWN, name: 'PassthroughCluster', namespace: UNKNOWN };

/** `<name>.<namespace>.svc.<domain>` gives its name and namespace; another host is its own name, in `namespace`. */
export function serviceOfHost(host: string, namespace: string): ServiceLabels {
  const m = /^([^.]+)\.([^.]+)\.svc(?:\.|$)/.exec(host);
  return m ? { host, name: m[1]!, namespace: m[2]! } : { host, name: host, namespace };
}

/** The host of an Istio cluster name (`outbound|80|v1|reviews.default.svc.cluster.local`); undefined for another name. */
export function hostOfCluster(name: string): string | undefined {
  const parts = name.split('|');
  return parts.length === 4 && parts[3] !== '' ? parts[3] : undefined;
}

/** What the scrape knows of this pod. */
export interface LocalFacts {
  readonly own: WorkloadMetadata;
  /** This workload's SPIFFE id (`spiffe://...`), when it holds a certificate. */
  readonly ownPrincipal: string | undefined;
  /** The service its inbound requests are for. */
  readonly inboundService: ServiceLabels;
  /** The service of an outbound cluster's name ('' the original destination). */
  serviceOf(cluster: string): ServiceLabels;
  /** A peer's exchanged metadata (its header value as it came); UNKNOWN_WORKLOAD for '' or one that does not decode. */
  peerOf(key: string): WorkloadMetadata;
}

const principalLabel = (principal: string): string => (principal === '' ? UNKNOWN : `spiffe://${principal}`);

function sides(inbound: boolean, f: LocalFacts, principal: string, peerKey: string, service: ServiceLabels):
  Omit<LabelValues, 'request_protocol' | 'response_code' | 'grpc_response_status' | 'response_flags'> {
  const peer = f.peerOf(peerKey);
  const [src, dst] = inbound ? [peer, f.own] : [f.own, peer];
  const mtls = principal !== '';
  const ownPrincipal = mtls ? f.ownPrincipal ?? UNKNOWN : UNKNOWN;
  return {
    reporter: inbound ? 'destination' : 'source',
    source_workload: src.workload, source_canonical_service: src.canonicalService, source_canonical_revision: src.canonicalRevision,
    source_workload_namespace: src.namespace, source_principal: inbound ? principalLabel(principal) : ownPrincipal,
    source_app: src.app, source_version: src.version, source_cluster: src.cluster,
    destination_workload: dst.workload, destination_workload_namespace: dst.namespace,
    destination_principal: inbound ? ownPrincipal : principalLabel(principal),
    destination_app: dst.app, destination_version: dst.version, destination_service: service.host,
    destination_canonical_service: dst.canonicalService, destination_canonical_revision: dst.canonicalRevision,
    destination_service_name: service.name, destination_service_namespace: service.namespace, destination_cluster: dst.cluster,
    // Istio's source reporter cannot know the server's policy: it always writes unknown.
    connection_security_policy: inbound ? (mtls ? 'mutual_tls' : 'none') : UNKNOWN,
  };
}

/** The labels of one HTTP series. */
export function httpLabels(inbound: boolean, f: LocalFacts, service: string, principal: string, peerKey: string, packed: number): LabelValues {
  const { status, grpc, flags } = unpackRequest(packed);
  return {
    ...sides(inbound, f, principal, peerKey, inbound ? f.inboundService : f.serviceOf(service)),
    request_protocol: grpc === undefined ? 'http' : 'grpc',
    response_code: String(status),
    grpc_response_status: grpc === undefined || grpc === null ? '' : String(grpc),
    response_flags: flagsText(flags) ?? '-',
  };
}

/** The labels of one TCP series. */
export function tcpLabels(inbound: boolean, f: LocalFacts, service: string, principal: string, peerKey: string): Omit<LabelValues, 'response_code' | 'grpc_response_status'> {
  return {
    ...sides(inbound, f, principal, peerKey, inbound ? f.inboundService : f.serviceOf(service)),
    request_protocol: 'tcp',
    response_flags: '-',
  };
}

export { UNKNOWN_WORKLOAD };
