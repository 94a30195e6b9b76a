// Reading samples out of Prometheus text in tests, by name and by the labels that matter (the
// standard metrics carry some 25 labels each: a test names the few it is about).
export interface Sample {
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** The samples of the family member `name` (that exact name: `x_bucket` is not `x`). */
export function samples(text: string, name: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labels: Record<string, string> = {};
    for (const m of line.slice(name.length + 1, line.lastIndexOf('}')).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
    out.push({ labels, value: Number(line.slice(line.lastIndexOf(' ') + 1)) });
  }
  return out;
}

/** The samples of `name` whose labels include every one of `want`. */
export function matching(text: string, name: string, want: Readonly<Record<string, string>>): Sample[] {
  return samples(text, name).filter((s) => Object.entries(want).every(([k, v]) => s.labels[k] === v));
}

/** The sum of the values of `name` whose labels include `want` (0 when none). */
export function sumOf(text: string, name: string, want: Readonly<Record<string, string>>): number {
  return matching(text, name, want).reduce((n, s) => n + s.value, 0);
}
