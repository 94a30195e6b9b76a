// The sidecar's inbound requests: to the original destination, as always, but first through the
// RequestAuthentication and AuthorizationPolicy that select this workload (401/403). With no
// policy in force the check is skipped entirely: the sidecar's hot path stays as it was.
import { ORIGINAL_DESTINATION, type RequestDecider, type Verdict } from '../proxy/decider.js';
import type { DecisionLog } from '../gateway/decisions.js';
import type { RequestSecurity, SecurityOutcome } from './request-security.js';
import type { Endpoint } from '../proxy/socket-options.js';

export function inboundDecider(security: RequestSecurity, decisions: DecisionLog): RequestDecider {
  const forward = (outcome: SecurityOutcome, dst: Endpoint, url: string): Verdict => {
    if (outcome.reply) return outcome.reply;
    const { setHeaders, removeHeaders, path } = security.upstreamEdits(outcome.authn, url);
    return { kind: 'forward', address: dst.address, port: dst.port, setHeaders, removeHeaders, ...(path !== undefined ? { path } : {}) };
  };
  return {
    decide: (req, dst) => {
      if (security.idle || !dst) return ORIGINAL_DESTINATION.decide(req, dst);
      const draft = decisions.begin(req, 'inbound');
      draft.upstream = `${dst.address}:${dst.port}`;
      const remote = req.socket.remoteAddress;
      const outcome = security.check(req, { port: dst.port, destinationIp: dst.address, ...(remote ? { sourceIp: remote } : {}) }, draft);
      const url = req.url ?? '/';
      return outcome instanceof Promise ? outcome.then((o) => forward(o, dst, url)) : forward(outcome, dst, url);
    },
    completed: (req, _verdict, status, durationMs) => decisions.complete(req, status, durationMs),
  };
}
