// What the rules depend on besides the flags: whether the pod has IPv6, and its DNS servers.
import { isIP } from 'node:net';
import type { PodNetwork } from './builder.js';
import type { MeshIptablesOptions } from './options.js';

/** `nameserver` lines of a resolv.conf, split by family, in file order. */
export function parseResolvConf(text: string): { v4: string[]; v6: string[] } {
  const v4: string[] = [];
  const v6: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    const server = m?.[1]?.replace(/%.*$/, ''); // drop an IPv6 zone (fe80::1%eth0)
    if (!server) continue;
    if (isIP(server) === 4) v4.push(server);
    else if (isIP(server) === 6) v6.push(server);
  }
  return { v4, v6 };
}

function isLoopbackOrLinkLocal(address: string): boolean {
  const a = address.toLowerCase();
  return a.startsWith('127.') || a === '::1' || a.startsWith('169.254.') || /^fe[89ab][0-9a-f]:/.test(a);
}

/** The pod counts as IPv6 when its first address that is neither loopback nor link-local is IPv6. */
export function firstAddressIsIpv6(addresses: readonly string[]): boolean {
  const first = addresses.find((a) => isIP(a) !== 0 && !isLoopbackOrLinkLocal(a));
  return first !== undefined && isIP(first) === 6;
}

/** Addresses from `ip -o addr show` output, in the kernel's order. */
export function parseIpAddrOutput(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /\binet6?\s+([0-9a-fA-F.:]+)\//.exec(line);
    if (m?.[1]) out.push(m[1]);
  }
  return out;
}

export interface PodNetworkSources {
  /** The pod's interface addresses, in the kernel's order. */
  readonly addresses: () => Promise<readonly string[]>;
  /** The pod's resolv.conf text, if there is one. */
  readonly resolvConf: () => string | undefined;
}

export async function detectPodNetwork(o: MeshIptablesOptions, sources: PodNetworkSources): Promise<PodNetwork> {
  const dns = o.redirectDns ? parseResolvConf(sources.resolvConf() ?? '') : { v4: [], v6: [] };
  const ipv6 = o.dualStack || firstAddressIsIpv6(await sources.addresses());
  return { ipv6, dnsServersV4: dns.v4, dnsServersV6: dns.v6 };
}
