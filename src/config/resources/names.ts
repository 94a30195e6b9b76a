// The shapes of names inside resources: Kubernetes object names and namespaces, host patterns and
// HTTP header names. Each check throws a FieldError naming the value and the accepted form.
import { isIpAddress } from './addresses.js';
import { FieldError, item, optStrList, show } from './fields.js';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** RFC 9110 token characters. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HOST_LABEL = /^[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?$/;

/** metadata.name: a DNS subdomain (lower-case letters, digits, `-` and `.`, at most 253). */
export function checkName(name: string, field: string): string {
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    throw new FieldError(field, `${show(name)} is not a valid name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)`);
  }
  return name;
}

/** A namespace: a DNS label (lower-case letters, digits and `-`, at most 63). */
export function checkNamespace(ns: string, field: string): string {
  if (ns.length > 63 || !DNS_LABEL.test(ns)) {
    throw new FieldError(field, `${show(ns)} is not a valid namespace (lower-case letters, digits and '-', at most 63)`);
  }
  return ns;
}

/**
 * A host pattern, returned lower-cased: `*`, `*.suffix` or a name (an IP address is a name here).
 * `*` may only stand alone or as the whole first label, as in Istio.
 */
export function checkHostPattern(host: string, field: string): string {
  const h = host.toLowerCase();
  if (h === '*' || isIpAddress(h)) return h;
  const rest = h.startsWith('*.') ? h.slice(2) : h;
  const labels = rest.split('.');
  // A trailing dot (FQDN form) is not accepted: a Host header never carries it.
  const ok = h.length <= 253 && labels.every((l) => l.length <= 63 && HOST_LABEL.test(l));
  if (!ok) {
    throw new FieldError(field, `${show(host)} is not a valid host (a DNS name, '*', or '*.' followed by a DNS name)`);
  }
  return h;
}

export function checkHeaderName(name: string, field: string): string {
  if (!HEADER_NAME.test(name)) throw new FieldError(field, `${show(name)} is not a valid HTTP header name`);
  return name;
}

/**
 * Istio's `exportTo`: `.` (the resource's namespace, resolved here), `*` (every namespace), namespaces,
 * and for a ServiceEntry `~` (no namespace). No repeats, and `*` or `~` only alone. Absent or empty: undefined.
 */
export function parseExportTo(raw: unknown, field: string, namespace: string, opts: { allowNone?: boolean } = {}): string[] | undefined {
  const values = optStrList(raw, field, { nonEmptyItems: true }) ?? [];
  if (values.length === 0) return undefined;
  const out: string[] = [];
  values.forEach((v, i) => {
    const resolved = v === '.' ? namespace : v === '*' || (v === '~' && opts.allowNone) ? v : checkNamespace(v, item(field, i));
    const earlier = out.indexOf(resolved);
    if (earlier >= 0) {
      const viaDot = v === '.' || values[earlier] === '.';
      throw new FieldError(item(field, i), viaDot ? `"." and ${show(namespace)} are the same namespace, already listed` : `${show(v)} is listed twice`);
    }
    out.push(resolved);
  });
  if (out.includes('*') && out.length > 1) throw new FieldError(field, `${show(values)}: "*" already exports to every namespace; give it alone`);
  if (out.includes('~') && out.length > 1) throw new FieldError(field, `${show(values)}: "~" exports to no namespace; give it alone`);
  return out;
}
