// An authorizer's answer (or its failure) made into what the proxy does (pure): the edits of an
// allowed request, or the reply to a refused one. Names the proxy owns are never edited by an
// authorizer: Host, framing and connection headers, x-forwarded-client-cert, x-forwarded-for and
// -proto (the gateway writes them), x-envoy-*, and every
// header the JWT filter wrote or removed (claim headers, the token), so that what the other
// policies and the application see of them is what the proxy asserts.
import type { LocalReply } from '../../proxy/decider.js';
import type { CheckAnswer, UpstreamHeaderEdit } from './check.js';

const OWNED = new Set(['host', 'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade',
  'content-length', 'expect', 'x-forwarded-client-cert', 'x-forwarded-for', 'x-forwarded-proto']);

export function ownedByProxy(lowerName: string, jwtEdited: ReadonlySet<string>): boolean {
  return OWNED.has(lowerName) || lowerName.startsWith(':') || lowerName.startsWith('x-envoy-') || jwtEdited.has(lowerName)
    // A name with `_` reaches a server mapping `_` to `-` as the owned name (CGI style).
    || (lowerName.includes('_') && ownedByProxy(lowerName.replace(/_/g, '-'), jwtEdited));
}

export interface FailurePolicy {
  readonly failOpen: boolean;
  readonly statusOnError: number;
}

export type CheckOutcome =
  | {
    readonly allowed: true;
    /** Header lines to set (every line of a name given; replaces the request's), lower-case. */
    readonly set: readonly [string, string][];
    readonly remove: readonly string[];
    readonly responseHeaders: readonly [string, string][];
    /** For the decision log. */
    readonly note: string;
  }
  | { readonly allowed: false; readonly reply: LocalReply; readonly note: string };

/** Response lines an authorizer may not add (framing, connection). */
const RESPONSE_OWNED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length']);

/**
 * `current(name)` gives the request's lines of a header as policy reads them now (after the JWT
 * filter's edits). Appends become a set of every line, so that the later policies judge the lines
 * the application will get.
 */
export function applyAnswer(
  answer: CheckAnswer, failure: FailurePolicy, current: (name: string) => readonly string[] | undefined, jwtEdited: ReadonlySet<string>,
): CheckOutcome {
  switch (answer.kind) {
    case 'error':
      if (failure.failOpen) return { allowed: true, set: [], remove: [], responseHeaders: [], note: `check failed (${answer.reason}); allowed: failOpen` };
      return {
        allowed: false, note: `check failed (${answer.reason}); denied with ${failure.statusOnError}`,
        reply: { kind: 'reply', status: failure.statusOnError, body: '', flag: 'UAEX', details: 'ext_authz_error' },
      };
    case 'deny': {
      const headers: Record<string, string> = {};
      for (const [n, v] of answer.headers) {
        if (RESPONSE_OWNED.has(n)) continue;
        headers[n] = Object.hasOwn(headers, n) ? `${headers[n]}, ${v}` : v;
      }
      return {
        allowed: false, note: `denied by the authorizer with ${answer.status}`,
        reply: { kind: 'reply', status: answer.status, body: answer.body, headers, flag: 'UAEX', details: 'ext_authz_denied' },
      };
    }
    case 'allow': {
      const lines = new Map<string, string[] | null>(); // null: removed
      const now = (name: string): readonly string[] | undefined => {
        const edited = lines.get(name);
        return edited === null ? undefined : edited ?? current(name);
      };
      for (const n of answer.remove) if (!ownedByProxy(n, jwtEdited)) lines.set(n, null);
      for (const e of answer.upstream) apply(e, now, lines, jwtEdited);
      const set: [string, string][] = [];
      const remove: string[] = [];
      for (const [n, v] of lines) {
        if (v === null) remove.push(n);
        else for (const line of v) set.push([n, line]);
      }
      const responseHeaders = answer.downstream.filter(([n]) => !RESPONSE_OWNED.has(n)) as [string, string][];
      return { allowed: true, set, remove, responseHeaders, note: 'allowed by the authorizer' };
    }
  }
}

function apply(e: UpstreamHeaderEdit, now: (name: string) => readonly string[] | undefined, lines: Map<string, string[] | null>, jwtEdited: ReadonlySet<string>): void {
  if (ownedByProxy(e.name, jwtEdited) || /[\r\n\0]/.test(e.value)) return;
  const existing = now(e.name);
  switch (e.action) {
    case 'set': lines.set(e.name, [e.value]); break;
    case 'append': lines.set(e.name, [...(existing ?? []), e.value]); break;
    case 'if-absent': if (existing === undefined) lines.set(e.name, [e.value]); break;
    case 'if-present': if (existing !== undefined) lines.set(e.name, [e.value]); break;
  }
}
