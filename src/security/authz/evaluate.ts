// AuthorizationPolicy evaluation in Istio's order: CUSTOM (the caller asks the external authorizer
// of a selecting policy first: selectCustom; a CUSTOM policy left here denies what it selects),
// then DENY (any match denies), then ALLOW (when any ALLOW policy applies, one must match). AUDIT policies are skipped: Istio acts on them only through an audit provider
// (Stackdriver), which this agent has not (the validator says so at load). Pure.
//
// Two entry points: `evaluate` for an HTTP request, `evaluateConnection` for a connection that is
// not HTTP (Istio's TCP semantics: an ALLOW rule needing an HTTP-only field matches no connection,
// a DENY rule's HTTP-only fields are ignored, so it denies more). Header conditions read
// every value of a header (header-values.ts). authz/README.md has the rules and why.
import type {
  AuthorizationAction, AuthorizationCondition, AuthorizationOperation, AuthorizationPolicy, AuthorizationRule, AuthorizationSource,
} from '../../config/resources/types.js';
import { claimValues, parsePolicyClaimKey } from '../claims.js';
import { ipInBlocks, parseIp } from './cidr.js';
import { editedHeader, headerCandidates, type AuthzHeaderEdits } from './header-values.js';
import { matchAny, matchValue } from './values.js';

export type { AuthzHeaderEdits } from './header-values.js';

export interface AuthzRequest {
  readonly method: string;
  /** The request target; operations read it without the query string, `request.headers[:path]` whole. */
  readonly path: string;
  /** Without port, lower-case. */
  readonly host: string;
  /** The destination port. */
  readonly port: number;
  /** Lower-case names; a repeated header as a list of its lines, or as one string joined with ", ". */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /**
   * The edits the proxy makes before forwarding (the JWT filter's: token removed, claim headers
   * written, forged ones dropped): `request.headers[...]` reads the headers as the backend gets them.
   */
  readonly headerEdits?: AuthzHeaderEdits;
  /** `iss/sub` of a valid JWT. */
  readonly principal?: string;
  /** The validated JWT payload. */
  readonly claims?: unknown;
  readonly audiences?: readonly string[];
  /** `azp` of a valid JWT. */
  readonly presenter?: string;
  /** The peer address of the connection. */
  readonly sourceIp?: string;
  /** The original client (X-Forwarded-For, as trusted); the peer address when absent. */
  readonly remoteIp?: string;
  /** mTLS peer identity: absent in this product unless mTLS is in use. */
  readonly sourcePrincipal?: string;
  readonly sourceNamespace?: string;
  /** The local address the client connected to (the original destination, for a sidecar). */
  readonly destinationIp?: string;
  /** The server name of the client's TLS ClientHello; absent on plaintext, or when it sent none. */
  readonly sni?: string;
}

/** A connection that is not HTTP, as policy sees it (the peer address is also `remote.ip`). */
export interface AuthzConnection {
  /** The destination port. */
  readonly port: number;
  /** The peer address. */
  readonly sourceIp?: string;
  readonly destinationIp?: string;
  /** mTLS peer identity, when there is one. */
  readonly sourcePrincipal?: string;
  readonly sourceNamespace?: string;
  /** The server name of the client's TLS ClientHello; absent on plaintext, or when it sent none. */
  readonly sni?: string;
}

export interface AuthzDecision {
  readonly allowed: boolean;
  /** For the decision log: `denied by DENY policy ns/name rule 0`, `allowed by ALLOW policy ns/name`... */
  readonly reason: string;
  /** `ns/name` of the policy that decided, if one did. */
  readonly policy?: string;
  readonly action?: AuthorizationAction;
  readonly ruleIndex?: number;
}

/** `host[:port]` → the host (lower-case) and the port, if written. */
function splitAuthority(authority: string): [string, string | undefined] {
  const m = /:(\d+)$/.exec(authority);
  return m ? [authority.slice(0, m.index).toLowerCase(), m[1]] : [authority.toLowerCase(), undefined];
}

/** The request's attributes, each derived at most once and only when a policy reads it. */
class AuthzView {
  private hostsCache: readonly string[] | undefined;
  private pathCache: string | undefined;
  private sourceCache: Uint8Array | null | undefined;
  private remoteCache: Uint8Array | null | undefined;
  private destinationCache: Uint8Array | null | undefined;
  private portText: string | undefined;
  private sniCache: readonly string[] | null | undefined;
  private headerCache: Map<string, readonly string[] | undefined> | undefined;
  private accountCache: string | null | undefined;

