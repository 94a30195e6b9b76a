// Where verification keys come from: an inline `jwks`, or a key set fetched from `jwksUri` (or,
// for a rule with neither, found by OpenID discovery under the issuer, as Istio does).
//
// A remote key set is fetched as soon as a rule names it (never awaited: startup does not wait),
// refreshed every PILOT_JWT_PUB_KEY_REFRESH_INTERVAL on an unref'd timer, and refetched at once
// when a token names a `kid` the set does not have (a rotation). On-demand refetches are coalesced
// and at most one starts per `minRefetchIntervalMs`, so a flood of made-up kids cannot turn into a
// flood of fetches. A failed fetch keeps the keys already held and is logged once per failing
// streak; without keys, fetching is retried with back-off and tokens of the issuer are refused.
// A redirect is such a failure, as Envoy follows none (MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS allows
// a few that keep the scheme): see redirectTarget.
import { onSharedKeySet, shareKeySet } from './key-share.js';
import * as http from 'node:http';
// node:https (and node:tls) are loaded by the first https:// fetch.
import type * as https from 'node:https';
import { KeySet } from './key-set.js';
import { compliantTls } from '../compliance.js';

export type Log = (level: 'info' | 'warn' | 'error', msg: string) => void;

/** Fetches a document as text; rejects on a transport error, a non-200 status, a redirect it may not follow or the signal. */
export type FetchText = (url: string, signal: AbortSignal) => Promise<string>;

/** A key set as the verifier sees it. */
export interface KeySource {
  /** The keys held now; undefined when there are none (never fetched, or an inline set that does not parse). */
  readonly current: KeySet | undefined;
  /** Starts a fetch (or joins the running one); undefined when none will run now (inline, or rate-limited). */
  refetch(): Promise<void> | undefined;
  /** For messages: `jwksUri https://...` or `the inline jwks`. */
  describe(): string;
  /** For no_keys messages: why there are no keys. */
  whyNoKeys(): string;
}

/** An inline `jwks`, parsed once. */
export class InlineKeys implements KeySource {
  readonly current: KeySet | undefined;
  readonly error: string | undefined;
  readonly skipped: readonly string[];

  constructor(readonly text: string) {
    const parsed = KeySet.parse(text);
    this.current = parsed.ok ? parsed.set : undefined;
    this.error = parsed.ok ? undefined : parsed.message;
    this.skipped = parsed.ok ? parsed.skipped : [];
  }

  refetch(): undefined {
    return undefined;
  }

  describe(): string {
    return 'the inline jwks';
  }

  whyNoKeys(): string {
    return `the inline jwks is not usable: ${this.error ?? 'no keys'}`;
  }
}

/** A rule whose keys cannot be had at all (a jwksUri that is not an http(s) URL...). */
export class MissingKeys implements KeySource {
  readonly current = undefined;

  constructor(private readonly why: string) {}

  refetch(): undefined {
    return undefined;
  }

  describe(): string {
    return 'no key source';
  }

  whyNoKeys(): string {
    return this.why;
  }
}

export interface RemoteKeysOptions {
  readonly refreshIntervalMs: number;
  /** A fetch's time-out until setFetchTimeout says otherwise (the rules' `timeout`). */
  readonly fetchTimeoutMs: number;
  readonly minRefetchIntervalMs: number;
  readonly fetchText: FetchText;
  /** ms since the epoch (injectable: tests move it). */
  readonly now: () => number;
  readonly log: Log;
}

/** First retry after a failure; doubles per failure up to RETRY_MAX_MS (or the refresh interval, if shorter). */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 60_000;
/** setTimeout's largest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** When to fetch next: the refresh interval after a success, back-off after `failures` failures in a row. */
export function nextFetchDelayMs(failures: number, refreshIntervalMs: number): number {
  const interval = Math.min(Math.max(1, refreshIntervalMs), MAX_TIMER_MS);
  if (failures === 0) return interval;
  return Math.min(RETRY_FIRST_MS * 2 ** Math.min(failures - 1, 20), RETRY_MAX_MS, interval);
}

export interface KeyStatus {
  readonly jwksUri: string;
  readonly keys: number;
  readonly lastFetch?: string;
  readonly lastError?: string;
}

