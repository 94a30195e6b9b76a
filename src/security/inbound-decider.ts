// The sidecar's inbound traffic: to the original destination, as always, but first through the
// RequestAuthentication and AuthorizationPolicy that select this workload. HTTP requests are judged
// one by one (401/403). Connections that are not HTTP (opaque bytes, TLS, h2c until HTTP/2 is
// parsed) are judged once with Istio's TCP semantics and refused before a byte reaches the app; a
// CONNECT tunnel carries bytes policy cannot read, so it must pass both ways. With no policy in
// force the checks are skipped entirely: the sidecar's hot path stays as it was.
import type { IncomingMessage } from 'node:http';
import type { DecisionLog } from '../gateway/decisions.js';
import { ORIGINAL_DESTINATION, type ConnectionFacts, type LocalReply, type RequestDecider, type Verdict } from '../proxy/decider.js';
import type { Endpoint } from '../proxy/socket-options.js';
import { rbacDeniedDetails, type RequestContext, type RequestSecurity, type SecurityOutcome } from './request-security.js';

const DENIED: LocalReply = { kind: 'reply', status: 403, body: 'RBAC: access denied' };

function context(dst: Endpoint, source: string | undefined): RequestContext {
  return { port: dst.port, destinationIp: dst.address, ...(source ? { sourceIp: source } : {}) };
}

export function inboundDecider(security: RequestSecurity, decisions: DecisionLog): RequestDecider {
  const forward = (req: IncomingMessage, outcome: SecurityOutcome, dst: Endpoint): Verdict => {
    if (outcome.reply) return outcome.reply;
    if (req.method === 'CONNECT' && security.hasPolicies) {
      const tcp = security.checkConnection(context(dst, req.socket.remoteAddress));
      if (!tcp.allowed) {
        decisions.count('authz', 'denied');
        decisions.annotate(req, `denied: a CONNECT tunnel is opaque to policy, and as a TCP connection: ${tcp.reason}`, rbacDeniedDetails(tcp));
        return DENIED;
      }
    }
    const { setHeaders, removeHeaders, path } = outcome.edits;
    return { kind: 'forward', address: dst.address, port: dst.port, setHeaders, removeHeaders, ...(path !== undefined ? { path } : {}) };
  };
  return {
    decide: (req, dst) => {
      if (security.idle || !dst) return ORIGINAL_DESTINATION.decide(req, dst);
      const draft = decisions.begin(req, 'inbound');
      draft.upstream = `${dst.address}:${dst.port}`;
      const outcome = security.check(req, context(dst, req.socket.remoteAddress), draft);
      return outcome instanceof Promise ? outcome.then((o) => forward(req, o, dst)) : forward(req, outcome, dst);
    },
    completed: (req, _verdict, status, durationMs) => decisions.complete(req, status, durationMs),
    get policesConnections(): boolean {
      return security.hasPolicies;
    },
    admitConnection: (facts: ConnectionFacts) => {
      const d = security.checkConnection(context(facts.destination, facts.source));
      return d.allowed ? d : { ...d, details: rbacDeniedDetails(d) };
    },
    connectionDecided: (facts, verdict) => {
      decisions.count('authz', verdict.allowed ? 'allowed' : 'denied');
      return decisions.connection('inbound', facts, `${verdict.allowed ? 'allowed' : 'denied'}: ${facts.kind} connection: ${verdict.reason}`,
        verdict.allowed ? undefined : { details: verdict.details });
    },
  };
}
