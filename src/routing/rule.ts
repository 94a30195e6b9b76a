// A VirtualService http rule as a table holds it, and the one loop that tries a virtual host's rules
// against a request: both tables (the gateway's and the sidecar's) compile their rules here and
// route with firstMatchingRule, so matching and decisions cannot drift apart. Pure.
import type { HttpMatchRequest } from '../config/resources/types.js';
import { decide, fixedDecision, type RuleDecision, type RuleSource } from './decision.js';
import { compileMatch, matchRequest, type CompiledMatch } from './match.js';
import type { RequestView } from './request.js';

/** A VirtualService http rule as it applies in one place (a gateway port, a sidecar destination port). */
export interface CompiledRule extends RuleSource {
  /**
   * The match entries that apply there, in order. Undefined: the rule has no match list and matches
   * every request (a rule whose entries all belong elsewhere is left out by compileRule).
   */
  readonly matches: readonly CompiledMatch[] | undefined;
  /**
   * The decision for each entry of `matches` (one for a rule without entries), built once; undefined
   * where it depends on the request (rewrites, redirects).
   */
  readonly decisions: readonly (RuleDecision | undefined)[];
}

/**
 * The rule with the match entries `applies` keeps (build time only), or undefined when the rule has
 * entries and none applies: such a rule is dropped, it does not become a catch-all (Istio's rule).
 */
export function compileRule(source: RuleSource, applies: (m: HttpMatchRequest) => boolean): CompiledRule | undefined {
  const entries = source.route.match;
  if (entries.length === 0) return { ...source, matches: undefined, decisions: [fixedDecision(source, undefined)] };
  const matches: CompiledMatch[] = [];
  entries.forEach((m, i) => {
    if (applies(m)) matches.push(compileMatch(m, i));
  });
  if (matches.length === 0) return undefined;
  return { ...source, matches, decisions: matches.map((m) => fixedDecision(source, m)) };
}

/** The position in rule.matches of the first entry that matches (0 for a rule without entries), or -1. */
function firstEntry(rule: CompiledRule, view: RequestView): number {
  const matches = rule.matches;
  if (matches === undefined) return 0;
  for (let i = 0; i < matches.length; i++) if (matchRequest(matches[i]!, view)) return i;
  return -1;
}

/**
 * The decision of the first rule with a matching entry (rules in order, entries ORed, the fields of
 * an entry ANDed), or undefined when none matches. Shared decisions are returned as they are.
 */
export function firstMatchingRule(rules: readonly CompiledRule[], view: RequestView): RuleDecision | undefined {
  for (const rule of rules) {
    const i = firstEntry(rule, view);
    if (i >= 0) return rule.decisions[i] ?? decide(rule, rule.matches?.[i], view);
  }
  return undefined;
}
