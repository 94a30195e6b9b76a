// RequestAuthentication as Istio has Envoy's jwt_authn do it: find the tokens (token-source), check
// each one's shape, issuer, time and audience (verify), its signature against the rule's keys (jwks,
// key-set), and remember verified tokens (token-cache). Every token the request carries must verify
// (Envoy checks only the first; a second one would reach the backend unverified); the first invalid
// one answers, else the first token is the request's identity.
//
// `authenticate` returns a plain value whenever it can: no token, a token refused by the cheap
// checks, or a token verified before (the cache). Only a token that needs a signature check (or a
// key set still being fetched) yields a promise, so the steady state of a client re-sending its
// token costs a header read, a Map lookup and no promise. Callers test `instanceof Promise`.
// Several tokens are checked one after the other, stopping at the first invalid one: a request
// stuffed with forged tokens costs at most one failed signature check, as a single token does.
import type { JwtRule } from '../../config/resources/types.js';
import { claimAt } from '../claims.js';
import { discoveryUrl, fetchTextWith, InlineKeys, isHttpUrl, MissingKeys, nodeFetchText, RemoteKeys, type FetchText, type KeySource, type KeyStatus, type Log } from './jwks.js';
import type { KeySet, KeyEntry } from './key-set.js';
import { ABSENT, describeLocation, invalid, type AuthnResult, type InvalidToken, type TokenLocation, type ValidToken } from './result.js';
import { TokenCache } from './token-cache.js';
import { cookieWithout, findTokens, planLocations, urlWithoutParam, type FoundToken, type RequestHeaders, type TokenPlan } from './token-source.js';
import { checkAudience, checkTime, decodeToken, isDecoded, verifySignature, type DecodedToken } from './verify.js';

export type { AuthnReason, AuthnResult, InvalidToken, TokenLocation, ValidToken } from './result.js';
export type { RequestHeaders } from './token-source.js';
export type { KeyStatus } from './jwks.js';

export interface JwtAuthenticatorOptions {
  /** PILOT_JWT_PUB_KEY_REFRESH_INTERVAL, in ms. */
  readonly refreshIntervalMs: number;
  /** JWKS_RESOLVER_INSECURE_SKIP_VERIFY: fetch https key sets without verifying the certificate. */
  readonly insecureSkipVerify: boolean;
  /** Time-out of one key set fetch for a rule without `timeout`; default 5000 (Istio's default). */
  readonly fetchTimeoutMs?: number;
  /** Verified tokens kept; default 10000, 0 disables the cache. */
  readonly cacheSize?: number;
  /** The clock, in ms since the epoch; default Date.now. */
  readonly now?: () => number;
  /**
   * MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS: a key set fetch (or an OpenID discovery) may follow a few
   * redirects that keep the scheme. Default false: a redirect fails the fetch, as in Envoy.
   */
  readonly followSameSchemeRedirects?: boolean;
  /** COMPLIANCE_POLICY, laid over the built-in client's https fetches (security/compliance.ts). */
  readonly compliancePolicy?: string;
  /**
   * Replaces the built-in node:http/https client (insecureSkipVerify is then the fetch's business).
   * It is asked not to follow redirects (`redirect: 'manual'`); the rule above decides which are.
   */
  readonly fetch?: typeof fetch;
  readonly log?: (level: 'info' | 'warn' | 'error', msg: string) => void;
  /** Told of every key set fetch (the agent's num_outgoing_requests and friends). */
  readonly onFetch?: (fetch: FetchOutcome) => void;
  /** Least time between two on-demand refetches of one key set (unknown kid, no keys); default 1000. */
  readonly minRefetchIntervalMs?: number;
}

export interface AuthnRequest {
  readonly headers: RequestHeaders;
  /** The request target: path and query. */
  readonly url: string;
}

