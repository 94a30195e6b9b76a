// One document → one typed resource or one Rejection. Dispatches on apiVersion + kind, fills in
// metadata (namespace defaults to the agent's), and turns any FieldError into a Rejection that
// names the file, the document, the resource and the field.
import type {
  AuthorizationPolicy, DestinationRule, Gateway, PeerAuthentication, Rejection, RequestAuthentication, ResourceKind,
  ResourceMeta, ResourceWarning, ServiceEntry, Sidecar, Telemetry, VirtualService, WorkloadEntry,
} from './types.js';
import { checkFields, FieldError, isObj, show, str, type Warn } from './fields.js';
export { formatRejection } from './format.js';
import { checkName, checkNamespace } from './names.js';
import { validateAuthorizationPolicy } from './validate-authorization-policy.js';
import { validateDestinationRule } from './validate-destination-rule.js';
import { validateGateway } from './validate-gateway.js';
import { validatePeerAuthentication } from './validate-peer-authentication.js';
import { validateRequestAuthentication } from './validate-request-authentication.js';
import { validateServiceEntry } from './validate-service-entry.js';
import { validateSidecar } from './validate-sidecar.js';
import { validateTelemetry } from './validate-telemetry.js';
import { validateVirtualService } from './validate-virtual-service.js';
import { validateWorkloadEntry } from './validate-workload-entry.js';

export const NETWORKING_GROUP = 'networking.mesh.io';
export const SECURITY_GROUP = 'security.mesh.io';
export const TELEMETRY_GROUP = 'telemetry.mesh.io';
/** The spec's groups: `v1`, and `v1beta1` as an alias (DESIGN "Configuration"); Telemetry's alias is Istio's `v1alpha1`. */
export const API_VERSIONS: readonly string[] = ['v1', 'v1beta1'];
const TELEMETRY_VERSIONS: readonly string[] = ['v1', 'v1alpha1'];

/** The spec's group of each kind. */
export const KIND_GROUPS: Readonly<Record<ResourceKind, string>> = {
  Gateway: NETWORKING_GROUP,
  VirtualService: NETWORKING_GROUP,
  ServiceEntry: NETWORKING_GROUP,
  DestinationRule: NETWORKING_GROUP,
  WorkloadEntry: NETWORKING_GROUP,
  Sidecar: NETWORKING_GROUP,
  RequestAuthentication: SECURITY_GROUP,
  AuthorizationPolicy: SECURITY_GROUP,
  PeerAuthentication: SECURITY_GROUP,
  Telemetry: TELEMETRY_GROUP,
};
export const RESOURCE_KINDS = Object.keys(KIND_GROUPS) as readonly ResourceKind[];

/**
 * Istio's own group for each kind and every version Istio serves it under: an operator's Istio YAML
 * is read unchanged, with the same meaning as the spec's group (the versions differ in name only).
 */
export const ISTIO_KIND_GROUPS: Readonly<Record<ResourceKind, { readonly group: string; readonly versions: readonly string[] }>> = (() => {
  const networking = { group: 'networking.istio.io', versions: ['v1', 'v1beta1', 'v1alpha3'] } as const;
  const security = { group: 'security.istio.io', versions: ['v1', 'v1beta1'] } as const;
  const telemetry = { group: 'telemetry.istio.io', versions: TELEMETRY_VERSIONS } as const;
  return {
    Telemetry: telemetry,
    Gateway: networking, VirtualService: networking, ServiceEntry: networking, DestinationRule: networking, WorkloadEntry: networking,
    Sidecar: networking, RequestAuthentication: security, AuthorizationPolicy: security, PeerAuthentication: security,
  };
})();

/**
 * Kinds Istio has that this agent refuses whole, with the reason (a known kind is never reported as
 * a typo). Any group and version.
 */
export const REFUSED_KINDS: Readonly<Record<string, string>> = {
  EnvoyFilter: 'is not supported by this agent: an EnvoyFilter patches the Envoy configuration istiod generates (listeners, filter chains, clusters), and this proxy has no Envoy configuration to patch; express the behaviour with VirtualService, DestinationRule or AuthorizationPolicy fields instead',
  WasmPlugin: 'is not supported by this agent: it loads WebAssembly filters into Envoy, which this proxy does not run',
  WorkloadGroup: 'is not supported by this agent: it is the template istiod uses to register VMs as WorkloadEntries; write the WorkloadEntry instead',
  ProxyConfig: 'is not supported by this agent: set the proxy settings in the mesh config (defaultConfig) or PROXY_CONFIG instead',
};

