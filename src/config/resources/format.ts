// A Rejection (or a ResourceWarning) as the one log line an operator reads.
import type { Rejection, ResourceWarning } from './types.js';

/** `file[index] Kind ns/name: field: message` (the parts the document did not give are left out). */
export function formatRejection(r: Rejection): string {
  let head = `${r.file}[${r.index}]`;
  if (r.kind !== undefined) head += ` ${r.kind}`;
  if (r.name !== undefined) head += ` ${r.namespace ?? '?'}/${r.name}`;
  return r.field === '' ? `${head}: ${r.message}` : `${head}: ${r.field}: ${r.message}`;
}

/** `file[index] Kind ns/name: field: message`, for a field accepted with a warning. */
export function formatWarning(w: ResourceWarning): string {
  return formatRejection(w);
}