/** Edits of the request before it is forwarded upstream. */
export interface UpstreamEdits {
  /** Lower-case names of headers to drop. */
  readonly removeHeaders: string[];
  /** Lower-case names and values to set (replacing any of the same name). */
  readonly setHeaders: [string, string][];
  /** The request target to forward (without the token's query parameter, when it was there). */
  readonly url: string;
}

export interface AuthnStats {
  readonly cacheHits: number;
  readonly cacheMisses: number;
  /** Signature computations (one per candidate key tried). */
  readonly signatureVerifications: number;
  readonly cacheSize: number;
}

interface RuleState {
  readonly rule: JwtRule;
  readonly keys: KeySource;
}

interface Plan {
  readonly rules: readonly RuleState[];
  readonly tokens: TokenPlan;
  readonly issuers: ReadonlySet<string>;
  /** Lower-case names of every header some rule writes (payload and claims). */
  readonly outputHeaders: readonly string[];
}

/** One verification of a token; a token found in several locations may have one per location. */
interface Cached {
  readonly result: ValidToken;
  readonly source: KeySource;
  /** The key set it was verified with: a changed set means verify again. */
  readonly keys: KeySet;
}

/** What checking one token yields: never `absent`. */
type Checked = ValidToken | InvalidToken;
type Outcome = Checked | Promise<Checked>;

const EMPTY_PLAN: Plan = { rules: [], tokens: planLocations([]), issuers: new Set(), outputHeaders: [] };
/** Control characters (HTAB aside) and DEL: a header value may not hold them (RFC 9110 5.5). */
const CONTROL = /[\0-\x08\x0a-\x1f\x7f]/;

const noop = (): void => undefined;
/** The longest time-out a timer can hold (a longer one would fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const child of Object.values(v)) deepFreeze(child);
  }
  return v;
}

/**
 * A claim as a header value: a string as is, anything else as JSON text; none for absent or unsafe
 * (CR, LF, NUL or another control character: header injection, or a value the proxy cannot write).
 * Characters beyond Latin-1 stay as they are: the value is a JS string, written out as UTF-8.
 */
function claimHeaderValue(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  const text = typeof v === 'string' ? v : JSON.stringify(v);
  return CONTROL.test(text) ? undefined : text;
}

/** The payload part of a compact JWS, as sent: base64url, unpadded (what Envoy forwards). */
function payloadSegment(token: string): string {
  const first = token.indexOf('.');
  return token.slice(first + 1, token.indexOf('.', first + 1));
}

export class JwtAuthenticator {
  private readonly now: () => number;
  private readonly log: Log;
  private readonly remoteOptions: ConstructorParameters<typeof RemoteKeys>[1];
  private readonly cache: TokenCache<readonly Cached[]>;
  /** Remote key sets by URL, kept across setRules while still named. */
  private remotes = new Map<string, RemoteKeys>();
  /** Parsed inline key sets by text, kept across setRules while still used. */
  private inlines = new Map<string, InlineKeys>();
  /** Verifications under way, by token: concurrent requests with one new token verify it once. */
  private readonly pending = new Map<string, { readonly location: TokenLocation; readonly result: Promise<Checked> }>();
  private plan: Plan = EMPTY_PLAN;
  private counters = { cacheHits: 0, cacheMisses: 0, signatureVerifications: 0 };
  private readonly countVerification = (): void => {
    this.counters.signatureVerifications += 1;
  };

  constructor(opts: JwtAuthenticatorOptions) {
    this.now = opts.now ?? Date.now;
    this.log = opts.log ?? noop;
    this.cache = new TokenCache(opts.cacheSize ?? 10_000);
    this.remoteOptions = {
      refreshIntervalMs: opts.refreshIntervalMs,
      fetchTimeoutMs: opts.fetchTimeoutMs ?? 5000,
      minRefetchIntervalMs: opts.minRefetchIntervalMs ?? 1000,
      fetchText: observed(fetchTextOf(opts), opts.onFetch),
      now: this.now,
      log: this.log,
    };
  }

