// The two checks every policed request passes, in Envoy's filter order: the JWT (RequestAuthentication;
// a token present but not verifiable is 401), then AuthorizationPolicy (denied is 403). The gateway
// and the sidecar's inbound listener both use it; only the gateway then routes on the claims.
//
// Policy judges the request the backend will get: every header line (header-lines.ts), after the
// JWT filter's edits (token removed, claim headers written, a client's copies of them dropped).
// Connections that are not HTTP get the same policies with Istio's TCP semantics (checkConnection).
import type { IncomingMessage } from 'node:http';
import type { AuthorizationPolicy, JwtRule } from '../config/resources/types.js';
import { detailsWord } from '../log/access-record.js';
import type { LocalReply } from '../proxy/decider.js';
import { authorityOf, RequestView } from '../proxy/request-view.js';
import type { BodySource, HeldBody } from '../proxy/held-body.js';
import type { DecisionDraft, DecisionLog } from '../gateway/decisions.js';
import { plainAddress } from '../gateway/forwarded-for.js';
import { evaluate, evaluateConnection, needsHttp, selectCustom, type AuthzDecision, type AuthzRequest } from './authz/evaluate.js';
import { editedHeader } from './authz/header-values.js';
import type { ExtAuthzProvider } from '../config/ext-authz-providers.js';
import { applyAnswer } from './ext-authz/apply.js';
import type { Authorizers } from './ext-authz/authorizers.js';
import type { CheckInput } from './ext-authz/check.js';
import { requestHeaderLines } from './header-lines.js';
import type { AuthnResult, JwtAuthenticator, RequestHeaders } from './jwt/authenticator.js';

/** A stop function with nothing to stop. */
const NOTHING = (): void => undefined;

/** What the request (or connection) looks like to policy, beyond its headers. */
export interface RequestContext {
  /** The destination port (the gateway's listener port, the app's port inbound). */
  readonly port: number;
  /** The local address the client connected to (the original destination, for a sidecar). */
  readonly destinationIp?: string;
  readonly sourceIp?: string;
  /** The original client (a gateway's trusted X-Forwarded-For entry); default: sourceIp. */
  readonly remoteIp?: string;
  /** The peer's identity over mutual TLS (`cluster.local/ns/default/sa/sleep`) and its namespace. */
  readonly sourcePrincipal?: string;
  readonly sourceNamespace?: string;
  /** The server name of the client's TLS ClientHello (`connection.sni`); absent on plaintext, or when it sent none. */
  readonly sni?: string;
  /** The request's scheme (an external authorizer is told it); default http. */
  readonly scheme?: 'http' | 'https';
}

/** The connection fields of a context (the mTLS peer, the SNI), for an authz request. */
function connectionFields(ctx: RequestContext): { sourcePrincipal?: string; sourceNamespace?: string; sni?: string } {
  const sni = ctx.sni ? { sni: ctx.sni } : {};
  if (ctx.sourcePrincipal === undefined) return sni;
  return { sourcePrincipal: ctx.sourcePrincipal, ...(ctx.sourceNamespace !== undefined ? { sourceNamespace: ctx.sourceNamespace } : {}), ...sni };
}

/** A connection that is not HTTP: its destination port and addresses. */
export type ConnectionContext = RequestContext;

/** Edits of the forwarded request; fresh arrays per request: the caller may add its own to them. */
export interface SecurityEdits {
  /** Lower-case names and values to set (replacing every line of the same name). */
  setHeaders: [string, string][];
  /** Lower-case names of headers to drop (every line). */
  removeHeaders: string[];
  /** The request target to forward, when it changed (a token's query parameter removed). */
  path?: string;
  /** Lines an external authorizer adds to the response to the client. */
  responseHeaders?: readonly (readonly [string, string])[];
  /**
   * The header edits before an external authorizer's, when it made some: the gateway routes on
   * these (Envoy picks the route before ext_authz edits the request and does not pick it again).
   */
  beforeAuthorizer?: { readonly setHeaders: readonly [string, string][]; readonly removeHeaders: readonly string[] };
}

