// Why each request got the answer it got: the JWT outcome, the policy outcome and the route, kept
// for the last few hundred requests (`pilot-agent request GET /debug/decisions`) and counted by
// outcome (metrics, /stats), and handed back to the proxy engine, which puts it in the request's
// access log line. Shared by the gateway and the sidecar's inbound policy checks.
import { RequestFacts } from './decision-facts.js';
import type { IncomingMessage } from 'node:http';
import type { DecisionNote, ResponseFlagName } from '../log/access-record.js';
import type { ConnectionFacts } from '../proxy/decider.js';

export type DecisionStage = 'jwt' | 'ext_authz' | 'authz' | 'route';

/** A decision as kept and shown; as a DecisionNote it also carries the route name, flag and details for the access log. */
export interface Decision extends DecisionNote {
  /** ISO time the request arrived. */
  readonly time: string;
  /** The listener: `gateway_8080`, `inbound`. */
  readonly listener: string;
  readonly method: string;
  readonly authority: string;
  readonly path: string;
  /** `absent`, `valid`, or `invalid: <reason>`. */
  readonly jwt: string;
  /** `iss/sub` of a valid token. */
  readonly principal?: string;
  /** `allowed: ...` or `denied: ...`, with the policy that decided. */
  readonly authz: string;
  /** Which rule matched, or why none did (gateway only). */
  readonly route?: string;
  /** `host:port` the request went to. */
  readonly upstream?: string;
  /** Traffic management: the cluster the request was routed to (`outbound|80|v1|reviews...`). */
  readonly cluster?: string;
  /** Traffic management: each attempt (endpoint, how it ended) and each retry decision with its reason. */
  readonly attempts?: readonly string[];
  /** The peer of a connection decided as TCP. */
  readonly source?: string;
  /** The peer's principal over mutual TLS (`cluster.local/ns/a/sa/sleep`). */
  readonly peer?: string;
  /** Istio's label: `mutual_tls` when the request came over mesh mTLS, `none` otherwise (inbound only). */
  readonly connectionSecurityPolicy?: 'mutual_tls' | 'none';
  /** Undefined: the client left before an answer. */
  readonly status?: number;
  readonly durationMs: number;
}

/** A decision being made: filled in as the request passes each stage. */
export interface DecisionDraft {
  time: string;
  status?: number;
  durationMs?: number;
  listener: string;
  method: string;
  authority: string;
  path: string;
  jwt: string;
  principal?: string;
  authz: string;
  route?: string;
  routeName?: string;
  flag?: ResponseFlagName;
  details?: string;
  upstream?: string;
  peer?: string;
  connectionSecurityPolicy?: 'mutual_tls' | 'none';
}

export const DECISION_LOG_SIZE = 500;

/**
 * The draft rides on the request itself: a WeakMap (or Map) entry per request kept requests and
 * drafts alive past the young generation — full GCs and a 5–7 ms p99 under load (bench-gateway).
 * The proxy's requests (RequestView) declare the field; a symbol added per request made every
 * access a megamorphic one.
 */
type WithDraft = { decisionDraft?: DecisionDraft | undefined };

/** The ISO time of now, formatted at most once per millisecond. */
let clockMs = 0;
let clockIso = '';
function isoNow(): string {
  return isoAt(Date.now());
}

/** `ms` (since the epoch) as ISO text, formatted once per millisecond (every request records one). */
export function isoAt(ms: number): string {
  const whole = Math.floor(ms);
  if (whole !== clockMs) {
    clockMs = whole;
    clockIso = new Date(whole).toISOString();
  }
  return clockIso;
}

/**
 * A place in the ring: every field of a Decision present (undefined when a decision has none), so
 * that one object, made once and long-lived, takes decision after decision. Keeping the decisions
 * themselves kept every request's draft alive past the young generation, hundreds per second into
 * the old one: the collector's work, and page faults as the old generation grew and shrank.
 * What is new with every request (its method, authority and path, its times) is not kept in it
 * but copied out of the heap (RequestFacts): a string or number made for one request and held by
 * the ring for the next 500 outlives two young collections and is moved to the old generation
 * (measured on the traffic path: ~100 B per request promoted, the old generation growing by 4 MB/s,
 * each young collection taking twice as long as without the record).
 */
type DecisionField = Exclude<keyof Decision, 'method' | 'authority' | 'path' | 'durationMs'>;
type DecisionSlot = { [K in DecisionField]: DecisionRecord[K] | undefined };

/**
 * A decision as recorded: its time may be ms since the epoch, formatted only when read. The
 * outbound path records one per request with a start time that differs from one request to the
 * next: formatting it there cost a toISOString per request.
 */
export type DecisionRecord = Omit<Decision, 'time'> & { readonly time: string | number };

function emptySlot(): DecisionSlot {
  return {
    time: '', listener: '', jwt: '', principal: undefined, authz: '', route: undefined,
    routeName: undefined, flag: undefined, details: undefined, upstream: undefined, cluster: undefined, attempts: undefined, source: undefined, peer: undefined,
    connectionSecurityPolicy: undefined, status: undefined,
  };
}

/** Copies `d` into `slot`, every field (a field `d` lacks is cleared: the slot held another decision); a time in ms goes to `facts`. */
function fill(slot: DecisionSlot, d: DecisionRecord): void {
  // A time in ms is the request's own (a new number each time): kept with the facts, not here.
  slot.time = typeof d.time === 'number' ? undefined : d.time;
  slot.listener = d.listener;
  slot.jwt = d.jwt;
  slot.principal = d.principal;
  slot.authz = d.authz;
  slot.route = d.route;
  slot.routeName = d.routeName;
  slot.flag = d.flag;
  slot.details = d.details;
  slot.upstream = d.upstream;
  slot.cluster = d.cluster;
  slot.attempts = d.attempts;
  slot.source = d.source;
  slot.peer = d.peer;
  slot.connectionSecurityPolicy = d.connectionSecurityPolicy;
  slot.status = d.status;
}