  /** Takes the rules that apply to this workload (all its RequestAuthentications, concatenated). */
  setRules(rules: readonly JwtRule[]): void {
    const remotes = new Map<string, RemoteKeys>();
    const inlines = new Map<string, InlineKeys>();
    const timeouts = new Map<RemoteKeys, number>();
    const states = rules.map((rule): RuleState => ({ rule, keys: this.keySourceFor(rule, remotes, inlines, timeouts) }));
    // A key set several rules name is fetched once, with the longest time-out any of them gives; a
    // new one at once, one kept from before on its own schedule (its back-off included).
    const kept = new Set(this.remotes.values());
    for (const [remote, ms] of timeouts) {
      remote.setFetchTimeout(ms);
      if (!kept.has(remote)) remote.start();
    }
    for (const [url, source] of this.remotes) if (!remotes.has(url)) source.close();
    this.remotes = remotes;
    this.inlines = inlines;
    const outputHeaders = new Set<string>();
    for (const rule of rules) {
      if (rule.outputPayloadToHeader !== undefined && rule.outputPayloadToHeader !== '') outputHeaders.add(rule.outputPayloadToHeader.toLowerCase());
      for (const o of rule.outputClaimToHeaders) outputHeaders.add(o.header.toLowerCase());
    }
    this.plan = {
      rules: states,
      tokens: planLocations(rules),
      issuers: new Set(rules.map((r) => r.issuer)),
      outputHeaders: [...outputHeaders],
    };
    // Results name their rule; verifications under way finish against the old plan and are not cached.
    this.cache.clear();
    this.pending.clear();
  }

  authenticate(req: AuthnRequest): AuthnResult | Promise<AuthnResult> {
    const plan = this.plan;
    if (plan.rules.length === 0) return ABSENT;
    let found: FoundToken[];
    try {
      found = findTokens(plan.tokens, req.headers, req.url);
    } catch (e) {
      // Fail closed: a token that could not be looked for must not pass as no token.
      return this.unexpected(e, plan.tokens.locations[0]!.location);
    }
    if (found.length === 0) return ABSENT;
    return this.checkAll(plan, found, 0, undefined);
  }

  /** Tokens `from` on, in order: the first invalid one answers; all valid: the first one's result. */
  private checkAll(plan: Plan, found: readonly FoundToken[], from: number, first: ValidToken | undefined): Outcome {
    for (let i = from; i < found.length; i++) {
      const outcome = this.checkOne(plan, found[i]!);
      if (outcome instanceof Promise) {
        return outcome.then((r) => (r.outcome === 'invalid' ? r : this.checkAll(plan, found, i + 1, first ?? r)));
      }
      if (outcome.outcome === 'invalid') return outcome;
      first ??= outcome;
    }
    return withOtherLocations(first!, found);
  }

  /** One token: the cache, a verification under way, or the checks. */
  private checkOne(plan: Plan, found: FoundToken): Outcome {
    const location = found.at.location;
    try {
      const hit = this.cache.get(found.token, this.now())?.find((c) => c.result.location === location);
      if (hit !== undefined && hit.source.current === hit.keys) {
        this.counters.cacheHits += 1;
        return hit.result;
      }
      this.counters.cacheMisses += 1;
      const pending = this.pending.get(found.token);
      if (pending !== undefined && pending.location === location) return pending.result;
      const outcome = this.check(plan, found);
      if (!(outcome instanceof Promise)) return outcome;
      const settled = outcome.catch((e: unknown) => this.unexpected(e, location));
      this.track(found, settled);
      return settled;
    } catch (e) {
      return this.unexpected(e, location);
    }
  }

  /** Not expected: every check returns its failure. A bug must neither let a token through nor throw. */
  private unexpected(e: unknown, location: TokenLocation): InvalidToken {
    this.log('error', `JWT check failed unexpectedly: ${(e as Error).stack ?? String(e)}`);
    return invalid({ reason: 'malformed', message: 'JWT could not be checked' }, location);
  }

