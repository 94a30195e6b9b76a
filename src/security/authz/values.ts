// The value syntax of AuthorizationPolicy fields and `when` values: exact, `prefix*`, `*suffix`,
// and `*` alone meaning "present and non-empty". Pure.

/** Istio's order: `*`, then a leading `*` (suffix), then a trailing `*` (prefix), else exact. */
export function matchValue(pattern: string, value: string | undefined): boolean {
  if (value === undefined) return false;
  if (pattern === '*') return value !== '';
  if (pattern.charCodeAt(0) === 0x2a /* * */) return value.endsWith(pattern.slice(1));
  if (pattern.charCodeAt(pattern.length - 1) === 0x2a) return value.startsWith(pattern.slice(0, -1));
  return value === pattern;
}

/** True when any pattern matches any of the values. */
export function matchAny(patterns: readonly string[], values: readonly string[]): boolean {
  for (const p of patterns) for (const v of values) if (matchValue(p, v)) return true;
  return false;
}
