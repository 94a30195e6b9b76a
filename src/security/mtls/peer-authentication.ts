// Which inbound mTLS mode applies to a port of this workload, from the PeerAuthentications in force,
// by Istio's precedence. Pure.
//
// Levels, most specific first: the workload policy (a selector with matchLabels, in the workload's
// namespace; its portLevelMtls before its mtls), the namespace policy (no selector, or an empty
// one), the mesh policy (no selector, in the root namespace); nothing: PERMISSIVE. A level whose
// mode is UNSET inherits the one above it; a port-level UNSET takes the workload policy's result.
// Several candidates at one level: Istio keeps the oldest; files have no age, so the first in file
// order (the snapshot's order) wins. A policy with a selector in the root namespace applies to no
// workload, as in Istio (workload policies do not reach across namespaces).
import type { PeerAuthentication, PeerAuthenticationMode, Workload } from '../../config/resources/types.js';
import { ROOT_NAMESPACE } from '../../config/resources/types.js';
import { selects } from '../../config/resources/workload.js';

export type InboundMtlsMode = Exclude<PeerAuthenticationMode, 'UNSET'>;

/** Istio's default when no policy says anything. */
export const DEFAULT_INBOUND_MTLS_MODE: InboundMtlsMode = 'PERMISSIVE';

export interface InboundPortMtls {
  readonly port: number;
  readonly mode: InboundMtlsMode;
  /** `PeerAuthentication ns/name` (the workload policy's portLevelMtls, or its inherited mode). */
  readonly decidedBy: string;
}

/** The inbound mTLS of one workload: plain data, for /config_dump as much as for the listeners. */
export interface InboundMtls {
  /** The mode of every port without a port-level entry. */
  readonly mode: InboundMtlsMode;
  /** `PeerAuthentication ns/name`, or `default` when no policy set a mode. */
  readonly decidedBy: string;
  /** The workload policy's portLevelMtls, UNSET resolved. */
  readonly ports: readonly InboundPortMtls[];
  /** Some port requires a mesh identity (readiness waits for the workload's certificate then). */
  readonly anyStrict: boolean;
}

function isNamespaceWide(p: PeerAuthentication): boolean {
  return p.selector === undefined || Object.keys(p.selector).length === 0;
}

function ref(p: PeerAuthentication): string {
  return `PeerAuthentication ${p.meta.namespace}/${p.meta.name}`;
}

/** The mode set by the namespace-wide policies of `namespace` and the root namespace (no workload policy). */
function inherited(policies: readonly PeerAuthentication[], namespace: string, rootNamespace: string): { mode: InboundMtlsMode; decidedBy: string } {
  const mesh = policies.find((p) => p.meta.namespace === rootNamespace && isNamespaceWide(p));
  const ns = namespace === rootNamespace ? undefined : policies.find((p) => p.meta.namespace === namespace && isNamespaceWide(p));
  let result = { mode: DEFAULT_INBOUND_MTLS_MODE, decidedBy: 'default' };
  for (const p of [mesh, ns]) if (p && p.mode !== 'UNSET') result = { mode: p.mode, decidedBy: ref(p) };
  return result;
}

/**
 * The mode any workload of `namespace` gets before its own workload policy: what auto mTLS can
 * know of a destination from its namespace (Istio skips mTLS to a namespace that says DISABLE).
 */
export function namespaceInboundMtls(policies: readonly PeerAuthentication[], namespace: string, rootNamespace = ROOT_NAMESPACE): { mode: InboundMtlsMode; decidedBy: string } {
  return inherited(policies, namespace, rootNamespace);
}

/** The effective inbound mTLS of `workload` (the snapshot's PeerAuthentications, in file order). */
export function inboundMtls(policies: readonly PeerAuthentication[], workload: Workload, rootNamespace = ROOT_NAMESPACE): InboundMtls {
  let { mode, decidedBy } = inherited(policies, workload.namespace, rootNamespace);
  const own = policies.find((p) => p.meta.namespace === workload.namespace && workload.namespace !== rootNamespace
    && !isNamespaceWide(p) && selects(p.selector, workload.labels));
  let ports: InboundPortMtls[] = [];
  if (own) {
    if (own.mode !== 'UNSET') ({ mode, decidedBy } = { mode: own.mode, decidedBy: ref(own) });
    ports = own.portLevelMtls.map((p) => ({ port: p.port, mode: p.mode === 'UNSET' ? mode : p.mode, decidedBy: ref(own) }));
  }
  return { mode, decidedBy, ports, anyStrict: mode === 'STRICT' || ports.some((p) => p.mode === 'STRICT') };
}

/** The mode of one port (the workload's own port: the original destination port of an inbound connection). */
export function inboundMtlsMode(mtls: InboundMtls, port: number): InboundMtlsMode {
  return mtls.ports.find((p) => p.port === port)?.mode ?? mtls.mode;
}
