// AuthorizationPolicy (security.mesh.io): ALLOW / DENY rules on the request's source, operation
// and conditions (`when`), Istio's fields and meanings. AUDIT is accepted with a warning (no effect
// here); CUSTOM names an external authorizer of the mesh config (`provider.name`), resolved when the
// policy is applied (src/security/ext-authz/); the `experimental.envoy.filters.*` condition keys are
// refused (no such filters).
import type {
  AuthorizationAction, AuthorizationCondition, AuthorizationOperation, AuthorizationPolicy, AuthorizationRule,
  AuthorizationSource, ResourceMeta,
} from './types.js';
import { parsePolicyClaimKey, POLICY_CLAIM_PREFIX } from '../../security/claims.js';
import { checkIpOrCidr } from './addresses.js';
import { checkFields, child, FieldError, IGNORE_WARNINGS, item, list, obj, oneOf, optList, show, str, strList, type Warn } from './fields.js';
import { checkHeaderName } from './names.js';
import { parseWorkloadSelector } from './selector.js';

const ACTIONS: readonly AuthorizationAction[] = ['ALLOW', 'DENY', 'AUDIT', 'CUSTOM'];

const SOURCE_FIELDS = ['principals', 'notPrincipals', 'requestPrincipals', 'notRequestPrincipals', 'namespaces',
  'notNamespaces', 'ipBlocks', 'notIpBlocks', 'remoteIpBlocks', 'notRemoteIpBlocks', 'serviceAccounts', 'notServiceAccounts', 'trustDomains', 'notTrustDomains'] as const;
/** Istio: `serviceAccounts` says the same thing as principals/namespaces in another form; one form per source. */
const SERVICE_ACCOUNT_EXCLUDES: Readonly<Record<string, readonly string[]>> = {
  serviceAccounts: ['principals', 'namespaces'],
  notServiceAccounts: ['notPrincipals', 'notNamespaces'],
};
/** A Kubernetes namespace or service account name as it appears in a SPIFFE id's path. */
const ACCOUNT_PART = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/;
const IP_SOURCE_FIELDS: readonly string[] = ['ipBlocks', 'notIpBlocks', 'remoteIpBlocks', 'notRemoteIpBlocks'];
const OPERATION_FIELDS = ['hosts', 'notHosts', 'ports', 'notPorts', 'methods', 'notMethods', 'paths', 'notPaths'] as const;

/** `when` keys other than the bracketed ones (claims, headers). */
export const CONDITION_KEYS: readonly string[] = [
  'source.ip', 'remote.ip', 'source.namespace', 'source.principal', 'request.auth.principal',
  'request.auth.audiences', 'request.auth.presenter', 'destination.ip', 'destination.port', 'connection.sni',
];
const IP_KEYS: readonly string[] = ['source.ip', 'remote.ip', 'destination.ip'];
const HEADER_KEY = /^request\.headers\[([^\][]+)\]$/;
const EXPERIMENTAL_FILTER_PREFIX = 'experimental.envoy.filters.';
/** HTTP/2 pseudo-headers Istio lets a condition name, and what the evaluator reads for each. */
export const CONDITION_PSEUDO_HEADERS: readonly string[] = [':authority', ':method', ':path'];

/**
 * The header a `request.headers[...]` condition reads, lower-cased. Istio takes any name: the
 * pseudo-headers above are honoured as the request's authority, method and path; a name no request
 * can carry (not an HTTP token) is accepted as Istio does, with a warning (its values never match).
 */
function conditionHeader(name: string, field: string, warn: Warn): string {
  const lower = name.toLowerCase();
  if (lower.startsWith(':')) {
    if (!CONDITION_PSEUDO_HEADERS.includes(lower)) {
      throw new FieldError(field, `${show(name)} is not supported yet: of the pseudo-headers, ${CONDITION_PSEUDO_HEADERS.join(', ')} are read`);
    }
    return lower;
  }
  try {
    checkHeaderName(name, field);
  } catch {
    warn(field, `${show(name)} is not an HTTP header name, so no request carries it: values never match and notValues always hold`);
  }
  return lower;
}

