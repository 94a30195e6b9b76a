// Header field lists (name, value, name, value...): how the frame layer gives a header block and
// takes one. The exchange edits a message's fields as such a list rather than as a node header
// object, which would be built from the list only to be turned back into one (an object, a key
// array and a new list per message).

/** The first value of `name` (lower-case) in `fields`. */
export function fieldValue(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

/** Every value of `name` in `fields`, joined by ', ' (as a header object's array would be); undefined when none. */
export function joinedValue(fields: readonly string[], name: string): string | undefined {
  let out: string | undefined;
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) out = out === undefined ? fields[i + 1] : `${out}, ${fields[i + 1]!}`;
  return out;
}

/** Fields a trailer section never carries on (the framing's, or a connection's). */
const NOT_TRAILERS: ReadonlySet<string> = new Set(['content-length', 'transfer-encoding', 'connection']);

/**
 * Trailers as they go on: the regular fields, names in lower case, without the framing's and the
 * connection's. `fields` itself when nothing changes, as with an HTTP/2 peer's (decoded in lower
 * case, its connection fields refused); a new list otherwise (an HTTP/1.1 upstream's raw trailers).
 */
export function trailerList(fields: readonly string[]): readonly string[] {
  let out: string[] | undefined;
  for (let i = 0; i < fields.length; i += 2) {
    const raw = fields[i]!;
    const name = raw.toLowerCase();
    const dropped = name.charCodeAt(0) === 0x3a || NOT_TRAILERS.has(name);
    if (out === undefined && (dropped || name !== raw)) out = fields.slice(0, i);
    if (out !== undefined && !dropped) out.push(name, fields[i + 1]!);
  }
  return out ?? fields;
}

/** Takes every line whose name is in `names` out of `fields`, in place (`from`: the first line that may go). */
export function removeFields(fields: string[], names: readonly string[], from = 0): void {
  let to = from;
  for (let i = from; i < fields.length; i += 2) {
    if (names.includes(fields[i]!)) continue;
    if (to !== i) {
      fields[to] = fields[i]!;
      fields[to + 1] = fields[i + 1]!;
    }
    to += 2;
  }
  fields.length = to;
}