/** A key set fetched from a URL (or found by OpenID discovery), kept fresh in the background. */
export class RemoteKeys implements KeySource {
  current: KeySet | undefined;
  private lastFetchMs: number | undefined;
  private lastError: string | undefined;
  /** The jwks_uri a discovery document named, once known. */
  private resolvedUri: string | undefined;
  private inFlight: Promise<void> | undefined;
  private lastAttemptMs = -Infinity;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private fetchTimeoutMs: number;
  private readonly closing = new AbortController();
  private readonly unsubscribe: () => void;

  /** `discovery`: `url` is an OpenID configuration document whose `jwks_uri` names the key set. */
  constructor(readonly url: string, private readonly opts: RemoteKeysOptions, readonly discovery = false) {
    this.fetchTimeoutMs = opts.fetchTimeoutMs;
    this.unsubscribe = onSharedKeySet((shared) => {
      if (shared.url === this.url) this.adopt(shared.text);
    });
  }

  /** A key set another worker thread fetched from the same URL. */
  private adopt(text: string): void {
    if (this.closing.signal.aborted || this.current?.source === text) return;
    const parsed = KeySet.parse(text);
    if (!parsed.ok) return;
    this.current = parsed.set;
    this.failures = 0;
    this.lastError = undefined;
    this.lastFetchMs = this.opts.now();
  }

  /** The time-out of the fetches from now on (a fetch under way keeps its own). */
  setFetchTimeout(ms: number): void {
    this.fetchTimeoutMs = ms;
  }

  /** The eager first fetch; not awaited by anyone. */
  start(): void {
    if (this.current === undefined && this.inFlight === undefined) void this.fetchNow();
  }

  refetch(): Promise<void> | undefined {
    if (this.inFlight !== undefined) return this.inFlight;
    if (this.closing.signal.aborted) return undefined;
    if (this.opts.now() - this.lastAttemptMs < this.opts.minRefetchIntervalMs) return undefined;
    return this.fetchNow();
  }

  describe(): string {
    return this.discovery ? `jwks_uri ${this.resolvedUri ?? '(unknown)'} from ${this.url}` : `jwksUri ${this.url}`;
  }

  whyNoKeys(): string {
    return `the key set at ${this.resolvedUri ?? this.url} has not been fetched${this.lastError === undefined ? ' yet' : `: ${this.lastError}`}`;
  }

  status(): KeyStatus {
    return {
      jwksUri: this.resolvedUri ?? this.url,
      keys: this.current?.keys.length ?? 0,
      ...(this.lastFetchMs === undefined ? {} : { lastFetch: new Date(this.lastFetchMs).toISOString() }),
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
    };
  }

  /** Stops the timer and any running fetch. */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.closing.abort();
    this.unsubscribe();
  }

  private fetchNow(): Promise<void> {
    this.lastAttemptMs = this.opts.now();
    clearTimeout(this.timer);
    this.timer = undefined;
    const timeoutMs = this.fetchTimeoutMs;
    const run = this.load(timeoutMs).then(
      (set) => this.succeeded(set),
      (e: unknown) => this.failed(e, timeoutMs),
    ).catch((e: unknown) => {
      // Not expected (the handlers only log and assign); the promise must not reject for its waiters.
      this.opts.log('error', `JWKS ${this.url}: ${(e as Error).stack ?? String(e)}`);
    }).finally(() => {
      this.inFlight = undefined;
      this.schedule();
    });
    this.inFlight = run;
    return run;
  }

  private async load(timeoutMs: number): Promise<KeySet> {
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), this.closing.signal]);
    let uri = this.url;
    if (this.discovery) {
      uri = jwksUriOf(await this.opts.fetchText(this.url, signal), this.url);
      this.resolvedUri = uri;
    }
    const text = await this.opts.fetchText(uri, signal);
    // The same document again: keep the same set, so tokens verified with it stay cached.
    if (this.current !== undefined && this.current.source === text) return this.current;
    const parsed = KeySet.parse(text);
    if (!parsed.ok) throw new Error(`${uri} does not hold a usable JWKS: ${parsed.message}`);
    if (parsed.skipped.length > 0) this.opts.log('warn', `JWKS ${uri}: keys left out: ${parsed.skipped.join('; ')}`);
    return parsed.set;
  }

  private succeeded(set: KeySet): void {
    if (this.closing.signal.aborted) return;
    const where = this.resolvedUri ?? this.url;
    if (this.failures > 0 && this.current !== undefined) this.opts.log('info', `JWKS ${where} fetched again after ${this.failures} failure(s)`);
    if (set !== this.current) {
      this.opts.log('info', `JWKS ${where}: ${this.current === undefined ? 'fetched' : 'changed'}, ${set.keys.length} key(s)`);
      shareKeySet(this.url, set.source);
    }
    this.current = set;
    this.failures = 0;
    this.lastError = undefined;
    this.lastFetchMs = this.opts.now();
  }

  private failed(e: unknown, timeoutMs: number): void {
    if (this.closing.signal.aborted) return;
    const message = errorText(e, timeoutMs);
    this.failures += 1;
    this.lastError = message;
    // Once per failing streak: a JWKS server that stays down must not fill the log.
    if (this.failures === 1) {
      const consequence = this.current === undefined
        ? 'tokens of this issuer are refused (no keys) until a fetch succeeds; retrying in the background'
        : `keeping the ${this.current.keys.length} key(s) fetched before`;
      this.opts.log(this.current === undefined ? 'error' : 'warn', `JWKS fetch from ${this.resolvedUri ?? this.url} failed: ${message}; ${consequence}`);
    }
  }

  private schedule(): void {
    if (this.closing.signal.aborted) return;
    const delay = nextFetchDelayMs(this.failures, this.opts.refreshIntervalMs);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.inFlight === undefined) void this.fetchNow();
    }, delay);
    this.timer.unref();
  }
}