  /** `tcp`: a connection, not a request; HTTP-only fields do not apply (see ruleMatches). */
  constructor(readonly req: AuthzRequest, readonly tcp = false) {}

  get path(): string {
    if (this.pathCache === undefined) {
      const q = this.req.path.indexOf('?');
      this.pathCache = q < 0 ? this.req.path : this.req.path.slice(0, q);
    }
    return this.pathCache;
  }

  get port(): string {
    return (this.portText ??= String(this.req.port));
  }

  /**
   * The host as policy values may name it: bare, and with a port (the Host header's, else the
   * destination port), so `foo.com` matches on any port and `foo.com:8080` on that port only.
   * Every candidate of the Host header counts (header-values.ts), beside the request's host.
   */
  get hosts(): readonly string[] {
    if (!this.hostsCache) {
      const out: string[] = [];
      const add = (host: string, port: string | undefined): void => {
        for (const h of [host, `${host}:${port ?? this.port}`]) if (!out.includes(h)) out.push(h);
      };
      const authorities = this.header('host') ?? [];
      add(this.req.host.toLowerCase(), authorities.length > 0 ? splitAuthority(authorities[0]!)[1] : undefined);
      for (const a of authorities) add(...splitAuthority(a));
      this.hostsCache = out;
    }
    return this.hostsCache;
  }

  get sourceIp(): Uint8Array | undefined {
    if (this.sourceCache === undefined) this.sourceCache = (this.req.sourceIp !== undefined && parseIp(this.req.sourceIp)) || null;
    return this.sourceCache ?? undefined;
  }

  get remoteIp(): Uint8Array | undefined {
    if (this.req.remoteIp === undefined) return this.sourceIp;
    if (this.remoteCache === undefined) this.remoteCache = parseIp(this.req.remoteIp) ?? null;
    return this.remoteCache ?? undefined;
  }

  get destinationIp(): Uint8Array | undefined {
    if (this.destinationCache === undefined) this.destinationCache = (this.req.destinationIp !== undefined && parseIp(this.req.destinationIp)) || null;
    return this.destinationCache ?? undefined;
  }

  /**
   * The SNI, lower-case (DNS names have no case; Envoy keeps it lower-cased too), as a one-value
   * list; undefined when the connection has none (plaintext, or a ClientHello without it).
   */
  get sni(): readonly string[] | undefined {
    if (this.sniCache === undefined) this.sniCache = this.req.sni ? [this.req.sni.toLowerCase()] : null;
    return this.sniCache ?? undefined;
  }

  /** The candidates of header `name` (any case) as the backend will get it; undefined when absent. */
  header(name: string): readonly string[] | undefined {
    const lower = name.toLowerCase();
    // Pseudo-headers (HTTP/2's names for what HTTP/1.1 puts in the request line and Host).
    if (lower.charCodeAt(0) === 0x3a) return this.pseudoHeader(lower);
    const cache = (this.headerCache ??= new Map());
    if (cache.has(lower)) return cache.get(lower);
    const values = headerCandidates(editedHeader(this.req.headers, this.req.headerEdits, lower));
    cache.set(lower, values);
    return values;
  }

  private pseudoHeader(name: string): readonly string[] | undefined {
    switch (name) {
      case ':authority': return this.header('host') ?? (this.req.host === '' ? undefined : [this.req.host]);
      case ':method': return this.req.method === '' ? undefined : [this.req.method];
      case ':path': return this.req.path === '' ? undefined : [this.req.path];
      default: return undefined;
    }
  }

  /** The peer's service account as `ns/sa`, from a principal `<trust domain>/ns/<ns>/sa/<sa>`; undefined otherwise. */
  get serviceAccount(): string | undefined {
    if (this.accountCache === undefined) this.accountCache = serviceAccountOfPrincipal(this.req.sourcePrincipal) ?? null;
    return this.accountCache ?? undefined;
  }
}

const set = (v: readonly string[] | undefined): v is readonly string[] => v !== undefined && v.length > 0;

/**
 * `ns/sa` of an Istio principal (`<trust domain>/ns/<ns>/sa/<sa>`), whatever the trust domain, as
 * Istio matches `serviceAccounts`; undefined for any other shape (or no principal).
 */
export function serviceAccountOfPrincipal(principal: string | undefined): string | undefined {
  if (principal === undefined) return undefined;
  const parts = principal.split('/');
  if (parts.length !== 5 || parts[0] === '' || parts[1] !== 'ns' || parts[3] !== 'sa' || parts[2] === '' || parts[4] === '') return undefined;
  return `${parts[2]}/${parts[4]}`;
}

