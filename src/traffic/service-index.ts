// Which service an outbound connection or request belongs to: by its original destination (a
// ServiceEntry address, or an address inside one of its CIDR blocks, on one of its ports), and for
// HTTP by its Host / :authority (a host of the service — exact, or the most specific wildcard — on
// the port the connection was made to, bare or with that port, the service's addresses and the
// Kubernetes short forms included, as Istio's virtual hosts list them). Anything else keeps its
// original destination. Built once per configuration; a lookup is a few Map gets: no regex, no scan.
// Also how a connection is carried, from the protocol its destination's port declares (protocolAt):
// TCP from the first byte, HTTP only, or sniffed (no protocol, or no ServiceEntry port).
import { isIpAddress } from '../config/resources/addresses.js';
import { portFamily } from '../config/resources/validate-service-entry.js';
import { parseCidr as parseIpCidr, parseIp } from '../security/authz/cidr.js';
import { DEFAULT_CLUSTER_DOMAIN } from '../security/mtls/host-names.js';
import type { ClusterSet, ServiceSpec } from './clusters.js';

export interface ServiceIndexOptions {
  /** The client's namespace: `reviews` alone names `reviews.<ns>.svc.<domain>` only from inside it. */
  readonly namespace: string;
  readonly clusterDomain?: string;
  /**
   * The endpoints a service's cluster has now: a connection to one of their addresses, on a port of a
   * service without `addresses` that declares a protocol, is carried as that protocol says (the
   * sidecar cannot tell it by the service's address). Absent: only addresses count.
   */
  readonly endpointsOf?: ((service: ServiceSpec) => readonly { readonly address: string }[] | undefined) | undefined;
}

/**
 * How a connection is carried, by the protocol of the ServiceEntry port it goes to (Istio's listener
 * protocol): `tcp` — relayed from the first byte, never parsed (TCP, TLS, HTTPS, MONGO, MYSQL, REDIS);
 * `http` — HTTP/1.x or HTTP/2 (HTTP, HTTP2, GRPC, GRPC-WEB, HTTP_PROXY), anything else passed through.
 * Undefined: sniffed from its first bytes.
 */
export type DeclaredProtocol = 'tcp' | 'http';

/**
 * What the services at one destination declare, merged as Istio's listeners merge (a listener on the
 * address for TCP and sniffed ports, on 0.0.0.0 for HTTP ones): any port of unset protocol makes it
 * sniffed, else TCP wins over HTTP (the address's TCP listener is the more specific), else HTTP.
 */
function merged(services: readonly ServiceSpec[]): DeclaredProtocol | undefined {
  let tcp = false;
  for (const s of services) {
    const family = portFamily(s.port.protocol);
    if (family === undefined) return undefined;
    if (family === 'tcp') tcp = true;
  }
  return tcp ? 'tcp' : 'http';
}

type PortMap = Map<number, ServiceSpec>;