  /**
   * Edits of the forwarded request. For a valid token: every location that carried a token removed
   * (unless the rule forwards it), then the payload and claim headers written. Whatever the outcome,
   * a client's own copy of a header some rule writes is removed: only this filter may assert it.
   */
  upstreamEdits(result: AuthnResult, req: { readonly url: string; readonly headers?: RequestHeaders }): UpstreamEdits {
    let url = req.url;
    const removeHeaders: string[] = [];
    const setHeaders: [string, string][] = [];
    if (result.outcome === 'valid') {
      const { rule } = result;
      if (!rule.forwardOriginalToken) {
        let cookie = req.headers?.cookie;
        let cookieEdited = false;
        for (const location of tokenLocations(result)) {
          if (location.kind === 'header') {
            if (!removeHeaders.includes(location.name)) removeHeaders.push(location.name);
          } else if (location.kind === 'param') {
            url = urlWithoutParam(url, location.name);
          } else {
            cookie = cookieWithout(cookie, location.name);
            cookieEdited = true;
          }
        }
        if (cookieEdited) {
          if (cookie === undefined) removeHeaders.push('cookie');
          else setHeaders.push(['cookie', typeof cookie === 'string' ? cookie : cookie.join('; ')]);
        }
      }
      if (rule.outputPayloadToHeader !== undefined && rule.outputPayloadToHeader !== '') {
        setHeaders.push([rule.outputPayloadToHeader.toLowerCase(), payloadSegment(result.token)]);
      }
      for (const { header, claim } of rule.outputClaimToHeaders) {
        const value = claimHeaderValue(claimAt(result.claims, claim));
        if (value !== undefined) setHeaders.push([header.toLowerCase(), value]);
      }
    }
    // Headers a rule writes are this filter's word about the token: a client's own copy is dropped
    // (a set header replaces every line of that name; the others are removed).
    for (const name of this.plan.outputHeaders) {
      if (!removeHeaders.includes(name) && !setHeaders.some(([n]) => n === name)) removeHeaders.push(name);
    }
    return { removeHeaders, setHeaders, url };
  }

  keyStatus(): KeyStatus[] {
    return [...this.remotes.values()].map((r) => r.status());
  }

  /** Counters for stats and tests. */
  stats(): AuthnStats {
    return { ...this.counters, cacheSize: this.cache.size };
  }

  close(): void {
    for (const source of this.remotes.values()) source.close();
    this.remotes.clear();
    this.cache.clear();
    this.pending.clear();
    this.plan = EMPTY_PLAN;
  }

  private keySourceFor(rule: JwtRule, remotes: Map<string, RemoteKeys>, inlines: Map<string, InlineKeys>, timeouts: Map<RemoteKeys, number>): KeySource {
    if (rule.jwks !== undefined && rule.jwks !== '') {
      let inline = inlines.get(rule.jwks) ?? this.inlines.get(rule.jwks);
      if (inline === undefined) {
        inline = new InlineKeys(rule.jwks);
        if (inline.error !== undefined) this.log('error', `RequestAuthentication issuer ${rule.issuer}: ${inline.whyNoKeys()}; its tokens are refused`);
        else if (inline.skipped.length > 0) this.log('warn', `RequestAuthentication issuer ${rule.issuer}: inline jwks keys left out: ${inline.skipped.join('; ')}`);
      }
      inlines.set(rule.jwks, inline);
      return inline;
    }
    let url: string | undefined;
    let discovery = false;
    if (rule.jwksUri !== undefined && rule.jwksUri !== '') {
      if (!isHttpUrl(rule.jwksUri)) {
        const why = `jwksUri ${JSON.stringify(rule.jwksUri)} is not an http(s) URL`;
        this.log('error', `RequestAuthentication issuer ${rule.issuer}: ${why}; its tokens are refused`);
        return new MissingKeys(why);
      }
      url = rule.jwksUri;
    } else {
      url = discoveryUrl(rule.issuer);
      discovery = true;
      if (url === undefined) {
        const why = `the rule has neither jwksUri nor jwks, and issuer ${JSON.stringify(rule.issuer)} is not an http(s) URL to discover keys from`;
        this.log('error', `RequestAuthentication issuer ${rule.issuer}: ${why}; its tokens are refused`);
        return new MissingKeys(why);
      }
    }
    const key = discovery ? `discovery ${url}` : url;
    const remote = remotes.get(key) ?? this.remotes.get(key) ?? new RemoteKeys(url, this.remoteOptions, discovery);
    remotes.set(key, remote);
    // The rule's `timeout` (Istio's: the JWKS fetch's; default 5 s); started by setRules once every rule is seen.
    const timeout = Math.min(rule.timeoutMs ?? this.remoteOptions.fetchTimeoutMs, MAX_TIMER_MS);
    timeouts.set(remote, Math.max(timeouts.get(remote) ?? 0, timeout));
    return remote;
  }