/** Any pattern matches the attribute (an absent attribute matches none). */
function anyMatches(patterns: readonly string[], attribute: string | undefined): boolean {
  for (const p of patterns) if (matchValue(p, attribute)) return true;
  return false;
}

/** A positive field holds when any value matches; a `not` field when none does; unset fields hold. */
function field(values: readonly string[] | undefined, notValues: readonly string[] | undefined, attribute: string | undefined): boolean {
  return (!set(values) || anyMatches(values, attribute)) && (!set(notValues) || !anyMatches(notValues, attribute));
}

// ---- HTTP-only fields, for connections (Istio's "Authorization on TCP") ----

/** `when` keys that only a request has: headers, and everything about its JWT. */
function isHttpOnlyKey(key: string): boolean {
  return key.startsWith('request.');
}

/** Whether a rule needs an HTTP-only field: `requestPrincipals`, `hosts`, `methods`, `paths` (and `not` forms), `request.*`. */
export function needsHttp(rule: AuthorizationRule): boolean {
  return rule.from.some((s) => set(s.requestPrincipals) || set(s.notRequestPrincipals))
    || rule.to.some((o) => set(o.hosts) || set(o.notHosts) || set(o.methods) || set(o.notMethods) || set(o.paths) || set(o.notPaths))
    || rule.when.some((c) => isHttpOnlyKey(c.key));
}

function sourceMatches(s: AuthorizationSource, view: AuthzView): boolean {
  const r = view.req;
  // On a connection the HTTP-only fields are ignored (only DENY rules get this far).
  return (view.tcp || field(s.requestPrincipals, s.notRequestPrincipals, r.principal))
    && field(s.principals, s.notPrincipals, r.sourcePrincipal)
    && field(s.namespaces, s.notNamespaces, r.sourceNamespace)
    // Exact comparison (Istio quotes the account in its matcher): no wildcards here.
    && (!set(s.serviceAccounts) || (view.serviceAccount !== undefined && s.serviceAccounts.includes(view.serviceAccount)))
    && (!set(s.notServiceAccounts) || view.serviceAccount === undefined || !s.notServiceAccounts.includes(view.serviceAccount))
    && (!set(s.trustDomains) || anyGlob(s.trustDomains, trustDomainOf(r.sourcePrincipal)))
    && (!set(s.notTrustDomains) || !anyGlob(s.notTrustDomains, trustDomainOf(r.sourcePrincipal)))
    && (!set(s.ipBlocks) || ipInBlocks(s.ipBlocks, view.sourceIp))
    && (!set(s.notIpBlocks) || !ipInBlocks(s.notIpBlocks, view.sourceIp))
    && (!set(s.remoteIpBlocks) || ipInBlocks(s.remoteIpBlocks, view.remoteIp))
    && (!set(s.notRemoteIpBlocks) || !ipInBlocks(s.notRemoteIpBlocks, view.remoteIp));
}

/** The trust domain of an Istio principal (`<trust domain>/ns/...`), lower-case; undefined without one. */
function trustDomainOf(principal: string | undefined): string | undefined {
  if (principal === undefined) return undefined;
  const slash = principal.indexOf('/');
  return slash > 0 ? principal.slice(0, slash).toLowerCase() : undefined;
}

/** `*` stands for any run of characters (a trust domain has no `/`, so this is Istio's `[^/]*`). */
export function globMatches(pattern: string, value: string): boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return pattern === value;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) return false;
  let at = first.length;
  const end = value.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const found = value.indexOf(parts[i]!, at);
    if (found < 0 || found + parts[i]!.length > end) return false;
    at = found + parts[i]!.length;
  }
  return true;
}

function anyGlob(patterns: readonly string[], value: string | undefined): boolean {
  if (value === undefined) return false;
  for (const p of patterns) if (globMatches(p, value)) return true;
  return false;
}

/** Host values are compared case-insensitively, against the host bare and with its port. */
function anyHostMatches(patterns: readonly string[], view: AuthzView): boolean {
  const hosts = view.hosts;
  for (const p of patterns) {
    const lower = p.toLowerCase();
    for (const h of hosts) if (matchValue(lower, h)) return true;
  }
  return false;
}

