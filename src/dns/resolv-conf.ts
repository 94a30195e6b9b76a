// The resolver configuration the pod's applications use (/etc/resolv.conf), read as glibc reads it,
// so the proxy forwards to the servers the application would have asked. Pure.
import { isIP } from 'node:net'; // isIP is a pure function: the same parser the sockets use

export interface ResolverConfig {
  /** Name servers in file order, at most 3 (glibc's MAXNS); an IPv6 zone (`%eth0`) is kept. */
  readonly nameservers: readonly string[];
  /** Search domains, lower-cased, without trailing dots; the last `search` or `domain` line wins. */
  readonly search: readonly string[];
  /** `options ndots:n` (default 1, at most 15). */
  readonly ndots: number;
  /** `options timeout:n` in milliseconds (default 5 s, at most 30 s). */
  readonly timeoutMs: number;
  /** `options attempts:n` (default 2, at most 5). */
  readonly attempts: number;
  /** `options rotate`. */
  readonly rotate: boolean;
}

export const MAX_NAMESERVERS = 3;

export const DEFAULT_RESOLVER_CONFIG: ResolverConfig = Object.freeze({
  nameservers: [], search: [], ndots: 1, timeoutMs: 5_000, attempts: 2, rotate: false,
});

function bounded(value: string, max: number): number | undefined {
  if (!/^\d+$/.test(value)) return undefined;
  return Math.min(Number(value), max);
}

export function parseResolvConf(text: string): ResolverConfig {
  const nameservers: string[] = [];
  let search: string[] = [];
  let { ndots, timeoutMs, attempts, rotate } = DEFAULT_RESOLVER_CONFIG;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    const [keyword, ...args] = line.split(/\s+/);
    switch (keyword) {
      case 'nameserver': {
        const server = args[0];
        if (server && nameservers.length < MAX_NAMESERVERS && isIP(server.replace(/%.*$/, '')) !== 0) nameservers.push(server);
        break;
      }
      case 'search':
      case 'domain':
        search = args.map((d) => d.toLowerCase().replace(/\.+$/, '')).filter((d) => d !== '');
        if (keyword === 'domain') search = search.slice(0, 1);
        break;
      case 'options':
        for (const option of args) {
          const [name, value = ''] = option.split(':', 2) as [string, string?];
          if (name === 'ndots') ndots = bounded(value, 15) ?? ndots;
          else if (name === 'timeout') timeoutMs = (bounded(value, 30) ?? timeoutMs / 1000) * 1000;
          else if (name === 'attempts') attempts = bounded(value, 5) ?? attempts;
          else if (name === 'rotate') rotate = true;
        }
        break;
      default:
        break;
    }
  }
  return Object.freeze({ nameservers, search, ndots, timeoutMs: Math.max(timeoutMs, 1000), attempts: Math.max(attempts, 1), rotate });
}
