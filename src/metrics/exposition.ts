// Prometheus text format 0.0.4 (and OpenMetrics, read as 0.0.4): parse, merge, filter, render.
// Pure. The merged endpoint (15020) and the admin's /stats/prometheus re-render through it, so what
// they answer is always valid text: one HELP/TYPE per family, no series twice.

export type FamilyType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  readonly name: string;
  /** Label pairs in their order, values unescaped. */
  readonly labels: readonly (readonly [string, string])[];
  /** The value as written (a float, `NaN`, `+Inf`, `-Inf`). */
  readonly value: string;
  readonly timestamp?: string;
}

export interface Family {
  readonly name: string;
  readonly type: FamilyType;
  /** Escaped as in the text (`\\` and `\n`); undefined when the family had no HELP line. */
  readonly help?: string;
  readonly samples: readonly Sample[];
}

export class ExpositionError extends Error {
  constructor(readonly line: number, message: string) {
    super(`line ${line}: ${message}`);
    this.name = 'ExpositionError';
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)$/i;
const TIMESTAMP = /^-?\d+$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
/** OpenMetrics types, as they become 0.0.4 types. */
const OPEN_METRICS_TYPES: Record<string, FamilyType> = {
  unknown: 'untyped', info: 'gauge', stateset: 'gauge', gaugehistogram: 'untyped',
};

/** Sample-name suffixes each type owns (`foo_bucket` belongs to histogram `foo`). */
function suffixesOf(type: FamilyType, openMetrics: boolean): readonly string[] {
  switch (type) {
    case 'histogram': return openMetrics ? ['_bucket', '_sum', '_count', '_created'] : ['_bucket', '_sum', '_count'];
    case 'summary': return openMetrics ? ['_sum', '_count', '_created'] : ['_sum', '_count'];
    case 'counter': return openMetrics ? ['_total', '_created'] : [];
    default: return [];
  }
}

interface MutableFamily {
  name: string;
  type: FamilyType;
  typed: boolean;
  help?: string;
  samples: Sample[];
  keys: Set<string>;
  /** OpenMetrics `info` and `gaugehistogram` families, whose sample names differ from 0.0.4's. */
  openMetricsType?: 'info' | 'gaugehistogram';
}

const OPEN_METRICS_SUFFIXES = { info: ['_info'], gaugehistogram: ['_bucket', '_gsum', '_gcount'] } as const;

function seriesKey(s: Sample): string {
  return `${s.name}{${[...s.labels].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`;
}

/** Reads `{a="x",b="y"}` from `text` at `i`; returns the labels and the index after `}`. */
function parseLabels(text: string, start: number, line: number): { labels: [string, string][]; end: number } {
  const labels: [string, string][] = [];
  const seen = new Set<string>();
  let i = start + 1;
  const skip = (): void => { while (text[i] === ' ' || text[i] === '\t') i++; };
  for (;;) {
    skip();
    if (text[i] === '}') return { labels, end: i + 1 };
    const name = LABEL_NAME.exec(text.slice(i))?.[0];
    if (!name) throw new ExpositionError(line, `bad label name at "${text.slice(i, i + 20)}"`);
    if (seen.has(name)) throw new ExpositionError(line, `label "${name}" given twice`);
    seen.add(name);
    i += name.length;
    skip();
    if (text[i] !== '=') throw new ExpositionError(line, `expected "=" after label "${name}"`);
    i++;
    skip();
    if (text[i] !== '"') throw new ExpositionError(line, `expected a quoted value for label "${name}"`);
    i++;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new ExpositionError(line, `unterminated value of label "${name}"`);
      if (c === '"') break;
      if (c === '\\') {
        const e = text[i + 1];
        if (e === '\\') value += '\\';
        else if (e === '"') value += '"';
        else if (e === 'n') value += '\n';
        else throw new ExpositionError(line, `bad escape "\\${e ?? ''}" in label "${name}"`);
        i += 2;
      } else {
        value += c;
        i++;
      }
    }
    i++;
    labels.push([name, value]);
    skip();
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new ExpositionError(line, `expected "," or "}" after label "${name}"`);
  }
}

