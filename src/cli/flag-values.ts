// Typed parsers for flag values. Each throws commander's InvalidArgumentError, which commander turns
// into `option '--flag <x>' argument 'value' is invalid. <reason>` and we turn into exit code 2.
import { InvalidArgumentError } from 'commander';
import { parseGoDuration, parseGoInt } from '../config/env/values.js';

function integer(text: string, min: number, max: number, kind: string): number {
  const parsed = parseGoInt(text.trim());
  if (!parsed.ok || parsed.value < min || parsed.value > max) {
    throw new InvalidArgumentError(`Expected ${kind} (${min} to ${max}).`);
  }
  return parsed.value;
}

export const nonNegativeIntValue = (text: string): number =>
  integer(text, 0, Number.MAX_SAFE_INTEGER, 'a non-negative integer');
export const int32Value = (text: string): number => integer(text, -(2 ** 31), 2 ** 31 - 1, 'a 32-bit integer');
export const uint16Value = (text: string): number => integer(text, 0, 65535, 'a 16-bit unsigned integer');

/** Go duration (`5s`, `500ms`) → milliseconds. */
export function durationValue(text: string): number {
  const parsed = parseGoDuration(text.trim());
  if (!parsed.ok) throw new InvalidArgumentError(`Expected ${parsed.expected}.`);
  return parsed.value;
}

/** Appends to an array flag (`--log_target` repeated); the first use replaces the default. */
export function collect(value: string, previous: string[] | undefined, defaults: readonly string[]): string[] {
  return previous === undefined || previous === defaults ? [value] : [...previous, value];
}
