// Host patterns as Istio and Envoy read them: `*` (everything), `*.suffix` (one or more labels
// before the suffix), or an exact name; all lower-case. Pure.

/** True when `pattern` (`*`, `*.suffix`, exact) covers the concrete host `host`. */
export function hostMatches(pattern: string, host: string): boolean {
  if (pattern === '*') return true;
  if (pattern.startsWith('*.')) return host.length > pattern.length - 1 && host.endsWith(pattern.slice(1));
  return pattern === host;
}

/** True when every host `a` covers is also covered by `b`. */
function subsetOf(a: string, b: string): boolean {
  if (b === '*') return true;
  if (a === '*') return false;
  if (b.startsWith('*.')) {
    // `*.x.foo.com` ⊆ `*.foo.com`; `a.foo.com` ⊆ `*.foo.com`; `*.foo.com` ⊄ `*.x.foo.com`.
    const suffix = b.slice(1);
    return a.startsWith('*.') ? a.slice(1).endsWith(suffix) : hostMatches(b, a);
  }
  return a === b;
}

/**
 * The hosts two patterns have in common, as one pattern (the narrower of the two), or undefined.
 * Istio's rule for a VirtualService host under a Gateway server host: server `foo.com` with VS `*`
 * serves `foo.com`; server `*.foo.com` with VS `a.foo.com` serves `a.foo.com`.
 */
export function intersectHosts(a: string, b: string): string | undefined {
  if (subsetOf(a, b)) return a;
  if (subsetOf(b, a)) return b;
  return undefined;
}

/** The Host/:authority value without its port, lower-cased (`[::1]:80` → `[::1]`). */
export function hostWithoutPort(authority: string): string {
  let end = authority.length;
  if (authority.charCodeAt(0) === 0x5b /* [ */) {
    const close = authority.indexOf(']');
    if (close > 0) end = close + 1;
  } else {
    const colon = authority.lastIndexOf(':');
    // A bare IPv6 address has several colons and no port to strip.
    if (colon >= 0 && authority.indexOf(':') === colon && isDigits(authority, colon + 1)) end = colon;
  }
  const host = end === authority.length ? authority : authority.slice(0, end);
  return hasUpper(host) ? host.toLowerCase() : host;
}

function isDigits(s: string, from: number): boolean {
  if (from >= s.length) return true; // `host:` carries an empty port
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

function hasUpper(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return true;
  }
  return false;
}

/**
 * Domains → values, looked up in Envoy's virtual-host order: the exact name, then the longest
 * `*.suffix` wildcard, then `*`. Wildcards are keyed by their suffix with the dot, so a lookup is
 * one map probe per label of the request host.
 */
export class DomainIndex<T> {
  private readonly exact = new Map<string, T>();
  private readonly wildcard = new Map<string, T>();
  private any: T | undefined;

  /** Adds `domain` unless present; returns the value now stored for it. */
  ensure(domain: string, create: () => T): T {
    if (domain === '*') return (this.any ??= create());
    const [map, key] = domain.startsWith('*.') ? [this.wildcard, domain.slice(1)] : [this.exact, domain];
    let v = map.get(key);
    if (v === undefined) map.set(key, (v = create()));
    return v;
  }

  /** What `*` holds: the answer for a name no other domain covers, or for no name at all. */
  get catchAll(): T | undefined {
    return this.any;
  }

  /** `host` lower-case and without port. */
  lookup(host: string): T | undefined {
    const exact = this.exact.get(host);
    if (exact !== undefined) return exact;
    if (this.wildcard.size > 0) {
      // Leftmost dot first: the longest suffix that still leaves at least one character before it.
      for (let dot = host.indexOf('.', 1); dot > 0; dot = host.indexOf('.', dot + 1)) {
        const v = this.wildcard.get(host.slice(dot));
        if (v !== undefined) return v;
      }
    }
    return this.any;
  }
}
