// Istio's WorkloadSelector (`selector: {matchLabels: {...}}`) of the security resources.
import type { LabelSelector } from './types.js';
import { checkFields, child, optObj, stringMap } from './fields.js';

/** Absent: undefined (every workload in scope). `{}` or `{matchLabels: {}}` selects every workload too. */
export function parseWorkloadSelector(raw: unknown, field: string): LabelSelector | undefined {
  const o = optObj(raw, field);
  if (o === undefined) return undefined;
  checkFields(o, field, { supported: ['matchLabels'] });
  return o['matchLabels'] === undefined ? {} : stringMap(o['matchLabels'], child(field, 'matchLabels'));
}
