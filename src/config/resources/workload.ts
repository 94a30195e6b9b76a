// The workload this agent serves (namespace + pod labels) and which resources apply to it, by
// Istio's rules: a security policy applies to workloads of its own namespace, or to every workload
// when it sits in the root namespace, its selector filtering in both cases; a Gateway applies to
// every workload its selector matches, whatever the namespace (PILOT_SCOPE_GATEWAY_TO_NAMESPACE off).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AgentError } from '../../errors/agent-error.js';
import type {
  AuthorizationPolicy, Gateway, LabelSelector, RequestAuthentication, ResourceSnapshot, ServiceEntry, VirtualService, Workload,
} from './types.js';
import { ROOT_NAMESPACE } from './types.js';
import { LOCALITY_LABEL, TOPOLOGY_LABELS } from './locality-lb-setting.js';

export const LABELS_FILE = 'etc/mesh/pod/labels';

const GO_ESCAPES: Readonly<Record<string, string>> = { a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', '"': '"', "'": "'" };

/**
 * A Go double-quoted string (the downward API writes values with %q): returns the value and the
 * position after the closing quote, or undefined when it is not well formed. `\x`, `\u`, `\U` and
 * octal escapes are Go's (bytes for \x and octal, which is how Go spells non-UTF-8 bytes).
 */
function unquoteGo(text: string, start: number): { value: string; end: number } | undefined {
  const bytes: number[] = [];
  const pushText = (s: string): void => { bytes.push(...Buffer.from(s, 'utf8')); };
  let at = start + 1;
  while (at < text.length) {
    const c = text[at]!;
    if (c === '"') return { value: Buffer.from(bytes).toString('utf8'), end: at + 1 };
    if (c !== '\\') {
      const cp = text.codePointAt(at)!;
      pushText(String.fromCodePoint(cp));
      at += cp > 0xffff ? 2 : 1;
      continue;
    }
    const e = text[at + 1];
    if (e === undefined) return undefined;
    if (GO_ESCAPES[e] !== undefined) {
      pushText(GO_ESCAPES[e]!);
      at += 2;
    } else if (e === 'x' && /^[0-9a-fA-F]{2}$/.test(text.slice(at + 2, at + 4))) {
      bytes.push(parseInt(text.slice(at + 2, at + 4), 16));
      at += 4;
    } else if ((e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(at + 2, at + 6))) || (e === 'U' && /^[0-9a-fA-F]{8}$/.test(text.slice(at + 2, at + 10)))) {
      const len = e === 'u' ? 4 : 8;
      const cp = parseInt(text.slice(at + 2, at + 2 + len), 16);
      if (cp > 0x10ffff) return undefined;
      pushText(String.fromCodePoint(cp));
      at += 2 + len;
    } else if (/^[0-7]{3}$/.test(text.slice(at + 1, at + 4))) {
      bytes.push(parseInt(text.slice(at + 1, at + 4), 8) & 0xff);
      at += 4;
    } else {
      return undefined;
    }
  }
  return undefined;
}

/**
 * Parses a downward-API labels file: one `key="value"` per line, values Go-quoted. Blank lines and
 * lines that are not of that form are skipped (an unquoted value is taken as written).
 */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  // defineProperty: a label named __proto__ is a label like any other.
  const set = (k: string, v: string): void => { Object.defineProperty(labels, k, { value: v, enumerable: true, writable: true, configurable: true }); };
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '');
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    if (key === '') continue;
    const rest = line.slice(eq + 1).trimStart();
    if (!rest.startsWith('"')) {
      set(key, rest.trim());
      continue;
    }
    const q = unquoteGo(rest, 0);
    if (q === undefined || rest.slice(q.end).trim() !== '') continue;
    set(key, q.value);
  }
  return labels;
}

/** The workload: POD_NAMESPACE and the labels at ./etc/mesh/pod/labels (none when the file is missing). */
export function readWorkload(cwd: string, namespace: string, labelsWhenAbsent: Readonly<Record<string, string>> = {}): Workload {
  const path = join(cwd, LABELS_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { namespace, labels: { ...labelsWhenAbsent } };
    throw new AgentError('ERR_CONFIG', `${path}: cannot be read: ${(err as Error).message}`, { cause: err });
  }
  return { namespace, labels: parseLabels(text) };
}

