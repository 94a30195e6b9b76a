// Endpoints found by DNS, as Envoy finds them for Istio's DNS clusters: resolution DNS is Envoy's
// STRICT_DNS (every address of every name is an endpoint), DNS_ROUND_ROBIN its LOGICAL_DNS (only
// the first address of the latest answer, which the engine reads again for each new connection).
// Istio sets respect_dns_ttl, so a name is resolved again when its record's TTL runs out (never
// sooner than a floor; the mesh's dnsRefreshRate when the answer carries no TTL). A failed
// resolution keeps the last answer, says so, and is tried again after the refresh rate. The
// resolver and the timers are passed in, so the whole of it is tested with fakes.
import { isIpAddress } from '../../config/resources/addresses.js';
import type { EndpointSpec } from '../spec.js';
import { endpointAt, MapEndpointSource, type EndpointTemplate } from './endpoint-source.js';

/** One address of an answer; `ttl` in seconds (0: none given). */
export interface ResolvedAddress {
  readonly address: string;
  readonly ttl: number;
}

/** Resolves a name to its addresses; an empty list is an answer ("no such name" included); a rejection is a failure. */
export type DnsResolve = (name: string) => Promise<readonly ResolvedAddress[]>;

/** The timers the source uses (real ones by default; unref'd, so a pending refresh never holds the process). */
export interface DnsTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const REAL_TIMERS: DnsTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Istio's default mesh `dnsRefreshRate`: the refresh when an answer has no TTL, and after a failure. */
export const DEFAULT_DNS_REFRESH_MS = 60_000;
/** Envoy's floor under a record's TTL (`dns_min_refresh_rate`). */
export const DEFAULT_DNS_MIN_REFRESH_MS = 5_000;

/** What one service needs resolved. */
export interface DnsTarget {
  /** The service (`host:port`). */
  readonly key: string;
  /** `all`: every address of every template (STRICT_DNS); `first`: the first address only (LOGICAL_DNS). */
  readonly mode: 'all' | 'first';
  /** The entry's endpoints, or its WorkloadEntries, or its host: addresses that are names get resolved. */
  readonly templates: readonly EndpointTemplate[];
}

export type DnsEvent =
  | { readonly kind: 'resolved'; readonly name: string; readonly addresses: readonly string[]; readonly nextMs: number }
  | { readonly kind: 'failed'; readonly name: string; readonly error: string; readonly kept: readonly string[]; readonly nextMs: number };

export interface DnsSourceOptions {
  readonly resolve: DnsResolve;
  readonly timers?: DnsTimers;
  /** Default 60 s (Istio's dnsRefreshRate). */
  readonly refreshMs?: number;
  /** Default 5 s. */
  readonly minRefreshMs?: number;
  /** After a failure; default: refreshMs (Envoy's, as Istio sets no failure rate). */
  readonly failureRefreshMs?: number;
  /** Every answer and failure, for the logs ("kept the last answer"). */
  readonly log?: (event: DnsEvent) => void;
}

interface NameState {
  /** undefined until the first answer. */
  addresses: readonly string[] | undefined;
  timer: unknown;
}

/** When to ask again after an answer: its lowest TTL, not under the floor; the refresh rate when it has none. */
export function nextRefreshMs(answer: readonly ResolvedAddress[], o: { refreshMs: number; minRefreshMs: number }): number {
  const ttls = answer.map((a) => a.ttl).filter((t) => t > 0);
  if (ttls.length === 0) return o.refreshMs;
  return Math.max(Math.min(...ttls) * 1000, o.minRefreshMs);
}

export class DnsEndpointSource extends MapEndpointSource {
  readonly #resolve: DnsResolve;
  readonly #timers: DnsTimers;
  readonly #refreshMs: number;
  readonly #minRefreshMs: number;
  readonly #failureRefreshMs: number;
  readonly #log: ((event: DnsEvent) => void) | undefined;
  #targets: readonly DnsTarget[] = [];
  readonly #names = new Map<string, NameState>();
  #closed = false;

  constructor(o: DnsSourceOptions) {
    super();
    this.#resolve = o.resolve;
    this.#timers = o.timers ?? REAL_TIMERS;
    this.#refreshMs = o.refreshMs ?? DEFAULT_DNS_REFRESH_MS;
    this.#minRefreshMs = o.minRefreshMs ?? DEFAULT_DNS_MIN_REFRESH_MS;
    this.#failureRefreshMs = o.failureRefreshMs ?? this.#refreshMs;
    this.#log = o.log;
  }

  /** The names being resolved (for /clusters and tests). */
  names(): string[] {
    return [...this.#names.keys()];
  }

  /** The services in force: new names are resolved at once, names no longer used are forgotten. */
  update(targets: readonly DnsTarget[]): void {
    if (this.#closed) return;
    this.#targets = targets;
    const needed = new Set(targets.flatMap((t) => t.templates.filter((e) => !isIpAddress(e.address)).map((e) => e.address)));
    for (const [name, state] of this.#names) {
      if (needed.has(name)) continue;
      this.#timers.clearTimeout(state.timer);
      this.#names.delete(name);
    }
    const fresh = [...needed].filter((n) => !this.#names.has(n));
    for (const name of fresh) this.#names.set(name, { addresses: undefined, timer: undefined });
    this.replaceAll(this.#compute());
    for (const name of fresh) this.#ask(name);
  }

  override close(): void {
    this.#closed = true;
    for (const state of this.#names.values()) this.#timers.clearTimeout(state.timer);
    super.close();
  }

  #compute(): Map<string, readonly EndpointSpec[]> {
    const out = new Map<string, readonly EndpointSpec[]>();
    for (const target of this.#targets) {
      const endpoints: EndpointSpec[] = [];
      for (const t of target.templates) {
        if (isIpAddress(t.address)) {
          endpoints.push(endpointAt(t, t.address));
          continue;
        }
        for (const a of this.#names.get(t.address)?.addresses ?? []) endpoints.push(endpointAt(t, a, `DNS ${t.address} (${t.origin})`));
      }
      out.set(target.key, target.mode === 'first' ? endpoints.slice(0, 1) : endpoints);
    }
    return out;
  }

  #ask(name: string): void {
    const state = this.#names.get(name);
    if (state === undefined || this.#closed) return;
    state.timer = undefined;
    const current = (): boolean => !this.#closed && this.#names.get(name) === state;
    let answer: Promise<readonly ResolvedAddress[]>;
    try {
      answer = this.#resolve(name);
    } catch (err) {
      answer = Promise.reject(err);
    }
    answer.then((records) => {
      if (!current()) return;
      const nextMs = nextRefreshMs(records, { refreshMs: this.#refreshMs, minRefreshMs: this.#minRefreshMs });
      state.addresses = Object.freeze(records.map((r) => r.address));
      this.#log?.({ kind: 'resolved', name, addresses: state.addresses, nextMs });
      state.timer = this.#timers.setTimeout(() => this.#ask(name), nextMs);
      this.replaceAll(this.#compute());
    }, (err: unknown) => {
      if (!current()) return;
      const kept = state.addresses ?? [];
      this.#log?.({ kind: 'failed', name, error: err instanceof Error ? err.message : String(err), kept, nextMs: this.#failureRefreshMs });
      state.timer = this.#timers.setTimeout(() => this.#ask(name), this.#failureRefreshMs);
    });
  }
}
