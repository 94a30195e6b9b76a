// The names the DNS proxy answers itself: the hosts of ServiceEntry resources that carry addresses,
// with the short forms Istio's DNS proxy also answers. Pure: resources and domains in, lookups out.
// The entries given are those the proxy's namespace sees (exportTo: src/agent/resources.ts filters).
//
// For a host `name.ns.svc.<cluster domain>` in the proxy's cluster domain (taken from --domain,
// `<namespace>.svc.<cluster domain>`), `name.ns.svc` and `name.ns` are answered too, and `name` when
// `ns` is the proxy's own namespace. A name followed by the first resolv.conf search domain (what a
// resolver tries first for a name with fewer dots than ndots) is answered with a CNAME to the name,
// so the search walk ends at its first step. Hosts `*.suffix` answer every name under the suffix.
//
// Authority: a name in the table is answered NOERROR, with no records when it has none of the asked
// type (never NXDOMAIN). NXDOMAIN is answered only for a multi-label table name followed by one of
// the other search domains (`api.example.com.svc.cluster.local`): the rest of a resolver's search
// walk for a name this table holds, which no upstream would know either. Every other name is
// forwarded, as Istio does.
import { isIP } from 'node:net'; // isIP is a pure function: the same parser the sockets use
import type { ServiceEntry } from '../config/resources/types.js';
import { QTYPE } from './wire.js';

export interface NameTableOptions {
  /** The proxy's DNS domain (--domain), `<namespace>.svc.<cluster domain>`. */
  readonly domain: string;
  /** The resolv.conf search domains, in order. */
  readonly searchDomains: readonly string[];
}

export interface LocalRecord {
  readonly type: 'A' | 'AAAA';
  readonly address: string;
}

/** What the table answers for a name. */
export interface LocalAnswer {
  readonly rcode: 'NOERROR' | 'NXDOMAIN';
  /** Set when the asked name is a search-domain expansion: a CNAME to this table name comes first. */
  readonly cname?: string;
  /** Records owned by the asked name (or by `cname` when set). */
  readonly records: readonly LocalRecord[];
}

interface Addresses {
  readonly v4: string[];
  readonly v6: string[];
}

/** `a.b.` or `A.B` → `a.b`. */
export function normalizeName(name: string): string {
  return name.toLowerCase().replace(/\.+$/, '');
}

/** `ns1.svc.cluster.local` → namespace `ns1`, cluster domain `cluster.local`; undefined for another shape. */
export function parseProxyDomain(domain: string): { namespace: string; clusterDomain: string } | undefined {
  const labels = normalizeName(domain).split('.');
  if (labels.length < 3 || labels[1] !== 'svc' || labels[0] === '' || labels.slice(2).some((l) => l === '')) return undefined;
  return { namespace: labels[0]!, clusterDomain: labels.slice(2).join('.') };
}

/**
 * The names a host is answered under: itself and, for `name.ns.svc.<cluster domain>` in the proxy's
 * cluster domain, `name.ns.svc`, `name.ns` and (same namespace only) `name`.
 */
export function alternateNames(host: string, domain: string): string[] {
  const h = normalizeName(host);
  const out = [h];
  const proxy = parseProxyDomain(domain);
  if (!proxy || h.startsWith('*')) return out;
  const suffix = `.svc.${proxy.clusterDomain}`;
  if (!h.endsWith(suffix)) return out;
  const labels = h.slice(0, -suffix.length).split('.');
  if (labels.length !== 2 || labels.some((l) => l === '')) return out;
  const [name, ns] = labels as [string, string];
  out.push(`${name}.${ns}.svc`, `${name}.${ns}`);
  if (ns === proxy.namespace) out.push(name);
  return out;
}

function add(map: Map<string, Addresses>, name: string, addresses: readonly string[]): void {
  let entry = map.get(name);
  if (!entry) map.set(name, (entry = { v4: [], v6: [] }));
  for (const a of addresses) {
    const list = isIP(a) === 4 ? entry.v4 : entry.v6;
    if (!list.includes(a)) list.push(a);
  }
}

export class NameTable {
  /** Exact names. */
  readonly #names = new Map<string, Addresses>();
  /** `*.suffix` hosts, by suffix. */
  readonly #wildcards = new Map<string, Addresses>();
  readonly #search: readonly string[];

  private constructor(search: readonly string[]) {
    this.#search = search;
  }

  static build(entries: readonly ServiceEntry[], options: NameTableOptions): NameTable {
    const table = new NameTable(options.searchDomains.map(normalizeName).filter((d) => d !== ''));
    for (const entry of entries) {
      // Only single addresses: a CIDR block is not something to answer with.
      const addresses = entry.addresses.filter((a) => isIP(a) !== 0);
      if (addresses.length === 0) continue;
      for (const host of entry.hosts) {
        const h = normalizeName(host);
        if (h === '' || h === '*' || isIP(h) !== 0) continue;
        if (h.startsWith('*.')) {
          add(table.#wildcards, h.slice(2), addresses);
          continue;
        }
        for (const name of alternateNames(h, options.domain)) add(table.#names, name, addresses);
      }
    }
    return table;
  }

  static empty(): NameTable {
    return new NameTable([]);
  }

  /** Exact names held (alternates included) plus wildcard hosts. */
  get size(): number {
    return this.#names.size + this.#wildcards.size;
  }

  /** Every name answered exactly, and `*.suffix` for the wildcards; for logs and debugging. */
  names(): string[] {
    return [...this.#names.keys(), ...[...this.#wildcards.keys()].map((s) => `*.${s}`)];
  }

  #find(name: string): Addresses | undefined {
    const exact = this.#names.get(name);
    if (exact || this.#wildcards.size === 0) return exact;
    // The most specific wildcard: for a.b.c, try *.b.c then *.c.
    for (let dot = name.indexOf('.'); dot >= 0; dot = name.indexOf('.', dot + 1)) {
      const hit = this.#wildcards.get(name.slice(dot + 1));
      if (hit) return hit;
    }
    return undefined;
  }

  /**
   * The local answer for `name` (lower-cased, no trailing dot) and query type, or undefined when the
   * name is not the table's to answer (the query is forwarded).
   */
  lookup(name: string, qtype: number): LocalAnswer | undefined {
    const found = this.#find(name);
    if (found) return { rcode: 'NOERROR', records: recordsOf(found, qtype) };
    for (let i = 0; i < this.#search.length; i++) {
      const suffix = `.${this.#search[i]}`;
      if (!name.endsWith(suffix)) continue;
      const base = name.slice(0, -suffix.length);
      const target = base === '' ? undefined : this.#find(base);
      if (!target) continue;
      if (i === 0) return { rcode: 'NOERROR', cname: base, records: qtype === QTYPE.CNAME ? [] : recordsOf(target, qtype) };
      if (base.includes('.')) return { rcode: 'NXDOMAIN', records: [] };
    }
    return undefined;
  }
}

function recordsOf(a: Addresses, qtype: number): LocalRecord[] {
  const v4 = (): LocalRecord[] => a.v4.map((address) => ({ type: 'A', address }));
  const v6 = (): LocalRecord[] => a.v6.map((address) => ({ type: 'AAAA', address }));
  switch (qtype) {
    case QTYPE.A: return v4();
    case QTYPE.AAAA: return v6();
    case QTYPE.ANY: return [...v4(), ...v6()];
    default: return [];
  }
}