export type ValidatedResource =
  | { readonly kind: 'Gateway'; readonly resource: Gateway }
  | { readonly kind: 'VirtualService'; readonly resource: VirtualService }
  | { readonly kind: 'ServiceEntry'; readonly resource: ServiceEntry }
  | { readonly kind: 'DestinationRule'; readonly resource: DestinationRule }
  | { readonly kind: 'WorkloadEntry'; readonly resource: WorkloadEntry }
  | { readonly kind: 'Sidecar'; readonly resource: Sidecar }
  | { readonly kind: 'Telemetry'; readonly resource: Telemetry }
  | { readonly kind: 'RequestAuthentication'; readonly resource: RequestAuthentication }
  | { readonly kind: 'AuthorizationPolicy'; readonly resource: AuthorizationPolicy }
  | { readonly kind: 'PeerAuthentication'; readonly resource: PeerAuthentication };

export interface ValidateContext {
  readonly file: string;
  /** The document's position in the file (0-based). */
  readonly index: number;
  /** metadata.namespace when the document has none (POD_NAMESPACE). */
  readonly defaultNamespace: string;
}

export type ValidationResult =
  /** `warnings`: fields accepted that deserve a word (Istio ignores them, or warns about them too). */
  | { readonly ok: true; readonly value: ValidatedResource; readonly key: string; readonly warnings: readonly ResourceWarning[] }
  /** `key`: the resource's identity when the document got far enough to name it. */
  | { readonly ok: false; readonly rejection: Rejection; readonly key?: string };

