// The differential test's judgement of one client connection: the bytes the client sent, read by
// the strict reference (strict-http.ts); what the application behind the proxy recorded for that
// connection's markers (test/fixtures/recorder-app.mjs); what the client received back. It holds:
//  (a) every request the app saw is one the client sent, under the strict reading, in order, once,
//      never a `/smuggled` one, never one a strict server refuses;
//  (b) its method, target (the proxy's path normalization applied), Host and body are the strict
//      reading's;
//  (c) the client's n-th response is the answer to its own n-th request: an app response belongs
//      to this connection and to that request (never another client's), and every request the
//      app answered has its answer at the client;
//  (d) a request the proxy answered itself (no app marker) never reached the app.
// After a 101 from the app the rest of the connection is a tunnel: the app must get it as bytes,
// in order, never as requests. Pure.
import { METHODS } from 'node:http';
import type { CorpusCase } from './request-corpus.js';
import { CASE_HEADER, MARKER, SMUGGLED } from './request-corpus.js';
import { readResponses, type ReceivedStream } from './response-stream.js';
import { readStrictly, type StrictReading, type StrictRequest } from './strict-http.js';

/** One line of the recorder's output. */
export interface AppRecord {
  readonly seq: number;
  /** Date.now() when recorded (just before the app answers). */
  readonly at: number;
  /** The app-side TCP connection it came on. */
  readonly conn: number;
  /** 'request': read whole and answered; 'upgrade': switched (101) and echoing; 'aborted': its connection ended mid-request; 'error': node:http refused the bytes. */
  readonly kind: 'request' | 'upgrade' | 'aborted' | 'error';
  readonly method?: string;
  readonly url?: string;
  /** rawHeaders: name, value, ... */
  readonly headers?: readonly string[];
  /** base64 */
  readonly body?: string;
  /** 'error': llhttp's code, the bytes it was parsing (base64), how far it got, and whether the 400 carrying `seq` went out. */
  readonly code?: string;
  readonly raw?: string;
  readonly parsed?: number;
  readonly responded?: boolean;
}

export interface ClientOutcome {
  readonly id: string;
  readonly received: Buffer;
  /** How the client stopped reading. */
  readonly end: 'close' | 'quiet' | 'timeout' | 'error';
  /** Date.now() when it stopped reading. */
  readonly endedAt: number;
  readonly error?: string;
}

export type FindingKind =
  | 'smuggled' | 'not-sent' | 'twice' | 'refusable-forwarded' | 'method' | 'target' | 'host' | 'body' | 'cut-short'
  | 'app-parse-error' | 'cross-case' | 'unknown-response' | 'response-order' | 'refused-but-seen' | 'proxy-success'
  | 'lost-response' | 'tunnel' | 'switch-without-upgrade' | 'unreadable-response' | 'unattributed';

export interface Finding {
  readonly caseId: string;
  readonly kind: FindingKind;
  readonly detail: string;
}

/** What one case amounted to, for the summary. */
export interface CaseTally {
  readonly read: number;
  readonly seen: number;
  readonly refusedByProxy: number;
  readonly switched: boolean;
}

const KNOWN_METHODS = new Set(METHODS);
/**
 * A client that stopped reading by itself (a quiet time, its time-out) may have stopped before an
 * answer could arrive: an answer counts as lost only when the app gave it this long before.
 */
const LOST_AFTER_MS = 250;

/**
 * The case each record belongs to, by seq: by its marker, else by the client that received the
 * app's answer to it (x-recorder-seq): node:http refusing bytes it got from a TCP relay, in pieces
 * without a marker; or a request whose marker a mutation moved out of its path (`http:///d/c1/0`
 * with a `/` deleted is `http://d/c1/0`: authority `d`, path `/c1/0`).
 */
export function attribute(records: readonly AppRecord[], outcomes: Iterable<ClientOutcome>): Map<number, string | undefined> {
  const receivedBy = new Map<number, string>();
  for (const o of outcomes) {
    for (const r of readResponses(o.received).responses) {
      const seq = r.headers.get('x-recorder-seq')?.[0];
      if (seq !== undefined) receivedBy.set(Number(seq), o.id);
    }
  }
  return new Map(records.map((rec) => [rec.seq, caseOf(rec) ?? receivedBy.get(rec.seq)]));
}

/** The case id a record's marker names, or undefined. */
export function caseOf(rec: AppRecord): string | undefined {
  if (rec.kind === 'error') return errorMarker(rec)?.[0];
  const m = MARKER.exec(rec.url ?? '') ?? undefined;
  if (m) return m[2];
  const s = SMUGGLED.exec(rec.url ?? '');
  if (s) return s[1];
  return caseHeader(rec.headers ?? [])?.split('/')[0];
}

