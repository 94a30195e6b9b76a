// ServiceEntry (networking.mesh.io): a service outside the registry — its hosts, addresses (single
// addresses or CIDR blocks) and ports, and where its endpoints come from: `endpoints` (STATIC: IP
// addresses; DNS / DNS_ROUND_ROBIN: names or addresses resolved by DNS), WorkloadEntries chosen by
// `workloadSelector`, or none (NONE: the original destination, Istio's passthrough). Used by the
// DNS proxy (names), auto mTLS (endpoint labels) and src/traffic (clusters, endpoints, the index).
// Every rule of Istio's validation is checked; its warnings are warnings here too.
import type { ResourceMeta, ServiceEntry, ServiceEntryEndpoint, ServiceEntryPort } from './types.js';
import { parseCidr } from './addresses.js';
import {
  checkFields, child, FieldError, IGNORE_WARNINGS, int, item, list, obj, oneOf, optInt, optList, optObj, optStr, optStrList, show, str,
  type Warn,
} from './fields.js';
import { checkHostPattern, parseExportTo } from './names.js';
import { checkSelectorLabels, labelMap } from './selector.js';
import { checkPortName, parseWorkloadFields, WORKLOAD_FIELDS } from './validate-workload-entry.js';

const LOCATIONS: readonly NonNullable<ServiceEntry['location']>[] = ['MESH_EXTERNAL', 'MESH_INTERNAL'];
const RESOLUTIONS: readonly NonNullable<ServiceEntry['resolution']>[] = ['NONE', 'STATIC', 'DNS', 'DNS_ROUND_ROBIN'];
/** The protocols Istio knows (upper-cased; Istio reads them case-insensitively). */
export const PROTOCOLS: readonly string[] = ['HTTP', 'HTTPS', 'HTTP2', 'GRPC', 'GRPC-WEB', 'HTTP_PROXY', 'TLS', 'TCP', 'UDP', 'MONGO', 'MYSQL', 'REDIS'];
const HTTP_PROTOCOLS: readonly string[] = ['HTTP', 'HTTP2', 'GRPC', 'GRPC-WEB', 'HTTP_PROXY'];
const TLS_PROTOCOLS: readonly string[] = ['HTTPS', 'TLS'];

/** True for the protocols on which a request names its host (HTTP's Host, TLS's SNI). */
export function namesItsHost(protocol: string | undefined): boolean {
  return protocol !== undefined && (HTTP_PROTOCOLS.includes(protocol) || TLS_PROTOCOLS.includes(protocol));
}

export function isHttpProtocol(protocol: string | undefined): boolean {
  return protocol !== undefined && HTTP_PROTOCOLS.includes(protocol);
}

/** The protocols Istio carries as HTTP/2 upstream (its IsHTTP2: the cluster speaks HTTP/2). */
const HTTP2_PROTOCOLS: readonly string[] = ['HTTP2', 'GRPC', 'GRPC-WEB'];

/**
 * How Istio's sidecar carries connections to a port of this protocol (its ModelProtocolToListenerProtocol):
 * `http` — HTTP processing (HTTP, HTTP2, GRPC, GRPC-WEB, HTTP_PROXY); `tcp` — TCP proxying, no HTTP
 * parsing (TCP, HTTPS, TLS, MONGO, MYSQL, REDIS); `udp` — not proxied at all (no listener, no cluster);
 * undefined (no protocol) — sniffed from the first bytes.
 */
export function portFamily(protocol: string | undefined): 'http' | 'tcp' | 'udp' | undefined {
  if (protocol === undefined) return undefined;
  if (protocol === 'UDP') return 'udp';
  return HTTP_PROTOCOLS.includes(protocol) ? 'http' : 'tcp';
}