export interface SecurityOutcome {
  readonly authn: AuthnResult;
  readonly authz?: AuthzDecision;
  /** Set when the request is refused (401 or 403). */
  readonly reply?: LocalReply;
  /** What to forward: the edits the policy judged the request with (the same as upstreamEdits). */
  readonly edits: SecurityEdits;
}

const DENIED: LocalReply = { kind: 'reply', status: 403, body: 'RBAC: access denied' };
const ABSENT: AuthnResult = { outcome: 'absent' };
const ALLOWED_NO_POLICIES = 'allowed: no policies';

/**
 * `value` as an RFC 9110 quoted-string: `\` and `"` escaped, characters a quoted-string cannot hold
 * (controls other than HTAB, DEL, anything beyond U+00FF) dropped. The Host header is the client's
 * text: unescaped, a `"` in it would end the realm and let it write its own auth-params.
 */
export function quotedString(value: string): string {
  return `"${value.replace(/[^\t\x20-\x7e\x80-\xff]/g, '').replace(/["\\]/g, '\\$&')}"`;
}

function unauthorized(result: Extract<AuthnResult, { outcome: 'invalid' }>, host: string): LocalReply {
  return {
    kind: 'reply', status: 401, body: result.message,
    headers: { 'www-authenticate': `Bearer realm=${quotedString(host)}, error="invalid_token"` },
  };
}

/**
 * Envoy's RESPONSE_CODE_DETAILS for a denial, naming the policy as Istio names it in Envoy's RBAC
 * config (`ns[NS]-policy[NAME]-rule[N]`), or `none` when no ALLOW policy matched.
 */
export function rbacDeniedDetails(d: AuthzDecision): string {
  if (d.policy === undefined) return 'rbac_access_denied_matched_policy[none]';
  const slash = d.policy.indexOf('/');
  return `rbac_access_denied_matched_policy[ns[${d.policy.slice(0, slash)}]-policy[${d.policy.slice(slash + 1)}]-rule[${d.ruleIndex ?? 0}]]`;
}

