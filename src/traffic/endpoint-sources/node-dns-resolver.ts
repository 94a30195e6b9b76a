// The real resolver for DnsEndpointSource: node:dns's resolve4/resolve6 with TTLs (the system's
// name servers, as Envoy's c-ares resolver uses them). "No such name" and "no record" are answers
// (empty, as Envoy treats them); anything else (time-out, refused, SERVFAIL) is a failure, after
// which the source keeps its last answer. /etc/hosts is not read (Envoy's DNS clusters do not either).
import { Resolver } from 'node:dns/promises';
import type { DnsResolve, ResolvedAddress } from './dns-source.js';

export interface NodeDnsOptions {
  /** Which records: `v4` (A), `v6` (AAAA) or `all` (both, IPv4 first), as Istio picks from the pod's addresses. Default v4. */
  readonly family?: 'v4' | 'v6' | 'all';
  /** Name servers (`ip` or `ip:port`); default the system's. */
  readonly servers?: readonly string[];
  /** Per query, before a retry (ms); default node's. */
  readonly timeoutMs?: number;
}

const EMPTY_CODES = new Set(['ENODATA', 'ENOTFOUND']);

export function nodeDnsResolve(o: NodeDnsOptions = {}): DnsResolve {
  const resolver = new Resolver(o.timeoutMs !== undefined ? { timeout: o.timeoutMs } : {});
  if (o.servers !== undefined) resolver.setServers([...o.servers]);
  const family = o.family ?? 'v4';
  const ask = async (name: string, v6: boolean): Promise<ResolvedAddress[]> => {
    try {
      const records = v6 ? await resolver.resolve6(name, { ttl: true }) : await resolver.resolve4(name, { ttl: true });
      return records.map((r) => ({ address: r.address, ttl: r.ttl }));
    } catch (err) {
      if (EMPTY_CODES.has((err as NodeJS.ErrnoException).code ?? '')) return [];
      throw err;
    }
  };
  return async (name) => {
    if (family !== 'all') return ask(name, family === 'v6');
    const [v4, v6] = await Promise.allSettled([ask(name, false), ask(name, true)]);
    const found = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    const failed = [v4, v6].find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (found.length === 0 && failed !== undefined) throw failed.reason;
    return found;
  };
}