function parsePort(raw: unknown, field: string): ServiceEntryPort {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['number', 'protocol', 'name', 'targetPort'] });
  const written = optStr(o['protocol'], child(field, 'protocol'), { nonEmpty: true });
  const protocol = written?.toUpperCase();
  if (protocol !== undefined && !PROTOCOLS.includes(protocol)) {
    throw new FieldError(child(field, 'protocol'), `${show(written)} is not a protocol Istio knows; accepted: ${PROTOCOLS.join(', ')}`);
  }
  const number = int(o['number'], child(field, 'number'), 1, 65535);
  // Istio requires a name (a DNS label): endpoints map their ports by it.
  const name = checkPortName(str(o['name'], child(field, 'name'), { nonEmpty: true }), child(field, 'name'));
  const targetPort = optInt(o['targetPort'], child(field, 'targetPort'), 1, 65535);
  return { number, name, ...(protocol !== undefined ? { protocol } : {}), ...(targetPort !== undefined ? { targetPort } : {}) };
}

/** `addresses`: IPs, and CIDR blocks; a block of a single address is reduced to the address. */
function parseAddress(raw: unknown, field: string): { text: string; block: boolean } {
  const written = str(raw, field, { nonEmpty: true });
  const c = parseCidr(written);
  if (c === undefined) throw new FieldError(field, `${show(written)} is not an IP address or CIDR block`);
  const full = c.prefix === (c.family === 4 ? 32 : 128);
  return full ? { text: c.address.toLowerCase(), block: false } : { text: `${c.address.toLowerCase()}/${c.prefix}`, block: true };
}

