// A route's header edits as one list per request: the rule's `headers` and then the chosen
// destination's (`route[].headers`), merged as Envoy applies Istio's lists: removals first, then the
// lines in order, a later `set` of a name replacing what was set or added of it before. Pure.
import type { HeaderOperations } from '../config/resources/types.js';

/** Edits as the engine takes them: lower-case names; `set` replaces every line of a name, `add` appends one. */
export interface HeaderEdits {
  readonly set: [string, string][];
  readonly add: [string, string][];
  readonly remove: string[];
}

/** The rule's operations followed by the destination's (either may be absent). */
export function mergedEdits(rule: HeaderOperations | undefined, dest: HeaderOperations | undefined): HeaderEdits {
  const set = new Map<string, string>();
  const add: [string, string][] = [];
  const remove: string[] = [];
  for (const ops of [rule, dest]) {
    if (ops === undefined) continue;
    for (const n of ops.remove) if (!remove.includes(n)) remove.push(n);
    for (const [n, v] of Object.entries(ops.set)) {
      set.set(n, v);
      // A later set replaces what was added of the name before.
      for (let i = add.length - 1; i >= 0; i--) if (add[i]![0] === n) add.splice(i, 1);
    }
    for (const [n, v] of Object.entries(ops.add)) add.push([n, v]);
  }
  return { set: [...set], add, remove };
}

/** Response edits as the engine takes them: the names whose lines go (removed, or set anew), and the lines added. */
export function responseEdits(e: HeaderEdits): { remove: string[]; add: [string, string][] } {
  const remove = [...e.remove];
  for (const [n] of e.set) if (!remove.includes(n)) remove.push(n);
  return { remove, add: [...e.set, ...e.add] };
}
