// Typed readers for the untyped documents a YAML/JSON parser returns. Each takes the value and its
// field path (`spec.http[0].route`) and either returns the typed value or throws a FieldError whose
// message names the value and what is accepted, so a validator reads like the schema it enforces.
import { DurationSyntaxError, parseDurationNs } from '../env/duration.js';

/** A field that does not validate: where it is and what is wrong. */
export class FieldError extends Error {
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.name = 'FieldError';
    this.field = field;
  }
}

export type Obj = Readonly<Record<string, unknown>>;

/** `spec` + `http` → `spec.http`; the root joins to the bare key. */
export function child(parent: string, key: string): string {
  return parent === '' ? key : `${parent}.${key}`;
}

/** `spec.http` + 0 → `spec.http[0]`; map keys (which may hold dots) use the same bracket form. */
export function item(parent: string, index: number | string): string {
  return `${parent}[${index}]`;
}

/** A short, quoted rendering of a value for messages (never the whole of a large value). */
export function show(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** What a value is, for "expected X, got Y" messages. */
export function describe(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  switch (typeof value) {
    case 'string': return `the string ${show(value)}`;
    case 'number': return `the number ${show(value)}`;
    case 'boolean': return `the boolean ${show(value)}`;
    case 'object': return 'a mapping';
    default: return typeof value;
  }
}

function expected(field: string, what: string, value: unknown): FieldError {
  return new FieldError(field, `expected ${what}, got ${describe(value)}`);
}

export function isObj(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function obj(value: unknown, field: string): Obj {
  if (value === undefined || value === null) throw new FieldError(field, 'required (a mapping)');
  if (!isObj(value)) throw expected(field, 'a mapping', value);
  return value;
}

export function optObj(value: unknown, field: string): Obj | undefined {
  return value === undefined ? undefined : obj(value, field);
}

export function str(value: unknown, field: string, opts: { nonEmpty?: boolean } = {}): string {
  if (value === undefined || value === null) throw new FieldError(field, 'required (a string)');
  if (typeof value !== 'string') throw expected(field, 'a string', value);
  if (opts.nonEmpty && value === '') throw new FieldError(field, 'must not be empty');
  return value;
}

export function optStr(value: unknown, field: string, opts: { nonEmpty?: boolean } = {}): string | undefined {
  return value === undefined ? undefined : str(value, field, opts);
}

export function optBool(value: unknown, field: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw expected(field, 'true or false', value);
  return value;
}

export function int(value: unknown, field: string, min: number, max: number): number {
  if (value === undefined || value === null) throw new FieldError(field, `required (an integer from ${min} to ${max})`);
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw expected(field, `an integer from ${min} to ${max}`, value);
  }
  return value;
}

export function optInt(value: unknown, field: string, min: number, max: number): number | undefined {
  return value === undefined ? undefined : int(value, field, min, max);
}

export function list(value: unknown, field: string, opts: { nonEmpty?: boolean } = {}): readonly unknown[] {
  if (value === undefined || value === null) throw new FieldError(field, 'required (a list)');
  if (!Array.isArray(value)) throw expected(field, 'a list', value);
  if (opts.nonEmpty && value.length === 0) throw new FieldError(field, 'must not be empty');
  return value;
}

/** An optional list: absent is the empty list. */
export function optList(value: unknown, field: string): readonly unknown[] {
  return value === undefined ? [] : list(value, field);
}

export function strList(value: unknown, field: string, opts: { nonEmpty?: boolean; nonEmptyItems?: boolean } = {}): string[] {
  return list(value, field, opts).map((v, i) => str(v, item(field, i), { nonEmpty: opts.nonEmptyItems ?? false }));
}

export function optStrList(value: unknown, field: string, opts: { nonEmptyItems?: boolean } = {}): string[] | undefined {
  return value === undefined ? undefined : strList(value, field, opts);
}

/** A mapping of strings to strings (label selectors, header edits). */
export function stringMap(value: unknown, field: string): Record<string, string> {
  const o = obj(value, field);
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, str(v, item(field, k))]));
}

/**
 * Collects warnings: a field accepted as Istio accepts it, but worth telling the operator about
 * (Istio itself ignores it, or Istio's own validation warns about it).
 */
export type Warn = (field: string, message: string) => void;

/** For validators called without a collector (warnings dropped). */
export const IGNORE_WARNINGS: Warn = () => {};

