// Test knobs from the environment (DIFFERENTIAL_CASES, DIFFERENTIAL_SEED...): a whole number, or the
// fallback when unset or empty; anything else stops the test naming the variable.

export function envCount(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name}=${JSON.stringify(text)}: expected a whole number`);
  return n;
}
