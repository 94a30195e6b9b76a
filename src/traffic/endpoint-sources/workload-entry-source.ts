// Endpoints from WorkloadEntries: those of a ServiceEntry's namespace whose labels contain its
// `workloadSelector` (Istio's rule), each on the service port's mapped port. Fed by the
// configuration: `update` with the services and WorkloadEntries in force after every change.
import type { ServiceEntry, WorkloadEntry } from '../../config/resources/types.js';
import { isIpAddress } from '../../config/resources/addresses.js';
import { selects } from '../../config/resources/workload.js';
import type { ServiceSpec } from '../clusters.js';
import type { EndpointSpec } from '../spec.js';
import { endpointAt, MapEndpointSource, templateOf, type EndpointTemplate } from './endpoint-source.js';

/** The WorkloadEntries an entry selects: same namespace, labels containing the selector's (in snapshot order). */
export function selectedWorkloadEntries(entry: ServiceEntry, workloadEntries: readonly WorkloadEntry[]): WorkloadEntry[] {
  if (entry.workloadSelector === undefined) return [];
  return workloadEntries.filter((w) => w.meta.namespace === entry.meta.namespace && selects(entry.workloadSelector, w.labels));
}

export function workloadEntryTemplates(service: ServiceSpec, workloadEntries: readonly WorkloadEntry[]): EndpointTemplate[] {
  return selectedWorkloadEntries(service.entry, workloadEntries).map((w) => templateOf(service, w, `WorkloadEntry ${w.meta.namespace}/${w.meta.name}`));
}

/** True for the services this source serves: STATIC with a workloadSelector. */
export function servesWorkloadEntries(service: ServiceSpec): boolean {
  return service.resolution === 'STATIC' && service.entry.workloadSelector !== undefined;
}

export interface WorkloadEntrySourceOptions {
  /** Told once about each WorkloadEntry left out (a name where an IP address is needed). */
  readonly log?: (message: string) => void;
}

export class WorkloadEntryEndpointSource extends MapEndpointSource {
  readonly #log: ((message: string) => void) | undefined;
  #reported = new Set<string>();

  constructor(opts: WorkloadEntrySourceOptions = {}) {
    super();
    this.#log = opts.log;
  }

  update(services: readonly ServiceSpec[], workloadEntries: readonly WorkloadEntry[]): void {
    const next = new Map<string, readonly EndpointSpec[]>();
    const reported = new Set<string>();
    for (const s of services) {
      if (!servesWorkloadEntries(s)) continue;
      const endpoints: EndpointSpec[] = [];
      for (const t of workloadEntryTemplates(s, workloadEntries)) {
        if (isIpAddress(t.address)) {
          endpoints.push(endpointAt(t, t.address));
          continue;
        }
        // A name needs DNS, which a STATIC entry does not do (Istio would not resolve it either).
        const note = `${t.origin} (address ${t.address}) is left out of ${s.origin}: resolution STATIC needs an IP address`;
        reported.add(note);
        if (!this.#reported.has(note)) this.#log?.(note);
      }
      next.set(s.key, endpoints);
    }
    this.#reported = reported;
    this.replaceAll(next);
  }
}
