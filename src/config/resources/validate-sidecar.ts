// Sidecar (networking.mesh.io): which services and VirtualServices a sidecar sees (`egress[].hosts`)
// and what it does with a destination none of them covers (`outboundTrafficPolicy.mode`). Which
// Sidecar applies to a workload, and what it scopes, is src/config/resources/sidecar-scope.ts.
import { ROOT_NAMESPACE, type OutboundTrafficMode, type ResourceMeta, type Sidecar, type SidecarEgressHost } from './types.js';
import { checkFields, child, FieldError, item, list, obj, oneOf, optObj, show, strList, type Warn } from './fields.js';
import { checkHostPattern, checkNamespace } from './names.js';
import { checkSelectorLabels, labelMap } from './selector.js';

export const OUTBOUND_TRAFFIC_MODES: readonly OutboundTrafficMode[] = ['ALLOW_ANY', 'REGISTRY_ONLY'];

/** What the fields refused as "not supported yet" would do. */
const LATER = {
  ingress: 'inbound listeners of their own (port, defaultEndpoint, tls); inbound traffic goes to the address it was sent to',
  inboundConnectionPool: 'a connection pool for inbound traffic',
  port: 'egress listeners per port (the hosts of an egress apply to every port here: leave port out)',
  bind: 'egress listeners bound to an address of their own',
  captureMode: 'a capture mode per egress listener',
  egressProxy: 'sending unknown destinations to an egress proxy',
} as const;

/** `namespace/dnsName` (Istio's form), `.` being the Sidecar's own namespace. */
function parseEgressHost(text: string, field: string, namespace: string): SidecarEgressHost {
  const slash = text.indexOf('/');
  if (slash <= 0 || slash !== text.lastIndexOf('/')) {
    throw new FieldError(field, `${show(text)}: expected namespace/dnsName (e.g. "./*", "istio-system/*", "*/api.example.com")`);
  }
  const ns = text.slice(0, slash);
  const host = checkHostPattern(text.slice(slash + 1), field);
  if (ns === '.') return { namespace, host };
  if (ns === '*' || ns === '~') return { namespace: ns, host };
  return { namespace: checkNamespace(ns, field), host };
}

export function validateSidecar(spec: unknown, meta: ResourceMeta, warn: Warn): Sidecar {
  const s = spec === undefined || spec === null ? {} : obj(spec, 'spec');
  checkFields(s, 'spec', {
    supported: ['workloadSelector', 'egress', 'outboundTrafficPolicy'],
    pending: { ingress: LATER.ingress, inboundConnectionPool: LATER.inboundConnectionPool },
  });
  let selector: Record<string, string> | undefined;
  const ws = optObj(s['workloadSelector'], 'spec.workloadSelector');
  if (ws !== undefined) {
    checkFields(ws, 'spec.workloadSelector', { supported: ['labels'] });
    selector = ws['labels'] === undefined ? {} : labelMap(ws['labels'], 'spec.workloadSelector.labels');
    checkSelectorLabels(selector, 'spec.workloadSelector.labels', warn, 'has no labels: it selects every workload of the namespace');
    if (meta.namespace === ROOT_NAMESPACE && Object.keys(selector).length > 0) {
      warn('spec.workloadSelector', `makes this Sidecar apply to matching workloads of ${ROOT_NAMESPACE} only: the mesh-wide default Sidecar is one without a selector (Istio reads it so too)`);
    }
  }
  let egressHosts: SidecarEgressHost[] | undefined;
  if (s['egress'] !== undefined) {
    const egress = list(s['egress'], 'spec.egress', { nonEmpty: true });
    // Istio takes one egress listener without a port (the catch-all); ports are not served yet, so one in all.
    if (egress.length > 1) throw new FieldError(item('spec.egress', 1), 'only one egress listener without a port is allowed (Istio\'s rule), and ports are not supported yet');
    const at = item('spec.egress', 0);
    const e = obj(egress[0], at);
    checkFields(e, at, { supported: ['hosts'], pending: { port: LATER.port, bind: LATER.bind, captureMode: LATER.captureMode } });
    const hostsField = child(at, 'hosts');
    egressHosts = strList(e['hosts'], hostsField, { nonEmpty: true, nonEmptyItems: true })
      .map((h, i) => parseEgressHost(h, item(hostsField, i), meta.namespace));
  }
  let outboundTrafficPolicy: OutboundTrafficMode | undefined;
  const otp = optObj(s['outboundTrafficPolicy'], 'spec.outboundTrafficPolicy');
  if (otp !== undefined) {
    checkFields(otp, 'spec.outboundTrafficPolicy', { supported: ['mode'], pending: { egressProxy: LATER.egressProxy } });
    // Istio's enum default is REGISTRY_ONLY (0) when the message is present with no mode.
    outboundTrafficPolicy = otp['mode'] === undefined ? 'REGISTRY_ONLY' : oneOf(otp['mode'], 'spec.outboundTrafficPolicy.mode', OUTBOUND_TRAFFIC_MODES);
  }
  return {
    meta,
    ...(selector !== undefined ? { selector } : {}),
    ...(egressHosts !== undefined ? { egressHosts } : {}),
    ...(outboundTrafficPolicy !== undefined ? { outboundTrafficPolicy } : {}),
  };
}
