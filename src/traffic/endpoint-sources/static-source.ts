// Endpoints written in a ServiceEntry (`endpoints`, resolution STATIC: IP addresses), per service
// port. Fed by the configuration: `update` with the services in force after every change.
import type { ServiceSpec } from '../clusters.js';
import type { EndpointSpec } from '../spec.js';
import { endpointAt, MapEndpointSource, templateOf, type EndpointTemplate } from './endpoint-source.js';

/** A service's ServiceEntry endpoints as templates (their addresses may be names under DNS resolution). */
export function staticTemplates(service: ServiceSpec): EndpointTemplate[] {
  const origin = `ServiceEntry ${service.entry.meta.namespace}/${service.entry.meta.name}`;
  return service.entry.endpoints.map((e) => templateOf(service, e, origin));
}

/** True for the services this source serves: STATIC, endpoints written in the entry. */
export function servesStatic(service: ServiceSpec): boolean {
  return service.resolution === 'STATIC' && service.entry.workloadSelector === undefined;
}

export class StaticEndpointSource extends MapEndpointSource {
  /** The services in force; those it serves get their entry's endpoints, the others are dropped. */
  update(services: readonly ServiceSpec[]): void {
    const next = new Map<string, readonly EndpointSpec[]>();
    for (const s of services) {
      if (!servesStatic(s)) continue;
      // The validator lets only IP addresses through under STATIC.
      next.set(s.key, staticTemplates(s).map((t) => endpointAt(t, t.address)));
    }
    this.replaceAll(next);
  }
}
