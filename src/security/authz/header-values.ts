// What a request header offers to a policy value (pure). A header may arrive as several lines
// (a string[], or one string node:http joined with ", ") or as one comma-separated list, and the
// backend may read any element of it: `x-role: user` + `x-role: admin` and `x-role: user, admin`
// both tell it "admin". So a policy reads every reading of the header, its candidates:
//   - every comma-separated element (trimmed, empty ones left out) of every line,
//   - every whole line, and, for several lines, the lines joined with ", " (the whole value).
// `values` holds when any candidate matches, `notValues` when none does. String and list forms of
// one header give the same candidates, so how node:http happened to join them does not matter.

/** Edits the proxy makes before forwarding, as policy must see them (set wins, removed ones are absent). */
export interface AuthzHeaderEdits {
  /** Lower-case names. */
  readonly remove: readonly string[];
  readonly set: readonly (readonly [string, string])[];
}

export type HeaderValue = string | readonly string[] | undefined;

function addElements(line: string, out: string[]): void {
  for (const piece of line.split(',')) {
    const element = piece.trim();
    if (element !== '' && !out.includes(element)) out.push(element);
  }
}

/** The candidates of a header value (above); undefined when the header is absent. */
export function headerCandidates(value: HeaderValue): readonly string[] | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') {
    if (!value.includes(',')) return [value];
    const out = [value];
    addElements(value, out);
    return out;
  }
  if (value.length === 0) return undefined;
  if (value.length === 1) return headerCandidates(value[0]);
  const out: string[] = [];
  for (const line of value) if (!out.includes(line)) out.push(line);
  const joined = value.join(', ');
  if (!out.includes(joined)) out.push(joined);
  for (const line of value) addElements(line, out);
  return out;
}

/**
 * Header `name` (lower-case) as the backend will get it: the value an edit sets (every set line),
 * absent if an edit removes it, else the request's own.
 */
export function editedHeader(
  headers: Readonly<Record<string, HeaderValue>>, edits: AuthzHeaderEdits | undefined, name: string,
): HeaderValue {
  if (edits !== undefined) {
    let set: string[] | undefined;
    for (const [n, v] of edits.set) if (n.toLowerCase() === name) (set ??= []).push(v);
    if (set !== undefined) return set.length === 1 ? set[0] : set;
    if (edits.remove.includes(name)) return undefined;
  }
  return headers[name];
}
