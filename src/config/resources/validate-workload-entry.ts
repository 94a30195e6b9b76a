// WorkloadEntry (networking.mesh.io): one workload outside the registry (a VM, a pod elsewhere),
// an endpoint of every ServiceEntry of its namespace whose workloadSelector its labels satisfy. Its
// fields are those of a ServiceEntry's `endpoints`, and both are read by parseWorkloadFields.
import type { ResourceMeta, ServiceEntryEndpoint, WorkloadEntry } from './types.js';
import { isIpAddress } from './addresses.js';
import { checkFields, child, FieldError, IGNORE_WARNINGS, int, item, obj, optInt, optObj, optStr, show, str, UINT32_MAX, type Obj, type Warn } from './fields.js';
import { checkHostPattern } from './names.js';
import { labelMap } from './selector.js';

export const WORKLOAD_FIELDS = ['address', 'ports', 'labels', 'network', 'locality', 'weight', 'serviceAccount'] as const;

// What Istio ignores for a proxy with no network of its own, which is this agent: its interface has
// none (Istio's proxy takes it from istiod's node metadata). `locality` is honoured (locality-aware
// balancing against the workload's own locality: src/traffic/locality.ts).
const NETWORK_HAS_NO_EFFECT = 'has no effect here: this agent has no network of its own, and Istio too dials an endpoint directly when either side\'s '
  + 'network is unset; reaching endpoints of another network through its gateway (multi-network meshes) is not supported';

/** Istio's rule for port names (ServiceEntry ports, endpoint and WorkloadEntry port maps): a DNS label. */
export function checkPortName(name: string, field: string): string {
  if (name.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    throw new FieldError(field, `${show(name)} is not a valid port name (a DNS label: lower-case letters, digits and '-', at most 63)`);
  }
  return name;
}

export interface AddressRule {
  /** Names (resolved by DNS) are accepted; otherwise only IP addresses. */
  readonly names: boolean;
  /** Why a name is refused, for the message. */
  readonly why?: string;
}

/**
 * The fields a WorkloadEntry and a ServiceEntry endpoint share. `portNames`: the entry's port names
 * an endpoint may map (a WorkloadEntry, which no entry owns, may name any valid port).
 */
export function parseWorkloadFields(o: Obj, field: string, rule: AddressRule, portNames: ReadonlySet<string> | undefined, warn: Warn): ServiceEntryEndpoint {
  const at = (k: string): string => child(field, k);
  const written = str(o['address'], at('address'), { nonEmpty: true });
  let address: string;
  if (written.startsWith('unix://')) {
    throw new FieldError(at('address'), 'is not supported yet: endpoints on unix domain sockets');
  } else if (isIpAddress(written)) {
    address = written.toLowerCase();
  } else {
    if (!rule.names) throw new FieldError(at('address'), `${show(written)} is not an IP address${rule.why !== undefined ? `; ${rule.why}` : ''}`);
    address = checkHostPattern(written, at('address'));
    if (address.includes('*')) throw new FieldError(at('address'), `${show(written)}: an endpoint address cannot be a wildcard`);
  }
  const ports: Record<string, number> = {};
  const rawPorts = optObj(o['ports'], at('ports'));
  for (const [name, value] of Object.entries(rawPorts ?? {})) {
    const where = item(at('ports'), name);
    // Istio: an endpoint port must name one of the entry's ports.
    if (portNames !== undefined && !portNames.has(name)) throw new FieldError(where, `${show(name)} is not the name of a port in spec.ports`);
    checkPortName(name, where);
    Object.defineProperty(ports, name, { value: int(value, where, 1, 65535), enumerable: true, writable: true, configurable: true });
  }
  const labels = o['labels'] === undefined ? {} : labelMap(o['labels'], at('labels'));
  const network = optStr(o['network'], at('network'));
  const locality = optStr(o['locality'], at('locality'));
  // Accepted (Istio's documents carry it) and said to do nothing here, at load: a field we accept
  // is never silently ignored.
  if (network !== undefined && network !== '') warn(at('network'), NETWORK_HAS_NO_EFFECT);
  const weight = optInt(o['weight'], at('weight'), 0, UINT32_MAX) ?? 0;
  const serviceAccount = optStr(o['serviceAccount'], at('serviceAccount'), { nonEmpty: true });
  return {
    address, ports, labels, weight,
    ...(network !== undefined && network !== '' ? { network } : {}),
    ...(locality !== undefined && locality !== '' ? { locality } : {}),
    ...(serviceAccount !== undefined ? { serviceAccount } : {}),
  };
}

export function validateWorkloadEntry(spec: unknown, meta: ResourceMeta, warn: Warn = IGNORE_WARNINGS): WorkloadEntry {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', { supported: [...WORKLOAD_FIELDS] });
  if (s['address'] === undefined || s['address'] === '') {
    // Istio accepts an entry without an address when it names a network (reached through that
    // network's gateway); this agent has no multi-network gateways.
    throw new FieldError('spec.address', s['network'] !== undefined
      ? 'required: reaching a workload through its network\'s gateway (an entry with a network and no address) is not supported yet'
      : 'required (an IP address, or a DNS name for entries with DNS resolution)');
  }
  return { meta, ...parseWorkloadFields(s, 'spec', { names: true }, undefined, warn) };
}