function operationMatches(o: AuthorizationOperation, view: AuthzView): boolean {
  return (!set(o.ports) || o.ports.includes(view.port))
    && (!set(o.notPorts) || !o.notPorts.includes(view.port))
    && (view.tcp || (
      field(o.methods, o.notMethods, view.req.method)
      && field(o.paths, o.notPaths, view.path)
      && (!set(o.hosts) || anyHostMatches(o.hosts, view))
      && (!set(o.notHosts) || !anyHostMatches(o.notHosts, view))));
}

const HEADER_KEY = /^request\.headers\[([^\]]+)\]$/;

/** The condition's attribute: its values (a list for claims and audiences), undefined when missing. */
function attribute(c: AuthorizationCondition, view: AuthzView): readonly string[] | undefined | 'unknown' {
  const r = view.req;
  const one = (v: string | undefined): readonly string[] | undefined => (v === undefined ? undefined : [v]);
  if (c.claimPath || c.key.startsWith('request.auth.claims[')) {
    const path = c.claimPath ?? (() => { const p = parsePolicyClaimKey(c.key); return p.ok ? p.path : undefined; })();
    if (!path) return 'unknown';
    return r.claims === undefined || r.claims === null ? undefined : claimValues(r.claims, path);
  }
  if (c.header !== undefined) return view.header(c.header);
  const header = HEADER_KEY.exec(c.key);
  if (header) return view.header(header[1]!);
  switch (c.key) {
    case 'request.auth.principal': return one(r.principal);
    case 'request.auth.audiences': return r.audiences;
    case 'request.auth.presenter': return one(r.presenter);
    case 'source.namespace': return one(r.sourceNamespace);
    case 'source.principal': return one(r.sourcePrincipal);
    case 'destination.port': return [view.port];
    case 'connection.sni': return view.sni;
    default: return 'unknown';
  }
}

function ipCondition(c: AuthorizationCondition, ip: Uint8Array | undefined): boolean {
  if (set(c.values) && !ipInBlocks(c.values, ip)) return false;
  if (set(c.notValues) && ip && ipInBlocks(c.notValues, ip)) return false;
  return true;
}

/** Whether any pattern matches the SNI, compared in any case as DNS names are (the SNI is lower-case already). */
function anySniMatches(patterns: readonly string[], sni: readonly string[]): boolean {
  for (const p of patterns) if (matchValue(p.toLowerCase(), sni[0])) return true;
  return false;
}

/** As any condition (below), with the SNI compared in any case: absent, it fails `values` and satisfies `notValues`. */
function sniCondition(c: AuthorizationCondition, sni: readonly string[] | undefined): boolean {
  if (set(c.values) && (sni === undefined || !anySniMatches(c.values, sni))) return false;
  if (set(c.notValues) && sni !== undefined && anySniMatches(c.notValues, sni)) return false;
  return true;
}

/**
 * A `when` condition: `values` holds when any value matches (any element, for list attributes;
 * any candidate, for a header), `notValues` when none does; a missing attribute fails `values` and
 * satisfies `notValues`. A key this evaluator does not know fails closed: it holds in a DENY or
 * CUSTOM policy and fails in an ALLOW one.
 */
function conditionHolds(c: AuthorizationCondition, view: AuthzView, action: AuthorizationAction): boolean {
  // On a connection an HTTP-only key is ignored (only DENY rules get this far).
  if (view.tcp && isHttpOnlyKey(c.key)) return true;
  switch (c.key) {
    case 'source.ip': return ipCondition(c, view.sourceIp);
    case 'remote.ip': return ipCondition(c, view.remoteIp);
    case 'destination.ip': return ipCondition(c, view.destinationIp);
    case 'connection.sni': return sniCondition(c, view.sni);
  }
  const values = attribute(c, view);
  // Failing closed: a DENY or CUSTOM policy selects more (denies more, checks more), ALLOW less.
  if (values === 'unknown') return action === 'DENY' || action === 'CUSTOM';
  if (set(c.values) && (values === undefined || !matchAny(c.values, values))) return false;
  if (set(c.notValues) && values !== undefined && matchAny(c.notValues, values)) return false;
  return true;
}

function ruleMatches(rule: AuthorizationRule, view: AuthzView, action: AuthorizationAction): boolean {
  // Istio drops an ALLOW rule that needs HTTP from a TCP filter (it allows less); DENY rules keep
  // their other fields (they deny more). A DENY rule of HTTP fields alone denies all.
  // A CUSTOM rule is read as an ALLOW rule is (Istio builds both the same way).
  if (view.tcp && action !== 'DENY' && needsHttp(rule)) return false;
  if (rule.from.length > 0 && !rule.from.some((s) => sourceMatches(s, view))) return false;
  if (rule.to.length > 0 && !rule.to.some((o) => operationMatches(o, view))) return false;
  for (const c of rule.when) if (!conditionHolds(c, view, action)) return false;
  return true;
}

