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
import { peerOf, type PeerIdentity } from '../proxy/tls/peer-identity.js';
import { requestedServerName } from '../proxy/tls/requested-server-name.js';
import { rbacDeniedDetails, type RequestContext, type RequestSecurity, type SecurityOutcome } from './request-security.js';
import { hasHeader, RequestView } from '../proxy/request-view.js';
import { PEER_METADATA_HEADER, PEER_METADATA_HEADERS, PEER_METADATA_ID_HEADER } from '../metrics/peer-metadata.js';

const DENIED: LocalReply = { kind: 'reply', status: 403, body: 'RBAC: access denied' };

export const XFCC = 'x-forwarded-client-cert';
/**
 * What no client's own copy may take to the application: XFCC (set here for a mutual TLS peer) and
 * Istio's peer-metadata headers (read here from a mutual TLS peer, never passed on, as Envoy does).
 */
const STRIP_OWNED: readonly string[] = [XFCC, ...PEER_METADATA_HEADERS];

/** Whether the request carries a header the proxy owns (the plaintext path checks before building an edit). */
function carriesOwned(req: IncomingMessage): boolean {
  return hasHeader(req, XFCC) || hasHeader(req, PEER_METADATA_HEADER) || hasHeader(req, PEER_METADATA_ID_HEADER);
}

/** A mutual TLS peer's exchanged metadata, kept on the request for the standard metrics (the proxy's request views only). */
function notePeerMetadata(req: IncomingMessage): void {
  if (req instanceof RequestView) req.peerMetadata = req.value(PEER_METADATA_HEADER);
}
/** No external authorizer's lines for the response (the usual case): nothing allocated for them. */
const NO_RESPONSE_HEADERS: { readonly addResponseHeaders?: readonly (readonly [string, string])[] } = Object.freeze({});

/** `sni`: the server name of the client's ClientHello, when the connection is TLS (mutual TLS, or TLS carried as bytes). */
function context(dst: Endpoint, source: string | undefined, peer: PeerIdentity | undefined, sni: string | undefined): RequestContext {
  return {
    port: dst.port, destinationIp: dst.address, ...(source ? { sourceIp: source } : {}),
    ...(peer ? { sourcePrincipal: peer.principal, ...(peer.namespace !== undefined ? { sourceNamespace: peer.namespace } : {}) } : {}),
    ...(sni ? { sni } : {}),
  };
}

/**
 * Istio's x-forwarded-client-cert for the app, of a request that came over mutual TLS: this
 * workload's id, the peer certificate's hash and its id. Set in place of any the client sent
 * (a plaintext client's is dropped): the app can trust the header it gets.
 */
export function xfccValue(peer: PeerIdentity, self: string | undefined): string {
  return `${self ? `By=${self};` : ''}Hash=${peer.certHash};Subject="";URI=${peer.spiffeId}`;
}

/** `address:port` of a connection's destination, made once per connection (the decision log keeps it). */
const upstreams = new WeakMap<Endpoint, string>();
function upstreamOf(dst: Endpoint): string {
  let text = upstreams.get(dst);
  if (text === undefined) upstreams.set(dst, (text = `${dst.address}:${dst.port}`));
  return text;
}

/** This workload's SPIFFE id (XFCC's `By`), when it holds a certificate. */
export type SelfIdentity = () => string | undefined;

export function inboundDecider(security: RequestSecurity, decisions: DecisionLog, self: SelfIdentity = () => undefined): RequestDecider {
  const forward = (req: IncomingMessage, outcome: SecurityOutcome, dst: Endpoint, peer: PeerIdentity | undefined): Verdict => {
    if (outcome.reply) return outcome.reply;
    if (req.method === 'CONNECT' && security.hasPolicies) {
      const tcp = security.checkConnection(context(dst, req.socket.remoteAddress, peer, requestedServerName(req.socket)));
      if (!tcp.allowed) {
        decisions.count('authz', 'denied');
        decisions.annotate(req, `denied: a CONNECT tunnel is opaque to policy, and as a TCP connection: ${tcp.reason}`, rbacDeniedDetails(tcp));
        return DENIED;
      }
    }
    const { setHeaders, removeHeaders, path, responseHeaders } = outcome.edits;
    if (peer) {
      setHeaders.push([XFCC, xfccValue(peer, self())]);
      removeHeaders.push(...PEER_METADATA_HEADERS);
    } else {
      removeHeaders.push(...STRIP_OWNED);
    }
    return {
      kind: 'forward', address: dst.address, port: dst.port, setHeaders, removeHeaders, ...(path !== undefined ? { path } : {}),
      ...(responseHeaders !== undefined ? { addResponseHeaders: responseHeaders } : NO_RESPONSE_HEADERS),
    };
  };
  return {
    decide: (req, dst) => {
      const peer = peerOf(req.socket);
      if ((security.idle && !peer) || !dst) {
        // No policy and no mTLS peer (the hot path): only a plaintext client's own XFCC or peer metadata to drop.
        const plain = ORIGINAL_DESTINATION.decide(req, dst) as Verdict;
        return plain.kind === 'forward' && carriesOwned(req) ? { ...plain, removeHeaders: STRIP_OWNED } : plain;
      }
      if (peer) notePeerMetadata(req);
      const draft = decisions.begin(req, 'inbound');
      draft.upstream = upstreamOf(dst);
      draft.connectionSecurityPolicy = peer ? 'mutual_tls' : 'none';
      if (peer) draft.peer = peer.principal;
      if (security.idle) { // an mTLS peer and no policy: its record and its XFCC, nothing to check
        security.passIdle(draft);
        return { kind: 'forward', address: dst.address, port: dst.port, setHeaders: [[XFCC, xfccValue(peer!, self())]], removeHeaders: PEER_METADATA_HEADERS };
      }
      const outcome = security.check(req, context(dst, req.socket.remoteAddress, peer, requestedServerName(req.socket)), draft);
      return outcome instanceof Promise ? outcome.then((o) => forward(req, o, dst, peer)) : forward(req, outcome, dst, peer);
    },
    completed: (req, _verdict, status, durationMs) => decisions.complete(req, status, durationMs),
    get policesConnections(): boolean {
      return security.hasPolicies;
    },
    get readsSni(): boolean {
      return security.readsSni;
    },
    admitConnection: (facts: ConnectionFacts) => {
      const d = security.checkConnection(context(facts.destination, facts.source, facts.peer, facts.sni));
      return d.allowed ? d : { ...d, details: rbacDeniedDetails(d) };
    },
    connectionDecided: (facts, verdict) => {
      decisions.count('authz', verdict.allowed ? 'allowed' : 'denied');
      return decisions.connection('inbound', facts, `${verdict.allowed ? 'allowed' : 'denied'}: ${facts.kind} connection: ${verdict.reason}`,
        verdict.allowed ? undefined : { details: verdict.details });
    },
  };
}
