// Reads the process environment against the declared variables, once, into a frozen typed record.
// A value that does not parse is not fatal here: the default is used and the problem is returned,
// so every command can report it and `proxy` can refuse to start.
import type { ValueOf, VarSpec } from './define.js';
import { formatDurationMs } from './duration.js';
import { defaultValue, parseVariable } from './values.js';
import { variables } from './variables.js';

type Declared = (typeof variables)[number];
export type EnvName = Declared['name'];

/** Every variable by name, with its run-time type (durations in milliseconds). */
export type EnvValues = {
  readonly [V in Declared as V['name']]: ValueOf[V['type']];
};

export interface EnvProblem {
  readonly name: EnvName;
  readonly value: string;
  readonly type: VarSpec['type'];
  /** What would have been accepted. */
  readonly expected: string;
  /** The default used instead, as text. */
  readonly defaultText: string;
}

export interface Environment {
  readonly values: EnvValues;
  readonly problems: readonly EnvProblem[];
  /** Names that were set (non-empty) in the environment. */
  readonly explicit: ReadonlySet<EnvName>;
}

/** The declarations, widened for code that walks all of them. */
export const declarations: readonly VarSpec[] = variables;

const byName = new Map<string, VarSpec>(declarations.map((v) => [v.name, v]));

export function lookupVariable(name: string): VarSpec | undefined {
  return byName.get(name);
}

/** The default of a declaration printed as an operator writes it. */
export function defaultText(spec: VarSpec): string {
  if (spec.type === 'duration') return formatDurationMs(defaultValue(spec) as number);
  return String(spec.default);
}

/**
 * Typed values for all declared variables. An empty value counts as unset for the non-string
 * types (manifests often carry `value: ""`); for strings the empty string is a real value.
 */
export function readEnvironment(env: Readonly<Record<string, string | undefined>>): Environment {
  const values: Record<string, unknown> = {};
  const problems: EnvProblem[] = [];
  const explicit = new Set<EnvName>();
  for (const spec of variables as readonly (VarSpec & { name: EnvName })[]) {
    const text = env[spec.name];
    values[spec.name] = defaultValue(spec);
    if (text === undefined || (text === '' && spec.type !== 'string')) continue;
    const parsed = parseVariable(spec, text);
    if (parsed.ok) {
      values[spec.name] = parsed.value;
      explicit.add(spec.name);
    } else {
      problems.push({
        name: spec.name, value: text, type: spec.type, expected: parsed.expected, defaultText: defaultText(spec),
      });
    }
  }
  return { values: Object.freeze(values) as EnvValues, problems: Object.freeze(problems), explicit };
}

/** One line for stderr naming the variable, the value, the expected type and the default used. */
export function describeProblem(p: EnvProblem): string {
  const shown = p.defaultText === '' ? '(empty)' : p.defaultText;
  return `invalid value for environment variable ${p.name}: ${JSON.stringify(p.value)} is not ${p.expected} `
    + `(type ${p.type}); using the default ${shown}`;
}