function checkPort(text: string, field: string): string {
  if (!/^[0-9]{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535) {
    throw new FieldError(field, `${show(text)} is not a port number (1 to 65535)`);
  }
  return text;
}

function values(raw: unknown, field: string, check?: (v: string, at: string) => string): string[] {
  const vs = strList(raw, field, { nonEmptyItems: true });
  return check ? vs.map((v, i) => check(v, item(field, i))) : vs;
}

/** Only the fields given are set (absent means "no constraint"); an empty source is an error. */
function parseFields<K extends string>(raw: unknown, field: string, names: readonly K[], check: (name: K) => ((v: string, at: string) => string) | undefined, unsupported: readonly string[] = []): Partial<Record<K, string[]>> {
  const o = obj(raw, field);
  checkFields(o, field, { supported: names, unsupported });
  const out: Partial<Record<K, string[]>> = {};
  for (const name of names) {
    if (o[name] !== undefined) out[name] = values(o[name], child(field, name), check(name));
  }
  if (Object.keys(out).length === 0) throw new FieldError(field, `must set at least one of ${names.join(', ')}`);
  return out;
}

/**
 * A `serviceAccounts` value, `<namespace>/<service account>` or a bare `<service account>` of the
 * policy's own namespace (Istio's reading), resolved to `ns/sa`. Istio matches it exactly (any trust
 * domain), so a wildcard would be a literal `*` that no account has: refused rather than never matching.
 */
function serviceAccountOf(namespace: string): (value: string, at: string) => string {
  return (value, at) => {
    const parts = value.split('/');
    if (parts.length > 2) throw new FieldError(at, `${show(value)}: expected <namespace>/<service account> or <service account>`);
    if (value.includes('*')) throw new FieldError(at, `${show(value)}: wildcards are not supported here (Istio matches service accounts exactly); use principals for patterns`);
    const [ns, sa] = parts.length === 2 ? parts as [string, string] : [namespace, parts[0]!];
    for (const part of [ns, sa]) {
      if (!ACCOUNT_PART.test(part)) throw new FieldError(at, `${show(value)}: ${show(part)} is not a Kubernetes name (lower-case letters, digits, "-", ".")`);
    }
    return `${ns}/${sa}`;
  };
}

/** A trust domain pattern: a trust domain's characters, `*` standing for any run of them (Istio: `[^/]*`). */
function checkTrustDomain(value: string, at: string): string {
  if (!/^[A-Za-z0-9._*-]+$/.test(value)) throw new FieldError(at, `${show(value)} is not a trust domain (letters, digits, ".", "-", "_", and "*" for any run of them)`);
  return value.toLowerCase();
}

function parseSource(raw: unknown, field: string, namespace: string): AuthorizationSource {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['source'] });
  const at = child(field, 'source');
  const accounts = serviceAccountOf(namespace);
  const source = parseFields(o['source'], at, SOURCE_FIELDS,
    (name) => (IP_SOURCE_FIELDS.includes(name) ? checkIpOrCidr : name === 'serviceAccounts' || name === 'notServiceAccounts' ? accounts
      : name === 'trustDomains' || name === 'notTrustDomains' ? checkTrustDomain : undefined));
  for (const [name, excluded] of Object.entries(SERVICE_ACCOUNT_EXCLUDES)) {
    const other = excluded.find((e) => source[e as keyof typeof source] !== undefined);
    if (source[name as keyof typeof source] !== undefined && other !== undefined) {
      throw new FieldError(child(at, name), `cannot be set with ${other} (Istio: one form of the peer identity per source)`);
    }
  }
  return source;
}

function parseOperation(raw: unknown, field: string): AuthorizationOperation {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['operation'] });
  return parseFields(o['operation'], child(field, 'operation'), OPERATION_FIELDS,
    (name) => (name === 'ports' || name === 'notPorts' ? checkPort : undefined));
}

