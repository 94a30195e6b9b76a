// Who a workload is, as Istio's standard metrics label it, and Istio's metadata exchange: the
// `x-envoy-peer-metadata` header (base64 of a google.protobuf.Struct of node metadata) and its
// `x-envoy-peer-metadata-id` companion. This agent's own metadata comes from the pod (downward-API
// labels, POD_NAME, POD_NAMESPACE, CLUSTER_ID, MESH_META_*); a peer's from its exchange, trusted only
// over a verified mutual TLS connection (the callers decide that).
import { decodeStruct, encodeStruct, StructDecodeError, type StructValue } from './proto-struct.js';

export const PEER_METADATA_HEADER = 'x-envoy-peer-metadata';
export const PEER_METADATA_ID_HEADER = 'x-envoy-peer-metadata-id';
/** Istio strips both from what reaches an application and from what a client outside the mesh sends. */
export const PEER_METADATA_HEADERS: readonly string[] = [PEER_METADATA_HEADER, PEER_METADATA_ID_HEADER];

/** A peer's header larger than this is not decoded (its labels are `unknown`). */
export const MAX_PEER_METADATA_BYTES = 8192;

/** The labels Istio's standard metrics give one workload; `unknown` where nothing says. */
export interface WorkloadMetadata {
  readonly workload: string;
  readonly namespace: string;
  readonly app: string;
  readonly version: string;
  readonly canonicalService: string;
  readonly canonicalRevision: string;
  readonly cluster: string;
}

export const UNKNOWN = 'unknown';

export const UNKNOWN_WORKLOAD: WorkloadMetadata = Object.freeze({
  workload: UNKNOWN, namespace: UNKNOWN, app: UNKNOWN, version: UNKNOWN, canonicalService: UNKNOWN, canonicalRevision: UNKNOWN, cluster: UNKNOWN,
});

const CANONICAL_NAME = 'service.istio.io/canonical-name';
const CANONICAL_REVISION = 'service.istio.io/canonical-revision';
const APP_NAME = 'app.kubernetes.io/name';
const APP_VERSION = 'app.kubernetes.io/version';
/** The only labels this agent sends a peer: what its metrics read, and nothing more of the pod. */
const EXCHANGED_LABELS = ['app', 'version', CANONICAL_NAME, CANONICAL_REVISION] as const;

type Labels = Readonly<Record<string, string>>;

const nonEmpty = (...values: (string | undefined)[]): string | undefined => values.find((v) => v !== undefined && v !== '');

/**
 * The workload of a pod whose name has no better source: a Deployment's pod `<name>-<rs hash>-<5>`
 * gives `<name>`, a StatefulSet's or a Job's `<name>-<n>`/`<name>-<5>` gives `<name>`; anything else
 * is its own workload. (Istio's injector reads the owner references; the pod name is what is here.)
 */
export function workloadOfPod(pod: string): string {
  const deployment = /^(.+)-[0-9a-f]{6,10}-[0-9a-z]{5}$/.exec(pod);
  if (deployment) return deployment[1]!;
  const other = /^(.+)-(?:[0-9]+|[0-9a-z]{5})$/.exec(pod);
  return other ? other[1]! : pod;
}

export interface OwnMetadataSource {
  readonly POD_NAME: string;
  readonly POD_NAMESPACE: string;
  readonly CLUSTER_ID: string;
  readonly MESH_META_CLUSTER_ID: string;
  readonly MESH_META_WORKLOAD_NAME: string;
  readonly SERVICE_ACCOUNT: string;
  readonly INSTANCE_IP: string;
}

/** This workload's metadata and what it tells its peers. */
export interface OwnMetadata {
  readonly metadata: WorkloadMetadata;
  /** `x-envoy-peer-metadata`: base64 of the Struct Istio's sidecars send. */
  readonly header: string;
  /** `x-envoy-peer-metadata-id`: the node id (`sidecar~<ip>~<pod>.<ns>~<ns>.svc.cluster.local`). */
  readonly id: string;
  /** The Struct's bytes (the TCP exchange carries them). */
  readonly struct: StructValue;
}

