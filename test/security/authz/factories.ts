// Builders for AuthorizationPolicy in the validator's output shape, and for requests.
import type { AuthorizationAction, AuthorizationCondition, AuthorizationPolicy, AuthorizationRule } from '../../../src/config/resources/types.js';
import type { AuthzRequest } from '../../../src/security/authz/evaluate.js';
import { parsePolicyClaimKey } from '../../../src/security/claims.js';

export function policy(id: string, action: AuthorizationAction, rules: Partial<AuthorizationRule>[]): AuthorizationPolicy {
  const [namespace, name] = id.split('/') as [string, string];
  return {
    meta: { kind: 'AuthorizationPolicy', apiVersion: 'security.mesh.io/v1', name, namespace, origin: { file: 'test.yaml', index: 0 } },
    action,
    rules: rules.map((r) => ({ from: [], to: [], when: [], ...r })),
  };
}

/** A `when` condition with claimPath/header filled in as the validator does. */
export function when(key: string, values?: string[], notValues?: string[]): AuthorizationCondition {
  const claim = parsePolicyClaimKey(key);
  const header = /^request\.headers\[(.+)\]$/.exec(key);
  return {
    key,
    ...(claim.ok ? { claimPath: claim.path } : {}),
    ...(header ? { header: header[1]!.toLowerCase() } : {}),
    ...(values ? { values } : {}),
    ...(notValues ? { notValues } : {}),
  };
}

export function authzRequest(r: Partial<AuthzRequest> = {}): AuthzRequest {
  return { method: 'GET', path: '/', host: 'example.com', port: 8080, headers: {}, ...r };
}
