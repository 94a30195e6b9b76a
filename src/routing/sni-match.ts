// How a TLS connection's server name picks among SNI patterns, as Envoy's filter-chain match on
// server_names does: the exact name first, then the longest `*.suffix`, then `*`. Shared by the
// sidecar's tls routes and the gateway's PASSTHROUGH servers. Pure.

/** How well `serverName` (lower-case) matches `pattern`: exact beats any wildcard, a longer suffix a shorter one; -1: not at all. */
export function sniRank(pattern: string, serverName: string): number {
  if (pattern === serverName) return Number.MAX_SAFE_INTEGER;
  if (pattern === '*') return 0;
  if (pattern.startsWith('*.') && serverName.length > pattern.length - 1 && serverName.endsWith(pattern.slice(1))) return pattern.length;
  return -1;
}

/** The entry whose `sniHosts` best match `serverName` (case-insensitive; the first of equals); undefined: none, or no name. */
export function bestSniMatch<E extends { readonly sniHosts: readonly string[] }>(entries: readonly E[], serverName: string | undefined): E | undefined {
  if (serverName === undefined) return undefined;
  const name = serverName.toLowerCase();
  let chosen: E | undefined;
  let best = -1;
  for (const e of entries) {
    for (const p of e.sniHosts) {
      const rank = sniRank(p, name);
      if (rank > best) {
        best = rank;
        chosen = e;
      }
    }
  }
  return chosen;
}