/** The decision at `at`, as a Decision of its own (the fields it has, no undefined ones), in Decision's field order. */
function copyOut(slot: DecisionSlot, facts: RequestFacts, at: number): Decision {
  const time = slot.time ?? isoAt(facts.timeMs(at));
  const d: Record<string, unknown> = { time, listener: slot.listener, ...facts.texts(at) };
  for (const [k, v] of Object.entries(slot)) if (v !== undefined && d[k] === undefined) d[k] = v;
  d['durationMs'] = facts.durationMs(at);
  return d as unknown as Decision;
}

/** A ring of the last decisions plus counts by stage and outcome. */
export class DecisionLog {
  private readonly ring: (DecisionSlot | undefined)[];
  private readonly facts: RequestFacts;
  private next = 0;
  /** `stage` → `outcome` → count. Outcomes are short words: absent/valid/invalid, allowed/denied, routed/no_route... */
  readonly counts = new Map<DecisionStage, Map<string, number>>();

  constructor(readonly capacity = DECISION_LOG_SIZE) {
    this.ring = new Array<DecisionSlot | undefined>(capacity);
    this.facts = new RequestFacts(capacity);
  }

  count(stage: DecisionStage, outcome: string): void {
    let byOutcome = this.counts.get(stage);
    if (!byOutcome) this.counts.set(stage, (byOutcome = new Map()));
    byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
  }

  /** Starts the decision of a request, as it arrives on `listener`. */
  begin(req: IncomingMessage, listener: string): DecisionDraft {
    const draft: DecisionDraft = {
      time: isoNow(), listener, method: req.method ?? 'GET',
      authority: req.headers.host ?? '', path: req.url ?? '/', jwt: 'absent', authz: '',
    };
    (req as WithDraft).decisionDraft = draft;
    return draft;
  }

  /** Replaces the policy outcome of the decision begun for `req`: a later check denied it (`details`: Envoy's RBAC details). */
  annotate(req: IncomingMessage, authz: string, details: string): void {
    const draft = (req as WithDraft).decisionDraft;
    if (!draft) return;
    draft.authz = authz;
    draft.flag = 'RBAC';
    draft.details = details;
  }

  /**
   * Records the decision on a connection carried (or refused) as opaque bytes: method `TCP`, the
   * destination as authority and upstream, no status (nothing HTTP was answered).
   */
  connection(listener: string, facts: ConnectionFacts, authz: string, denied?: { details?: string | undefined }): Decision {
    const destination = facts.destination.address.includes(':') ? `[${facts.destination.address}]:${facts.destination.port}` : `${facts.destination.address}:${facts.destination.port}`;
    const decision: Decision = {
      time: isoNow(), listener, method: 'TCP', authority: destination, path: '-', jwt: '-', authz, upstream: destination, durationMs: 0,
      ...(facts.source ? { source: facts.source } : {}),
      ...(facts.peer ? { peer: facts.peer.principal, connectionSecurityPolicy: 'mutual_tls' as const } : {}),
      ...(denied ? { flag: 'RBAC' as const, ...(denied.details ? { details: denied.details } : {}) } : {}),
    };
    this.record(decision);
    return decision;
  }

  /**
   * Records the decision begun for `req` once its answer is complete (status undefined: abandoned)
   * and answers it (for the access log); undefined when no decision was begun for it.
   */
  complete(req: IncomingMessage, status: number | undefined, durationMs: number): Decision | undefined {
    const draft = (req as WithDraft).decisionDraft;
    if (!draft) return undefined;
    (req as WithDraft).decisionDraft = undefined;
    if (status !== undefined) draft.status = status;
    draft.durationMs = durationMs;
    // Complete now: the draft is the decision, the ring keeps a copy (the draft dies young).
    const decision = draft as Decision;
    this.record(decision);
    return decision;
  }

  /** Puts `decision` in the ring, copied: nothing of the object is kept (a caller may fill one object again and again). */
  record(decision: DecisionRecord): void {
    const at = this.next;
    fill(this.ring[at] ??= emptySlot(), decision);
    this.facts.set(at, decision);
    this.next = at + 1 === this.capacity ? 0 : at + 1; // (no division: this is every routed request)
  }

  /** Makes this log the merge of several (every worker's): counts summed, decisions by time. */
  assignMerged(parts: readonly { readonly counts: ReadonlyMap<DecisionStage, ReadonlyMap<string, number>>; readonly decisions: readonly Decision[] }[]): void {
    this.counts.clear();
    this.ring.fill(undefined);
    this.next = 0;
    for (const part of parts) {
      for (const [stage, byOutcome] of part.counts) for (const [outcome, n] of byOutcome) {
        let mine = this.counts.get(stage);
        if (!mine) this.counts.set(stage, (mine = new Map()));
        mine.set(outcome, (mine.get(outcome) ?? 0) + n);
      }
    }
    const all = parts.flatMap((p) => p.decisions).sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
    for (const d of all.slice(-this.capacity)) this.record(d);
  }

  /** Oldest first, at most `limit` of the newest. */
  recent(limit = this.capacity): Decision[] {
    const out: Decision[] = [];
    for (let i = 0; i < this.capacity; i++) {
      const at = (this.next + i) % this.capacity;
      const slot = this.ring[at];
      if (slot) out.push(copyOut(slot, this.facts, at));
    }
    return out.slice(Math.max(0, out.length - limit));
  }
}
