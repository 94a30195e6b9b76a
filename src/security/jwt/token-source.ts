// Where tokens are read (pure). A rule without fromHeaders/fromParams/fromCookies reads
// `Authorization: Bearer <token>` and the `access_token` query parameter (Envoy's defaults, which
// Istio keeps); a rule that lists locations reads only those. The locations of all rules form one
// ordered list (rules in order; per rule headers, then params, then cookies), each knowing which
// rules read it: the first location holding a token wins, and only those rules may verify it.
import type { JwtRule } from '../../config/resources/types.js';
import type { TokenLocation } from './result.js';

export const DEFAULT_HEADER: TokenLocation = Object.freeze({ kind: 'header', name: 'authorization', prefix: 'Bearer ', ignoreCase: true });
export const DEFAULT_PARAM: TokenLocation = Object.freeze({ kind: 'param', name: 'access_token' });

/** A location and the indexes (into the rule list) of the rules that read it. */
export interface PlannedLocation {
  readonly location: TokenLocation;
  readonly rules: readonly number[];
}

export interface TokenPlan {
  readonly locations: readonly PlannedLocation[];
  readonly hasParams: boolean;
  readonly hasCookies: boolean;
}

export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface FoundToken {
  readonly token: string;
  readonly at: PlannedLocation;
}

function keyOf(l: TokenLocation): string {
  switch (l.kind) {
    case 'header': return `h\0${l.name}\0${l.ignoreCase ? l.prefix.toLowerCase() : l.prefix}\0${l.ignoreCase}`;
    case 'param': return `p\0${l.name}`;
    case 'cookie': return `c\0${l.name}`;
  }
}

/** The locations a rule reads, in Envoy's order: headers, params, cookies. */
export function ruleLocations(rule: JwtRule): TokenLocation[] {
  if (rule.fromHeaders.length === 0 && rule.fromParams.length === 0 && rule.fromCookies.length === 0) {
    return [DEFAULT_HEADER, DEFAULT_PARAM];
  }
  return [
    ...rule.fromHeaders.map((h): TokenLocation => ({ kind: 'header', name: h.name.toLowerCase(), prefix: h.prefix, ignoreCase: false })),
    ...rule.fromParams.map((name): TokenLocation => ({ kind: 'param', name })),
    ...rule.fromCookies.map((name): TokenLocation => ({ kind: 'cookie', name })),
  ];
}

/** One ordered, de-duplicated list of locations for all rules. */
export function planLocations(rules: readonly JwtRule[]): TokenPlan {
  const byKey = new Map<string, { location: TokenLocation; rules: number[] }>();
  rules.forEach((rule, i) => {
    for (const location of ruleLocations(rule)) {
      const key = keyOf(location);
      const entry = byKey.get(key);
      if (entry === undefined) byKey.set(key, { location, rules: [i] });
      else if (!entry.rules.includes(i)) entry.rules.push(i);
    }
  });
  const locations = [...byKey.values()];
  return {
    locations,
    hasParams: locations.some((p) => p.location.kind === 'param'),
    hasCookies: locations.some((p) => p.location.kind === 'cookie'),
  };
}

function decodeComponent(s: string): string | undefined {
  try {
    return decodeURIComponent(s.includes('+') ? s.replaceAll('+', ' ') : s);
  } catch {
    return undefined;
  }
}

/** The first value of each query parameter (names and values decoded as a form). */
export function queryParams(url: string): Map<string, string> {
  const params = new Map<string, string>();
  const q = url.indexOf('?');
  if (q < 0) return params;
  const hash = url.indexOf('#', q);
  for (const piece of url.slice(q + 1, hash < 0 ? undefined : hash).split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    const name = decodeComponent(eq < 0 ? piece : piece.slice(0, eq));
    const value = eq < 0 ? '' : decodeComponent(piece.slice(eq + 1));
    if (name !== undefined && value !== undefined && !params.has(name)) params.set(name, value);
  }
  return params;
}

/** The first value of each cookie of the `cookie` header(s). */
export function cookies(header: string | string[] | undefined): Map<string, string> {
  const jar = new Map<string, string>();
  if (header === undefined) return jar;
  for (const line of Array.isArray(header) ? header : [header]) {
    for (const pair of line.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0) continue;
      const name = pair.slice(0, eq).trim();
      let value = pair.slice(eq + 1).trim();
      if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
      if (name !== '' && !jar.has(name)) jar.set(name, value);
    }
  }
  return jar;
}

function fromHeaderValue(value: string, l: Extract<TokenLocation, { kind: 'header' }>): string | undefined {
  if (l.prefix !== '') {
    const head = value.slice(0, l.prefix.length);
    if (l.ignoreCase ? head.toLowerCase() !== l.prefix.toLowerCase() : head !== l.prefix) return undefined;
  }
  const token = value.slice(l.prefix.length).trim();
  return token === '' ? undefined : token;
}

function fromHeader(headers: RequestHeaders, l: Extract<TokenLocation, { kind: 'header' }>): string | undefined {
  const raw = headers[l.name];
  if (raw === undefined) return undefined;
  if (typeof raw === 'string') return fromHeaderValue(raw, l);
  for (const v of raw) {
    const token = fromHeaderValue(v, l);
    if (token !== undefined) return token;
  }
  return undefined;
}

/** The first token found, in plan order; undefined when the request carries none. */
export function findToken(plan: TokenPlan, headers: RequestHeaders, url: string): FoundToken | undefined {
  // The query and cookies are parsed at most once, and only when some rule reads them.
  let params: Map<string, string> | undefined;
  let jar: Map<string, string> | undefined;
  for (const at of plan.locations) {
    const l = at.location;
    let token: string | undefined;
    if (l.kind === 'header') {
      token = fromHeader(headers, l);
    } else if (l.kind === 'param') {
      if (!url.includes('?')) continue;
      params ??= queryParams(url);
      token = params.get(l.name);
    } else {
      jar ??= cookies(headers.cookie);
      token = jar.get(l.name);
    }
    if (token !== undefined && token !== '') return { token, at };
  }
  return undefined;
}

/** The URL without any occurrence of query parameter `name`; other parameters keep their spelling. */
export function urlWithoutParam(url: string, name: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const hash = url.indexOf('#', q);
  const query = url.slice(q + 1, hash < 0 ? undefined : hash);
  const kept = query.split('&').filter((piece) => {
    if (piece === '') return false;
    const eq = piece.indexOf('=');
    return decodeComponent(eq < 0 ? piece : piece.slice(0, eq)) !== name;
  });
  const rest = hash < 0 ? '' : url.slice(hash);
  return kept.length === 0 ? url.slice(0, q) + rest : `${url.slice(0, q)}?${kept.join('&')}${rest}`;
}

/** The `cookie` header without cookie `name`; undefined when nothing is left. */
export function cookieWithout(header: string | string[] | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  const kept: string[] = [];
  for (const line of Array.isArray(header) ? header : [header]) {
    for (const pair of line.split(';')) {
      const trimmed = pair.trim();
      if (trimmed === '') continue;
      const eq = trimmed.indexOf('=');
      if ((eq < 0 ? trimmed : trimmed.slice(0, eq).trim()) === name) continue;
      kept.push(trimmed);
    }
  }
  return kept.length === 0 ? undefined : kept.join('; ');
}
