// ServiceEntry (networking.mesh.io): names outside the registry, used here by the DNS proxy to
// answer for hosts with the addresses given.
import type { ResourceMeta, ServiceEntry } from './types.js';
import { checkSingleAddress } from './addresses.js';
import { checkFields, child, FieldError, int, item, list, obj, oneOf, optList, optStr, show, str } from './fields.js';
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

export function validateServiceEntry(spec: unknown, meta: ResourceMeta): ServiceEntry {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', {
    supported: ['hosts', 'addresses', 'ports', 'location', 'resolution'],
    ignored: ['endpoints', 'exportTo', 'subjectAltNames', 'workloadSelector'],
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
  return { meta, hosts, addresses: [...new Set(addresses)], ports, location, resolution };
}