/** A resource's identity: two resources with the same key are the same resource, whichever group names them. */
export function resourceKey(kind: string, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

export function isResourceKind(kind: unknown): kind is ResourceKind {
  return typeof kind === 'string' && Object.hasOwn(KIND_GROUPS, kind);
}

/** Every apiVersion a kind is read under: the spec's group first, then Istio's. */
export function acceptedApiVersions(kind: ResourceKind): string[] {
  const istio = ISTIO_KIND_GROUPS[kind];
  const ours = kind === 'Telemetry' ? TELEMETRY_VERSIONS : API_VERSIONS;
  return [...ours.map((v) => `${KIND_GROUPS[kind]}/${v}`), ...istio.versions.map((v) => `${istio.group}/${v}`)];
}

/** True for an apiVersion of one of Istio's groups (as opposed to the spec's `*.mesh.io`). */
export function isIstioApiVersion(apiVersion: string): boolean {
  return apiVersion.split('/')[0]!.endsWith('.istio.io');
}

function kindList(): string {
  const groups = [...new Set(Object.values(KIND_GROUPS))];
  const byGroup = groups.map((g) => {
    const kinds = RESOURCE_KINDS.filter((k) => KIND_GROUPS[k] === g);
    const istio = ISTIO_KIND_GROUPS[kinds[0]!];
    const ours = g === TELEMETRY_GROUP ? TELEMETRY_VERSIONS : API_VERSIONS;
    return `${kinds.join(', ')} (${g}/${ours.join(' or ')}, or ${istio.group}/${istio.versions.join(', ')})`;
  });
  return byGroup.join('; ');
}

function specOf(value: ValidatedResource['kind'], spec: unknown, meta: ResourceMeta, warn: Warn): ValidatedResource {
  switch (value) {
    case 'Gateway': return { kind: value, resource: validateGateway(spec, meta, warn) };
    case 'VirtualService': return { kind: value, resource: validateVirtualService(spec, meta, warn) };
    case 'ServiceEntry': return { kind: value, resource: validateServiceEntry(spec, meta, warn) };
    case 'DestinationRule': return { kind: value, resource: validateDestinationRule(spec, meta, warn) };
    case 'WorkloadEntry': return { kind: value, resource: validateWorkloadEntry(spec, meta, warn) };
    case 'Sidecar': return { kind: value, resource: validateSidecar(spec, meta, warn) };
    case 'Telemetry': return { kind: value, resource: validateTelemetry(spec, meta, warn) };
    case 'RequestAuthentication': return { kind: value, resource: validateRequestAuthentication(spec, meta, warn) };
    case 'AuthorizationPolicy': return { kind: value, resource: validateAuthorizationPolicy(spec, meta, warn) };
    case 'PeerAuthentication': return { kind: value, resource: validatePeerAuthentication(spec, meta) };
  }
}

/** Validates one parsed document. Never throws for bad input. */
export function validateDocument(doc: unknown, ctx: ValidateContext): ValidationResult {
  // What is known so far, so the rejection can name as much of the resource as the document gives.
  const who: { kind?: string; name?: string; namespace?: string } = {};
  let key: string | undefined;
  try {
    if (!isObj(doc)) throw new FieldError('', `expected a mapping with apiVersion, kind, metadata and spec, got ${Array.isArray(doc) ? 'a list' : show(doc)}`);
    if (typeof doc['kind'] === 'string') who.kind = doc['kind'];
    const metadata = doc['metadata'];
    if (isObj(metadata)) {
      if (typeof metadata['name'] === 'string') who.name = metadata['name'];
      who.namespace = typeof metadata['namespace'] === 'string' && metadata['namespace'] !== '' ? metadata['namespace'] : ctx.defaultNamespace;
    }
    const kind = str(doc['kind'], 'kind', { nonEmpty: true });
    const refused = Object.hasOwn(REFUSED_KINDS, kind) ? REFUSED_KINDS[kind] : undefined;
    if (refused !== undefined) throw new FieldError('kind', `${kind} ${refused}`);
    if (!isResourceKind(kind)) throw new FieldError('kind', `unknown kind ${show(kind)}; accepted: ${kindList()}`);
    // The identity as written: enough for the store to keep the last good version of this resource.
    if (who.name !== undefined) key = resourceKey(kind, who.namespace ?? ctx.defaultNamespace, who.name);
    const apiVersion = str(doc['apiVersion'], 'apiVersion', { nonEmpty: true });
    if (!acceptedApiVersions(kind).includes(apiVersion)) {
      throw new FieldError('apiVersion', `${show(apiVersion)} is not an accepted version of ${kind}; accepted: ${acceptedApiVersions(kind).join(', ')}`);
    }
    checkFields(doc, '', { supported: ['apiVersion', 'kind', 'metadata', 'spec'], ignored: ['status'] });
    if (!isObj(metadata)) throw new FieldError('metadata', metadata === undefined ? 'required (a mapping with name)' : `expected a mapping, got ${show(metadata)}`);
    const name = checkName(str(metadata['name'], 'metadata.name', { nonEmpty: true }), 'metadata.name');
    const rawNs = metadata['namespace'];
    const namespace = rawNs === undefined || rawNs === null || rawNs === '' ? ctx.defaultNamespace
      : checkNamespace(str(rawNs, 'metadata.namespace'), 'metadata.namespace');
    key = resourceKey(kind, namespace, name);
    const meta: ResourceMeta = { kind, apiVersion, name, namespace, origin: { file: ctx.file, index: ctx.index } };
    const warnings: ResourceWarning[] = [];
    const warn: Warn = (field, message) => {
      warnings.push({ file: ctx.file, index: ctx.index, kind, name, namespace, field, message });
    };
    const value = specOf(kind, doc['spec'], meta, warn);
    return { ok: true, value: deepFreeze(value), key, warnings: Object.freeze(warnings) };
  } catch (err) {
    if (!(err instanceof FieldError)) throw err;
    const rejection: Rejection = {
      file: ctx.file,
      index: ctx.index,
      ...(who.kind !== undefined ? { kind: who.kind } : {}),
      ...(who.name !== undefined ? { name: who.name, namespace: who.namespace ?? ctx.defaultNamespace } : {}),
      field: err.field,
      message: err.message,
    };
    return key === undefined ? { ok: false, rejection } : { ok: false, rejection, key };
  }
}

/** Resources are shared by every consumer: freeze them so none can change another's view. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !(value instanceof RegExp) && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
