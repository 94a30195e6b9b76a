// A checker of Prometheus text format 0.0.4, written apart from src/metrics (it must not share the
// parser it checks). It reports what a Prometheus server would refuse or misread: bad lines, a
// second HELP/TYPE, TYPE after samples, a family split in two, a series twice, broken histograms.

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+(-?\d+))?[ \t]*$/;
const LABEL = /^[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\[\\"n])*)"[ \t]*(,|$)/;
const NUMBER = /^(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)$/i;
const TYPES = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

function suffixes(type: string): string[] {
  if (type === 'histogram') return ['_bucket', '_sum', '_count'];
  if (type === 'summary') return ['_sum', '_count'];
  return [];
}

export interface ParsedSample {
  readonly family: string;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** Problems found, one message each (empty when the text is valid); `samples` for further checks. */
export function validatePrometheusText(text: string): { problems: string[]; samples: ParsedSample[] } {
  const problems: string[] = [];
  const samples: ParsedSample[] = [];
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const finished = new Set<string>();
  const seenSeries = new Set<string>();
  const withSamples = new Set<string>();
  let current: string | undefined;
  const enter = (family: string, n: number): void => {
    if (current === family) return;
    if (finished.has(family)) problems.push(`line ${n}: family ${family} appears again after other families`);
    if (current !== undefined) finished.add(current);
    current = family;
  };
  if (text !== '' && !text.endsWith('\n')) problems.push('text does not end with a newline');
  text.split('\n').forEach((line, i) => {
    const n = i + 1;
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!m) return;
      const [, kind, name, rest] = m as unknown as [string, string, string, string | undefined];
      if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(name)) problems.push(`line ${n}: bad name ${name}`);
      enter(name, n);
      if (kind === 'HELP') {
        if (helps.has(name)) problems.push(`line ${n}: second HELP for ${name}`);
        helps.add(name);
      } else {
        if (types.has(name)) problems.push(`line ${n}: second TYPE for ${name}`);
        if (withSamples.has(name)) problems.push(`line ${n}: TYPE for ${name} after its samples`);
        if (!TYPES.includes(rest ?? '')) problems.push(`line ${n}: unknown type ${rest ?? ''}`);
        types.set(name, rest ?? '');
      }
      return;
    }
    const m = SAMPLE.exec(line);
    if (!m) {
      problems.push(`line ${n}: not a sample: ${line}`);
      return;
    }
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string];
    const labels: Record<string, string> = {};
    let rest = labelText ?? '';
    while (rest.trim() !== '') {
      const l = LABEL.exec(rest);
      if (!l) {
        problems.push(`line ${n}: bad labels {${labelText ?? ''}}`);
        break;
      }
      if (l[1]! in labels) problems.push(`line ${n}: label ${l[1]!} twice`);
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      rest = rest.slice(l[0].length);
    }
    if (!NUMBER.test(valueText)) problems.push(`line ${n}: bad value ${valueText}`);
    let family = name;
    if (current !== undefined && current !== name && suffixes(types.get(current) ?? '').some((s) => name === current + s)) family = current;
    const type = types.get(family) ?? 'untyped';
    if (type === 'histogram' && name === family) problems.push(`line ${n}: histogram ${family} has a sample without suffix`);
    enter(family, n);
    withSamples.add(family);
    const key = `${name}{${Object.keys(labels).sort().map((k) => `${k}=${JSON.stringify(labels[k])}`).join(',')}}`;
    if (seenSeries.has(key)) problems.push(`line ${n}: series ${key} twice`);
    seenSeries.add(key);
    samples.push({ family, name, labels, value: Number(valueText.replace(/^\+?Inf$/i, 'Infinity').replace(/^-Inf$/i, '-Infinity')) });
  });

  // Histograms: per series, cumulative buckets ending in +Inf equal to _count, and a _sum.
  for (const [family, type] of types) {
    if (type !== 'histogram') continue;
    const groups = new Map<string, ParsedSample[]>();
    for (const s of samples.filter((x) => x.family === family)) {
      const { le, ...rest } = s.labels;
      void le;
      const key = JSON.stringify(Object.entries(rest).sort());
      groups.set(key, [...(groups.get(key) ?? []), s]);
    }
    for (const [key, group] of groups) {
      const buckets = group.filter((s) => s.name === `${family}_bucket`);
      const count = group.find((s) => s.name === `${family}_count`);
      if (!group.some((s) => s.name === `${family}_sum`)) problems.push(`${family}${key}: no _sum`);
      if (!count) problems.push(`${family}${key}: no _count`);
      const inf = buckets.find((s) => s.labels['le'] === '+Inf');
      if (!inf) problems.push(`${family}${key}: no +Inf bucket`);
      else if (count && inf.value !== count.value) problems.push(`${family}${key}: +Inf bucket ${inf.value} != count ${count.value}`);
      const sorted = [...buckets].sort((a, b) => Number(a.labels['le']!.replace('+Inf', 'Infinity')) - Number(b.labels['le']!.replace('+Inf', 'Infinity')));
      for (let i = 1; i < sorted.length; i++) {
        if (sorted[i]!.value < sorted[i - 1]!.value) problems.push(`${family}${key}: buckets not cumulative at le=${sorted[i]!.labels['le']!}`);
      }
    }
  }
  return { problems, samples };
}

/** Asserts validity with the problems in the message. */
export function assertValidPrometheusText(text: string): ParsedSample[] {
  const { problems, samples } = validatePrometheusText(text);
  if (problems.length > 0) throw new Error(`invalid Prometheus text:\n  ${problems.join('\n  ')}\n---\n${text}`);
  return samples;
}

/** The family names in the order they appear. */
export function familyOrder(text: string): string[] {
  const names: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+)/.exec(line);
    if (m) names.push(m[1]!);
  }
  return names;
}