function parseSample(text: string, line: number, openMetrics: boolean): Sample {
  const name = METRIC_NAME.exec(text)?.[0];
  if (!name) throw new ExpositionError(line, `bad metric name in "${text.slice(0, 40)}"`);
  let i = name.length;
  while (text[i] === ' ' || text[i] === '\t') i++;
  let labels: [string, string][] = [];
  if (text[i] === '{') ({ labels, end: i } = parseLabels(text, i, line));
  else i = name.length;
  let rest = text.slice(i);
  // OpenMetrics exemplars (` # {...} 1.0`) have no place in 0.0.4 text.
  if (openMetrics) rest = rest.replace(/\s#\s.*$/, '');
  const fields = rest.trim().split(/[ \t]+/);
  if (!/^[ \t]/.test(rest) || fields.length < 1 || fields.length > 2 || fields[0] === '') {
    throw new ExpositionError(line, `expected "<value> [<timestamp>]" after ${name}`);
  }
  const [value, timestamp] = fields as [string, string | undefined];
  if (!FLOAT.test(value)) throw new ExpositionError(line, `"${value}" is not a number (${name})`);
  if (timestamp !== undefined) {
    if (TIMESTAMP.test(timestamp)) return { name, labels, value, timestamp };
    // OpenMetrics timestamps are seconds (maybe fractional); 0.0.4 wants integer milliseconds.
    if (openMetrics && FLOAT.test(timestamp) && Number.isFinite(Number(timestamp))) {
      return { name, labels, value, timestamp: String(Math.round(Number(timestamp) * 1000)) };
    }
    throw new ExpositionError(line, `"${timestamp}" is not a timestamp (${name})`);
  }
  return { name, labels, value };
}

/**
 * Parses Prometheus text format 0.0.4 (and, with `openMetrics`, OpenMetrics 1.0, converted to
 * 0.0.4: `# EOF`, `# UNIT`, exemplars and `_created` samples dropped, counters named `_total`).
 * Throws ExpositionError naming the line for anything a Prometheus server would refuse.
 */
export function parseExposition(text: string, options: { openMetrics?: boolean } = {}): Family[] {
  const openMetrics = options.openMetrics ?? false;
  const families = new Map<string, MutableFamily>();
  const order: MutableFamily[] = [];
  const familyNamed = (name: string): MutableFamily => {
    let f = families.get(name);
    if (!f) {
      f = { name, type: 'untyped', typed: false, samples: [], keys: new Set() };
      families.set(name, f);
      order.push(f);
    }
    return f;
  };
  const owns = (f: MutableFamily, sampleName: string): boolean => sampleName === f.name
    || (f.openMetricsType ? OPEN_METRICS_SUFFIXES[f.openMetricsType] : suffixesOf(f.type, openMetrics))
      .some((s) => sampleName === f.name + s);
  let current: MutableFamily | undefined;
  /**
   * The family a sample belongs to, as Prometheus decides it: the family of the previous line if
   * it owns the name (`foo_bucket` after `# TYPE foo histogram`), else the family of that name,
   * else a typed family owning the name through its suffix, else a new untyped family.
   */
  const familyOfSample = (sampleName: string): MutableFamily => {
    if (current && owns(current, sampleName)) return current;
    const exact = families.get(sampleName);
    if (exact) return exact;
    for (const suffix of ['_bucket', '_sum', '_count', '_total', '_created', '_info', '_gsum', '_gcount']) {
      if (!sampleName.endsWith(suffix)) continue;
      const base = families.get(sampleName.slice(0, -suffix.length));
      if (base && owns(base, sampleName)) return base;
    }
    return familyNamed(sampleName);
  };

  text.split('\n').forEach((raw, index) => {
    const lineNo = index + 1;
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^#[ \t]+(HELP|TYPE|UNIT|EOF)(?:[ \t]+(\S+)(?:[ \t](.*))?)?$/.exec(line);
      if (!m) return; // a plain comment
      const [, keyword, name, rest] = m;
      if (keyword === 'EOF' || keyword === 'UNIT') {
        if (openMetrics) return;
        if (keyword === 'EOF') throw new ExpositionError(lineNo, '"# EOF" in Prometheus text (OpenMetrics sent as text/plain?)');
        return;
      }
      if (!name || !METRIC_NAME.test(name) || METRIC_NAME.exec(name)![0] !== name) {
        throw new ExpositionError(lineNo, `bad metric name in "${line}"`);
      }
      const f = familyNamed(name);
      current = f;
      if (keyword === 'HELP') {
        if (f.help !== undefined) throw new ExpositionError(lineNo, `second HELP for ${name}`);
        f.help = rest ?? '';
        return;
      }
      const typeText = (rest ?? '').trim();
      if (f.typed) throw new ExpositionError(lineNo, `second TYPE for ${name}`);
      if (f.samples.length > 0) throw new ExpositionError(lineNo, `TYPE for ${name} after its samples`);
      let type: FamilyType | undefined = TYPES.has(typeText) ? (typeText as FamilyType) : undefined;
      if (openMetrics && type === undefined) type = OPEN_METRICS_TYPES[typeText];
      if (type === undefined) throw new ExpositionError(lineNo, `unknown type "${typeText}" for ${name}`);
      f.type = type;
      f.typed = true;
      if (openMetrics && (typeText === 'info' || typeText === 'gaugehistogram')) f.openMetricsType = typeText;
      return;
    }
    const sample = parseSample(line, lineNo, openMetrics);
    const f = familyOfSample(sample.name);
    current = f;
    if (openMetrics && sample.name === `${f.name}_created`) return;
    const key = seriesKey(sample);
    if (f.keys.has(key)) throw new ExpositionError(lineNo, `series ${key} given twice`);
    f.keys.add(key);
    f.samples.push(sample);
  });

  return order.flatMap((f): Family[] => {
    let name = f.name;
    // OpenMetrics names a counter `foo` and its sample `foo_total`; 0.0.4 wants them equal.
    if (openMetrics && f.type === 'counter' && f.samples.length > 0 && f.samples.every((s) => s.name === `${f.name}_total`)) {
      name = `${f.name}_total`;
    }
    if (f.openMetricsType === 'info') name = `${f.name}_info`;
    if (f.samples.some((s) => !sampleBelongs(s.name, name, f.type))) {
      // What 0.0.4 cannot express (gauge histograms...): one untyped family per sample name.
      const byName = new Map<string, Sample[]>();
      for (const s of f.samples) byName.set(s.name, [...(byName.get(s.name) ?? []), s]);
      return [...byName].map(([n, samples]) => ({ name: n, type: 'untyped' as const, samples }));
    }
    return [{ name, type: f.type, ...(f.help !== undefined ? { help: f.help } : {}), samples: f.samples }];
  });
}

