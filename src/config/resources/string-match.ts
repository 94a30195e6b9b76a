// Istio's StringMatch (`{exact}`, `{prefix}`, `{regex}`) → the typed form, with the regex compiled
// once as a full match. Istio's regexes are RE2; JavaScript's engine differs, so the RE2 spellings
// operators use are translated (leading `(?i)`/`(?s)`, `(?P<name>`, `\A`, `\z`, `[[:alpha:]]`)
// and what RE2 refuses (lookaround, backreferences) is refused here too, so a resource that works
// here also works in Istio and none can make matching backtrack through a backreference.
import type { StringMatch } from './types.js';
import { checkFields, FieldError, obj, show } from './fields.js';

const POSIX_CLASSES: Readonly<Record<string, string>> = {
  alnum: '0-9A-Za-z', alpha: 'A-Za-z', ascii: '\\x00-\\x7F', blank: '\\t ', cntrl: '\\x00-\\x1F\\x7F',
  digit: '0-9', graph: '!-~', lower: 'a-z', print: ' -~', punct: '!-\\/:-@\\[-`{-~', space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z', word: '0-9A-Za-z_', xdigit: '0-9A-Fa-f',
};

/** Translates an RE2 pattern to a JavaScript source and flags; throws Error with the reason. */
function translate(pattern: string): { source: string; flags: string } {
  let flags = '';
  let at = 0;
  const leading = /^\(\?([a-zA-Z]+)\)/.exec(pattern);
  if (leading) {
    for (const f of leading[1]!) {
      if (f !== 'i' && f !== 's') throw new Error(`the flag (?${f}) is not supported (only i and s)`);
      if (!flags.includes(f)) flags += f;
    }
    at = leading[0].length;
  }
  let out = '';
  let inClass = false;
  while (at < pattern.length) {
    const c = pattern[at]!;
    if (c === '\\') {
      const n = pattern[at + 1];
      if (n === undefined) throw new Error('trailing backslash');
      if (!inClass && /[1-9]/.test(n)) throw new Error('backreferences are not supported (RE2)');
      if (!inClass && n === 'k' && pattern[at + 2] === '<') throw new Error('backreferences are not supported (RE2)');
      // What JavaScript would read with another meaning, refused rather than changed.
      if (n === 'Q' || n === 'E') throw new Error('quoted literals (\\Q...\\E) have no JavaScript equivalent: escape each character instead');
      if (n === 'C') throw new Error('\\C (any single byte) has no JavaScript equivalent');
      if ((n === 'p' || n === 'P') && pattern[at + 2] !== '{') throw new Error(`\\${n} needs braces here (\\${n}{L}, not \\${n}L)`);
      if (!inClass && n === 'A') out += '^';
      else if (!inClass && n === 'z') out += '$';
      else {
        if (n === 'p' || n === 'P') flags += flags.includes('u') ? '' : 'u';
        out += c + n;
      }
      at += 2;
      continue;
    }
    if (inClass) {
      const posix = /^\[:(\^?)([a-z]+):\]/.exec(pattern.slice(at));
      if (posix) {
        const cls = POSIX_CLASSES[posix[2]!];
        if (cls === undefined || posix[1] === '^') throw new Error(`the class ${posix[0]} is not supported`);
        out += cls;
        at += posix[0].length;
        continue;
      }
      if (c === ']') inClass = false;
      out += c;
      at += 1;
      continue;
    }
    if (c === '[') {
      inClass = true;
      out += c;
      at += 1;
      // RE2 (like POSIX) reads a `]` right after `[` or `[^` as a literal; JavaScript as an empty class.
      if (pattern[at] === '^') { out += '^'; at += 1; }
      if (pattern[at] === ']') { out += '\\]'; at += 1; }
      continue;
    }
    if (c === '(' && pattern[at + 1] === '?') {
      const rest = pattern.slice(at + 2);
      if (rest.startsWith('=') || rest.startsWith('!') || rest.startsWith('<=') || rest.startsWith('<!')) {
        throw new Error('lookaround assertions are not supported (RE2)');
      }
      if (rest.startsWith('P<')) {
        out += '(?<';
        at += 4;
        continue;
      }
    }
    out += c;
    at += 1;
  }
  return { source: out, flags };
}

/** Compiles an Istio (RE2) regex as a full match of the value; throws Error naming the problem. */
export function compileFullMatch(pattern: string): RegExp {
  const { source, flags } = translate(pattern);
  return compiled(`^(?:${source})$`, flags);
}

/** Compiles an Istio (RE2) regex to find every match in a value (Envoy's regex_rewrite: RE2 GlobalReplace). */
export function compileGlobal(pattern: string): RegExp {
  const { source, flags } = translate(pattern);
  return compiled(source, `${flags}g`);
}

function compiled(source: string, flags: string): RegExp {
  try {
    return new RegExp(source, flags);
  } catch (err) {
    // Drop the engine's echo of the translated pattern: the operator wrote the original.
    const reason = /: ([^:]+)$/.exec((err as Error).message)?.[1] ?? (err as Error).message;
    throw new Error(reason.toLowerCase());
  }
}

/**
 * An RE2 substitution (`\1`...`\9` a group, `\0` the whole match, `\\` a backslash) in JavaScript's
 * replacement form (`$1`, `$&`, `$$` for a dollar); throws Error for what RE2 refuses (another escape,
 * a group the regex does not have).
 */
export function translateSubstitution(text: string, groups: number): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '$') { out += '$$'; continue; }
    if (c !== '\\') { out += c; continue; }
    const n = text[i + 1];
    i++;
    if (n === '\\') out += '\\';
    else if (n !== undefined && n >= '0' && n <= '9') {
      if (Number(n) > groups) throw new Error(`\\${n} names a group the regex does not have (it has ${groups})`);
      out += n === '0' ? '$&' : `$${n}`;
    } else throw new Error(`\\${n ?? ''} is not a substitution escape (\\0 to \\9, or \\\\ for a backslash)`);
  }
  return out;
}

/** How many capturing groups a compiled regex has. */
export function groupCount(re: RegExp): number {
  return new RegExp(`${re.source}|`, re.flags.replace('g', '')).exec('')!.length - 1;
}

/**
 * A StringMatch. `allowPresent`: `{}` means "present, any value" (header and query matchers, as in
 * Istio); elsewhere exactly one of exact, prefix and regex is required.
 */
export function parseStringMatch(raw: unknown, field: string, opts: { allowPresent?: boolean } = {}): StringMatch {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['exact', 'prefix', 'regex'] });
  const keys = Object.keys(o);
  if (keys.length === 0) {
    if (opts.allowPresent) return { kind: 'present' };
    throw new FieldError(field, 'expected one of exact, prefix or regex');
  }
  if (keys.length > 1) throw new FieldError(field, `expected only one of exact, prefix or regex, got ${keys.join(' and ')}`);
  const kind = keys[0] as 'exact' | 'prefix' | 'regex';
  const at = `${field}.${kind}`;
  const value = o[kind];
  if (typeof value !== 'string') throw new FieldError(at, `expected a string, got ${show(value)}`);
  if (kind !== 'regex') return { kind, value };
  if (value === '') throw new FieldError(at, 'an empty regex is not accepted');
  try {
    return { kind, value, regex: compileFullMatch(value) };
  } catch (err) {
    throw new FieldError(at, `${show(value)} is not a valid regular expression: ${(err as Error).message}`);
  }
}