function errorText(e: unknown, timeoutMs: number): string {
  if (e instanceof Error && (e.name === 'TimeoutError' || (e.name === 'AbortError' && e.cause instanceof Error && e.cause.name === 'TimeoutError'))) {
    return `no answer within ${timeoutMs} ms`;
  }
  const cause = e instanceof Error && e.cause instanceof Error ? ` (${e.cause.message})` : '';
  return e instanceof Error ? `${e.message}${cause}` : String(e);
}

/** The `jwks_uri` of an OpenID configuration document. */
function jwksUriOf(text: string, from: string): string {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error(`${from} is not JSON`);
  }
  const uri = doc !== null && typeof doc === 'object' ? (doc as { jwks_uri?: unknown }).jwks_uri : undefined;
  if (typeof uri !== 'string' || !isHttpUrl(uri)) throw new Error(`${from} names no http(s) jwks_uri`);
  // As for a redirect: keys fetched over http by way of an https discovery could be anyone's.
  const scheme = new URL(uri).protocol;
  const fromScheme = new URL(from).protocol;
  if (scheme !== fromScheme) throw new Error(`${from} names jwks_uri ${uri} on another scheme (${scheme.slice(0, -1)}, the document came over ${fromScheme.slice(0, -1)}); not followed: it changes the scheme`);
  return uri;
}

