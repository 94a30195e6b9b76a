// IP addresses and CIDR blocks (IPv4 and IPv6) for ipBlocks, remoteIpBlocks and the `*.ip` when
// keys. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, what a dual-stack Node socket reports) is
// treated as the IPv4 address, so IPv4 blocks match it. Pure.

export interface Cidr {
  /** 4 bytes (IPv4) or 16 (IPv6). */
  readonly bytes: Uint8Array;
  readonly bits: number;
}

function parseIPv4(s: string, out: Uint8Array, at: number): boolean {
  const parts = s.split('.');
  if (parts.length !== 4) return false;
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (p.length === 0 || p.length > 3 || !/^\d+$/.test(p)) return false;
    const n = Number(p);
    if (n > 255) return false;
    out[at + i] = n;
  }
  return true;
}

/** Hex groups of one side of `::`, written into `out` from byte `at`; the byte count, or -1. */
function parseGroups(side: string, out: Uint8Array, at: number, allowV4Tail: boolean): number {
  if (side === '') return 0;
  const groups = side.split(':');
  let n = 0;
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i]!;
    if (allowV4Tail && i === groups.length - 1 && g.includes('.')) {
      if (at + n + 4 > 16 || !parseIPv4(g, out, at + n)) return -1;
      n += 4;
      continue;
    }
    if (!/^[0-9a-fA-F]{1,4}$/.test(g) || at + n + 2 > 16) return -1;
    const v = parseInt(g, 16);
    out[at + n] = v >> 8;
    out[at + n + 1] = v & 0xff;
    n += 2;
  }
  return n;
}

function parseIPv6(s: string): Uint8Array | undefined {
  const out = new Uint8Array(16);
  const gap = s.indexOf('::');
  if (gap < 0) return parseGroups(s, out, 0, true) === 16 ? out : undefined;
  if (s.indexOf('::', gap + 1) >= 0) return undefined;
  const head = parseGroups(s.slice(0, gap), out, 0, false);
  if (head < 0) return undefined;
  const tail = new Uint8Array(16);
  const tailLen = parseGroups(s.slice(gap + 2), tail, 0, true);
  if (tailLen < 0 || head + tailLen > 14) return undefined;
  out.set(tail.subarray(0, tailLen), 16 - tailLen);
  return out;
}

function isV4Mapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** 4 or 16 bytes; undefined when `s` is not an address. Brackets and a zone (`%eth0`) are dropped. */
export function parseIp(s: string): Uint8Array | undefined {
  let text = s;
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1);
  if (!text.includes(':')) {
    const v4 = new Uint8Array(4);
    return parseIPv4(text, v4, 0) ? v4 : undefined;
  }
  const zone = text.indexOf('%');
  const v6 = parseIPv6(zone < 0 ? text : text.slice(0, zone));
  if (v6 && isV4Mapped(v6)) return v6.slice(12);
  return v6;
}

/** `10.0.0.0/8`, `2001:db8::/32`, or a single address (a /32 or /128). */
export function parseCidr(s: string): Cidr | undefined {
  const slash = s.indexOf('/');
  const addr = slash < 0 ? s : s.slice(0, slash);
  // IPv6 parsed without the v4-mapped reduction, so the prefix length still counts 128 bits.
  const bytes = addr.includes(':') ? parseIPv6(addr) : parseIp(addr);
  if (!bytes) return undefined;
  const max = bytes.length * 8;
  let bits = max;
  if (slash >= 0) {
    const p = s.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) return undefined;
    bits = Number(p);
    if (bits > max) return undefined;
  }
  if (bytes.length === 16 && isV4Mapped(bytes) && bits >= 96) return { bytes: bytes.slice(12), bits: bits - 96 };
  return { bytes, bits };
}

export function cidrContains(c: Cidr, ip: Uint8Array): boolean {
  if (c.bytes.length !== ip.length) return false;
  const whole = c.bits >> 3;
  for (let i = 0; i < whole; i++) if (c.bytes[i] !== ip[i]) return false;
  const rest = c.bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (c.bytes[whole]! & mask) === (ip[whole]! & mask);
}

// Policies are immutable for the life of a configuration: each list of blocks is parsed once.
const compiled = new WeakMap<readonly string[], readonly (Cidr | undefined)[]>();

/** The blocks of a policy field, parsed once per list; an unparsable entry never matches. */
export function cidrList(blocks: readonly string[]): readonly (Cidr | undefined)[] {
  let list = compiled.get(blocks);
  if (!list) compiled.set(blocks, (list = blocks.map(parseCidr)));
  return list;
}

/** True when `ip` (from parseIp) lies in any of `blocks`; an absent address lies in none. */
export function ipInBlocks(blocks: readonly string[], ip: Uint8Array | undefined): boolean {
  if (!ip) return false;
  for (const c of cidrList(blocks)) if (c && cidrContains(c, ip)) return true;
  return false;
}