/**
 * The workload's locality (`region/zone/subzone`, '' when unknown), from its pod labels: Istio's
 * pilot-agent reads the `istio-locality` label (`.` standing for `/`); without it, istiod takes the
 * node's topology labels, which this agent (no istiod) reads from the pod's own labels:
 * `topology.kubernetes.io/region`, `topology.kubernetes.io/zone` (Kubernetes copies both onto pods
 * with its pod topology labels), `topology.istio.io/subzone`.
 */
export function workloadLocality(labels: Readonly<Record<string, string>>): string {
  const own = Object.hasOwn(labels, LOCALITY_LABEL) ? labels[LOCALITY_LABEL]!.trim() : '';
  if (own !== '') return own.replace(/\./g, '/');
  const get = (k: string): string => (Object.hasOwn(labels, k) ? labels[k]!.trim() : '');
  const region = get(TOPOLOGY_LABELS.region);
  const zone = get(TOPOLOGY_LABELS.zone);
  const subzone = get(TOPOLOGY_LABELS.subzone);
  if (region === '' && zone === '' && subzone === '') return '';
  return subzone !== '' ? `${region}/${zone}/${subzone}` : zone !== '' ? `${region}/${zone}` : region;
}

/** matchLabels semantics: every label of the selector is on the workload; absent or {} selects all. */
export function selects(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (selector === undefined) return true;
  return Object.entries(selector).every(([k, v]) => Object.hasOwn(labels, k) && labels[k] === v);
}

/** Istio's scoping of workload-selecting policies (RequestAuthentication, AuthorizationPolicy). */
export function appliesToWorkload(resource: { readonly meta: { readonly namespace: string }; readonly selector?: LabelSelector | undefined }, workload: Workload): boolean {
  const ns = resource.meta.namespace;
  return (ns === ROOT_NAMESPACE || ns === workload.namespace) && selects(resource.selector, workload.labels);
}

export function requestAuthenticationsFor(snapshot: ResourceSnapshot, workload: Workload): RequestAuthentication[] {
  return snapshot.requestAuthentications.filter((r) => appliesToWorkload(r, workload));
}

export function authorizationPoliciesFor(snapshot: ResourceSnapshot, workload: Workload): AuthorizationPolicy[] {
  return snapshot.authorizationPolicies.filter((p) => appliesToWorkload(p, workload));
}

/**
 * Istio's `exportTo` of a ServiceEntry or VirtualService (`.` already resolved to its namespace):
 * absent or `*`: every namespace; `~`: none; else the namespaces listed.
 */
export function exportedTo(exportTo: readonly string[] | undefined, namespace: string): boolean {
  return exportTo === undefined || exportTo.includes('*') || exportTo.includes(namespace);
}

/**
 * The ServiceEntries a workload of `namespace` sees (exportTo), in snapshot order: the only ones its
 * clusters, routes, DNS names and TLS plans may come from, as Istio scopes its registry per proxy.
 */
export function serviceEntriesFor(entries: readonly ServiceEntry[], namespace: string): ServiceEntry[] {
  return entries.filter((se) => exportedTo(se.exportTo, namespace));
}

/** Gateways whose selector matches the workload's labels, in any namespace. */
export function gatewaysFor(snapshot: ResourceSnapshot, workload: Workload): Gateway[] {
  return snapshot.gateways.filter((g) => selects(g.selector, workload.labels));
}

/** A Gateway's name as VirtualServices refer to it after resolution: `ns/name`. */
export function gatewayRef(gateway: Gateway): string {
  return `${gateway.meta.namespace}/${gateway.meta.name}`;
}

/** VirtualServices bound (spec.gateways) to any of these gateways, in snapshot order. */
export function virtualServicesFor(snapshot: ResourceSnapshot, gateways: readonly Gateway[]): VirtualService[] {
  const refs = new Set(gateways.map(gatewayRef));
  return snapshot.virtualServices.filter((vs) => vs.gateways.some((g) => refs.has(g)));
}
