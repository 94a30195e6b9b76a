// The balancer a cluster's LoadBalancerSpec asks for. PASSTHROUGH has none: the engine sends such a
// cluster's traffic to the original destination and never asks the cluster for an endpoint.
import type { LoadBalancerSpec } from '../spec.js';
import type { Balancer, BalancerOptions } from './balancer.js';
import { LeastRequestBalancer } from './least-request.js';
import { MaglevBalancer } from './maglev.js';
import { RandomBalancer } from './random.js';
import { RingHashBalancer } from './ring-hash.js';
import { RoundRobinBalancer } from './round-robin.js';

export { NONE, RETRY_HOST_REPICKS, type Balancer, type BalancerOptions, type HostSet, type PickContext, type TriedEndpoint } from './balancer.js';

/** A new balancer over `o.hosts` (one per worker and endpoint set), or undefined for PASSTHROUGH. */
export function createBalancer(spec: LoadBalancerSpec, o: BalancerOptions): Balancer | undefined {
  if (spec.kind === 'consistentHash') {
    return spec.table.kind === 'maglev'
      ? new MaglevBalancer({ ...o, tableSize: spec.table.tableSize })
      : new RingHashBalancer({ ...o, minimumRingSize: spec.table.minimumRingSize });
  }
  switch (spec.simple) {
    case 'LEAST_REQUEST': return new LeastRequestBalancer(o);
    case 'ROUND_ROBIN': return new RoundRobinBalancer(o);
    case 'RANDOM': return new RandomBalancer(o);
    case 'PASSTHROUGH': return undefined;
  }
}
