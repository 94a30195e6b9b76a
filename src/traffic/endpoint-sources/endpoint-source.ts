// Where a service's endpoints come from, behind one narrow interface: the data path asks
// `endpointsOf(service)` (a map lookup, no I/O) and listens for changes; each source fills its map
// its own way (ServiceEntry endpoints, WorkloadEntries, DNS; a Kubernetes EndpointSlice watch later)
// without the data path knowing which. Pure helpers and a map-backed base live here too.
import type { ServiceEntryEndpoint } from '../../config/resources/types.js';
import type { ServiceSpec } from '../clusters.js';
import type { EndpointSpec } from '../spec.js';

/**
 * The endpoints of the services (`host:port`, ServiceSpec.key / ClusterSpec.service). A source is
 * configured by its own means (its constructor, an `update` of its own); this is all its readers see.
 */
export interface EndpointSource {
  /** The service's endpoints as last known (frozen; the same array until they change); empty when none or unknown. */
  endpointsOf(service: string): readonly EndpointSpec[];
  /** `listener` is called with the services whose endpoints changed; returns the function that stops it. */
  onChange(listener: (services: readonly string[]) => void): () => void;
  /** Stops timers and watches; endpoints stay readable as last known. */
  close(): void;
}

/** An endpoint before its address is known to be an IP: a ServiceEntry endpoint or WorkloadEntry, for one service port. */
export interface EndpointTemplate {
  /** An IP address, or a DNS name (for DNS resolution). */
  readonly address: string;
  readonly port: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly locality?: string | undefined;
  readonly weight: number;
  readonly serviceAccount?: string | undefined;
  /** `ServiceEntry ns/name`, `WorkloadEntry ns/name`. */
  readonly origin: string;
}

/** Istio's choice of an endpoint's port: its own for the port's name, else the port's targetPort, else the service port. */
export function endpointPort(service: Pick<ServiceSpec, 'port'>, ports: Readonly<Record<string, number>>): number {
  const own = Object.hasOwn(ports, service.port.name) ? ports[service.port.name] : undefined;
  return own ?? service.port.targetPort ?? service.port.number;
}

/** A ServiceEntry endpoint or WorkloadEntry as a template for one service port. */
export function templateOf(service: Pick<ServiceSpec, 'port'>, e: ServiceEntryEndpoint, origin: string): EndpointTemplate {
  return {
    address: e.address,
    port: endpointPort(service, e.ports),
    labels: e.labels,
    ...(e.locality !== undefined ? { locality: e.locality } : {}),
    weight: e.weight,
    ...(e.serviceAccount !== undefined ? { serviceAccount: e.serviceAccount } : {}),
    origin,
  };
}

/** A template at an IP address: the endpoint (Istio: an endpoint without a weight counts as 1). */
export function endpointAt(t: EndpointTemplate, address: string, origin = t.origin): EndpointSpec {
  return Object.freeze({
    address,
    port: t.port,
    labels: t.labels,
    ...(t.locality !== undefined ? { locality: t.locality } : {}),
    weight: t.weight > 0 ? t.weight : 1,
    ...(t.serviceAccount !== undefined ? { serviceAccount: t.serviceAccount } : {}),
    origin,
  });
}

/** A subset's endpoints: those whose labels contain all of the subset's (none given: all). */
export function selectSubset(endpoints: readonly EndpointSpec[], labels: Readonly<Record<string, string>> | undefined): readonly EndpointSpec[] {
  if (labels === undefined) return endpoints;
  const wanted = Object.entries(labels);
  if (wanted.length === 0) return endpoints;
  return endpoints.filter((e) => wanted.every(([k, v]) => Object.hasOwn(e.labels, k) && e.labels[k] === v));
}

const NONE: readonly EndpointSpec[] = Object.freeze([]);

/** Compares two endpoint lists as a reader would see them (order included: the first one matters to LOGICAL_DNS). */
function sameEndpoints(a: readonly EndpointSpec[], b: readonly EndpointSpec[]): boolean {
  return a.length === b.length && JSON.stringify(a) === JSON.stringify(b);
}

/** The common part of the sources: a map of frozen lists, replaced in bulk, listeners told which keys changed. */
export class MapEndpointSource implements EndpointSource {
  #endpoints = new Map<string, readonly EndpointSpec[]>();
  readonly #listeners = new Set<(services: readonly string[]) => void>();

  endpointsOf(service: string): readonly EndpointSpec[] {
    return this.#endpoints.get(service) ?? NONE;
  }

  /** The services this source holds. */
  services(): string[] {
    return [...this.#endpoints.keys()];
  }

  onChange(listener: (services: readonly string[]) => void): () => void {
    this.#listeners.add(listener);
    return () => { this.#listeners.delete(listener); };
  }

  close(): void {
    this.#listeners.clear();
  }

  /** Replaces every service's endpoints; tells the listeners which changed (added and removed ones too). */
  protected replaceAll(next: ReadonlyMap<string, readonly EndpointSpec[]>): void {
    const changed: string[] = [];
    const merged = new Map<string, readonly EndpointSpec[]>();
    for (const [key, list] of next) {
      const prev = this.#endpoints.get(key);
      if (prev !== undefined && sameEndpoints(prev, list)) {
        merged.set(key, prev);
      } else {
        merged.set(key, Object.freeze([...list]));
        changed.push(key);
      }
    }
    for (const key of this.#endpoints.keys()) if (!next.has(key)) changed.push(key);
    this.#endpoints = merged;
    this.notify(changed);
  }

  /** Replaces some services' endpoints (the others stay). */
  protected replaceSome(next: ReadonlyMap<string, readonly EndpointSpec[]>): void {
    const all = new Map(this.#endpoints);
    for (const [key, list] of next) all.set(key, list);
    this.replaceAll(all);
  }

  protected notify(changed: readonly string[]): void {
    if (changed.length === 0) return;
    const frozen = Object.freeze([...changed]);
    for (const listener of [...this.#listeners]) listener(frozen);
  }
}