function sampleBelongs(sampleName: string, familyName: string, type: FamilyType): boolean {
  return sampleName === familyName || suffixesOf(type, false).some((s) => sampleName === familyName + s);
}

export interface MergeResult {
  readonly families: Family[];
  /** Families of a later part left out because an earlier part has the name with another type. */
  readonly conflicts: string[];
  /** Series of a later part left out because an earlier part already has them. */
  readonly duplicateSeries: number;
}

/**
 * Merges parts in order: a family that several parts have is printed once, with the first part's
 * HELP and TYPE and the samples of all parts (a series only once). A later family whose type or
 * sample names clash with an earlier one is left out whole.
 */
export function mergeExpositions(parts: readonly (readonly Family[])[]): MergeResult {
  const byName = new Map<string, { family: Family; samples: Sample[]; keys: Set<string> }>();
  /** Sample name → the family that owns it. */
  const owner = new Map<string, string>();
  const conflicts: string[] = [];
  let duplicateSeries = 0;
  for (const part of parts) {
    for (const family of part) {
      const existing = byName.get(family.name);
      const names = new Set([family.name, ...family.samples.map((s) => s.name)]);
      const clash = [...names].some((n) => owner.has(n) && owner.get(n) !== family.name)
        || (existing !== undefined && existing.family.type !== family.type);
      if (clash) {
        conflicts.push(family.name);
        continue;
      }
      const entry = existing ?? { family, samples: [], keys: new Set<string>() };
      if (!existing) byName.set(family.name, entry);
      for (const n of names) owner.set(n, family.name);
      for (const s of family.samples) {
        const key = seriesKey(s);
        if (entry.keys.has(key)) {
          duplicateSeries++;
          continue;
        }
        entry.keys.add(key);
        entry.samples.push(s);
      }
    }
  }
  const families = [...byName.values()].map(({ family, samples }) => ({ ...family, samples }));
  return { families, conflicts, duplicateSeries };
}

/** Keeps the families whose name matches `filter`; with `usedOnly`, those with a non-zero sample. */
export function filterExposition(families: readonly Family[], options: { filter?: RegExp; usedOnly?: boolean }): Family[] {
  return families.filter((f) => (options.filter === undefined || options.filter.test(f.name))
    && (!options.usedOnly || f.samples.some((s) => Number(s.value) !== 0)));
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export function renderSample(s: Sample): string {
  const labels = s.labels.length === 0 ? '' : `{${s.labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}}`;
  return `${s.name}${labels} ${s.value}${s.timestamp !== undefined ? ` ${s.timestamp}` : ''}`;
}

/** Prometheus text 0.0.4; ends with a newline (empty text for no family). */
export function renderExposition(families: readonly Family[]): string {
  const lines: string[] = [];
  for (const f of families) {
    if (f.help !== undefined) lines.push(`# HELP ${f.name} ${f.help}`);
    lines.push(`# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) lines.push(renderSample(s));
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}
