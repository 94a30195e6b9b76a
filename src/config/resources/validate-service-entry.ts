// ServiceEntry (networking.mesh.io): names outside the registry, used here by the DNS proxy to
// answer for hosts with the addresses given, and by auto mTLS, which reads the endpoints' labels.
import type { ResourceMeta, ServiceEntry, ServiceEntryEndpoint } from './types.js';
import { checkSingleAddress, isIpAddress } from './addresses.js';
import {
  checkFields, child, FieldError, int, item, list, obj, oneOf, optInt, optList, optObj, optStr, optStrList, show, str, stringMap,
} from './fields.js';
import { checkHostPattern } from './names.js';

const LOCATIONS: readonly NonNullable<ServiceEntry['location']>[] = ['MESH_EXTERNAL', 'MESH_INTERNAL'];
const RESOLUTIONS: readonly NonNullable<ServiceEntry['resolution']>[] = ['NONE', 'STATIC', 'DNS', 'DNS_ROUND_ROBIN'];

function parsePort(raw: unknown, field: string): ServiceEntry['ports'][number] {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['number', 'protocol', 'name'], ignored: ['targetPort'] });
  const protocol = optStr(o['protocol'], child(field, 'protocol'), { nonEmpty: true })?.toUpperCase();
  return {
    number: int(o['number'], child(field, 'number'), 1, 65535),
    name: optStr(o['name'], child(field, 'name')) ?? '',
    ...(protocol !== undefined ? { protocol } : {}),
  };
}

/**
 * An endpoint (Istio's WorkloadEntry fields). Its address is an IP, or with DNS resolution a name,
 * or `unix://path`; its `ports` map the entry's port names to the endpoint's own numbers.
 */
function parseEndpoint(raw: unknown, field: string, resolution: ServiceEntry['resolution'], portNames: ReadonlySet<string>): ServiceEntryEndpoint {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['address', 'ports', 'labels', 'network', 'locality', 'weight', 'serviceAccount'] });
  const at = (k: string): string => child(field, k);
  const written = str(o['address'], at('address'), { nonEmpty: true });
  let address: string;
  if (isIpAddress(written) || written.startsWith('unix://')) {
    address = written.toLowerCase();
  } else {
    // A name is resolved by DNS: only an entry with DNS resolution has endpoints that need it (Istio's rule).
    if (resolution !== 'DNS' && resolution !== 'DNS_ROUND_ROBIN') {
      throw new FieldError(at('address'), `${show(written)} is not an IP address (or unix://path); names need resolution DNS or DNS_ROUND_ROBIN`);
    }
    address = checkHostPattern(written, at('address'));
    if (address.startsWith('*')) throw new FieldError(at('address'), `${show(written)}: an endpoint address cannot be a wildcard`);
  }
  const ports: Record<string, number> = {};
  const rawPorts = optObj(o['ports'], at('ports'));
  for (const [name, value] of Object.entries(rawPorts ?? {})) {
    // Istio: an endpoint port must name one of the entry's ports.
    if (!portNames.has(name)) throw new FieldError(item(at('ports'), name), `${show(name)} is not the name of a port in spec.ports`);
    Object.defineProperty(ports, name, { value: int(value, item(at('ports'), name), 1, 65535), enumerable: true, writable: true, configurable: true });
  }
  const labels = o['labels'] === undefined ? {} : stringMap(o['labels'], at('labels'));
  const network = optStr(o['network'], at('network'));
  const locality = optStr(o['locality'], at('locality'));
  const weight = optInt(o['weight'], at('weight'), 0, 4294967295) ?? 0;
  const serviceAccount = optStr(o['serviceAccount'], at('serviceAccount'), { nonEmpty: true });
  return {
    address, ports, labels, weight,
    ...(network !== undefined ? { network } : {}),
    ...(locality !== undefined ? { locality } : {}),
    ...(serviceAccount !== undefined ? { serviceAccount } : {}),
  };
}

export function validateServiceEntry(spec: unknown, meta: ResourceMeta): ServiceEntry {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', {
    supported: ['hosts', 'addresses', 'ports', 'location', 'resolution', 'endpoints', 'subjectAltNames'],
    ignored: ['exportTo', 'workloadSelector'],
  });
  const hosts = list(s['hosts'], 'spec.hosts', { nonEmpty: true }).map((h, i) => {
    const at = item('spec.hosts', i);
    const host = checkHostPattern(str(h, at, { nonEmpty: true }), at);
    if (host === '*') throw new FieldError(at, `${show(h)}: a ServiceEntry host cannot be * alone`);
    return host;
  });
  const addresses = optList(s['addresses'], 'spec.addresses').map((a, i) => checkSingleAddress(str(a, item('spec.addresses', i)), item('spec.addresses', i)));
  const ports = optList(s['ports'], 'spec.ports').map((p, i) => parsePort(p, item('spec.ports', i)));
  // Istio's enum defaults.
  const location = s['location'] === undefined ? 'MESH_EXTERNAL' : oneOf(s['location'], 'spec.location', LOCATIONS);
  const resolution = s['resolution'] === undefined ? 'NONE' : oneOf(s['resolution'], 'spec.resolution', RESOLUTIONS);
  const portNames = new Set(ports.map((p) => p.name).filter((n) => n !== ''));
  const endpoints = optList(s['endpoints'], 'spec.endpoints').map((e, i) => parseEndpoint(e, item('spec.endpoints', i), resolution, portNames));
  const subjectAltNames = optStrList(s['subjectAltNames'], 'spec.subjectAltNames', { nonEmptyItems: true }) ?? [];
  return { meta, hosts, addresses: [...new Set(addresses)], ports, location, resolution, endpoints, subjectAltNames };
}