  private track(found: FoundToken, result: Promise<Checked>): void {
    const entry = { location: found.at.location, result };
    this.pending.set(found.token, entry);
    void result.finally(() => {
      if (this.pending.get(found.token) === entry) this.pending.delete(found.token);
    });
  }

  /** The cheap checks, then the rules for the token's issuer that read where it was found. */
  private check(plan: Plan, found: FoundToken): Outcome {
    const location = found.at.location;
    const d = decodeToken(found.token);
    if (!isDecoded(d)) return invalid(d, location);
    if (d.iss === undefined) return invalid({ reason: 'unknown_issuer', message: 'JWT has no "iss" claim' }, location);
    const candidates = found.at.rules.map((i) => plan.rules[i]!).filter((s) => s.rule.issuer === d.iss);
    if (candidates.length === 0) {
      const message = plan.issuers.has(d.iss)
        ? `JWT issuer ${JSON.stringify(d.iss)} is not accepted in ${describeLocation(location)}`
        : `JWT issuer ${JSON.stringify(d.iss)} is not configured`;
      return invalid({ reason: 'unknown_issuer', message }, location, d.iss);
    }
    const time = checkTime(d, this.now());
    if (time !== undefined) return invalid(time, location, d.iss);
    return this.tryRules(plan, found, d, candidates, 0, undefined);
  }

  /** Several rules may name one issuer (several RequestAuthentications): the first that accepts wins. */
  private tryRules(plan: Plan, found: FoundToken, d: DecodedToken, rules: readonly RuleState[], from: number, first: InvalidToken | undefined): Outcome {
    for (let i = from; i < rules.length; i++) {
      const outcome = this.attempt(plan, found, d, rules[i]!);
      if (outcome instanceof Promise) {
        return outcome.then((r) => (r.outcome === 'invalid' ? this.tryRules(plan, found, d, rules, i + 1, first ?? r) : r));
      }
      if (outcome.outcome !== 'invalid') return outcome;
      first ??= outcome;
    }
    return first!;
  }

  private attempt(plan: Plan, found: FoundToken, d: DecodedToken, state: RuleState): Outcome {
    const audience = checkAudience(d, state.rule.audiences);
    if (audience !== undefined) return invalid(audience, found.at.location, d.iss);
    if (state.keys.current === undefined) {
      // Never fetched: join the fetch under way (startup) or start one, unless one just failed.
      const fetching = state.keys.refetch();
      if (fetching !== undefined) return fetching.then(() => this.withKeys(plan, found, d, state, false));
    }
    return this.withKeys(plan, found, d, state, true);
  }