/** Istio's reading of a workload's labels into the metric labels (the same for this pod and a peer). */
export function metadataOf(workload: string | undefined, namespace: string | undefined, cluster: string | undefined, labels: Labels): WorkloadMetadata {
  const app = nonEmpty(labels['app'], labels[APP_NAME]);
  const version = nonEmpty(labels['version'], labels[APP_VERSION]);
  return {
    workload: nonEmpty(workload) ?? UNKNOWN,
    namespace: nonEmpty(namespace) ?? UNKNOWN,
    app: app ?? UNKNOWN,
    version: version ?? UNKNOWN,
    canonicalService: nonEmpty(labels[CANONICAL_NAME], app, workload) ?? UNKNOWN,
    canonicalRevision: nonEmpty(labels[CANONICAL_REVISION], version) ?? 'latest',
    cluster: nonEmpty(cluster) ?? UNKNOWN,
  };
}

/** This pod's metadata, from its environment and its downward-API labels. */
export function ownMetadata(env: OwnMetadataSource, labels: Labels): OwnMetadata {
  const namespace = env.POD_NAMESPACE || 'default';
  const workload = nonEmpty(env.MESH_META_WORKLOAD_NAME, env.POD_NAME ? workloadOfPod(env.POD_NAME) : undefined);
  const cluster = nonEmpty(env.MESH_META_CLUSTER_ID, env.CLUSTER_ID);
  const metadata = metadataOf(workload, namespace, cluster, labels);
  const exchanged: Record<string, string> = {};
  for (const k of EXCHANGED_LABELS) if (labels[k] !== undefined) exchanged[k] = labels[k]!;
  // The canonical pair is always sent, as Istio's injector always labels a pod with it.
  exchanged[CANONICAL_NAME] = metadata.canonicalService;
  exchanged[CANONICAL_REVISION] = metadata.canonicalRevision;
  const struct: Record<string, string | StructValue> = {
    NAME: env.POD_NAME || metadata.workload,
    NAMESPACE: namespace,
    CLUSTER_ID: metadata.cluster,
    WORKLOAD_NAME: metadata.workload,
    OWNER: `kubernetes://apis/apps/v1/namespaces/${namespace}/deployments/${metadata.workload}`,
    LABELS: exchanged,
  };
  if (env.SERVICE_ACCOUNT) struct['SERVICE_ACCOUNT'] = env.SERVICE_ACCOUNT;
  return {
    metadata,
    header: encodeStruct(struct).toString('base64'),
    id: `sidecar~${env.INSTANCE_IP}~${env.POD_NAME}.${namespace}~${namespace}.svc.cluster.local`,
    struct,
  };
}

/** A peer's metadata from its exchanged Struct (missing fields: `unknown`). */
export function metadataOfStruct(s: StructValue): WorkloadMetadata {
  const str = (k: string): string | undefined => (typeof s[k] === 'string' ? s[k] as string : undefined);
  const rawLabels = s['LABELS'];
  const labels: Record<string, string> = {};
  if (rawLabels !== undefined && typeof rawLabels !== 'string') {
    for (const [k, v] of Object.entries(rawLabels)) if (typeof v === 'string') labels[k] = v;
  }
  return metadataOf(nonEmpty(str('WORKLOAD_NAME'), str('NAME')), str('NAMESPACE'), str('CLUSTER_ID'), labels);
}

/** A peer's `x-envoy-peer-metadata` value decoded; undefined when it is not one (too big, not base64 of a Struct). */
export function metadataOfHeader(value: string): WorkloadMetadata | undefined {
  if (value.length > MAX_PEER_METADATA_BYTES) return undefined;
  try {
    return metadataOfStruct(decodeStruct(Buffer.from(value, 'base64')));
  } catch (err) {
    if (err instanceof StructDecodeError) return undefined;
    throw err;
  }
}