/** The index of the first matching rule, or -1 (no rules: never matches). */
function matchingRule(policy: AuthorizationPolicy, view: AuthzView): number {
  return policy.rules.findIndex((r) => ruleMatches(r, view, policy.action));
}

const id = (p: AuthorizationPolicy): string => `${p.meta.namespace}/${p.meta.name}`;

const NO_HEADERS: AuthzRequest['headers'] = Object.freeze({});

/** Evaluates the policies that select this workload for an HTTP request (selection is the caller's). */
export function evaluate(policies: readonly AuthorizationPolicy[], req: AuthzRequest): AuthzDecision {
  if (policies.length === 0) return { allowed: true, reason: 'no policies' };
  return decide(policies, new AuthzView(req));
}

/**
 * Evaluates the policies for a connection that is not HTTP (Istio's TCP semantics, above). The
 * peer address is `source.ip`, `remote.ip` and what `ipBlocks` and `remoteIpBlocks` test.
 */
export function evaluateConnection(policies: readonly AuthorizationPolicy[], conn: AuthzConnection): AuthzDecision {
  if (policies.length === 0) return { allowed: true, reason: 'no policies' };
  // The HTTP attributes are never read on a connection: empty placeholders.
  const req: AuthzRequest = { method: '', path: '', host: '', headers: NO_HEADERS, ...conn };
  return decide(policies, new AuthzView(req, true));
}

/**
 * The first CUSTOM policy one of whose rules selects the request (its index in `policies` and the
 * rule's), or undefined: those requests go to the policy's external authorizer. A CUSTOM rule needs
 * what an ALLOW rule needs (a rule with HTTP-only fields selects no connection).
 */
export function selectCustom(policies: readonly AuthorizationPolicy[], req: AuthzRequest): { policy: AuthorizationPolicy; rule: number } | undefined {
  const view = new AuthzView(req);
  for (const p of policies) {
    if (p.action !== 'CUSTOM') continue;
    const rule = matchingRule(p, view);
    if (rule >= 0) return { policy: p, rule };
  }
  return undefined;
}

/**
 * CUSTOM policies handed to `evaluate` are those whose authorizer cannot be asked (the caller sends
 * the others to it first): what they select is denied, never allowed (Istio turns them into DENY).
 * On a connection every CUSTOM policy is such: no authorizer is asked for connections here.
 */
function decide(policies: readonly AuthorizationPolicy[], view: AuthzView): AuthzDecision {
  let allowCount = 0;
  let customs = false;
  // AUDIT policies are not evaluated: without an audit provider they have no effect (see the top).
  for (const p of policies) {
    if (p.action === 'ALLOW') allowCount++;
    else if (p.action === 'CUSTOM') customs = true;
  }
  if (customs) for (const p of policies) {
    if (p.action !== 'CUSTOM') continue;
    const rule = matchingRule(p, view);
    if (rule >= 0) {
      const why = view.tcp ? 'external authorization of connections not carried as HTTP is not supported here'
        : `its provider ${JSON.stringify(p.provider ?? '')} cannot be used (see the load warning)`;
      return { allowed: false, reason: `denied by CUSTOM policy ${id(p)} rule ${rule}: ${why}`, policy: id(p), action: 'CUSTOM', ruleIndex: rule };
    }
  }
  for (const p of policies) {
    if (p.action !== 'DENY') continue;
    const rule = matchingRule(p, view);
    if (rule >= 0) {
      return { allowed: false, reason: `denied by DENY policy ${id(p)} rule ${rule}`, policy: id(p), action: 'DENY', ruleIndex: rule };
    }
  }
  if (allowCount === 0) {
    return { allowed: true, reason: 'no DENY policy matched and no ALLOW policy applies' };
  }
  for (const p of policies) {
    if (p.action !== 'ALLOW') continue;
    const rule = matchingRule(p, view);
    if (rule >= 0) {
      return { allowed: true, reason: `allowed by ALLOW policy ${id(p)}`, policy: id(p), action: 'ALLOW', ruleIndex: rule };
    }
  }
  return { allowed: false, reason: `no ALLOW policy matched (${allowCount} apply)` };
}
