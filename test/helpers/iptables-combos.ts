// Random `mesh-iptables` configurations for the property test (test/integration/iptables/
// property.test.ts): every flag and variable of spec 4.4 that changes a rule, both families,
// REDIRECT and TPROXY, DNS capture with the pod's resolv.conf naming IPv4, IPv6, both or no
// servers, CIDR lists of both families (loopback ranges too), owner groups. Deterministic: combo i of
// seed s is always the same, so one failing combo replays alone.
import { seeded } from './seeded.js';

/** The generator that picks the flags (seeded.ts). */
export const prng = seeded;

export interface Combo {
  /** Flags after `mesh-iptables`. */
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** The pod's interface addresses in the kernel's order (decides IPv6 with --dual-stack off). */
  readonly addresses: readonly string[];
  /** The pod's /etc/resolv.conf. */
  readonly resolvConf: string;
}

const V4_CIDRS = ['10.0.0.0/8', '10.96.0.0/12', '192.168.1.7', '172.16.0.0/12', '127.1.2.3/32', '127.0.0.0/8', '169.254.169.254/32'];
const V6_CIDRS = ['fd00::/8', '2001:db8::/32', 'fd00:10::/64', '::1/128', 'fe80::/10', '2001:db8::5'];
const PORTS = ['80', '443', '8080', '15008', '15020', '15021', '15090', '3306', '53', '22'];

/**
 * The i-th configuration of a seed. `group` is a group name that exists on this machine (owner
 * matches resolve names when the rules are restored).
 */
export function combo(seed: number, i: number, group: string): Combo {
  const rnd = prng((seed ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0);
  const chance = (p: number): boolean => rnd() < p;
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const some = <T>(xs: readonly T[], max: number): T[] => {
    const n = 1 + Math.floor(rnd() * max);
    return [...new Set(Array.from({ length: n }, () => pick(xs)))];
  };
  const args: string[] = [];
  const flag = (name: string, value: string): void => { args.push(name, value); };
  const env: Record<string, string> = {};

  if (chance(0.2)) flag('-p', pick(['15001', '16001']));
  if (chance(0.2)) flag('-z', pick(['15006', '16006']));
  if (chance(0.2)) flag('-e', pick(['15008', '16008']));
  const tproxy = chance(0.4);
  if (tproxy) {
    if (chance(0.8)) flag('-m', 'TPROXY'); else env['INBOUND_INTERCEPTION_MODE'] = 'TPROXY';
  } else if (chance(0.2)) flag('-m', 'REDIRECT');
  if (chance(0.3)) flag('-t', pick(['1337', '4242', '0x10']));
  if (chance(0.3)) flag('-r', pick(['133', '77', '1000']));
  const inbound = rnd();
  if (inbound < 0.4) flag('-b', '*');
  else if (inbound < 0.75) flag('-b', some(PORTS, 3).join(','));
  else if (chance(0.5)) flag('-b', '');
  if (chance(0.4)) flag('-d', some(PORTS, 3).join(','));
  const outbound = rnd();
  const cidrs = (): string[] => [...(chance(0.7) ? some(V4_CIDRS, 3) : []), ...(chance(0.6) ? some(V6_CIDRS, 2) : [])];
  if (outbound < 0.35) flag('-i', '*');
  else if (outbound < 0.75) flag('-i', cidrs().join(','));
  if (chance(0.35)) flag('-x', cidrs().join(','));
  if (chance(0.3)) flag('-o', some(PORTS, 3).join(','));
  if (chance(0.3)) flag('-q', some(PORTS, 2).join(','));
  if (chance(0.3)) flag('-c', some(['eth1', 'veth+', 'net9'], 2).join(','));
  if (chance(0.25)) flag('-k', some(['tap0', 'tap1'], 2).join(','));
  if (chance(0.4)) flag('-u', pick(['1337', '1337,0', '3,4', 'root']));
  if (chance(0.3)) flag('-g', pick(['1337', '1337,2000', '1,2', group]));
  for (const [name, p] of [['--redirect-dns', 0.5], ['--capture-all-dns', 0.25], ['--drop-invalid', 0.25], ['--dual-stack', 0.3],
    ['--iptables-trace-logging', 0.15], ['--block-inbound-ipv6', 0.25]] as const) {
    if (chance(p)) args.push(name);
  }
  const groups = rnd();
  if (groups < 0.15) env['MESH_OUTBOUND_OWNER_GROUPS'] = `${group},202`;
  else if (groups < 0.2) env['MESH_OUTBOUND_OWNER_GROUPS'] = '';
  else if (groups < 0.3) env['MESH_OUTBOUND_OWNER_GROUPS'] = '*';
  if (chance(0.2)) env['MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE'] = pick([`${group},203`, '888']);
  if (chance(0.2)) env['MESH_OUTBOUND_IPV4_LOOPBACK_CIDR'] = pick(['127.0.0.0/8', '127.0.0.1/32']);

  const addresses = pick([['10.1.0.5'], ['10.1.0.5', 'fd00:1::5'], ['fd00:1::5', '10.1.0.5'], ['fd00:1::5']]);
  const servers = pick([[], ['10.96.0.10'], ['fd00::a'], ['10.96.0.10', 'fd00::a'], ['127.0.0.53', '::127.0.0.53']]);
  return { args, env, addresses, resolvConf: servers.map((s) => `nameserver ${s}\n`).join('') };
}

/** A combo as a shell-like line, for messages. */
export function describeCombo(c: Combo): string {
  const quote = (s: string): string => (/^[\w.,:/+*-]+$/.test(s) && s !== '*' ? s : `'${s}'`);
  const env = Object.entries(c.env).map(([k, v]) => `${k}=${quote(v)} `).join('');
  const servers = c.resolvConf.trim().split('\n').filter(Boolean).map((l) => l.split(' ')[1]);
  return `${env}mesh-iptables ${c.args.map(quote).join(' ')}  [pod: ${c.addresses.join(' ')}; resolv.conf: ${servers.join(' ') || 'none'}]`;
}
