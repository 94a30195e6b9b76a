// What routing decides for a request, and how a matched rule turns into a decision: one builder for
// both tables (the gateway's and the sidecar's). Most decisions depend only on the rule and match
// entry, so a table builds them once and hands out the same frozen object; only rewrites and
// redirects, which carry the request's path, are built per request. Pure.
import type { CorsPolicy, HeaderOperations, HttpFault, HttpMirror, HttpRetry, HttpRoute, HttpRouteDestination } from '../config/resources/types.js';
import { redirectLocation, rewritePath } from './destination.js';
import { matchedPrefixLength, type CompiledMatch } from './match.js';
import type { RequestView } from './request.js';

/** Which rule decided. */
export interface RuleRef {
  /** `ns/name` of the Gateway; `mesh` for the sidecar's routes. */
  readonly gateway: string;
  /** `ns/name` of the VirtualService. */
  readonly virtualService: string;
  readonly ruleIndex: number;
  readonly ruleName?: string;
  /** Position of the matching entry in the rule's `match` list; absent for a rule without one. */
  readonly matchIndex?: number;
  readonly matchName?: string;
  /** The rule's fault injection (Envoy's fault filter runs before any action: route, redirect or direct answer). */
  readonly fault?: HttpFault;
}

/** Send the request on: to one of `destinations` (pickDestination), with the rule's edits. */
export type ForwardDecision = RuleRef & {
  readonly kind: 'route';
  /** Choose one with pickDestination. Empty: the rule has nowhere to send the request. */
  readonly destinations: readonly HttpRouteDestination[];
  /** The request target and Host to forward with, when the rule rewrites them. */
  readonly rewrite?: { readonly path?: string; readonly authority?: string };
  readonly requestHeaders?: HeaderOperations;
  /** The rule's response header edits (a destination's own come with it: `destinations[].headers`). */
  readonly responseHeaders?: HeaderOperations;
  readonly timeoutMs?: number;
  /** The rule's `retries` as written; absent: Istio's default policy (the caller's to fill in). */
  readonly retries?: HttpRetry;
  /** The rule's mirrors as written (each request copied with its percentage: the caller draws per request). */
  readonly mirrors?: readonly HttpMirror[];
  /** The rule's CORS policy (applyCors in cors.ts); absent: the request is not looked at for CORS. */
  readonly cors?: CorsPolicy;
  readonly reason: string;
};

/** What a matched rule decides: forward, answer directly, or redirect. The same shape for both tables. */
export type RuleDecision =
  | ForwardDecision
  | (RuleRef & { readonly kind: 'direct'; readonly status: number; readonly body?: string; readonly reason: string })
  | (RuleRef & { readonly kind: 'redirect'; readonly location: string; readonly status: number; readonly reason: string });

/**
 * A virtual host was found for the request but none of its rules matched: Envoy answers 404 with
 * response flag NR and details `route_not_found` (NO_ROUTE_REPLY).
 */
export interface NoRouteDecision {
  readonly kind: 'no-route';
  /** `ns/name` of the VirtualServices whose rules were tried, in order. */
  readonly virtualServices: readonly string[];
  readonly reason: string;
}

/** Envoy's answer to a request no route matched. */
export const NO_ROUTE_REPLY = Object.freeze({ status: 404, flag: 'NR', details: 'route_not_found' } as const);

/** The gateway's answers (route()). */
export type RouteDecision =
  | RuleDecision
  /** A server's tls.httpsRedirect: a redirect no rule made. */
  | (Partial<RuleRef> & { readonly kind: 'redirect'; readonly location: string; readonly status: number; readonly reason: string })
  /** No server or virtual host for this host on this port: 404. */
  | { readonly kind: 'no-host'; readonly reason: string }
  /** The host is served but no rule matched: 404. */
  | NoRouteDecision;

