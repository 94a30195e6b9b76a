// This host's (pod's) own addresses, as the kernel lists them: mesh-iptables reads the pod's family
// from them, the listeners tell a local destination (a loop) from a remote one, the DNS proxy binds
// each of them for a wildcard DNS_PROXY_ADDR; the metrics servers answer off-host peers 403.
import { networkInterfaces } from 'node:os';

/** Addresses in the kernel's order: interfaces as listed, IPv4 before IPv6 within one. */
export function localAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address));
}

/** True for 127.0.0.0/8, ::1 and IPv4-mapped loopback (`::ffff:127.0.0.1`). */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  const a = address.toLowerCase().replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (a === '::1' || a === '0:0:0:0:0:0:0:1') return true;
  const v4 = a.startsWith('::ffff:') ? a.slice('::ffff:'.length) : a;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** Loopback, or one of `local` (this pod's addresses; an IPv4-mapped address counts as its IPv4). */
export function isLocalAddress(address: string, local: ReadonlySet<string>): boolean {
  return isLoopbackAddress(address) || local.has(address.replace(/^::ffff:(?=\d+\.)/, ''));
}
