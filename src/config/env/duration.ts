// Go's time.Duration text form, because operators copy values between Istio and this agent:
// `100ms`, `1h30m`, `1.5s`, `-2m`, `0`. Parsed exactly (integer nanoseconds, as Go does) and
// printed back the way Go prints (`5m0s`, `24h0m0s`).

const NS_PER: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  'µs': 1_000n, // U+00B5 micro sign
  'μs': 1_000n, // U+03BC Greek mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};
const MAX_NS = (1n << 63n) - 1n;

export class DurationSyntaxError extends Error {
  constructor(readonly input: string, reason: string) {
    super(`invalid duration "${input}": ${reason}`);
    this.name = 'DurationSyntaxError';
  }
}

/**
 * The fraction's share of a unit, computed the way Go does (digits kept while they fit in int64,
 * then one float64 multiplication, truncated), so `0.3333333333333333333h` is exactly 20m as in Go.
 */
function fractionNs(digits: string, unit: bigint): bigint {
  let x = 0n;
  let scale = 1n;
  for (const d of digits) {
    if (x > MAX_NS / 10n) break;
    x = x * 10n + BigInt(d);
    scale *= 10n;
  }
  return BigInt(Math.trunc(Number(x) * (Number(unit) / Number(scale))));
}

/** Parses a Go duration string into nanoseconds. Throws DurationSyntaxError. */
export function parseDurationNs(input: string): bigint {
  let rest = input;
  let negative = false;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    negative = rest[0] === '-';
    rest = rest.slice(1);
  }
  if (rest === '0') return 0n;
  if (rest === '') throw new DurationSyntaxError(input, 'empty');
  let total = 0n;
  while (rest !== '') {
    const m = /^(\d*)(?:\.(\d*))?([^\d.]+)/.exec(rest);
    if (!m || (m[1] === '' && (m[2] ?? '') === '')) {
      throw new DurationSyntaxError(input, 'expected a number followed by a unit (ns, us, ms, s, m, h)');
    }
    const [whole, intPart = '', fracPart = '', unitText = ''] = m;
    const unit = NS_PER[unitText];
    if (unit === undefined) {
      throw new DurationSyntaxError(input, `unknown unit "${unitText}" (use ns, us, ms, s, m or h)`);
    }
    total += BigInt(intPart || '0') * unit + fractionNs(fracPart, unit);
    if (total > MAX_NS + (negative ? 1n : 0n)) throw new DurationSyntaxError(input, 'out of range');
    rest = rest.slice(whole.length);
  }
  return negative ? -total : total;
}

/** Parses a Go duration string into milliseconds (fractional below 1 ms). */
export function parseDurationMs(input: string): number {
  return Number(parseDurationNs(input)) / 1e6;
}

function fraction(value: bigint, digits: number): string {
  const text = value.toString().padStart(digits, '0').replace(/0+$/, '');
  return text === '' ? '' : `.${text}`;
}

/** Prints nanoseconds the way Go's Duration.String does. */
export function formatDurationNs(ns: bigint): string {
  if (ns === 0n) return '0s';
  const sign = ns < 0n ? '-' : '';
  const u = ns < 0n ? -ns : ns;
  if (u < 1_000n) return `${sign}${u}ns`;
  if (u < 1_000_000n) return `${sign}${u / 1_000n}${fraction(u % 1_000n, 3)}µs`;
  if (u < 1_000_000_000n) return `${sign}${u / 1_000_000n}${fraction(u % 1_000_000n, 6)}ms`;
  const seconds = `${(u / 1_000_000_000n) % 60n}${fraction(u % 1_000_000_000n, 9)}s`;
  const totalMinutes = u / 60_000_000_000n;
  if (totalMinutes === 0n) return `${sign}${seconds}`;
  const hours = totalMinutes / 60n;
  const minutes = totalMinutes % 60n;
  return hours === 0n ? `${sign}${minutes}m${seconds}` : `${sign}${hours}h${minutes}m${seconds}`;
}

/** Prints milliseconds the way Go prints the same duration. */
export function formatDurationMs(ms: number): string {
  return formatDurationNs(BigInt(Math.round(ms * 1e6)));
}