export interface FieldSet {
  /** Fields this agent reads. */
  readonly supported: readonly string[];
  /** Fields accepted without effect and without a word (metadata-like fields such as `status`). */
  readonly ignored?: readonly string[];
  /** Istio fields whose meaning this agent cannot honour: a rejection rather than a silent change. */
  readonly unsupported?: readonly string[];
  /** Istio fields this agent will honour but does not yet: refused, naming what they would do (field → what). */
  readonly pending?: Readonly<Record<string, string>>;
  /** Istio fields Istio itself ignores: accepted with a warning saying so (field → why). */
  readonly istioIgnores?: Readonly<Record<string, string>>;
}

/** Rejects fields that are not part of the schema (a misspelt field would otherwise be ignored). */
export function checkFields(o: Obj, field: string, set: FieldSet, warn: Warn = IGNORE_WARNINGS): void {
  for (const key of Object.keys(o)) {
    if (set.supported.includes(key) || set.ignored?.includes(key)) continue;
    if (set.unsupported?.includes(key)) throw new FieldError(child(field, key), 'is not supported by this agent');
    const pending = set.pending !== undefined && Object.hasOwn(set.pending, key) ? set.pending[key] : undefined;
    if (pending !== undefined) throw new FieldError(child(field, key), `is not supported yet: ${pending}`);
    const ignoredByIstio = set.istioIgnores !== undefined && Object.hasOwn(set.istioIgnores, key) ? set.istioIgnores[key] : undefined;
    if (ignoredByIstio !== undefined) {
      warn(child(field, key), ignoredByIstio);
      continue;
    }
    const where = field === '' ? 'here' : `in ${field}`;
    const accepted = [...set.supported, ...(set.ignored ?? []), ...Object.keys(set.istioIgnores ?? {})];
    throw new FieldError(child(field, key), `unknown field ${show(key)} ${where}; accepted: ${accepted.join(', ')}`);
  }
}

/** Istio's int32 counters (connection pool limits): 0 to 2^31 - 1. */
export const INT32_MAX = 2147483647;
/** Istio's uint32 values (UInt32Value wrappers): 0 to 2^32 - 1. */
export const UINT32_MAX = 4294967295;

const NS_PER_MS = 1_000_000n;

/**
 * A duration as Istio reads it (Go's text form: `10s`, `1.5s`, `100ms`, `1m30s`) → milliseconds,
 * checked as Istio checks durations: whole milliseconds only, and at least 1ms unless `zero` is
 * allowed (a cookie TTL of 0s means a session cookie).
 */
export function duration(value: unknown, field: string, opts: { zero?: boolean } = {}): number {
  if (value === undefined || value === null) throw new FieldError(field, 'required (a duration such as 100ms, 5s or 1m30s)');
  if (typeof value !== 'string') throw expected(field, 'a duration such as 100ms, 5s or 1m30s', value);
  let ns: bigint;
  try {
    ns = parseDurationNs(value);
  } catch (err) {
    if (err instanceof DurationSyntaxError) throw new FieldError(field, `${show(value)} is not a duration such as 100ms, 5s or 1m30s`);
    throw err;
  }
  if (ns < 0n) throw new FieldError(field, `${show(value)} is negative; a duration is 1ms or more`);
  if (ns === 0n && opts.zero) return 0;
  if (ns < NS_PER_MS) throw new FieldError(field, `${show(value)} is shorter than 1ms, which Istio refuses`);
  if (ns % NS_PER_MS !== 0n) throw new FieldError(field, `${show(value)} is not a whole number of milliseconds, which Istio refuses`);
  return Number(ns / NS_PER_MS);
}

export function optDuration(value: unknown, field: string, opts: { zero?: boolean } = {}): number | undefined {
  return value === undefined ? undefined : duration(value, field, opts);
}

/** One of a closed set of words; `fold` makes the input case-insensitive (the output is upper-case). */
export function oneOf<T extends string>(value: unknown, field: string, allowed: readonly T[], opts: { fold?: boolean } = {}): T {
  const text = str(value, field);
  const key = opts.fold ? text.toUpperCase() : text;
  if (!(allowed as readonly string[]).includes(key)) throw new FieldError(field, `${show(text)} is not one of ${allowed.join(', ')}`);
  return key as T;
}
