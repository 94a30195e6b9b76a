// The names a connection is known by, and how a DestinationRule host matches them. Kubernetes short
// forms are expanded the way a pod's resolver would (`reviews` → `reviews.<ns>.svc.<cluster domain>`),
// so a rule written `reviews` in namespace A and an app calling `reviews.a` meet on one name. Pure.
import { isIP } from 'node:net';

export const DEFAULT_CLUSTER_DOMAIN = 'cluster.local';

/** `A.Example.com.` → `a.example.com`; `api.example.com:8443` (an HTTP Host) → `api.example.com`. */
export function normalizeHost(name: string): string {
  let h = name.trim().toLowerCase();
  const port = /^([^:[\]]+):\d+$/.exec(h);
  if (port) h = port[1]!;
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  return h.replace(/\.+$/, '');
}

/**
 * `name` as `name.ns.svc.<domain>` when it is a Kubernetes short form seen from `namespace`:
 * `svc` → `svc.<namespace>.svc.<domain>`, `svc.ns` and `svc.ns.svc` completed. Other names as they are.
 */
export function expandShortName(name: string, namespace: string, clusterDomain: string): string {
  if (name === '*' || name.startsWith('*.') || isIP(name) !== 0) return name;
  const labels = name.split('.');
  if (labels.length === 1) return `${name}.${namespace}.svc.${clusterDomain}`;
  if (labels.length === 2 && !name.endsWith(`.${clusterDomain}`)) return `${name}.svc.${clusterDomain}`;
  if (labels.length === 3 && labels[2] === 'svc') return `${name}.${clusterDomain}`;
  return name;
}

/**
 * The connection's names, normalized, each with its expansion from the client's namespace. The
 * expansion comes first where the short form is surely Kubernetes' (`svc`, `svc.ns.svc`), so it is
 * the name an SNI is made from; `a.b` may as well be a real domain and keeps its place.
 */
export function connectionNames(hosts: readonly string[], clientNamespace: string, clusterDomain: string): string[] {
  const out: string[] = [];
  for (const raw of hosts) {
    const h = normalizeHost(raw);
    if (h === '') continue;
    const expanded = expandShortName(h, clientNamespace, clusterDomain);
    const pair = h.split('.').length === 2 ? [h, expanded] : [expanded, h];
    for (const n of pair) if (!out.includes(n)) out.push(n);
  }
  return out;
}

/** `reviews.ns.svc.<domain>` → `ns` (the service's namespace, where its owner's rules live). */
export function serviceNamespaceOf(name: string, clusterDomain: string): string | undefined {
  const suffix = `.svc.${clusterDomain}`;
  if (!name.endsWith(suffix)) return undefined;
  const labels = name.slice(0, -suffix.length).split('.');
  return labels.length === 2 && labels.every((l) => l !== '') ? labels[1] : undefined;
}

/**
 * How specifically `pattern` matches `name`: undefined for no match; an exact name beats every
 * wildcard, and a longer wildcard beats a shorter one (`*.a.example.com` over `*.example.com` over `*`).
 */
export function hostMatchRank(pattern: string, name: string): number | undefined {
  if (pattern === name) return Number.MAX_SAFE_INTEGER;
  if (pattern === '*') return isIP(name) === 0 ? 0 : undefined;
  if (pattern.startsWith('*.') && name.endsWith(pattern.slice(1)) && isIP(name) === 0) return pattern.length;
  return undefined;
}

/** A name usable as a TLS server name: a DNS name, not a pattern or an address. */
export function isServerName(name: string): boolean {
  return name !== '' && !name.includes('*') && isIP(name) === 0;
}