export function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** Where Istio looks for an issuer's keys when a rule gives neither jwksUri nor jwks. */
export function discoveryUrl(issuer: string): string | undefined {
  if (!isHttpUrl(issuer)) return undefined;
  return `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
}

/** Largest key set document accepted (a JWKS is a few kB). */
const MAX_DOCUMENT_BYTES = 1 << 20;
/** Most redirects one fetch follows, when same-scheme redirects are allowed at all (the variable's description names it). */
export const MAX_REDIRECTS = 3;
/** The statuses that redirect a GET (fetch's list); any other 3xx is an error status. */
const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

export interface RedirectOptions {
  /**
   * MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS: follow up to MAX_REDIRECTS redirects that keep the
   * scheme. Default false: no redirect is followed, as Envoy's remote JWKS fetch.
   */
  readonly followSameSchemeRedirects?: boolean;
}

/**
 * Where a redirect leads, or why it is not followed (thrown: the fetch fails and the keys held stay).
 * A key set that a redirect can replace is a key set anyone on the way can replace: followed to any
 * host and scheme (https → http), somebody else's keys would sign tokens that pass. So no redirect
 * is followed unless allowed, and then only a few that keep the scheme: https stays https (the new
 * host's certificate is verified like the first), http stays http.
 */
export function redirectTarget(from: URL, status: number, location: string, hops: number, opts: RedirectOptions): URL {
  let to: URL | undefined;
  try {
    to = new URL(location, from);
  } catch {
    to = undefined;
  }
  // The URL as parsed (or the header JSON-quoted): the server's text never reaches the log raw.
  const where = `${from.href} redirected (HTTP ${status}) to ${to?.href ?? JSON.stringify(location)}`;
  if (opts.followSameSchemeRedirects !== true) throw new Error(`${where}; redirects are not followed (MESH_JWKS_FOLLOW_SAME_SCHEME_REDIRECTS is off)`);
  if (to === undefined) throw new Error(`${where}; not followed: not a URL`);
  if (to.protocol !== from.protocol) throw new Error(`${where}; not followed: it changes the scheme`);
  if (hops >= MAX_REDIRECTS) throw new Error(`${where}; not followed: more than ${MAX_REDIRECTS} redirects`);
  return to;
}

/**
 * GET over node:http/https. Node's global fetch has no per-request way to skip certificate
 * verification, which JWKS_RESOLVER_INSECURE_SKIP_VERIFY needs; node:https has `rejectUnauthorized`.
 */
export function nodeFetchText(opts: { readonly insecureSkipVerify: boolean; readonly compliancePolicy?: string } & RedirectOptions): FetchText {
  const get = (u: URL, signal: AbortSignal, hops: number): Promise<string> => new Promise((resolve, reject) => {
    const url = u.href;
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      reject(new Error(`not an http(s) URL: ${url}`));
      return;
    }
    // A fresh connection per fetch (`agent: false`): fetches are minutes apart, and a kept-alive
    // socket the server has since closed would fail the fetch with "socket hang up".
    const options: https.RequestOptions = { signal, agent: false, headers: { accept: 'application/json' } };
    if (u.protocol === 'https:') {
      options.rejectUnauthorized = !opts.insecureSkipVerify;
      // COMPLIANCE_POLICY: the versions, suites and curve of the fetch's TLS (`agent: false`: a context per fetch).
      Object.assign(options, compliantTls(opts.compliancePolicy ?? '', {}));
    }
    const req = (u.protocol === 'https:' ? process.getBuiltinModule('node:https') : http).get(u, options, (res) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (REDIRECT_STATUSES.has(status) && location !== undefined) {
        res.resume();
        try {
          resolve(get(redirectTarget(u, status, location, hops, opts), signal, hops + 1));
        } catch (e) {
          reject(e);
        }
        return;
      }
      if (status !== 200) {
        res.resume();
        reject(new Error(`HTTP ${status} from ${url}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_DOCUMENT_BYTES) req.destroy(new Error(`${url} answered more than ${MAX_DOCUMENT_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
      res.on('close', () => {
        if (!res.complete) reject(new Error(`${url}: connection closed before the end of the answer`));
      });
    });
    req.on('error', reject);
  });
  return async (url, signal) => {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new Error(`not a URL: ${url}`);
    }
    return await get(u, signal, 0);
  };
}

/**
 * An injected `fetch` (tests, or a caller with its own client) as a FetchText. Asked not to follow
 * redirects (`redirect: 'manual'`); the same rule as nodeFetchText decides which are followed.
 */
export function fetchTextWith(f: typeof fetch, opts: RedirectOptions = {}): FetchText {
  return async (url, signal) => {
    let u = new URL(url);
    for (let hops = 0; ; hops += 1) {
      const res = await f(u.href, { signal, redirect: 'manual', headers: { accept: 'application/json' } });
      if (res.status === 200 && !res.redirected) return await res.text();
      await res.body?.cancel().catch(() => undefined);
      // A fetch that followed a redirect anyway (it ignores `redirect: 'manual'`), or one that hides
      // where it leads (a browser's opaque redirect): where the keys would come from is unknown.
      if (res.redirected) throw new Error(`${u.href} was redirected to ${res.url} by a fetch that follows redirects itself; not accepted`);
      if (res.type === 'opaqueredirect') throw new Error(`${u.href} redirected to a place the fetch does not tell; not followed`);
      const location = res.headers.get('location');
      if (!REDIRECT_STATUSES.has(res.status) || location === null) throw new Error(`HTTP ${res.status} from ${u.href}`);
      u = redirectTarget(u, res.status, location, hops, opts);
    }
  };
}