/** The rule a decision comes from, as a table compiled it. */
export interface RuleSource {
  /** `ns/name` of the VirtualService. */
  readonly virtualService: string;
  /** `ns/name` of the Gateway whose server brought the rule in; `mesh` for the sidecar. */
  readonly gateway: string;
  /** Position in the VirtualService's `http` list. */
  readonly ruleIndex: number;
  readonly route: HttpRoute;
}

/** Istio's route name: the rule's `name`, with its match entry's `name` after a dot; undefined when neither is named. */
export function routeName(ruleName: string | undefined, matchName: string | undefined): string | undefined {
  if (ruleName === undefined) return matchName;
  return matchName === undefined ? ruleName : `${ruleName}.${matchName}`;
}

function describe(rule: RuleSource, m: CompiledMatch | undefined): string {
  const name = rule.route.name !== undefined ? ` "${rule.route.name}"` : '';
  return `vs ${rule.virtualService} rule ${rule.ruleIndex}${name}${m ? ` (match ${m.index})` : ''}`;
}

/** The decision when it does not depend on the request (no rewrite, no redirect), else undefined. */
export function fixedDecision(rule: RuleSource, m: CompiledMatch | undefined): RuleDecision | undefined {
  const r = rule.route;
  if (r.redirect || (r.rewrite && (r.rewrite.uri !== undefined || r.rewrite.authority !== undefined || r.rewrite.uriRegex !== undefined))) return undefined;
  return Object.freeze(decide(rule, m, undefined));
}

/** The decision for a matched rule; `view` is needed only for rewrites and redirects. */
export function decide(rule: RuleSource, m: CompiledMatch | undefined, view: RequestView | undefined): RuleDecision {
  const r = rule.route;
  const ref: RuleRef = {
    gateway: rule.gateway, virtualService: rule.virtualService, ruleIndex: rule.ruleIndex,
    ...(r.name !== undefined ? { ruleName: r.name } : {}),
    ...(m ? { matchIndex: m.index } : {}),
    ...(m?.name !== undefined ? { matchName: m.name } : {}),
    ...(r.fault !== undefined ? { fault: r.fault } : {}),
  };
  const why = describe(rule, m);
  if (r.redirect && view) {
    return { ...ref, kind: 'redirect', status: r.redirect.redirectCode, location: redirectLocation(r.redirect, view), reason: `${why}: redirect` };
  }
  if (r.directResponse) {
    return { ...ref, kind: 'direct', status: r.directResponse.status, ...(r.directResponse.body !== undefined ? { body: r.directResponse.body } : {}), reason: `${why}: direct response` };
  }
  let rewrite: { path?: string; authority?: string } | undefined;
  if (view && r.rewrite && (r.rewrite.uri !== undefined || r.rewrite.authority !== undefined || r.rewrite.uriRegex !== undefined)) {
    rewrite = {};
    if (r.rewrite.uri !== undefined) rewrite.path = rewritePath(view.path, view.query, r.rewrite.uri, matchedPrefixLength(m));
    // Envoy's regex_rewrite: every match in the path, the query kept as it was.
    else if (r.rewrite.uriRegex !== undefined) rewrite.path = view.path.replace(r.rewrite.uriRegex.regex, r.rewrite.uriRegex.substitution) + view.query;
    if (r.rewrite.authority !== undefined) rewrite.authority = r.rewrite.authority;
  }
  return {
    ...ref, kind: 'route', destinations: r.route,
    ...(rewrite ? { rewrite } : {}),
    ...(r.requestHeaders ? { requestHeaders: r.requestHeaders } : {}),
    ...(r.responseHeaders ? { responseHeaders: r.responseHeaders } : {}),
    ...(r.timeoutMs !== undefined ? { timeoutMs: r.timeoutMs } : {}),
    ...(r.retries !== undefined ? { retries: r.retries } : {}),
    ...(r.mirrors !== undefined ? { mirrors: r.mirrors } : {}),
    ...(r.corsPolicy !== undefined ? { cors: r.corsPolicy } : {}),
    reason: why,
  };
}

