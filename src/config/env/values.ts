// Text → typed value, with Go's strconv semantics so a value accepted by Istio is accepted here.
import type { ValueOf, VarSpec, VarType } from './define.js';
import { DurationSyntaxError, parseDurationMs } from './duration.js';

export type ParseResult<T> = { ok: true; value: T } | { ok: false; expected: string };

const TRUE_WORDS = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE_WORDS = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/** strconv.ParseBool. */
export function parseGoBool(text: string): ParseResult<boolean> {
  if (TRUE_WORDS.has(text)) return { ok: true, value: true };
  if (FALSE_WORDS.has(text)) return { ok: true, value: false };
  return { ok: false, expected: 'a bool (true, false, 1, 0, t, f)' };
}

/** strconv.Atoi: optional sign and decimal digits, nothing else; 64-bit range within JS safety. */
export function parseGoInt(text: string): ParseResult<number> {
  if (/^[+-]?\d+$/.test(text)) {
    const value = Number(text);
    if (Number.isSafeInteger(value)) return { ok: true, value };
  }
  return { ok: false, expected: 'an integer (decimal digits, optional sign)' };
}

/** strconv.ParseFloat for decimal forms, exponents, `Inf` and `NaN`. */
export function parseGoFloat(text: string): ParseResult<number> {
  const t = text.replace(/^\+/, '');
  if (/^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t)) return { ok: true, value: Number(t) };
  if (/^-?(inf|infinity)$/i.test(t)) return { ok: true, value: t.startsWith('-') ? -Infinity : Infinity };
  if (/^nan$/i.test(t)) return { ok: true, value: NaN };
  return { ok: false, expected: 'a number (for example 0.5, 100, 1e-3)' };
}

export function parseGoDuration(text: string): ParseResult<number> {
  try {
    return { ok: true, value: parseDurationMs(text) };
  } catch (err) {
    if (err instanceof DurationSyntaxError) {
      return { ok: false, expected: 'a duration such as 100ms, 30s, 5m0s or 24h0m0s' };
    }
    throw err;
  }
}

const parsers: { [K in VarType]: (text: string) => ParseResult<ValueOf[K]> } = {
  bool: parseGoBool,
  string: (text) => ({ ok: true, value: text }),
  int: parseGoInt,
  duration: parseGoDuration,
  float: parseGoFloat,
};

const listText = (values: readonly string[]): string =>
  values.map((v) => (v === '' ? '(empty)' : v)).join(', ');

/** Parses one variable's text against its declaration: its type, then its allowed values. */
export function parseVariable<S extends VarSpec>(spec: S, text: string): ParseResult<ValueOf[S['type']]> {
  const parsed = parsers[spec.type](text) as ParseResult<ValueOf[S['type']]>;
  if (!parsed.ok) return parsed;
  if (spec.allowed && !spec.allowed.includes(text)) {
    return { ok: false, expected: `one of ${listText(spec.allowed)}` };
  }
  if (spec.allowedList) {
    const items = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
    if (items.some((item) => !spec.allowedList!.includes(item))) {
      return { ok: false, expected: `a comma-separated list of ${listText(spec.allowedList)}` };
    }
  }
  if (spec.range) {
    const n = parsed.value as number;
    if (n < spec.range[0] || n > spec.range[1]) return { ok: false, expected: `a number from ${spec.range[0]} to ${spec.range[1]}` };
  }
  return parsed;
}

/** The declared default as its run-time value (durations are declared in Go syntax). */
export function defaultValue<S extends VarSpec>(spec: S): ValueOf[S['type']] {
  if (spec.type !== 'duration') return spec.default as ValueOf[S['type']];
  const parsed = parseGoDuration(String(spec.default));
  if (!parsed.ok) throw new Error(`bad declared default for ${spec.name}: ${String(spec.default)}`);
  return parsed.value as ValueOf[S['type']];
}