/** The path an operation matches: without the query string. */
export function pathOnly(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** The Host header without its port, lower-cased. */
export function hostOnly(authority: string): string {
  const h = authority.startsWith('[') ? authority.slice(0, authority.indexOf(']') + 1) : authority.replace(/:\d+$/, '');
  return h.toLowerCase();
}

/** CUSTOM policies whose requests go to an external authorizer, and that authorizer. */
interface CustomInForce {
  readonly policies: readonly AuthorizationPolicy[];
  readonly provider: ExtAuthzProvider;
}

export class RequestSecurity {
  /** What HTTP requests are evaluated against (CUSTOM policies sent to an authorizer left out). */
  private policies: readonly AuthorizationPolicy[] = [];
  /** What connections not carried as HTTP are evaluated against: every policy in force. */
  private connectionPolicies: readonly AuthorizationPolicy[] = [];
  private custom: CustomInForce | undefined;
  private hasRules = false;
  private sniRead = false;

  /**
   * `authorizers`: the mesh config's external authorizers (none: every CUSTOM policy denies what it
   * selects). `self`: this workload's SPIFFE id, an authorizer's `destination.principal` for requests
   * that came over mesh mTLS.
   */
  constructor(
    readonly authenticator: JwtAuthenticator, private readonly decisions: DecisionLog, private readonly authorizers?: Authorizers,
    private readonly self: () => string | undefined = () => undefined,
  ) {}

  /**
   * Takes the rules and policies that select this workload (every configuration change). AUDIT
   * policies are left out: they have no effect here (no audit provider; said at load), so a
   * workload with only those stays on the path that checks nothing. Answers what an operator must
   * be told: CUSTOM policies whose provider cannot be used (they deny what they select, as Istio's do).
   */
  configure(rules: readonly JwtRule[], policies: readonly AuthorizationPolicy[]): string[] {
    this.authenticator.setRules(rules);
    this.hasRules = rules.length > 0;
    const active = policies.some((p) => p.action === 'AUDIT') ? policies.filter((p) => p.action !== 'AUDIT') : policies;
    const { custom, warnings } = this.customOf(active);
    this.custom = custom;
    this.connectionPolicies = active;
    this.policies = custom ? active.filter((p) => !custom.policies.includes(p)) : active;
    this.sniRead = active.some((p) => p.rules.some((r) => r.when.some((c) => c.key === 'connection.sni')));
    return warnings;
  }

  /**
   * The CUSTOM policies an authorizer can be asked for. Istio's rules: the provider must be one of
   * the mesh config's, and a workload's CUSTOM policies must all name the same one; otherwise they
   * deny what they select.
   */
  private customOf(active: readonly AuthorizationPolicy[]): { custom?: CustomInForce; warnings: string[] } {
    const customs = active.filter((p) => p.action === 'CUSTOM');
    if (customs.length === 0) return { warnings: [] };
    const warnings: string[] = [];
    const names = [...new Set(customs.map((p) => p.provider ?? ''))];
    const id = (p: AuthorizationPolicy): string => `AuthorizationPolicy ${p.meta.namespace}/${p.meta.name}`;
    // Only where a rule can select a connection at all (one needing an HTTP field selects none).
    for (const p of customs.filter((c) => c.rules.some((r) => !needsHttp(r)))) {
      warnings.push(`${id(p)}: CUSTOM applies to HTTP requests; a connection not carried as HTTP that its rules select is denied `
        + '(no authorizer is asked for connections here)');
    }
    if (names.length > 1) {
      for (const p of customs) {
        warnings.push(`${id(p)}: spec.provider.name: this workload's CUSTOM policies name ${names.length} providers (${names.join(', ')}); `
          + 'one provider per workload, as in Istio: the requests they select are denied');
      }
      return { warnings };
    }
    const provider = this.authorizers?.provider(names[0]!);
    if (!provider) {
      for (const p of customs) {
        warnings.push(`${id(p)}: spec.provider.name: ${JSON.stringify(names[0])} is not an envoyExtAuthzHttp or envoyExtAuthzGrpc provider `
          + 'of the mesh config\'s extensionProviders: the requests it selects are denied');
      }
      return { warnings };
    }
    return { custom: { policies: customs, provider }, warnings };
  }

  /** Nothing to check: the sidecar skips this stage entirely (no call per request). */
  get idle(): boolean {
    return !this.hasRules && this.connectionPolicies.length === 0;
  }

  /**
   * Some AuthorizationPolicy is in force: connections that are not HTTP go through checkConnection.
   * False: every connection is allowed without evaluation (RequestAuthentication alone never blocks TCP).
   */
  get hasPolicies(): boolean {
    return this.connectionPolicies.length > 0;
  }

  /** Some policy in force has a `connection.sni` condition: TLS carried as bytes is judged with its ClientHello's server name. */
  get readsSni(): boolean {
    return this.sniRead;
  }

  /**
   * Header and URL edits for the forwarded request, whatever the JWT outcome: the token(s) removed
   * unless forwarded and claims to headers (valid), a client's own copy of a header a rule writes
   * dropped (always). `check` computes the same edits once as `SecurityOutcome.edits`; prefer those.
   * Without `headers`, a cookie that carried a token cannot be cut out: the `cookie` header is removed.
   */
  upstreamEdits(authn: AuthnResult, url: string, headers?: RequestHeaders): SecurityEdits {
    // Fresh arrays per call: the caller may add its own edits to them.
    if (!this.hasRules) return { setHeaders: [], removeHeaders: [] };
    const { setHeaders, removeHeaders, url: edited } = this.authenticator.upstreamEdits(authn, headers === undefined ? { url } : { url, headers });
    return edited !== url ? { setHeaders, removeHeaders, path: edited } : { setHeaders, removeHeaders };
  }

  /**
   * What `check` comes to when idle (no token read, every request allowed), without the work: the
   * draft filled in and counted the same way. For requests recorded although nothing checks them.
   */
  passIdle(draft: DecisionDraft): void {
    this.decisions.count('jwt', ABSENT.outcome);
    draft.jwt = ABSENT.outcome;
    draft.authz = ALLOWED_NO_POLICIES;
    this.decisions.count('authz', 'allowed');
  }

  /** Authenticates then authorizes; synchronous unless keys must be fetched. Fills in `draft`. */
  check(req: IncomingMessage, ctx: RequestContext, draft: DecisionDraft): SecurityOutcome | Promise<SecurityOutcome> {
    const url = req.url ?? '/';
    if (this.idle) return this.authorize(req, req.headers, url, ctx, draft, ABSENT);
    const headers = requestHeaderLines(req);
    const authn = this.hasRules ? this.authenticator.authenticate({ headers, url }) : ABSENT;
    if (authn instanceof Promise) return authn.then((a) => this.authorize(req, headers, url, ctx, draft, a));
    return this.authorize(req, headers, url, ctx, draft, authn);
  }

  /**
   * Authorizes a connection that is not HTTP (Istio's TCP semantics). Pure: nothing is counted here,
   * the caller counts it once the connection is carried or refused (it may still turn out HTTP).
   */
  checkConnection(ctx: ConnectionContext): AuthzDecision {
    if (this.connectionPolicies.length === 0) return { allowed: true, reason: 'no policies' };
    return evaluateConnection(this.connectionPolicies, {
      port: ctx.port,
      ...(ctx.sourceIp ? { sourceIp: ctx.sourceIp } : {}),
      ...(ctx.destinationIp ? { destinationIp: ctx.destinationIp } : {}),
      ...connectionFields(ctx),
    });
  }

  private authorize(
    req: IncomingMessage, headers: RequestHeaders, url: string, ctx: RequestContext, draft: DecisionDraft, authn: AuthnResult,
  ): SecurityOutcome | Promise<SecurityOutcome> {
    this.decisions.count('jwt', authn.outcome);
    const edits = this.upstreamEdits(authn, url, headers);
    if (authn.outcome === 'invalid') {
      draft.jwt = `invalid: ${authn.reason}: ${authn.message}`;
      draft.authz = 'not evaluated';
      draft.flag = 'UAEX';
      draft.details = `jwt_authn_access_denied{${detailsWord(authn.message)}}`;
      return { authn, edits, reply: unauthorized(authn, draft.authority) };
    }
    draft.jwt = authn.outcome;
    if (authn.outcome === 'valid') draft.principal = authn.principal;
    if (this.policies.length === 0 && !this.custom) {
      draft.authz = ALLOWED_NO_POLICIES;
      this.decisions.count('authz', 'allowed');
      return { authn, edits };
    }
    const valid = authn.outcome === 'valid' ? authn : undefined;
    const host = headers.host;
    const authzRequest: AuthzRequest = {
      method: req.method ?? 'GET',
      // With its query: `request.headers[:path]` reads it whole; operations strip it.
      path: url,
      host: hostOnly((typeof host === 'string' ? host : host?.[0]) ?? ''),
      port: ctx.port,
      headers,
      headerEdits: { remove: edits.removeHeaders, set: edits.setHeaders },
      ...(valid ? { principal: valid.principal, claims: valid.claims, audiences: [...valid.audiences] } : {}),
      ...(valid?.presenter ? { presenter: valid.presenter } : {}),
      ...(ctx.sourceIp ? { sourceIp: ctx.sourceIp, remoteIp: ctx.remoteIp ?? ctx.sourceIp } : {}),
      ...(ctx.destinationIp ? { destinationIp: ctx.destinationIp } : {}),
      ...connectionFields(ctx),
    };
    // Istio's order: CUSTOM first; its authorizer's verdict, then DENY and ALLOW on the request as edited.
    const custom = this.custom;
    const hit = custom ? selectCustom(custom.policies, authzRequest) : undefined;
    if (custom && hit) return this.askAuthorizer(req, url, ctx, draft, authn, edits, authzRequest, custom.provider, hit.policy);
    return this.judge(authzRequest, draft, authn, edits, '');
  }

  /** DENY then ALLOW; `prefix` says what CUSTOM decided before, for the decision log. */
  private judge(authzRequest: AuthzRequest, draft: DecisionDraft, authn: AuthnResult, edits: SecurityEdits, prefix: string): SecurityOutcome {
    const authz = evaluate(this.policies, authzRequest);
    const verdict = authz.allowed ? 'allowed' : 'denied';
    draft.authz = prefix + (authz.reason.startsWith(verdict) ? authz.reason : `${verdict}: ${authz.reason}`);
    this.decisions.count('authz', authz.allowed ? 'allowed' : 'denied');
    if (!authz.allowed) {
      draft.flag = 'RBAC';
      draft.details = rbacDeniedDetails(authz);
    }
    return authz.allowed ? { authn, authz, edits } : { authn, authz, edits, reply: DENIED };
  }

  /**
   * Sends the request (as the JWT filter left it) to the CUSTOM policy's authorizer. Refused: its
   * answer goes back to the client. Allowed: its header edits join the request's, and DENY and
   * ALLOW judge the request with them. The check ends when the client's connection closes.
   */
  private askAuthorizer(
    req: IncomingMessage, url: string, ctx: RequestContext, draft: DecisionDraft, authn: AuthnResult, edits: SecurityEdits,
    authzRequest: AuthzRequest, provider: ExtAuthzProvider, policy: AuthorizationPolicy,
  ): Promise<SecurityOutcome> {
    const who = `CUSTOM policy ${policy.meta.namespace}/${policy.meta.name} (provider ${provider.name})`;
    const current = (name: string): readonly string[] | undefined => {
      const v = editedHeader(authzRequest.headers, authzRequest.headerEdits, name);
      return v === undefined ? undefined : typeof v === 'string' ? [v] : v;
    };
    const base = checkInput(req, url, ctx, authzRequest, current, ctx.sourcePrincipal !== undefined ? this.self() : undefined);
    const wanted = provider.body;
    if (wanted === undefined) return this.sendCheck(req, draft, authn, edits, authzRequest, provider, who, base, current);
    // includeRequestBodyInCheck: the body is held (the engine forwards nothing of it yet) and goes with the check.
    const source = req instanceof RequestView ? req.body : undefined;
    if (source === undefined) { // not carried by this proxy's engines (nothing can hold its body): refused, never let through unchecked
      draft.authz = `denied by ${who}: its body cannot be held for the check (includeRequestBodyInCheck)`;
      draft.flag = 'UAEX';
      draft.details = NO_BODY_HOLD.details!;
      this.decisions.count('authz', 'denied');
      return Promise.resolve({ authn, edits, reply: NO_BODY_HOLD });
    }
    return heldBody(source, wanted.maxBytes, wanted.allowPartial, provider.timeoutMs).then((held) => {
      if (held === 'timeout' || held === undefined) {
        draft.authz = `denied by ${who}: ${held === undefined ? 'the request went away before its body came' : `its body did not come within ${provider.timeoutMs}ms`}`;
        draft.details = BODY_TIMED_OUT.details!;
        this.decisions.count('authz', 'denied');
        return { authn, edits, reply: BODY_TIMED_OUT };
      }
      if (held.over && !wanted.allowPartial) {
        draft.authz = `denied by ${who}: the body is longer than maxRequestBytes (${wanted.maxBytes})`;
        draft.details = TOO_LARGE.details!;
        this.decisions.count('authz', 'denied');
        return { authn, edits, reply: TOO_LARGE };
      }
      const input: CheckInput = { ...base, body: { bytes: held.bytes, partial: held.over } };
      return this.sendCheck(req, draft, authn, edits, authzRequest, provider, who, input, current);
    });
  }

  private sendCheck(
    req: IncomingMessage, draft: DecisionDraft, authn: AuthnResult, edits: SecurityEdits, authzRequest: AuthzRequest,
    provider: ExtAuthzProvider, who: string, input: CheckInput, current: (name: string) => readonly string[] | undefined,
  ): Promise<SecurityOutcome> {
    const jwtEdited = new Set([...edits.removeHeaders, ...edits.setHeaders.map(([n]) => n)]);
    // The client going away ends the check: for HTTP/1 its connection closing; for HTTP/2 its stream
    // closing (the streams share one connection; the engine says so per stream).
    const leaving = new AbortController();
    const gone = (): void => leaving.abort();
    const socket = req.socket;
    let stopListening: () => void;
    if (req.httpVersion === '2.0') {
      stopListening = (req as { body?: BodySource }).body?.whenGone?.(gone) ?? NOTHING;
    } else {
      socket.once('close', gone);
      stopListening = () => { socket.removeListener('close', gone); };
    }
    return this.authorizers!.check(provider, input, leaving.signal).then((answer) => {
      stopListening();
      const outcome = applyAnswer(answer, provider, current, jwtEdited);
      // Envoy's ext_authz counters: ok, denied, error, and failure_mode_allowed (an error let through).
      this.decisions.count('ext_authz', answer.kind === 'allow' ? 'ok' : answer.kind === 'deny' ? 'denied' : outcome.allowed ? 'failure_mode_allowed' : 'error');
      if (!outcome.allowed) {
        draft.authz = `denied by ${who}: ${outcome.note}`;
        draft.flag = 'UAEX';
        if (outcome.reply.details !== undefined) draft.details = outcome.reply.details;
        this.decisions.count('authz', 'denied');
        return { authn, edits, reply: outcome.reply };
      }
      if (outcome.set.length > 0 || outcome.remove.length > 0) {
        edits.beforeAuthorizer = { setHeaders: edits.setHeaders, removeHeaders: [...edits.removeHeaders] };
        const touched = new Set([...outcome.set.map(([n]) => n), ...outcome.remove]);
        edits.setHeaders = [...edits.setHeaders.filter(([n]) => !touched.has(n)), ...outcome.set];
        edits.removeHeaders.push(...outcome.remove);
      }
      if (outcome.responseHeaders.length > 0) edits.responseHeaders = outcome.responseHeaders;
      const edited: AuthzRequest = { ...authzRequest, headerEdits: { remove: edits.removeHeaders, set: edits.setHeaders } };
      return this.judge(edited, draft, authn, edits, `${who}: ${outcome.note}; `);
    });
  }
}

/** Envoy's answers when a body held for a check is too long (allowPartialMessage unset), or never comes. */
const TOO_LARGE: LocalReply = { kind: 'reply', status: 413, body: 'Payload Too Large', details: 'request_payload_too_large' };
const BODY_TIMED_OUT: LocalReply = { kind: 'reply', status: 408, body: 'request body not received in time\n', details: 'request_body_timeout' };
const NO_BODY_HOLD: LocalReply = {
  kind: 'reply', status: 403, body: 'the request body cannot be held for its authorization check\n', flag: 'UAEX', details: 'ext_authz_error',
};

/**
 * The request's body, held by the engine until more than `limit` bytes are known or it is whole;
 * 'timeout' when it has not come within `timeoutMs` (a client that stalls mid-body); undefined
 * when the request went away.
 */
function heldBody(source: BodySource, limit: number, partial: boolean, timeoutMs: number): Promise<HeldBody | undefined | 'timeout'> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), timeoutMs);
    source.awaitBody(limit, partial).then((held) => {
      clearTimeout(timer);
      resolve(held);
    }, () => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
}