  private withKeys(plan: Plan, found: FoundToken, d: DecodedToken, state: RuleState, mayRefetch: boolean): Outcome {
    const keys = state.keys.current;
    if (keys === undefined) {
      return invalid({ reason: 'no_keys', message: `no keys to verify JWTs of issuer ${JSON.stringify(d.iss)}: ${state.keys.whyNoKeys()}` }, found.at.location, d.iss);
    }
    if (mayRefetch && d.kid !== undefined && !keys.hasKid(d.kid)) {
      // A kid the set does not have: the issuer may have rotated its keys.
      const fetching = state.keys.refetch();
      if (fetching !== undefined) return fetching.then(() => this.withKeys(plan, found, d, state, false));
    }
    const selection = keys.select(d.alg, d.kid);
    if (!selection.ok) {
      const message = selection.reason === 'unknown_kid' ? `${selection.message}, from ${state.keys.describe()}` : selection.message;
      return invalid({ reason: selection.reason, message }, found.at.location, d.iss);
    }
    return this.verified(plan, found, d, state, keys, selection.keys);
  }

  private async verified(plan: Plan, found: FoundToken, d: DecodedToken, state: RuleState, keys: KeySet, candidates: readonly KeyEntry[]): Promise<Checked> {
    const failure = await verifySignature(found.token, d.alg, candidates, this.countVerification);
    if (failure !== undefined) return invalid(failure, found.at.location, d.iss);
    const issuer = d.iss!;
    const subject = d.sub ?? '';
    const result: ValidToken = {
      outcome: 'valid',
      issuer,
      subject,
      principal: `${issuer}/${subject}`,
      audiences: Object.freeze([...d.audiences]),
      ...(d.azp === undefined ? {} : { presenter: d.azp }),
      claims: deepFreeze(d.payload),
      rule: state.rule,
      location: found.at.location,
      token: found.token,
    };
    Object.freeze(result);
    if (plan === this.plan) {
      // One entry per token, holding its verification at each location (a client may send one token twice).
      const now = this.now();
      const others = this.cache.get(found.token, now)?.filter((c) => c.result.location !== result.location) ?? [];
      this.cache.set(found.token, [...others, { result, source: state.keys, keys }], d.exp === undefined ? Infinity : d.exp * 1000, now);
    }
    return result;
  }
}

/** Where the tokens of a valid result were: its own location, then the others. */
function tokenLocations(result: ValidToken): readonly TokenLocation[] {
  return result.alsoFoundAt === undefined ? [result.location] : [result.location, ...result.alsoFoundAt];
}

/**
 * The first token's result, naming the other locations that carried a (verified) token, so that
 * upstreamEdits removes them too. The cached result is shared: a new object, only when needed.
 */
function withOtherLocations(first: ValidToken, found: readonly FoundToken[]): ValidToken {
  let others: TokenLocation[] | undefined;
  for (const f of found) {
    const l = f.at.location;
    if (l !== first.location && !others?.includes(l)) (others ??= []).push(l);
  }
  return others === undefined ? first : Object.freeze({ ...first, alsoFoundAt: Object.freeze(others) });
}

/** The client that fetches key sets: the built-in one, or the injected `fetch`; redirects as the options allow. */
function fetchTextOf(opts: JwtAuthenticatorOptions): FetchText {
  const redirects = { followSameSchemeRedirects: opts.followSameSchemeRedirects ?? false };
  return opts.fetch === undefined
    ? nodeFetchText({ insecureSkipVerify: opts.insecureSkipVerify, compliancePolicy: opts.compliancePolicy ?? '', ...redirects })
    : fetchTextWith(opts.fetch, redirects);
}

/** One key set fetch: whether it worked, how long it took, whether the one before it (same URL) failed. */
export interface FetchOutcome {
  readonly ok: boolean;
  readonly ms: number;
  readonly retry: boolean;
}

function observed(fetchText: FetchText, onFetch: ((f: FetchOutcome) => void) | undefined): FetchText {
  if (!onFetch) return fetchText;
  const failed = new Set<string>();
  return async (url, signal) => {
    const started = performance.now();
    const retry = failed.has(url);
    try {
      const text = await fetchText(url, signal);
      failed.delete(url);
      onFetch({ ok: true, ms: performance.now() - started, retry });
      return text;
    } catch (err) {
      failed.add(url);
      onFetch({ ok: false, ms: performance.now() - started, retry });
      throw err;
    }
  };
}
