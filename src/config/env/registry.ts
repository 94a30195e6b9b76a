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

/** A value as an operator writes it (durations in Go syntax). */
function valueText(spec: VarSpec, value: boolean | string | number): string {
  return spec.type === 'duration' && typeof value === 'number' ? formatDurationMs(value) : String(value);
}

/** Why a variable that is not honoured has no effect: the end of its warning, and the docs' column. */
export function noEffectReason(spec: VarSpec): string {
  switch (spec.here) {
    case 'honoured': return '';
    case 'istiod': return `an istiod setting (Istio's pilot-agent ignores it too)${spec.why ? `: ${spec.why}` : ''}`;
    case 'not-applicable': return spec.why ?? '';
    case 'not-supported': return `not supported by this agent yet: ${spec.why ?? ''}`;
  }
}

/**
 * What this agent does with a variable, for docs/ENVIRONMENT.md: `honoured`, or why not, and the value
 * it behaves as (flagged when that is not the default).
 */
export function effectText(spec: VarSpec): string {
  if (spec.here === 'honoured') return spec.note ? `honoured: ${spec.note}` : 'honoured';
  const reason = spec.here === 'istiod' ? noEffectReason(spec) : spec.here === 'not-applicable' ? `no effect: ${spec.why ?? ''}` : noEffectReason(spec);
  if (spec.matches === undefined) return reason;
  const as = `\`${valueText(spec, spec.matches)}\``;
  return spec.matches === defaultValue(spec)
    ? `${reason}. Behaves as the default, ${as}: only another value is warned of`
    : `${reason}. **Behaves as ${as}, not as the default**; set to ${as} it is not warned of`;
}

/**
 * One warning per variable set in the environment (a non-empty value) that has no effect in this
 * agent: it names the variable and why. A value that asks for what the agent does anyway
 * (`matches`) is as good as honoured: nothing is said of it.
 */
export function noEffectWarnings(e: Pick<Environment, 'values' | 'explicit'>): string[] {
  const out: string[] = [];
  const values = e.values as Readonly<Record<string, unknown>>;
  for (const spec of declarations) {
    // An empty string (a manifest's `value: ""`) asks for nothing.
    if (spec.here === 'honoured' || !e.explicit.has(spec.name as EnvName) || values[spec.name] === '') continue;
    if (spec.matches !== undefined && values[spec.name] === spec.matches) continue;
    out.push(`${spec.name} is set but has no effect here: ${noEffectReason(spec)}`);
  }
  return out;
}
