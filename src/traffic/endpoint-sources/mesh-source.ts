// The endpoint source the sidecar runs with today: the resource files' ServiceEntries and
// WorkloadEntries, and DNS for entries that resolve names. One EndpointSource to the data path;
// inside, each service goes to the source its resolution calls for. Resolution NONE has no
// endpoints: its cluster is ORIGINAL_DST (the connection's original destination).
import type { WorkloadEntry } from '../../config/resources/types.js';
import type { ServiceSpec } from '../clusters.js';
import type { EndpointSpec } from '../spec.js';
import { DnsEndpointSource, type DnsSourceOptions, type DnsTarget } from './dns-source.js';
import { endpointPort, type EndpointSource, type EndpointTemplate } from './endpoint-source.js';
import { servesStatic, staticTemplates, StaticEndpointSource } from './static-source.js';
import { servesWorkloadEntries, workloadEntryTemplates, WorkloadEntryEndpointSource } from './workload-entry-source.js';

const NONE: readonly EndpointSpec[] = Object.freeze([]);

/** A DNS service's names: its endpoints, else its selected WorkloadEntries, else its host. */
export function dnsTargets(services: readonly ServiceSpec[], workloadEntries: readonly WorkloadEntry[]): DnsTarget[] {
  const out: DnsTarget[] = [];
  for (const s of services) {
    if (s.resolution !== 'DNS' && s.resolution !== 'DNS_ROUND_ROBIN') continue;
    let templates: EndpointTemplate[];
    if (s.entry.endpoints.length > 0) templates = staticTemplates(s);
    else if (s.entry.workloadSelector !== undefined) templates = workloadEntryTemplates(s, workloadEntries);
    else templates = [{ address: s.host, port: endpointPort(s, {}), labels: {}, weight: 1, origin: s.origin }];
    out.push({ key: s.key, mode: s.resolution === 'DNS' ? 'all' : 'first', templates });
  }
  return out;
}

export interface MeshEndpointSourceOptions {
  readonly dns: DnsSourceOptions;
  /** WorkloadEntries left out, and the like. */
  readonly log?: (message: string) => void;
}

export class MeshEndpointSource implements EndpointSource {
  readonly #static = new StaticEndpointSource();
  readonly #workloadEntries: WorkloadEntryEndpointSource;
  readonly #dns: DnsEndpointSource;
  #route = new Map<string, EndpointSource>();
  readonly #listeners = new Set<(services: readonly string[]) => void>();
  /** Changes collected during update(), told once at its end. */
  #batch: Set<string> | undefined;

  constructor(o: MeshEndpointSourceOptions) {
    this.#workloadEntries = new WorkloadEntryEndpointSource(o.log !== undefined ? { log: o.log } : {});
    this.#dns = new DnsEndpointSource(o.dns);
    for (const source of [this.#static, this.#workloadEntries, this.#dns]) source.onChange((keys) => this.#changed(keys));
  }

  /** The services and WorkloadEntries in force (after every configuration change). */
  update(services: readonly ServiceSpec[], workloadEntries: readonly WorkloadEntry[]): void {
    const route = new Map<string, EndpointSource>();
    for (const s of services) {
      if (servesStatic(s)) route.set(s.key, this.#static);
      else if (servesWorkloadEntries(s)) route.set(s.key, this.#workloadEntries);
      else if (s.resolution === 'DNS' || s.resolution === 'DNS_ROUND_ROBIN') route.set(s.key, this.#dns);
    }
    // Readers told of a change must find the key's new source already in place.
    this.#route = route;
    this.#batch = new Set();
    try {
      this.#static.update(services);
      this.#workloadEntries.update(services, workloadEntries);
      this.#dns.update(dnsTargets(services, workloadEntries));
    } finally {
      const changed = [...this.#batch];
      this.#batch = undefined;
      this.#tell(changed);
    }
  }

  endpointsOf(service: string): readonly EndpointSpec[] {
    return this.#route.get(service)?.endpointsOf(service) ?? NONE;
  }

  onChange(listener: (services: readonly string[]) => void): () => void {
    this.#listeners.add(listener);
    return () => { this.#listeners.delete(listener); };
  }

  close(): void {
    this.#static.close();
    this.#workloadEntries.close();
    this.#dns.close();
    this.#listeners.clear();
  }

  #changed(keys: readonly string[]): void {
    if (this.#batch !== undefined) {
      for (const k of keys) this.#batch.add(k);
      return;
    }
    this.#tell(keys);
  }

  #tell(keys: readonly string[]): void {
    if (keys.length === 0) return;
    const frozen = Object.freeze([...keys]);
    for (const listener of [...this.#listeners]) listener(frozen);
  }
}
