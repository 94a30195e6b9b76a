// Label maps and Istio's WorkloadSelector (`selector: {matchLabels: {...}}`). Label keys and values
// follow the Kubernetes rules Istio checks them with, so a label Istio refuses is refused here.
import type { LabelSelector } from './types.js';
import { checkFields, child, FieldError, item, optObj, show, stringMap, type Warn } from './fields.js';

/** A label name (or the part after `prefix/`), or a non-empty label value: at most 63 characters. */
const LABEL_NAME = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;
const DNS_SUBDOMAIN = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$/;

function checkLabelKey(key: string, field: string): void {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  const okPrefix = prefix === undefined || (prefix.length <= 253 && DNS_SUBDOMAIN.test(prefix));
  if (!okPrefix || name.length > 63 || !LABEL_NAME.test(name)) {
    throw new FieldError(field, `${show(key)} is not a valid label key (an optional DNS-name prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)`);
  }
}

function checkLabelValue(value: string, field: string): void {
  if (value !== '' && (value.length > 63 || !LABEL_NAME.test(value))) {
    throw new FieldError(field, `${show(value)} is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)`);
  }
}

/** A map of labels (subsets, endpoints, WorkloadEntries, sourceLabels), checked as Kubernetes labels. */
export function labelMap(value: unknown, field: string): Record<string, string> {
  const labels = stringMap(value, field);
  for (const [k, v] of Object.entries(labels)) {
    checkLabelKey(k, item(field, k));
    checkLabelValue(v, item(field, k));
  }
  return labels;
}

/** Absent: undefined (every workload in scope). `{}` or `{matchLabels: {}}` selects every workload too. */
export function parseWorkloadSelector(raw: unknown, field: string): LabelSelector | undefined {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['matchLabels'] });
  return o['matchLabels'] === undefined ? {} : stringMap(o['matchLabels'], child(field, 'matchLabels'));
}

/**
 * Istio's checks of a networking resource's selector (DestinationRule `workloadSelector.matchLabels`,
 * ServiceEntry `workloadSelector.labels`): no empty key, no `*`; no labels at all is allowed with a warning.
 */
export function checkSelectorLabels(labels: Readonly<Record<string, string>>, field: string, warn: Warn, noLabels: string): void {
  for (const [k, v] of Object.entries(labels)) {
    if (k === '') throw new FieldError(item(field, k), 'an empty label key is not allowed in a selector');
    if (k.includes('*') || v.includes('*')) throw new FieldError(item(field, k), `${show(`${k}=${v}`)}: wildcards are not allowed in a selector`);
  }
  if (Object.keys(labels).length === 0) warn(field, noLabels);
}
