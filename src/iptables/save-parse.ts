// Reading the kernel's rules back (pure: text in, data out). `iptables-save` prints every rule in a
// canonical form that differs from what we feed `iptables-restore`: options in a fixed order
// (`-s -d -i -o -p`, then each match, then the target), the implicit `-m tcp` before `--dport`, marks
// in hex, `/32` on bare addresses, defaults spelled out (`--on-ip 0.0.0.0`, `--nfmask ...`), aliases
// resolved (`--to-port` → `--to-ports`, `--set-mark` → `--set-xmark`). `normalizeRule` renders any
// rule, ours or the kernel's, in exactly that form, so "expected" and "present" compare as strings.
// The forms were found by restoring every fixture (and many variants) with iptables 1.8.9, nft and
// legacy backends alike, and reading them back; test/integration/iptables/read-back.test.ts keeps
// checking them against the real tools (test/helpers/normalize-corpus.ts lists the cases).
import { BUILTIN_CHAINS, MESH_CHAIN_PREFIX, TABLES } from './constants.js';
import type { Family, Rule } from './rules.js';

// ---------------------------------------------------------------------------------------------
// iptables-save text → tables → chains → rules

export interface SavedChain {
  readonly name: string;
  /** `ACCEPT`/`DROP` for built-in chains, `-` for user chains. */
  readonly policy: string;
  /** Rule bodies in kernel order, verbatim: the text after `-A CHAIN `. */
  readonly rules: readonly string[];
}

export interface SavedTable {
  readonly name: string;
  /** In the order iptables-save lists them (built-in chains first, then user chains by name). */
  readonly chains: readonly SavedChain[];
}

/** Tables in the order of the text. Comments and counters are dropped. */
export function parseSave(text: string): SavedTable[] {
  const tables: SavedTable[] = [];
  let chains: Map<string, { name: string; policy: string; rules: string[] }> | undefined;
  let table = '';
  const close = (): void => {
    if (chains) tables.push({ name: table, chains: [...chains.values()] });
    chains = undefined;
  };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      close();
      table = line.slice(1);
      chains = new Map();
    } else if (line === 'COMMIT') {
      close();
    } else if (chains && line.startsWith(':')) {
      const [name = '', policy = '-'] = line.slice(1).split(/\s+/);
      chains.set(name, { name, policy, rules: [] });
    } else if (chains && (line.startsWith('-A ') || line.startsWith('['))) {
      // `[pkts:bytes] -A CHAIN ...` with `iptables-save -c`
      const m = /^(?:\[\d+:\d+\]\s+)?-A\s+(\S+)\s*(.*)$/.exec(line);
      if (!m) continue;
      const name = m[1]!;
      const chain = chains.get(name) ?? { name, policy: '-', rules: [] };
      chains.set(name, chain);
      chain.rules.push(m[2]!);
    }
  }
  close();
  return tables;
}