/** A request's identity within its connection: `n:<n>` from its marker (or `x-case`), or `smuggled`. */
function keyOf(url: string, caseHeaderValue: string | undefined): string | undefined {
  const m = MARKER.exec(url);
  if (m) return `n:${m[3]}`;
  if (SMUGGLED.test(url)) return 'smuggled';
  const n = caseHeaderValue?.split('/')[1];
  return n === undefined ? undefined : `n:${n}`;
}

/** The `x-case` value of flat raw headers (name, value, ...). */
function caseHeader(raw: readonly string[]): string | undefined {
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === CASE_HEADER) return raw[i + 1];
  return undefined;
}

/** The marker of the request llhttp was reading when it failed: the last one before where it stopped. */
function errorMarker(rec: AppRecord): [caseId: string, key: string] | undefined {
  const raw = Buffer.from(rec.raw ?? '', 'base64').toString('latin1');
  const upTo = raw.slice(0, Math.max(rec.parsed ?? raw.length, raw.indexOf('\n') + 1));
  let found: [string, string] | undefined;
  for (const m of upTo.matchAll(new RegExp(`${MARKER.source}|${SMUGGLED.source}`, 'g'))) {
    found = m[2] !== undefined ? [m[2], `n:${m[3]}`] : [m[4]!, 'smuggled'];
  }
  return found;
}

const requestKey = (r: StrictRequest): string | undefined => keyOf(r.url ?? r.target, caseHeader(r.headers.flat()));
const recordKey = (rec: AppRecord): string | undefined =>
  (rec.kind === 'error' ? errorMarker(rec)?.[1] : keyOf(rec.url ?? '', caseHeader(rec.headers ?? [])));
const show = (b: Buffer): string => JSON.stringify(b.toString('latin1'));
const describe = (rec: AppRecord): string =>
  `${rec.kind === 'error' ? `bytes node:http refused (${rec.code})` : `${rec.method} ${rec.url}`} (app seq ${rec.seq}, conn ${rec.conn})`;
const named = (r: StrictRequest | undefined): string => (r ? `${r.method} ${r.target}` : 'no request of the strict reading');

function hostsOf(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'host') out.push(raw[i + 1]!);
  return out;
}

/** One connection judged: the reading of its bytes, what came back, and the findings so far. */
class Judgement {
  readonly findings: Finding[] = [];
  readonly reading: StrictReading;
  readonly stream: ReceivedStream;
  /** The requests that are requests: after a 101, the rest of the bytes are the tunnel's. */
  readonly requests: readonly StrictRequest[];
  readonly keys: readonly (string | undefined)[];
  /** The request reading stopped in (its head read, then a framing error, or the bytes ended). */
  readonly partialKey: string | undefined;
  readonly switchAt: number;
  /** Request index → the app's record of it. */
  readonly seenAt = new Map<number, AppRecord>();
  /** Records of the request reading stopped in: the client never sent it whole, no answer is owed. */
  readonly unfinished = new Set<number>();
  /** App seqs the client got an answer for. */
  readonly answered = new Set<number>();
  refusedByProxy = 0;

  constructor(readonly c: CorpusCase, readonly outcome: ClientOutcome) {
    this.reading = readStrictly(c.bytes);
    this.stream = readResponses(outcome.received, (i) => this.reading.requests[i]?.method === 'HEAD');
    this.switchAt = this.stream.responses.findIndex((r) => r.status === 101);
    this.requests = this.switchAt >= 0 ? this.reading.requests.slice(0, this.switchAt + 1) : this.reading.requests;
    this.keys = this.requests.map(requestKey);
    const p = this.reading.partial;
    // A target without the case's marker (`*`, an authority) is known by its x-case header, once read.
    this.partialKey = p ? keyOf(p.url ?? p.target, p.headers ? caseHeader(p.headers.flat()) : undefined) : undefined;
  }

  fail(kind: FindingKind, detail: string): void {
    this.findings.push({ caseId: this.c.id, kind, detail });
  }

  /** (a), (b): each app record against the strict reading, in the order the app made them. */
  records(records: readonly AppRecord[]): void {
    let last = -1;
    for (const rec of records) {
      if (rec.kind === 'error') {
        this.appRefused(rec);
        continue;
      }
      const key = recordKey(rec);
      const j = this.keys.findIndex((k, i) => k === key && i > last);
      if (j >= 0) {
        last = j;
        this.seenAt.set(j, rec);
        this.compare(this.requests[j]!, rec);
      } else if (key !== undefined && key === this.partialKey) {
        this.unfinished.add(rec.seq);
        this.partial(rec);
      } else {
        this.notRead(rec, key);
      }
    }
  }