function parseCondition(raw: unknown, field: string, warn: Warn): AuthorizationCondition {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['key', 'values', 'notValues'] });
  const keyField = child(field, 'key');
  const key = str(o['key'], keyField, { nonEmpty: true });
  let extra: { claimPath?: string[]; header?: string } = {};
  let check: ((v: string, at: string) => string) | undefined;
  if (key.startsWith(POLICY_CLAIM_PREFIX)) {
    const parsed = parsePolicyClaimKey(key);
    if (!parsed.ok) throw new FieldError(keyField, `${show(key)} is not a valid claim key: ${parsed.message}`);
    extra = { claimPath: [...parsed.path] };
  } else if (key.startsWith('request.headers')) {
    const m = HEADER_KEY.exec(key);
    if (!m) throw new FieldError(keyField, `${show(key)}: expected request.headers[<name>]`);
    extra = { header: conditionHeader(m[1]!, keyField, warn) };
  } else if (key.startsWith(EXPERIMENTAL_FILTER_PREFIX)) {
    throw new FieldError(keyField, `${show(key)} is not supported by this agent: it matches the dynamic metadata an Envoy network filter (mysql_proxy, redis_proxy...) writes, and this proxy runs no such filter; a policy needing it cannot be enforced here`);
  } else if (!CONDITION_KEYS.includes(key)) {
    throw new FieldError(keyField, `${show(key)} is not a supported key; accepted: ${POLICY_CLAIM_PREFIX}[<claim>], request.headers[<name>], ${CONDITION_KEYS.join(', ')}`);
  }
  if (IP_KEYS.includes(key)) check = checkIpOrCidr;
  if (key === 'destination.port') check = checkPort;
  const vs = o['values'] === undefined ? undefined : values(o['values'], child(field, 'values'), check);
  const nvs = o['notValues'] === undefined ? undefined : values(o['notValues'], child(field, 'notValues'), check);
  if (!vs?.length && !nvs?.length) throw new FieldError(field, `needs values or notValues for ${show(key)}`);
  return { key, ...extra, ...(vs?.length ? { values: vs } : {}), ...(nvs?.length ? { notValues: nvs } : {}) };
}

/** `from: []` and `to: []` are errors, as in Istio (omit the field to match anything). */
function nonEmptyIfPresent(raw: unknown, field: string): readonly unknown[] {
  return raw === undefined ? [] : list(raw, field, { nonEmpty: true });
}

function parseRule(raw: unknown, field: string, namespace: string, warn: Warn): AuthorizationRule {
  const o = obj(raw ?? {}, field);
  checkFields(o, field, { supported: ['from', 'to', 'when'] });
  return {
    from: nonEmptyIfPresent(o['from'], child(field, 'from')).map((v, i) => parseSource(v, item(child(field, 'from'), i), namespace)),
    to: nonEmptyIfPresent(o['to'], child(field, 'to')).map((v, i) => parseOperation(v, item(child(field, 'to'), i))),
    when: optList(o['when'], child(field, 'when')).map((v, i) => parseCondition(v, item(child(field, 'when'), i), warn)),
  };
}

/**
 * Istio gives AUDIT an effect only through an audit provider (Stackdriver) that marks the matching
 * requests for its log; this agent has none, so it is accepted (Istio accepts it) and said to do nothing.
 */
const AUDIT_HAS_NO_EFFECT = 'AUDIT has no effect here: Istio acts on AUDIT policies only through an audit provider '
  + '(Stackdriver), which this agent does not have; no request is marked or logged for this policy';

/** `provider.name`: required with CUSTOM, refused with any other action (Istio's checks). */
function parseProvider(raw: unknown, action: AuthorizationAction): string | undefined {
  if (raw === undefined || raw === null) {
    if (action === 'CUSTOM') throw new FieldError('spec.provider', 'is required with action CUSTOM: name one of the mesh config\'s extensionProviders');
    return undefined;
  }
  if (action !== 'CUSTOM') throw new FieldError('spec.provider', `is only for action CUSTOM (this policy's action is ${action})`);
  const o = obj(raw, 'spec.provider');
  checkFields(o, 'spec.provider', { supported: ['name'] });
  return str(o['name'], 'spec.provider.name', { nonEmpty: true });
}

export function validateAuthorizationPolicy(spec: unknown, meta: ResourceMeta, warn: Warn = IGNORE_WARNINGS): AuthorizationPolicy {
  // `spec: {}` (or none) is Istio's allow-nothing policy.
  const s = obj(spec ?? {}, 'spec');
  checkFields(s, 'spec', { supported: ['selector', 'action', 'rules', 'provider'], unsupported: ['targetRef', 'targetRefs'] });
  const selector = parseWorkloadSelector(s['selector'], 'spec.selector');
  const action = s['action'] === undefined ? 'ALLOW' : oneOf(s['action'], 'spec.action', ACTIONS);
  const provider = parseProvider(s['provider'], action);
  const rules = optList(s['rules'], 'spec.rules').map((r, i) => parseRule(r, item('spec.rules', i), meta.namespace, warn));
  if (action === 'AUDIT') warn('spec.action', AUDIT_HAS_NO_EFFECT);
  return { meta, ...(selector !== undefined ? { selector } : {}), action, rules, ...(provider !== undefined ? { provider } : {}) };
}