export function validateServiceEntry(spec: unknown, meta: ResourceMeta, warn: Warn = IGNORE_WARNINGS): ServiceEntry {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', {
    supported: ['hosts', 'addresses', 'ports', 'location', 'resolution', 'endpoints', 'subjectAltNames', 'workloadSelector', 'exportTo'],
  });
  const hosts = list(s['hosts'], 'spec.hosts', { nonEmpty: true }).map((h, i) => {
    const at = item('spec.hosts', i);
    const host = checkHostPattern(str(h, at, { nonEmpty: true }), at);
    if (host === '*') throw new FieldError(at, `${show(h)}: a ServiceEntry host cannot be * alone`);
    return host;
  });
  // Istio's enum defaults.
  const location = s['location'] === undefined ? 'MESH_EXTERNAL' : oneOf(s['location'], 'spec.location', LOCATIONS);
  const resolution = s['resolution'] === undefined ? 'NONE' : oneOf(s['resolution'], 'spec.resolution', RESOLUTIONS);
  const addresses: string[] = [];
  optList(s['addresses'], 'spec.addresses').forEach((a, i) => {
    const { text, block } = parseAddress(a, item('spec.addresses', i));
    if (block && resolution !== 'NONE' && resolution !== 'STATIC') {
      throw new FieldError(item('spec.addresses', i), `${show(text)} is a CIDR block, which Istio allows only with resolution NONE or STATIC (not ${resolution})`);
    }
    if (!addresses.includes(text)) addresses.push(text);
  });
  const ports = optList(s['ports'], 'spec.ports').map((p, i) => parsePort(p, item('spec.ports', i)));
  ports.forEach((p, i) => {
    const at = item('spec.ports', i);
    if (ports.slice(0, i).some((q) => q.name === p.name)) throw new FieldError(child(at, 'name'), `${show(p.name)} is already the name of an earlier port`);
    if (ports.slice(0, i).some((q) => q.number === p.number)) throw new FieldError(child(at, 'number'), `port ${p.number} is already defined earlier`);
    if (p.targetPort !== undefined && resolution === 'NONE') {
      warn(child(at, 'targetPort'), 'has no effect with resolution NONE: connections keep their original destination port (Istio applies it '
        + 'there when ENABLE_RESOLUTION_NONE_TARGET_PORT is true, its default; not supported by this agent yet)');
    }
    if (p.protocol !== undefined && HTTP2_PROTOCOLS.includes(p.protocol)) {
      warn(child(at, 'protocol'), `${p.protocol}: an HTTP/1.1 client's requests go upstream as HTTP/1.1 here; Istio would send them as HTTP/2 `
        + '(unless a DestinationRule sets useClientProtocol): this sidecar does not turn HTTP/1.1 into HTTP/2. HTTP/2 and gRPC clients go as HTTP/2');
    }
    if (addresses.length === 0 && (p.protocol === undefined || p.protocol === 'TCP')) {
      warn(at, `serves ${p.protocol ?? 'an unset protocol'} without spec.addresses: connections are matched to this entry by address only, so none will be (Istio warns too)`
        + (p.protocol === 'TCP' ? '; its protocol still applies to connections made to its endpoints\' addresses on the port' : ''));
    }
  });
  const portNames = new Set(ports.map((p) => p.name));

  let workloadSelector: ServiceEntry['workloadSelector'];
  const selectorRaw = optObj(s['workloadSelector'], 'spec.workloadSelector');
  if (selectorRaw !== undefined) {
    checkFields(selectorRaw, 'spec.workloadSelector', { supported: ['labels'] });
    workloadSelector = selectorRaw['labels'] === undefined ? {} : labelMap(selectorRaw['labels'], 'spec.workloadSelector.labels');
    checkSelectorLabels(workloadSelector, 'spec.workloadSelector.labels', warn,
      'has no labels: every WorkloadEntry of the namespace is an endpoint (Istio warns too)');
    if (s['endpoints'] !== undefined) throw new FieldError('spec.workloadSelector', 'give either workloadSelector or endpoints, not both (Istio\'s rule)');
    if (resolution !== 'STATIC') {
      warn('spec.workloadSelector', resolution === 'NONE'
        ? 'has no effect with resolution NONE: connections keep their original destination (Istio warns too)'
        : `should not be set with resolution ${resolution} (Istio warns too); the selected WorkloadEntries' addresses are resolved like endpoints`);
    }
  }

  const byDns = resolution === 'DNS' || resolution === 'DNS_ROUND_ROBIN';
  const rawEndpoints = optList(s['endpoints'], 'spec.endpoints');
  if (resolution === 'NONE' && rawEndpoints.length > 0) {
    throw new FieldError('spec.endpoints', 'must be empty with resolution NONE, where connections keep their original destination (Istio\'s rule)');
  }
  if (resolution === 'DNS_ROUND_ROBIN' && rawEndpoints.length > 1) {
    throw new FieldError('spec.endpoints', `takes at most one endpoint with resolution DNS_ROUND_ROBIN, got ${rawEndpoints.length} (Istio's rule)`);
  }
  const endpoints: ServiceEntryEndpoint[] = rawEndpoints.map((e, i) => {
    const at = item('spec.endpoints', i);
    const o = obj(e, at);
    checkFields(o, at, { supported: [...WORKLOAD_FIELDS] });
    return parseWorkloadFields(o, at, { names: byDns, why: 'names need resolution DNS or DNS_ROUND_ROBIN' }, portNames, warn);
  });
  if (byDns && endpoints.length === 0) {
    hosts.forEach((h, i) => {
      if (h.includes('*')) {
        throw new FieldError(item('spec.hosts', i), `${show(h)}: with resolution ${resolution} and no endpoints the hosts are resolved, so they cannot be wildcards (Istio's rule)`);
      }
    });
  }
  if (resolution === 'STATIC' && endpoints.length === 0 && workloadSelector === undefined) {
    warn('spec.endpoints', 'is empty with resolution STATIC: the service has no endpoints, and requests to it fail with 503 (no healthy upstream), as in Istio');
  }
  if (resolution !== 'NONE' && hosts.length > 1) {
    const port = ports.find((p) => !namesItsHost(p.protocol));
    if (port !== undefined) {
      throw new FieldError('spec.hosts', `several hosts need ports that name their host (HTTP or TLS); port ${port.number} is ${port.protocol ?? 'of an unset protocol'} (Istio's rule, unless resolution is NONE)`);
    }
  }
  const subjectAltNames = optStrList(s['subjectAltNames'], 'spec.subjectAltNames', { nonEmptyItems: true }) ?? [];
  const exportTo = parseExportTo(s['exportTo'], 'spec.exportTo', meta.namespace, { allowNone: true });
  return {
    meta, hosts, addresses, ports, location, resolution, endpoints, subjectAltNames,
    ...(workloadSelector !== undefined ? { workloadSelector } : {}),
    ...(exportTo !== undefined ? { exportTo } : {}),
  };
}
