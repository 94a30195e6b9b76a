// IP addresses and CIDR blocks as resources write them. Only node:net's isIP is used (a pure
// function): it parses every IPv4/IPv6 spelling exactly as the sockets that use them will.
import { isIP } from 'node:net';
import { FieldError, show } from './fields.js';

export function isIpAddress(text: string): boolean {
  return isIP(text) !== 0;
}

export interface Cidr {
  readonly address: string;
  readonly family: 4 | 6;
  readonly prefix: number;
}

/** `10.0.0.1`, `10.0.0.0/8`, `2001:db8::/32`: the address, its family and prefix length (full when absent). */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const family = isIP(address);
  if (family !== 4 && family !== 6) return undefined;
  const max = family === 4 ? 32 : 128;
  if (slash < 0) return { address, family, prefix: max };
  const p = text.slice(slash + 1);
  if (!/^[0-9]{1,3}$/.test(p) || Number(p) > max) return undefined;
  return { address, family, prefix: Number(p) };
}

/** An IP address or CIDR block (AuthorizationPolicy ipBlocks, `source.ip` conditions). */
export function checkIpOrCidr(text: string, field: string): string {
  if (parseCidr(text) === undefined) throw new FieldError(field, `${show(text)} is not an IP address or CIDR block`);
  return text;
}