/** Whether the text shows any rule or user-defined chain (backend detection). */
export function hasRules(text: string): boolean {
  for (const t of parseSave(text)) {
    for (const c of t.chains) if (c.rules.length > 0 || c.policy === '-') return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Tokens as iptables-restore splits a line: blanks separate, double quotes group (with \" and \\).

export interface Token {
  readonly text: string;
  /** Written in double quotes: never an option, even when it starts with `-`. */
  readonly quoted: boolean;
}

export function tokenize(line: string): Token[] {
  const out: Token[] = [];
  let cur = '';
  let quoted = false;
  let inQuote = false;
  let have = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (inQuote) {
      if (ch === '\\' && i + 1 < line.length) cur += line[++i];
      else if (ch === '"') inQuote = false;
      else cur += ch;
    } else if (ch === '"') {
      inQuote = true;
      quoted = true;
      have = true;
    } else if (ch === ' ' || ch === '\t') {
      if (have) out.push({ text: cur, quoted });
      cur = '';
      quoted = false;
      have = false;
    } else {
      cur += ch;
      have = true;
    }
  }
  if (have) out.push({ text: cur, quoted });
  return out;
}

/** A value as iptables-save writes a string (xtables_save_string): bare when only [A-Za-z0-9_-]. */
export function saveString(value: string): string {
  if (/^[A-Za-z0-9_-]+$/.test(value)) return value;
  return `"${value.replace(/["\\']/g, (c) => `\\${c}`)}"`;
}

// ---------------------------------------------------------------------------------------------
// Addresses, as the kernel stores them (network part only) and glibc's inet_ntop prints them.

function parseV4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.reduce((acc, p) => acc * 256 + Number(p), 0);
}

const v4Text = (n: number): string => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');

function parseV6(text: string): number[] | undefined {
  let head = text;
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (lastColon === -1) return undefined;
  if (text.slice(lastColon + 1).includes('.')) {
    // an embedded IPv4 address in the last 32 bits: `::ffff:1.2.3.4`, `::127.0.0.53`
    const v4 = parseV4(text.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    tail = [Math.floor(v4 / 65536), v4 % 65536];
    head = text.slice(0, lastColon + 1);
    if (!head.endsWith('::')) head = head.slice(0, -1);
  }
  const halves = head.split('::');
  if (halves.length > 2) return undefined;
  const words = (s: string): number[] | undefined => {
    if (s === '') return [];
    const ws = s.split(':');
    if (!ws.every((w) => /^[0-9a-fA-F]{1,4}$/.test(w))) return undefined;
    return ws.map((w) => parseInt(w, 16));
  };
  const a = words(halves[0]!);
  const b = halves.length === 2 ? words(halves[1]!) : [];
  if (!a || !b) return undefined;
  const total = a.length + b.length + tail.length;
  if (halves.length === 1 ? total !== 8 : total > 7) return undefined;
  return [...a, ...new Array<number>(8 - total).fill(0), ...b, ...tail];
}

/** glibc inet_ntop(AF_INET6): longest zero run (≥ 2 words, first wins) as `::`, `::a.b.c.d` forms. */
function v6Text(w: readonly number[]): string {
  let best = { base: -1, len: 0 };
  let cur = { base: -1, len: 0 };
  for (let i = 0; i < 8; i++) {
    if (w[i] === 0) {
      cur = cur.base === -1 ? { base: i, len: 1 } : { base: cur.base, len: cur.len + 1 };
      if (cur.len > best.len) best = cur;
    } else cur = { base: -1, len: 0 };
  }
  if (best.len < 2) best = { base: -1, len: 0 };
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (best.base !== -1 && i >= best.base && i < best.base + best.len) {
      if (i === best.base) out += ':';
      continue;
    }
    if (i !== 0) out += ':';
    if (i === 6 && best.base === 0 && (best.len === 6 || (best.len === 5 && w[5] === 0xffff))) {
      out += v4Text(w[6]! * 65536 + w[7]!);
      break;
    }
    out += w[i]!.toString(16);
  }
  if (best.base !== -1 && best.base + best.len === 8) out += ':';
  return out;
}

/**
 * `10.1.2.3` → `10.1.2.3/32`, `10.1.2.3/8` → `10.0.0.0/8`, `/255.255.0.0` → `/16`,
 * `2001:DB8:0::1/64` → `2001:db8::/64`. A host name is left as written.
 */
export function normalizeAddress(text: string): string {
  const [addr = '', mask] = text.split('/', 2);
  const v4 = parseV4(addr);
  if (v4 !== undefined) {
    let len = 32;
    if (mask !== undefined) {
      const dotted = parseV4(mask);
      if (dotted !== undefined) {
        const bits = dotted.toString(2).padStart(32, '0');
        if (!/^1*0*$/.test(bits)) return text;
        len = bits.indexOf('0') === -1 ? 32 : bits.indexOf('0');
      } else if (/^\d+$/.test(mask) && Number(mask) <= 32) len = Number(mask);
      else return text;
    }
    const keep = len === 0 ? 0 : Math.floor(v4 / 2 ** (32 - len)) * 2 ** (32 - len);
    return `${v4Text(keep)}/${len}`;
  }
  const v6 = addr.includes(':') ? parseV6(addr) : undefined;
  if (v6 !== undefined) {
    let len = 128;
    if (mask !== undefined) {
      if (!/^\d+$/.test(mask) || Number(mask) > 128) return text;
      len = Number(mask);
    }
    const masked = v6.map((word, i) => {
      const bits = Math.max(0, Math.min(16, len - i * 16));
      return bits === 16 ? word : bits === 0 ? 0 : word & (0xffff << (16 - bits)) & 0xffff;
    });
    return `${v6Text(masked)}/${len}`;
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// Rules in iptables-save's canonical form

export interface NormalizeOptions {
  /** Family of the rule, for defaults such as TPROXY's `--on-ip` (default ipv4). */
  readonly family?: Family;
  /**
   * Resolves a user or group name to its id, as iptables does when it loads `--uid-owner java`
   * (the kernel keeps the number, iptables-save prints it). Unresolved names stay as written.
   */
  readonly resolveId?: (kind: 'user' | 'group', name: string) => number | undefined;
}

interface Opt { name: string; neg: boolean; values: Token[] }
interface Match { name: string; opts: Opt[] }

const PROTO_NUMBERS: Record<string, string> = { 1: 'icmp', 6: 'tcp', 17: 'udp', 58: 'ipv6-icmp', 132: 'sctp', 136: 'udplite' };
const PROTO_ALIASES: Record<string, string> = { icmpv6: 'ipv6-icmp', 'icmp6': 'ipv6-icmp' };
/** Options that load the protocol's own match when `-p` is given and no loaded match takes them. */
const PROTO_OPTIONS = new Set(['--sport', '--dport', '--source-port', '--destination-port', '--tcp-flags', '--syn',
  '--tcp-option', '--icmp-type', '--icmpv6-type', '--chunk-types']);
const PROTO_MATCH: Record<string, string> = { tcp: 'tcp', udp: 'udp', icmp: 'icmp', 'ipv6-icmp': 'icmp6', sctp: 'sctp', udplite: 'udplite' };

/** Options each known match takes, aliases mapped to the name iptables-save prints; and its print order. */
const MATCH_OPTIONS: Record<string, { alias: Record<string, string>; order?: readonly string[] }> = {
  tcp: { alias: { '--sport': '--sport', '--source-port': '--sport', '--dport': '--dport', '--destination-port': '--dport',
    '--tcp-flags': '--tcp-flags', '--syn': '--tcp-flags', '--tcp-option': '--tcp-option' },
  order: ['--sport', '--dport', '--tcp-flags', '--tcp-option'] },
  udp: { alias: { '--sport': '--sport', '--source-port': '--sport', '--dport': '--dport', '--destination-port': '--dport' },
    order: ['--sport', '--dport'] },
  multiport: { alias: { '--sports': '--sports', '--source-ports': '--sports', '--dports': '--dports',
    '--destination-ports': '--dports', '--ports': '--ports' } },
  owner: { alias: { '--uid-owner': '--uid-owner', '--gid-owner': '--gid-owner', '--suppl-groups': '--suppl-groups',
    '--socket-exists': '--socket-exists' }, order: ['--socket-exists', '--uid-owner', '--gid-owner', '--suppl-groups'] },
  mark: { alias: { '--mark': '--mark' } },
  connmark: { alias: { '--mark': '--mark' } },
  conntrack: { alias: Object.fromEntries(['--ctstate', '--ctproto', '--ctorigsrc', '--ctorigdst', '--ctreplsrc', '--ctrepldst',
    '--ctorigsrcport', '--ctorigdstport', '--ctreplsrcport', '--ctrepldstport', '--ctstatus', '--ctexpire', '--ctdir']
    .map((o) => [o, o])),
  order: ['--ctstate', '--ctproto', '--ctorigsrc', '--ctorigdst', '--ctreplsrc', '--ctrepldst', '--ctorigsrcport',
    '--ctorigdstport', '--ctreplsrcport', '--ctrepldstport', '--ctstatus', '--ctexpire', '--ctdir'] },
  state: { alias: { '--state': '--state' } },
  comment: { alias: { '--comment': '--comment' } },
  icmp: { alias: { '--icmp-type': '--icmp-type' } },
  icmp6: { alias: { '--icmpv6-type': '--icmpv6-type' } },
};

/** Options that never take a value (the rest take the following non-option tokens). */
const FLAG_OPTIONS = new Set(['--syn', '--socket-exists', '--suppl-groups', '--save-mark', '--restore-mark', '--notrack',
  '--random', '--random-fully', '--persistent', '--log-tcp-sequence', '--log-tcp-options', '--log-ip-options',
  '--log-uid', '--log-macdecode', '--rcheck', '--update', '--set', '--remove', '--rttl']);
const CT_STATES = ['INVALID', 'NEW', 'RELATED', 'ESTABLISHED', 'UNTRACKED', 'SNAT', 'DNAT'];
const LOG_LEVELS: Record<string, number> = { emerg: 0, alert: 1, crit: 2, error: 3, err: 3, warning: 4, warn: 4,
  notice: 5, info: 6, debug: 7, panic: 0 };
const SERVICES: Record<string, number> = { domain: 53, http: 80, https: 443, ssh: 22, ftp: 21, smtp: 25, ntp: 123 };
const STRING_OPTIONS = new Set(['--log-prefix', '--comment', '--nflog-prefix']);

const isOptionToken = (t: Token): boolean => !t.quoted && /^--?[A-Za-z]/.test(t.text);
const plain = (text: string): Token => ({ text, quoted: false });

/** strtoul(…, 0): decimal, 0x hex, 0 octal. */
function parseNumber(text: string): number | undefined {
  if (/^0x[0-9a-f]+$/i.test(text)) return parseInt(text, 16);
  if (/^0[0-7]+$/.test(text)) return parseInt(text, 8);
  if (/^\d+$/.test(text)) return Number(text);
  return undefined;
}
const hex = (n: number): string => `0x${(n >>> 0).toString(16)}`;

/** `V[/M]` → [value, mask]; the mask defaults to `defaultMask`. */
function valueMask(text: string, defaultMask: number): [number, number] | undefined {
  const [v, m] = text.split('/', 2);
  const value = parseNumber(v ?? '');
  const mask = m === undefined ? defaultMask : parseNumber(m);
  return value === undefined || mask === undefined ? undefined : [value >>> 0, mask >>> 0];
}

function port(text: string): string {
  const n = SERVICES[text];
  return n === undefined ? text : String(n);
}
/** `10:10` → `10`, `5:` → `5:65535`, `:5` → `0:5`, service names → numbers. */
function portRange(text: string): string {
  if (!text.includes(':')) return port(text);
  const [a = '', b = ''] = text.split(':', 2);
  const lo = a === '' ? '0' : port(a);
  const hi = b === '' ? '65535' : port(b);
  return lo === hi ? lo : `${lo}:${hi}`;
}

function ownerId(text: string, kind: 'user' | 'group', o: NormalizeOptions): string {
  const one = (t: string): string => (/^\d+$/.test(t) ? String(Number(t)) : String(o.resolveId?.(kind, t) ?? t));
  // A range only when both ends are numbers (`mesh-proxy` is a name).
  const range = /^(\d+)-(\d+)$/.exec(text);
  if (!range) return one(text);
  const lo = one(range[1]!);
  const hi = one(range[2]!);
  return lo === hi ? lo : `${lo}-${hi}`;
}

function canonicalMatch(m: Match, o: NormalizeOptions): Match {
  const spec = MATCH_OPTIONS[m.name];
  let opts = m.opts.map((x) => ({ ...x, name: spec?.alias[x.name] ?? x.name }));
  const set = (x: Opt, ...values: string[]): Opt => ({ ...x, values: values.map(plain) });
  opts = opts.map((x) => {
    const v = x.values[0]?.text ?? '';
    switch (`${m.name} ${x.name}`) {
      case 'tcp --tcp-flags':
        return x.values.length === 0 ? set(x, 'FIN,SYN,RST,ACK', 'SYN') : x;
      case 'tcp --sport': case 'tcp --dport': case 'udp --sport': case 'udp --dport':
        return set(x, portRange(v));
      case 'multiport --sports': case 'multiport --dports': case 'multiport --ports':
        return set(x, v.split(',').map((p) => (p.includes(':') ? p.split(':').map(port).join(':') : port(p))).join(','));
      case 'owner --uid-owner': return set(x, ownerId(v, 'user', o));
      case 'owner --gid-owner': return set(x, ownerId(v, 'group', o));
      case 'mark --mark': case 'connmark --mark': {
        const vm = valueMask(v, 0xffffffff);
        if (!vm) return x;
        return set(x, vm[1] === 0xffffffff ? hex(vm[0]) : `${hex(vm[0])}/${hex(vm[1])}`);
      }
      case 'conntrack --ctstate': case 'state --state': {
        const states = v.toUpperCase().split(',');
        return set(x, [...CT_STATES.filter((s) => states.includes(s)), ...states.filter((s) => !CT_STATES.includes(s))].join(','));
      }
      default:
        return x;
    }
  });
  if (spec?.order) {
    const order = spec.order;
    opts = [...opts].sort((a, b) => rank(order, a.name) - rank(order, b.name));
  }
  return { name: m.name, opts };
}

const rank = (order: readonly string[], name: string): number => {
  const i = order.indexOf(name);
  return i === -1 ? order.length : i;
};

function canonicalTarget(name: string, opts: Opt[], o: NormalizeOptions): Opt[] {
  const find = (...names: string[]): Opt | undefined => opts.find((x) => names.includes(x.name));
  const val = (x: Opt | undefined): string | undefined => x?.values[0]?.text;
  const opt = (n: string, ...values: string[]): Opt => ({ name: n, neg: false, values: values.map(plain) });
  const rest = (...known: string[]): Opt[] => opts.filter((x) => !known.includes(x.name));
  switch (name) {
    case 'REDIRECT': {
      const to = val(find('--to-ports', '--to-port'));
      const range = to?.includes('-') && to.split('-')[0] === to.split('-')[1] ? to.split('-')[0]! : to;
      return [...(range === undefined ? [] : [opt('--to-ports', range)]), ...rest('--to-ports', '--to-port')];
    }
    case 'TPROXY': {
      const onPort = val(find('--on-port'));
      const onIp = val(find('--on-ip')) ?? (o.family === 'ipv6' ? '::' : '0.0.0.0');
      const vm = valueMask(val(find('--tproxy-mark')) ?? '0/0', 0xffffffff);
      return [...(onPort === undefined ? [] : [opt('--on-port', onPort)]), opt('--on-ip', onIp.replace(/\/\d+$/, '')),
        ...(vm ? [opt('--tproxy-mark', `${hex(vm[0])}/${hex(vm[1])}`)] : []), ...rest('--on-port', '--on-ip', '--tproxy-mark')];
    }
    case 'MARK': case 'CONNMARK': {
      const mk = find('--set-mark', '--set-xmark');
      if (mk) {
        const vm = valueMask(val(mk) ?? '', 0xffffffff);
        return vm ? [opt('--set-xmark', `${hex(vm[0])}/${hex(vm[1])}`)] : opts;
      }
      const bit = find('--and-mark', '--or-mark', '--xor-mark');
      const n = parseNumber(val(bit) ?? '');
      if (name === 'MARK' && bit && n !== undefined) {
        const [v, m] = bit.name === '--and-mark' ? [0, ~n >>> 0] : bit.name === '--or-mark' ? [n, n] : [n, 0];
        return [opt('--set-xmark', `${hex(v)}/${hex(m)}`)];
      }
      const op = find('--save-mark', '--restore-mark');
      if (name === 'CONNMARK' && op) {
        const mask = parseNumber(val(find('--mask')) ?? '') ?? 0xffffffff;
        const nf = parseNumber(val(find('--nfmask')) ?? '') ?? mask;
        const ct = parseNumber(val(find('--ctmask')) ?? '') ?? mask;
        return [opt(op.name), opt('--nfmask', hex(nf)), opt('--ctmask', hex(ct))];
      }
      return opts;
    }
    case 'CT': {
      return opts.filter((x) => !(x.name === '--zone' && parseNumber(val(x) ?? '') === 0));
    }
    case 'LOG': {
      const level = val(find('--log-level'));
      const n = level === undefined ? 4 : parseNumber(level) ?? LOG_LEVELS[level.toLowerCase()] ?? level;
      const prefix = find('--log-prefix');
      return [...(prefix ? [prefix] : []), ...(n === 4 ? [] : [opt('--log-level', String(n))]),
        ...rest('--log-prefix', '--log-level')];
    }
    default:
      return opts;
  }
}

function renderOpt(x: Opt): string[] {
  const values = x.values.map((v) => (STRING_OPTIONS.has(x.name) || v.quoted ? saveString(v.text) : v.text));
  return [...(x.neg ? ['!'] : []), x.name, ...values];
}

/** The options every rule has, before any match: iptables-save prints them first, in this order. */
type BaseKey = 's' | 'd' | 'i' | 'o' | 'p' | 'f';
const BASE_OPTIONS: Readonly<Record<string, BaseKey>> = { '-s': 's', '--source': 's', '--src': 's', '-d': 'd',
  '--destination': 'd', '--dst': 'd', '-i': 'i', '--in-interface': 'i', '-o': 'o', '--out-interface': 'o',
  '-p': 'p', '--protocol': 'p', '-f': 'f', '--fragment': 'f' };

/**
 * A rule body (`-p tcp --dport 15008 -j RETURN`, or its tokens) in the form iptables-save prints.
 * Usually one string; several when an address option lists several (`-s a,b` makes one rule each,
 * as iptables does).
 */
export function normalizeRule(body: string | readonly string[], o: NormalizeOptions = {}): string[] {
  const tokens = tokenize(typeof body === 'string' ? body : body.join(' '));
  const base: Record<BaseKey, { neg: boolean; value: string } | undefined> =
    { s: undefined, d: undefined, i: undefined, o: undefined, p: undefined, f: undefined };
  const matches: Match[] = [];
  let tgt: { kind: '-j' | '-g'; name: string; opts: Opt[] } | undefined;
  let current: Match | undefined;
  let neg = false;
  const extra: Opt[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    const next = (): string => tokens[++i]?.text ?? '';
    if (!t.quoted && t.text === '!') { neg = true; continue; }
    const key = t.quoted || tgt ? undefined : BASE_OPTIONS[t.text];
    if (key) {
      base[key] = { neg, value: key === 'f' ? '' : next() };
      neg = false;
      continue;
    }
    if (!t.quoted && !tgt && (t.text === '-m' || t.text === '--match')) {
      current = { name: next().toLowerCase(), opts: [] };
      matches.push(current);
      continue;
    }
    if (!t.quoted && !tgt && (t.text === '-j' || t.text === '--jump' || t.text === '-g' || t.text === '--goto')) {
      tgt = { kind: t.text === '-g' || t.text === '--goto' ? '-g' : '-j', name: next(), opts: [] };
      continue;
    }
    if (!t.quoted && (t.text === '-c' || t.text === '--set-counters')) { i += 2; continue; }
    // An option with its values: the following tokens up to the next option or `!`.
    const values: Token[] = [];
    if (!FLAG_OPTIONS.has(t.text)) {
      while (i + 1 < tokens.length && !isOptionToken(tokens[i + 1]!) && !(tokens[i + 1]!.text === '!' && !tokens[i + 1]!.quoted)) {
        values.push(tokens[++i]!);
      }
    }
    const opt: Opt = { name: t.text, neg, values };
    neg = false;
    if (tgt) { tgt.opts.push(opt); continue; }
    const knows = (m: Match): boolean => {
      const spec = MATCH_OPTIONS[m.name];
      return spec === undefined || spec.alias[opt.name] !== undefined;
    };
    let owner = current && knows(current) ? current
      : [...matches].reverse().find((m) => MATCH_OPTIONS[m.name]?.alias[opt.name] !== undefined);
    const proto = base.p && !base.p.neg ? canonicalProto(base.p.value) : undefined;
    if (!owner && PROTO_OPTIONS.has(opt.name) && proto && PROTO_MATCH[proto]) {
      owner = { name: PROTO_MATCH[proto]!, opts: [] };
      matches.push(owner);
      current = owner;
    }
    if (owner) owner.opts.push(opt);
    else extra.push(opt);
  }

  const prefix = (b: { neg: boolean } | undefined, flag: string, value?: string): string[] =>
    b ? [...(b.neg ? ['!'] : []), flag, ...(value === undefined ? [] : [value])] : [];
  const tail: string[] = [];
  for (const m of matches) {
    const c = canonicalMatch(m, o);
    tail.push('-m', c.name, ...c.opts.flatMap(renderOpt));
  }
  tail.push(...extra.flatMap(renderOpt));
  if (tgt) tail.push(tgt.kind, tgt.name, ...canonicalTarget(tgt.name, tgt.opts, o).flatMap(renderOpt));

  const proto = base.p ? canonicalProto(base.p.value) : undefined;
  const head = (s: string | undefined, d: string | undefined): string[] => [
    ...(s === undefined ? [] : prefix(base.s, '-s', s)),
    ...(d === undefined ? [] : prefix(base.d, '-d', d)),
    ...prefix(base.i, '-i', base.i?.value),
    ...prefix(base.o, '-o', base.o?.value),
    ...(proto === undefined || (proto === 'all' && !base.p!.neg) ? [] : prefix(base.p, '-p', proto)),
    ...prefix(base.f, '-f'),
  ];
  const addresses = (b: { neg: boolean; value: string } | undefined): (string | undefined)[] => {
    if (!b) return [undefined];
    return b.value.split(',').map(normalizeAddress).map((a) => (!b.neg && /^(0\.0\.0\.0|::)\/0$/.test(a) ? undefined : a));
  };
  const out: string[] = [];
  for (const s of addresses(base.s)) for (const d of addresses(base.d)) out.push([...head(s, d), ...tail].join(' '));
  return out;
}

function canonicalProto(p: string): string {
  const lower = p.toLowerCase();
  return PROTO_NUMBERS[lower] ?? PROTO_ALIASES[lower] ?? (lower === '0' ? 'all' : lower);
}

/** The chain a rule jumps (`-j`) or goes (`-g`) to, from its canonical body. */
export function ruleTarget(body: string): string | undefined {
  return / -[jg] (\S+)/.exec(` ${body}`)?.[1];
}

// ---------------------------------------------------------------------------------------------
// The mesh part of the kernel's rules, and of a rule set

/** One chain's mesh rules: a whole MESH_ chain, or the mesh rules of another chain. */
export interface MeshChain {
  readonly table: string;
  readonly chain: string;
  /** A MESH_ chain (created and deleted by us) rather than rules inside someone else's chain. */
  readonly own: boolean;
  /** Canonical bodies in kernel order. */
  readonly rules: readonly string[];
}

/** Key of a built-in chain rule in `expectedBuiltin` sets: table, chain and canonical body. */
export const ruleKey = (table: string, chain: string, body: string): string => `${table}\t${chain}\t${body}`;

/**
 * Rules of built-in chains that are ours although they jump to no MESH_ chain: those TPROXY adds to
 * mangle (mark handling), recognised by shape with any mark value, so rules of an earlier
 * configuration (another mark) are still found. Other such rules (e.g. `--drop-invalid`'s
 * `-m conntrack --ctstate INVALID -j DROP`, too generic to claim by shape) are recognised only when
 * the expected rule set has them: see `expectedBuiltinKeys`.
 */
export const MESH_BUILTIN_SHAPES: readonly { table: string; chain: string; shape: RegExp }[] = [
  { table: 'mangle', chain: 'PREROUTING', shape: /^-p tcp -m mark --mark \S+ -j CONNMARK --save-mark --nfmask \S+ --ctmask \S+$/ },
  { table: 'mangle', chain: 'OUTPUT', shape: /^-o lo -p tcp -m mark --mark \S+ -j RETURN$/ },
  { table: 'mangle', chain: 'OUTPUT', shape: /^! -d \S+ -o lo -p tcp -m owner --[ug]id-owner \S+ -j MARK --set-xmark \S+$/ },
  { table: 'mangle', chain: 'OUTPUT', shape: /^-p tcp -m connmark --mark \S+ -j CONNMARK --restore-mark --nfmask \S+ --ctmask \S+$/ },
  // --iptables-trace-logging, should a trace rule ever sit in a built-in chain
  { table: '*', chain: '*', shape: /-j LOG --log-prefix "?MESH_/ },
];

/** Whether a rule of a chain that is not a MESH_ chain belongs to the mesh. */
export function isMeshRule(table: string, chain: string, body: string, expectedBuiltin?: ReadonlySet<string>): boolean {
  const target = ruleTarget(body);
  if (target?.startsWith(MESH_CHAIN_PREFIX)) return true;
  if (expectedBuiltin?.has(ruleKey(table, chain, body))) return true;
  if (!BUILTIN_CHAINS.has(chain)) return false;
  return MESH_BUILTIN_SHAPES.some((s) => (s.table === '*' || s.table === table) && (s.chain === '*' || s.chain === chain)
    && s.shape.test(body));
}

export interface ExtractOptions extends NormalizeOptions {
  /** `ruleKey`s of the expected rule set's rules in non-MESH_ chains (see `expectedBuiltinKeys`). */
  readonly expectedBuiltin?: ReadonlySet<string>;
}

/**
 * The mesh part of an iptables-save text (one family): every MESH_ chain with all its rules (also
 * when empty), and for every other chain the rules that are ours (see `isMeshRule`). Bodies are
 * canonical; `raw` keeps the kernel's text of each rule, for `-D`.
 */
export function extractMesh(tables: readonly SavedTable[], o: ExtractOptions = {}): (MeshChain & { readonly raw: readonly string[] })[] {
  const out: (MeshChain & { raw: string[] })[] = [];
  for (const t of tables) {
    for (const c of t.chains) {
      const own = c.name.startsWith(MESH_CHAIN_PREFIX);
      const rules: string[] = [];
      const raw: string[] = [];
      for (const body of c.rules) {
        const canonical = normalizeRule(body, o)[0] ?? body;
        if (own || isMeshRule(t.name, c.name, canonical, o.expectedBuiltin)) {
          rules.push(canonical);
          raw.push(body);
        }
      }
      if (own || rules.length > 0) out.push({ table: t.name, chain: c.name, own, rules, raw });
    }
  }
  return out;
}

/**
 * What the kernel will show for a rule set (one family): per chain, the canonical bodies in the
 * order they end up in after restoring the rules in order (`-A` appends, `-I N` inserts).
 */
export function expectedMesh(rules: readonly Rule[], o: NormalizeOptions = {}): MeshChain[] {
  const chains = new Map<string, { table: string; chain: string; own: boolean; rules: string[] }>();
  // Restore input lists tables in TABLES order: inserts are relative to rules of the same chain only.
  const ordered = [...rules].sort((a, b) => TABLES.indexOf(a.table) - TABLES.indexOf(b.table));
  for (const r of ordered) {
    const key = `${r.table}\t${r.chain}`;
    let c = chains.get(key);
    if (!c) {
      c = { table: r.table, chain: r.chain, own: r.chain.startsWith(MESH_CHAIN_PREFIX), rules: [] };
      chains.set(key, c);
    }
    const bodies = normalizeRule(r.args, o);
    if (r.position === undefined) c.rules.push(...bodies);
    else c.rules.splice(r.position - 1, 0, ...bodies);
  }
  return [...chains.values()];
}

/** `ruleKey`s of a rule set's rules that live in chains other than MESH_ ones. */
export function expectedBuiltinKeys(rules: readonly Rule[], o: NormalizeOptions = {}): Set<string> {
  const keys = new Set<string>();
  for (const c of expectedMesh(rules, o)) {
    if (!c.own) for (const body of c.rules) keys.add(ruleKey(c.table, c.chain, body));
  }
  return keys;
}

export interface MeshDiffLine {
  readonly table: string;
  readonly chain: string;
  /** `-`: present but not expected; `+`: expected but missing. */
  readonly op: '-' | '+';
  readonly body: string;
}

/** Rule-by-rule difference (per chain, in order, longest common subsequence kept). Empty: identical. */
export function diffMesh(present: readonly MeshChain[], expected: readonly MeshChain[]): MeshDiffLine[] {
  const key = (c: MeshChain): string => `${c.table}\t${c.chain}`;
  const have = new Map(present.map((c) => [key(c), c]));
  const want = new Map(expected.map((c) => [key(c), c]));
  const out: MeshDiffLine[] = [];
  const keys = [...new Set([...want.keys(), ...have.keys()])];
  for (const k of keys) {
    const [table = '', chain = ''] = k.split('\t');
    const a = have.get(k)?.rules ?? [];
    const b = want.get(k)?.rules ?? [];
    const ops = lcsDiff(a, b);
    // A MESH_ chain that exists empty but is not expected at all is a difference too.
    if (ops.length === 0 && have.has(k) && !want.has(k) && have.get(k)!.own) {
      out.push({ table, chain, op: '-', body: '(empty chain)' });
    }
    for (const [op, body] of ops) out.push({ table, chain, op, body });
  }
  return out;
}

function lcsDiff(a: readonly string[], b: readonly string[]): ['-' | '+', string][] {
  const n = a.length;
  const m = b.length;
  const dp: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) dp[i]![j] = a[i] === b[j] ? dp[i + 1]![j + 1]! + 1 : Math.max(dp[i + 1]![j]!, dp[i]![j + 1]!);
  }
  const out: ['-' | '+', string][] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { i++; j++; }
    else if (i < n && (j === m || dp[i + 1]![j]! >= dp[i]![j + 1]!)) out.push(['-', a[i++]!]);
    else out.push(['+', b[j++]!]);
  }
  return out;
}

/** The diff as a person reads it: one line per rule, `- -A CHAIN ...` / `+ -A CHAIN ...`, per table. */
export function formatDiff(lines: readonly MeshDiffLine[], family?: Family): string {
  let out = '';
  let lastTable = '';
  for (const l of lines) {
    if (l.table !== lastTable) {
      out += `${family ? `${family} ` : ''}table ${l.table}:\n`;
      lastTable = l.table;
    }
    out += l.body === '(empty chain)' ? `  - ${l.chain} (an empty chain)\n` : `  ${l.op} -A ${l.chain} ${l.body}\n`;
  }
  return out;
}

/**
 * `iptables-restore` input (as `toRestore` writes it, or a fixture) back into rules: `-A CHAIN ...`
 * and `-I CHAIN N ...` lines per `*table`; `-N`, `:CHAIN` and COMMIT lines carry no rule. Quoted
 * values keep their quotes, so `ruleLine` gives the same text back.
 */
export function parseRestore(text: string): Rule[] {
  const rules: Rule[] = [];
  let table: Rule['table'] | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('*')) {
      const name = line.slice(1);
      table = (TABLES as readonly string[]).includes(name) ? name as Rule['table'] : undefined;
      continue;
    }
    if (!table) continue;
    const m = /^-([AI])\s+(\S+)\s*(.*)$/.exec(line);
    if (!m) continue;
    const words = tokenize(m[3]!).map((t) => (t.quoted ? `"${t.text.replace(/["\\]/g, '\\$&')}"` : t.text));
    if (m[1] === 'I' && /^\d+$/.test(words[0] ?? '')) {
      rules.push({ table, chain: m[2]!, position: Number(words[0]), args: words.slice(1) });
    } else {
      rules.push({ table, chain: m[2]!, args: words });
    }
  }
  return rules;
}