/** The request as an authorizer is told it: its headers as the JWT filter left them. */
function checkInput(
  req: IncomingMessage, url: string, ctx: RequestContext, r: AuthzRequest, current: (name: string) => readonly string[] | undefined,
  selfId: string | undefined,
): CheckInput {
  const headers = new Map<string, readonly string[]>();
  const names = new Set([...Object.keys(r.headers), ...(r.headerEdits?.set ?? []).map(([n]) => n)]);
  for (const n of names) {
    const lines = current(n);
    if (lines !== undefined) headers.set(n, lines);
  }
  const socket = req.socket;
  return {
    method: req.method ?? 'GET',
    path: url,
    host: authorityOf(req),
    scheme: ctx.scheme ?? 'http',
    protocol: req.httpVersion === '2.0' ? 'HTTP/2' : `HTTP/${req.httpVersion ?? '1.1'}`,
    headers,
    source: {
      address: plainAddress(ctx.sourceIp ?? socket.remoteAddress), port: socket.remotePort ?? 0,
      ...(ctx.sourcePrincipal ? { principal: `spiffe://${ctx.sourcePrincipal}` } : {}),
    },
    destination: { address: plainAddress(ctx.destinationIp ?? socket.localAddress), port: ctx.port, ...(selfId ? { principal: selfId } : {}) },
  };
}
