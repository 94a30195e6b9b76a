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
import type { DecisionDraft, DecisionLog } from '../gateway/decisions.js';
import { evaluate, evaluateConnection, type AuthzDecision } from './authz/evaluate.js';
import { requestHeaderLines } from './header-lines.js';
import type { AuthnResult, JwtAuthenticator, RequestHeaders } from './jwt/authenticator.js';

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

export class RequestSecurity {
  private policies: readonly AuthorizationPolicy[] = [];
  private hasRules = false;
  private sniRead = false;

  constructor(readonly authenticator: JwtAuthenticator, private readonly decisions: DecisionLog) {}

  /**
   * Takes the rules and policies that select this workload (every configuration change). AUDIT
   * policies are left out: they have no effect here (no audit provider; said at load), so a
   * workload with only those stays on the path that checks nothing.
   */
  configure(rules: readonly JwtRule[], policies: readonly AuthorizationPolicy[]): void {
    this.authenticator.setRules(rules);
    this.hasRules = rules.length > 0;
    this.policies = policies.some((p) => p.action === 'AUDIT') ? policies.filter((p) => p.action !== 'AUDIT') : policies;
    this.sniRead = this.policies.some((p) => p.rules.some((r) => r.when.some((c) => c.key === 'connection.sni')));
  }

  /** Nothing to check: the sidecar skips this stage entirely (no call per request). */
  get idle(): boolean {
    return !this.hasRules && this.policies.length === 0;
  }

  /**
   * Some AuthorizationPolicy is in force: connections that are not HTTP go through checkConnection.
   * False: every connection is allowed without evaluation (RequestAuthentication alone never blocks TCP).
   */
  get hasPolicies(): boolean {
    return this.policies.length > 0;
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
    if (this.policies.length === 0) return { allowed: true, reason: 'no policies' };
    return evaluateConnection(this.policies, {
      port: ctx.port,
      ...(ctx.sourceIp ? { sourceIp: ctx.sourceIp } : {}),
      ...(ctx.destinationIp ? { destinationIp: ctx.destinationIp } : {}),
      ...connectionFields(ctx),
    });
  }

  private authorize(
    req: IncomingMessage, headers: RequestHeaders, url: string, ctx: RequestContext, draft: DecisionDraft, authn: AuthnResult,
  ): SecurityOutcome {
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
    if (this.policies.length === 0) {
      draft.authz = ALLOWED_NO_POLICIES;
      this.decisions.count('authz', 'allowed');
      return { authn, edits };
    }
    const valid = authn.outcome === 'valid' ? authn : undefined;
    const host = headers.host;
    const authz = evaluate(this.policies, {
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
    });
    const verdict = authz.allowed ? 'allowed' : 'denied';
    draft.authz = authz.reason.startsWith(verdict) ? authz.reason : `${verdict}: ${authz.reason}`;
    this.decisions.count('authz', authz.allowed ? 'allowed' : 'denied');
    if (!authz.allowed) {
      draft.flag = 'RBAC';
      draft.details = rbacDeniedDetails(authz);
    }
    return authz.allowed ? { authn, authz, edits } : { authn, authz, edits, reply: DENIED };
  }
}
