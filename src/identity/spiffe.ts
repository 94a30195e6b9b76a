// SPIFFE ids in Istio's shape, `spiffe://<trust domain>/ns/<namespace>/sa/<service account>`: formed
// from the environment, parsed back from a certificate, and printed as Istio's principal (the id
// without the scheme) that authorization policies match. Pure: no I/O.
import { AgentError } from '../errors/agent-error.js';

export const SPIFFE_SCHEME = 'spiffe://';

export interface SpiffeIdentity {
  readonly trustDomain: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

// The SPIFFE spec's character sets: trust domains are lower case (they compare byte for byte), path
// segments may use both cases. Anything else (ports, user info, query, `%` escapes) is refused.
const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
const SEGMENT = /^[A-Za-z0-9._-]+$/;
const MAX_ID_LENGTH = 2048;

function invalid(id: string, why: string): AgentError {
  return new AgentError('ERR_SPIFFE_ID', `invalid SPIFFE id ${JSON.stringify(id)}: ${why}`);
}

function checkSegment(id: string, what: string, value: string): void {
  if (value === '') throw invalid(id, `empty ${what}`);
  if (value === '.' || value === '..') throw invalid(id, `${what} "${value}" is a relative path segment`);
  if (!SEGMENT.test(value)) throw invalid(id, `${what} "${value}" has characters outside letters, digits, ".", "-", "_"`);
}

function checkTrustDomain(id: string, value: string): void {
  if (value === '') throw invalid(id, 'empty trust domain');
  if (!TRUST_DOMAIN.test(value)) {
    throw invalid(id, `trust domain "${value}" has characters outside lower-case letters, digits, ".", "-", "_"`);
  }
}

/** `spiffe://td/ns/<ns>/sa/<sa>`; every part is checked, so the result always parses back. */
export function formatSpiffeId(identity: SpiffeIdentity): string {
  const id = `${SPIFFE_SCHEME}${identity.trustDomain}/ns/${identity.namespace}/sa/${identity.serviceAccount}`;
  checkTrustDomain(id, identity.trustDomain);
  checkSegment(id, 'namespace', identity.namespace);
  checkSegment(id, 'service account', identity.serviceAccount);
  if (id.length > MAX_ID_LENGTH) throw invalid(id, `longer than ${MAX_ID_LENGTH} bytes`);
  return id;
}

/** Splits an Istio-shaped SPIFFE id; throws ERR_SPIFFE_ID naming what is wrong. */
export function parseSpiffeId(id: string): SpiffeIdentity {
  if (!id.startsWith(SPIFFE_SCHEME)) throw invalid(id, `does not start with ${SPIFFE_SCHEME}`);
  if (id.length > MAX_ID_LENGTH) throw invalid(id, `longer than ${MAX_ID_LENGTH} bytes`);
  const rest = id.slice(SPIFFE_SCHEME.length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw invalid(id, 'no path after the trust domain (expected /ns/<namespace>/sa/<service account>)');
  checkTrustDomain(id, rest.slice(0, slash));
  const segments = rest.slice(slash + 1).split('/');
  if (segments.length !== 4 || segments[0] !== 'ns' || segments[2] !== 'sa') {
    throw invalid(id, 'path is not /ns/<namespace>/sa/<service account>');
  }
  const [, namespace = '', , serviceAccount = ''] = segments;
  checkSegment(id, 'namespace', namespace);
  checkSegment(id, 'service account', serviceAccount);
  return { trustDomain: rest.slice(0, slash), namespace, serviceAccount };
}

/** Istio's principal: the id without `spiffe://` (`cluster.local/ns/default/sa/sleep`). */
export function principalOf(id: string): string {
  parseSpiffeId(id);
  return id.slice(SPIFFE_SCHEME.length);
}

/** The variables the id is formed from (a subset of EnvValues, so tests need not build all 209). */
export interface IdentityEnv {
  readonly TRUST_DOMAIN: string;
  readonly POD_NAMESPACE: string;
  readonly SERVICE_ACCOUNT: string;
}

/**
 * This workload's id. Empty values take the defaults Istio's injector would have filled in:
 * trust domain `cluster.local`, namespace `default` (as the rest of the agent does), service account `default`.
 */
export function workloadSpiffeId(env: IdentityEnv): string {
  return formatSpiffeId({
    trustDomain: env.TRUST_DOMAIN || 'cluster.local',
    namespace: env.POD_NAMESPACE || 'default',
    serviceAccount: env.SERVICE_ACCOUNT || 'default',
  });
}