  /** node:http refused bytes: its own limit (a method it does not know), or bytes no strict reader reads either. */
  private appRefused(rec: AppRecord): void {
    const { requests, reading } = this;
    const unknownMethod = [...requests, ...(reading.partial ? [reading.partial] : [])].some((r) => !KNOWN_METHODS.has(r.method));
    if (!unknownMethod && reading.stop !== 'error') {
      this.fail('app-parse-error', `node:http could not parse what it got (${rec.code}) though the client's bytes read strictly: `
        + `${show(Buffer.from(rec.raw ?? '', 'base64'))}`);
    }
  }

  /** A request the strict reading holds: the app's copy must be it. */
  private compare(r: StrictRequest, rec: AppRecord): void {
    const what = named(r);
    if (rec.kind === 'aborted') this.fail('cut-short', `${what}: the client sent it whole, the app's copy was cut short (${describe(rec)})`);
    if (r.problems.length > 0) this.fail('refusable-forwarded', `${what}: a strict server refuses it (${r.problems.join('; ')}), yet the app got ${describe(rec)}`);
    if (rec.method !== r.method) this.fail('method', `${what} reached the app as method ${rec.method}`);
    if (r.url !== undefined && rec.url !== r.url) this.fail('target', `${what}: the app saw target ${JSON.stringify(rec.url)}, expected ${JSON.stringify(r.url)}`);
    const hosts = hostsOf(rec.headers ?? []);
    if (r.authority !== undefined && (hosts.length !== 1 || hosts[0] !== r.authority)) {
      this.fail('host', `${what}: the app saw Host ${JSON.stringify(hosts)}, expected ${JSON.stringify(r.authority)}`);
    }
    const body = Buffer.from(rec.body ?? '', 'base64');
    if (rec.kind !== 'aborted' && !body.equals(r.body)) this.fail('body', `${what}: the app saw body ${show(body)}, the client sent ${show(r.body)}`);
  }

  /**
   * The request the client's bytes end in, or whose body turns out malformed: the proxy sends a
   * head on as soon as it has it (bodies stream) and cuts the request when it sees the rest, so the
   * app may have seen a head the proxy judged, never a complete request.
   */
  private partial(rec: AppRecord): void {
    const p = this.reading.partial!;
    if (rec.kind === 'upgrade' && this.reading.stop === 'incomplete') {
      this.fail('body', `the app switched protocols at the head of ${describe(rec)}, whose body was still to come: it reads that body as the new protocol's bytes`);
    } else if (rec.kind !== 'aborted') {
      this.fail('refusable-forwarded', `the app got ${describe(rec)} whole; a strict reader refuses it: ${this.reading.reason}`);
    } else if (rec.method !== p.method || rec.url !== p.url) {
      this.fail('target', `the unfinished request ${p.method} ${p.target} reached the app as ${describe(rec)}`);
    }
  }

  /** A record of no request of the strict reading: seen twice, hidden in a body, or never sent. */
  private notRead(rec: AppRecord, key: string | undefined): void {
    const earlier = this.keys.findIndex((k) => k === key);
    if (earlier >= 0 && this.seenAt.has(earlier)) {
      this.fail('twice', `the app saw ${describe(rec)} again (first as seq ${this.seenAt.get(earlier)!.seq})`);
    } else if (key === 'smuggled') {
      this.fail('smuggled', `the app saw ${describe(rec)}, a request inside another one's body`);
    } else {
      this.fail('not-sent', `the app saw ${describe(rec)}, which the strict reading of the client's bytes does not hold`
        + `${earlier >= 0 ? ' at that place' : ''}${this.reading.stop === 'error' ? ` (reading stops: ${this.reading.reason})` : ''}`);
    }
  }