/** `10.0.0.1`, `fd00::1` (RFC 5952 form), from the bytes parseIp gives (v4-mapped already reduced). */
export function canonicalIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len && j - i > 1) best = { at: i, len: j - i };
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.at < 0) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.len).join(':')}`;
}

function maskedKey(bytes: Uint8Array, bits: number): string {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    out.push(keep === 0 ? 0 : bytes[i]! & ((0xff << (8 - keep)) & 0xff));
  }
  return out.join('.');
}

/** Whether an endpoint's address (as written or resolved) is the destination `text` (its canonical form given). */
function sameAddress(endpoint: string, text: string, canonical: string): boolean {
  if (endpoint === text || endpoint === canonical) return true;
  if (!endpoint.includes(':')) return false; // IPv4 text has one form
  const bytes = parseIp(endpoint);
  return bytes !== undefined && canonicalIp(bytes) === canonical;
}

/** What a socket reports for an IPv4 peer on a dual-stack socket (`::ffff:10.0.0.1`) → `10.0.0.1`. */
function stripV4Mapped(address: string): string {
  return address.length > 7 && (address.startsWith('::ffff:') || address.startsWith('::FFFF:')) && address.includes('.') ? address.slice(7) : address;
}

export class ServiceIndex {
  /** `address|port` → services (several hosts of one entry may share an address). */
  readonly #byAddress = new Map<string, ServiceSpec[]>();
  /** Prefix lengths with blocks, longest first, per family; `family/bits` → `masked|port` → services. */
  readonly #blockBits: { 4: number[]; 6: number[] } = { 4: [], 6: [] };
  readonly #byBlock = new Map<string, Map<string, ServiceSpec[]>>();
  /** Host (lower-case; `*.suffix` for wildcards) → port → service. */
  readonly #byHost = new Map<string, PortMap>();
  #wildcards = false;
  /** Ports some service declares TCP or HTTP on: a connection to any other port is sniffed, looked up no further. */
  readonly #declaredPorts = new Set<number>();
  /** The merged protocol of each list of services #byAddress / #byBlock hold, when declared. */
  readonly #declared = new Map<readonly ServiceSpec[], DeclaredProtocol>();
  /** Port → the services without addresses that declare TCP or HTTP on it (matched by their endpoints). */
  readonly #addressless = new Map<number, ServiceSpec[]>();
  /** Ports a service may take a request on by its Host (HTTP, or not declared): any address of them may be its. */
  readonly #hostPorts = new Set<number>();
  #endpointsOf: ServiceIndexOptions['endpointsOf'];
  /** forRequest's last question and answer (an index is immutable once built: it never goes stale). */
  readonly #lastRequest: { authority: string | undefined; address: string; port: number; service: ServiceSpec | undefined } = {
    authority: undefined, address: '', port: -1, service: undefined,
  };

  private constructor() {}

  static build(set: Pick<ClusterSet, 'services'>, o: ServiceIndexOptions): ServiceIndex {
    const index = new ServiceIndex();
    const domain = o.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN;
    index.#endpointsOf = o.endpointsOf;
    for (const s of set.services) {
      const family = portFamily(s.port.protocol);
      // UDP is not proxied (Istio builds no listener nor cluster for it): no connection or request is its.
      if (family === 'udp') continue;
      for (const written of s.entry.addresses) index.#addAddress(written, s);
      for (const name of hostNames(s.host, o.namespace, domain)) index.#addHost(name, s);
      // A request made to the service's address carries it as Host (Istio lists it among the domains).
      for (const a of s.entry.addresses) if (isIpAddress(a)) index.#addHost(a, s);
      if (family !== 'tcp') index.#hostPorts.add(s.port.number);
      if (family === undefined) continue;
      index.#declaredPorts.add(s.port.number);
      if (s.entry.addresses.length === 0) {
        const list = index.#addressless.get(s.port.number) ?? [];
        list.push(s);
        index.#addressless.set(s.port.number, list);
      }
    }
    index.#blockBits[4].sort((a, b) => b - a);
    index.#blockBits[6].sort((a, b) => b - a);
    const lists = [...index.#byAddress.values(), ...[...index.#byBlock.values()].flatMap((m) => [...m.values()])];
    for (const list of lists) {
      const p = merged(list);
      if (p !== undefined) index.#declared.set(list, p);
    }
    return index;
  }

  #addAddress(written: string, s: ServiceSpec): void {
    const c = parseIpCidr(written);
    if (c === undefined) return;
    const full = c.bits === c.bytes.length * 8;
    if (full) {
      const key = `${canonicalIp(c.bytes)}|${s.port.number}`;
      const list = this.#byAddress.get(key) ?? [];
      list.push(s);
      this.#byAddress.set(key, list);
      return;
    }
    const family = c.bytes.length === 4 ? 4 : 6;
    const table = `${family}/${c.bits}`;
    let blocks = this.#byBlock.get(table);
    if (blocks === undefined) {
      blocks = new Map();
      this.#byBlock.set(table, blocks);
      this.#blockBits[family].push(c.bits);
    }
    const key = `${maskedKey(c.bytes, c.bits)}|${s.port.number}`;
    const list = blocks.get(key) ?? [];
    list.push(s);
    blocks.set(key, list);
  }

  #addHost(name: string, s: ServiceSpec): void {
    if (name.startsWith('*')) this.#wildcards = true;
    let ports = this.#byHost.get(name);
    if (ports === undefined) {
      ports = new Map();
      this.#byHost.set(name, ports);
    }
    // The first service to claim a name on a port keeps it (an exact host beats an address-as-host).
    if (!ports.has(s.port.number)) ports.set(s.port.number, s);
  }

  /** The services at an original destination (usually one; several hosts of one entry may share it). */
  servicesAt(address: string, port: number): readonly ServiceSpec[] | undefined {
    const text = stripV4Mapped(address);
    const exact = this.#byAddress.get(`${text}|${port}`);
    if (exact !== undefined) return exact;
    const bytes = parseIp(text);
    if (bytes === undefined) return undefined;
    const canonical = canonicalIp(bytes);
    if (canonical !== text) {
      const again = this.#byAddress.get(`${canonical}|${port}`);
      if (again !== undefined) return again;
    }
    const family = bytes.length === 4 ? 4 : 6;
    for (const bits of this.#blockBits[family]) {
      const found = this.#byBlock.get(`${family}/${bits}`)!.get(`${maskedKey(bytes, bits)}|${port}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  /**
   * How a connection to `address:port` is carried (once per connection, before a byte is read): as
   * the ports of the services at that address declare, merged (see `merged`); for an address no
   * service holds, as a service without addresses declares when the address is one of its endpoints
   * on that port. Undefined: sniffed, as every connection to a port no ServiceEntry declares.
   */
  protocolAt(address: string, port: number): DeclaredProtocol | undefined {
    if (!this.#declaredPorts.has(port)) return undefined;
    const list = this.servicesAt(address, port);
    if (list !== undefined) return this.#declared.get(list);
    const candidates = this.#addressless.get(port);
    if (candidates === undefined || this.#endpointsOf === undefined) return undefined;
    const text = stripV4Mapped(address);
    const bytes = parseIp(text);
    const canonical = bytes === undefined ? text : canonicalIp(bytes);
    const holding: ServiceSpec[] = [];
    for (const s of candidates) {
      const endpoints = this.#endpointsOf(s);
      if (endpoints?.some((e) => sameAddress(e.address, text, canonical))) holding.push(s);
    }
    return holding.length === 0 ? undefined : merged(holding);
  }

  /** Whether a request to any address on `port` may be a service's, by its Host (an HTTP or undeclared service port). */
  mayRouteByHost(port: number): boolean {
    return this.#hostPorts.has(port);
  }

  /** A connection (TCP, or TLS / HTTP before its Host is known): by its original destination. */
  byDestination(address: string, port: number): ServiceSpec | undefined {
    return this.servicesAt(address, port)?.[0];
  }

  /** An HTTP request by its Host / :authority, on the port the connection was made to. */
  byHost(authority: string, port: number): ServiceSpec | undefined {
    const host = hostPart(authority, port);
    if (host === undefined) return undefined;
    const exact = this.#byHost.get(host)?.get(port);
    if (exact !== undefined || !this.#wildcards) return exact;
    // The most specific wildcard first: a.b.example.com → *.b.example.com → *.example.com → *.com.
    for (let dot = host.indexOf('.'); dot >= 0; dot = host.indexOf('.', dot + 1)) {
      const found = this.#byHost.get(`*${host.slice(dot)}`)?.get(port);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  /** An HTTP request: by its Host, else by its original destination (the rule; see docs/TRAFFIC-CONFIG.md). */
  forRequest(authority: string | undefined, address: string, port: number): ServiceSpec | undefined {
    // The last answer is kept: a client's requests mostly repeat the Host and destination of the one
    // before (three comparisons instead of parsing and lower-casing the Host, and two map lookups).
    const last = this.#lastRequest;
    if (authority === last.authority && port === last.port && address === last.address) return last.service;
    let service: ServiceSpec | undefined;
    if (authority !== undefined && authority !== '') service = this.byHost(authority, port);
    service ??= this.byDestination(address, port);
    last.authority = authority;
    last.address = address;
    last.port = port;
    last.service = service;
    return service;
  }
}

/**
 * The host of a Host / :authority, lower-cased, when it is usable on `port`: bare, or with that very
 * port (`api.example.com:8080` on port 80 names nothing). A trailing dot is dropped; `[v6]` unbracketed.
 */
export function hostPart(authority: string, port: number): string | undefined {
  let host = authority;
  let given: string | undefined;
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    if (end < 0) return undefined;
    given = host.length > end + 1 && host[end + 1] === ':' ? host.slice(end + 2) : undefined;
    host = host.slice(1, end);
  } else {
    const colon = host.lastIndexOf(':');
    if (colon >= 0 && host.indexOf(':') === colon) {
      given = host.slice(colon + 1);
      host = host.slice(0, colon);
    }
  }
  if (given !== undefined && given !== String(port)) return undefined;
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host.toLowerCase();
}

/** The names a host is known by from `namespace`: itself, and for `svc.ns.svc.<domain>` the short forms Istio adds. */
export function hostNames(host: string, namespace: string, clusterDomain: string): string[] {
  const names = [host];
  const suffix = `.svc.${clusterDomain}`;
  if (!host.endsWith(suffix) || host.startsWith('*')) return names;
  const labels = host.slice(0, -suffix.length).split('.');
  if (labels.length !== 2) return names;
  const [svc, ns] = labels as [string, string];
  names.push(`${svc}.${ns}.svc`, `${svc}.${ns}`);
  if (ns === namespace) names.push(svc);
  return names;
}
