// The two checks every policed request passes, in Envoy's filter order: the JWT (RequestAuthentication;
// a token present but not verifiable is 401), then AuthorizationPolicy (denied is 403). The gateway
// and the sidecar's inbound listener both use it; only the gateway then routes on the claims.
import type { IncomingMessage } from 'node:http';
import type { AuthorizationPolicy, JwtRule } from '../config/resources/types.js';
import type { LocalReply } from '../proxy/decider.js';
import type { DecisionDraft, DecisionLog } from '../gateway/decisions.js';
import { evaluate, type AuthzDecision } from './authz/evaluate.js';
import type { AuthnResult, JwtAuthenticator } from './jwt/authenticator.js';

/** What the request looks like to policy, beyond its headers. */
export interface RequestContext {
  /** The destination port (the gateway's listener port, the app's port inbound). */
  readonly port: number;
  readonly destinationIp?: string;
  readonly sourceIp?: string;
  /** The original client (a gateway's trusted X-Forwarded-For entry); default: sourceIp. */
  readonly remoteIp?: string;
}

export interface SecurityOutcome {
  readonly authn: AuthnResult;
  readonly authz?: AuthzDecision;
  /** Set when the request is refused (401 or 403). */
  readonly reply?: LocalReply;
}

const DENIED: LocalReply = { kind: 'reply', status: 403, body: 'RBAC: access denied' };
const ABSENT: AuthnResult = { outcome: 'absent' };

function unauthorized(result: Extract<AuthnResult, { outcome: 'invalid' }>, host: string): LocalReply {
  return {
    kind: 'reply', status: 401, body: result.message,
    headers: { 'www-authenticate': `Bearer realm="${host}", error="invalid_token"` },
  };
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

  constructor(readonly authenticator: JwtAuthenticator, private readonly decisions: DecisionLog) {}

  /** Takes the rules and policies that select this workload (every configuration change). */
  configure(rules: readonly JwtRule[], policies: readonly AuthorizationPolicy[]): void {
    this.authenticator.setRules(rules);
    this.hasRules = rules.length > 0;
    this.policies = policies;
  }

  /** Nothing to check: the sidecar's fast path skips this stage entirely. */
  get idle(): boolean {
    return !this.hasRules && this.policies.length === 0;
  }

  /** Header and URL edits for the forwarded request: the token removed unless forwarded, claims to headers. */
  upstreamEdits(authn: AuthnResult, url: string): { setHeaders: [string, string][]; removeHeaders: string[]; path?: string } {
    if (authn.outcome !== 'valid') return { setHeaders: [], removeHeaders: [] };
    // Fresh arrays per call: the caller may add its own edits to them.
    const { setHeaders, removeHeaders, url: edited } = this.authenticator.upstreamEdits(authn, { url });
    return edited !== url ? { setHeaders, removeHeaders, path: edited } : { setHeaders, removeHeaders };
  }

  /** Authenticates then authorizes; synchronous unless keys must be fetched. Fills in `draft`. */
  check(req: IncomingMessage, ctx: RequestContext, draft: DecisionDraft): SecurityOutcome | Promise<SecurityOutcome> {
    const authn = this.hasRules ? this.authenticator.authenticate({ headers: req.headers, url: req.url ?? '/' }) : ABSENT;
    if (authn instanceof Promise) return authn.then((a) => this.authorize(req, ctx, draft, a));
    return this.authorize(req, ctx, draft, authn);
  }

  private authorize(req: IncomingMessage, ctx: RequestContext, draft: DecisionDraft, authn: AuthnResult): SecurityOutcome {
    this.decisions.count('jwt', authn.outcome);
    if (authn.outcome === 'invalid') {
      draft.jwt = `invalid: ${authn.reason}: ${authn.message}`;
      draft.authz = 'not evaluated';
      return { authn, reply: unauthorized(authn, draft.authority) };
    }
    draft.jwt = authn.outcome;
    if (authn.outcome === 'valid') draft.principal = authn.principal;
    if (this.policies.length === 0) {
      draft.authz = 'allowed: no policies';
      this.decisions.count('authz', 'allowed');
      return { authn };
    }
    const valid = authn.outcome === 'valid' ? authn : undefined;
    const authz = evaluate(this.policies, {
      method: req.method ?? 'GET',
      path: pathOnly(req.url ?? '/'),
      host: hostOnly(req.headers.host ?? ''),
      port: ctx.port,
      headers: req.headers,
      ...(valid ? { principal: valid.principal, claims: valid.claims, audiences: [...valid.audiences] } : {}),
      ...(valid?.presenter ? { presenter: valid.presenter } : {}),
      ...(ctx.sourceIp ? { sourceIp: ctx.sourceIp, remoteIp: ctx.remoteIp ?? ctx.sourceIp } : {}),
      ...(ctx.destinationIp ? { destinationIp: ctx.destinationIp } : {}),
    });
    const verdict = authz.allowed ? 'allowed' : 'denied';
    draft.authz = authz.reason.startsWith(verdict) ? authz.reason : `${verdict}: ${authz.reason}`;
    this.decisions.count('authz', authz.allowed ? 'allowed' : 'denied');
    return authz.allowed ? { authn, authz } : { authn, authz, reply: DENIED };
  }
}