  /** (c), (d): the n-th response answers the n-th request; the proxy's own answers went to requests the app never saw. */
  responses(bySeq: ReadonlyMap<number, { caseId: string | undefined; rec: AppRecord }>): void {
    const { stream, requests, keys } = this;
    if (stream.unreadable) this.fail('unreadable-response', `${stream.unreadable} (after ${stream.responses.length} responses)`);
    stream.responses.forEach((resp, i) => {
      const seqText = resp.headers.get('x-recorder-seq')?.[0];
      if (seqText === undefined) {
        this.refusedByProxy++;
        if (resp.status < 400) this.fail('proxy-success', `response ${i} (${resp.status}) is not the app's and not an error`);
        const seen = this.seenAt.get(i);
        if (seen) this.fail('refused-but-seen', `the proxy answered ${named(requests[i])} itself (${resp.status}), yet the app saw it as ${describe(seen)}`);
        return;
      }
      const seq = Number(seqText);
      this.answered.add(seq);
      const owner = bySeq.get(seq);
      const key = owner && recordKey(owner.rec);
      if (!owner) {
        this.fail('unknown-response', `response ${i} carries app seq ${seq}, which the app never recorded`);
      } else if (owner.caseId !== this.c.id) {
        this.fail('cross-case', `response ${i} is the app's answer to case ${owner.caseId}'s ${describe(owner.rec)}`);
      } else if (owner.rec.kind !== 'error' && key !== keys[i] && !(i === keys.length && key === this.partialKey)) {
        this.fail('response-order', `response ${i} answers ${describe(owner.rec)}, not ${named(requests[i])}`);
      }
    });
  }

  /** (c): every request the app answered has its answer at the client (unless the client stopped reading first). */
  lostAnswers(records: readonly AppRecord[]): void {
    const { outcome } = this;
    for (const rec of records) {
      // node:http's own 400 for bytes it could not parse may be cut by the proxy: not owed.
      const owed = (rec.kind === 'request' || rec.kind === 'upgrade') && !this.unfinished.has(rec.seq);
      const gaveUpEarly = outcome.end !== 'close' && outcome.endedAt - rec.at < LOST_AFTER_MS;
      if (owed && !this.answered.has(rec.seq) && !gaveUpEarly) {
        this.fail('lost-response', `the app answered ${describe(rec)}; the client never got it (client: ${outcome.end}${outcome.error ? ` ${outcome.error}` : ''})`);
      }
    }
  }

  /** After a 101: the request asked for it, and the tunnel carried the client's later bytes as they were. */
  tunnel(): void {
    if (this.switchAt < 0) return;
    const r = this.requests[this.switchAt];
    if (!r?.upgrade) {
      this.fail('switch-without-upgrade', `a 101 answered ${named(r)}, which asked for no switch`);
      return;
    }
    const rest = this.c.bytes.subarray(r.end);
    const echoed = this.stream.tunnel ?? Buffer.alloc(0);
    if (!rest.subarray(0, echoed.length).equals(echoed)) this.fail('tunnel', `the tunnel echoed ${show(echoed)}, the client sent ${show(rest)} after the upgrade`);
  }
}

/**
 * Judges one connection. `records`: the app's records of this case, in the order the app made
 * them; `bySeq`: every record of the batch with its case (a response may carry another's).
 */
export function judge(c: CorpusCase, records: readonly AppRecord[], outcome: ClientOutcome,
  bySeq: ReadonlyMap<number, { caseId: string | undefined; rec: AppRecord }>): { findings: Finding[]; tally: CaseTally } {
  const j = new Judgement(c, outcome);
  j.records(records);
  j.responses(bySeq);
  j.lostAnswers(records);
  j.tunnel();
  return { findings: j.findings, tally: { read: j.requests.length, seen: j.seenAt.size, refusedByProxy: j.refusedByProxy, switched: j.switchAt >= 0 } };
}

/** The generator's intent against the reference reader, for a generated case: the differences (none: they agree). */
export function referenceDisagreements(c: CorpusCase): string[] {
  const intended = c.intended;
  if (!intended) return [];
  const out: string[] = [];
  const reading = readStrictly(c.bytes);
  const readable = intended.filter((r) => r.fate !== 'stop');
  if (reading.requests.length !== readable.length) {
    out.push(`reads ${reading.requests.length} requests, the generator meant ${readable.length} (stop: ${reading.stop} ${reading.reason ?? ''})`);
    return out;
  }
  readable.forEach((want, i) => {
    const got = reading.requests[i]!;
    if (got.method !== want.method || got.target !== want.target) out.push(`[${i}] reads ${got.method} ${got.target}, meant ${want.method} ${want.target}`);
    if (!got.body.equals(want.body)) out.push(`[${i}] reads body ${show(got.body)}, meant ${show(want.body)}`);
    if ((got.problems.length > 0) !== (want.fate === 'refused')) out.push(`[${i}] problems ${JSON.stringify(got.problems)}, meant ${want.fate}`);
  });
  const lastOne = intended[intended.length - 1]!;
  const stop = lastOne.fate === 'stop' ? 'error' : lastOne.closes ? 'close' : 'end';
  if (reading.stop !== stop) out.push(`stops with ${reading.stop} (${reading.reason ?? ''}), meant ${stop}`);
  return out;
}
