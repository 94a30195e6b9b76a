// The console form of a log record: `time<TAB>level<TAB>scope<TAB>message<TAB>key=value ...`,
// Istio's layout (tab-separated so `cut -f` works), with the scope always shown.

const RESERVED = new Set(['time', 'level', 'scope', 'msg']);

function valueText(value: unknown): string {
  if (typeof value === 'string') return /[\s"=]/.test(value) || value === '' ? JSON.stringify(value) : value;
  return JSON.stringify(value) ?? String(value);
}

export function formatTextLine(record: Record<string, unknown>): string {
  const fields: string[] = [];
  let stack = '';
  for (const [key, value] of Object.entries(record)) {
    if (RESERVED.has(key)) continue;
    if (key === 'stack' && typeof value === 'string') stack = `\n${value}`;
    else fields.push(`${key}=${valueText(value)}`);
  }
  const head = [record['time'], record['level'], record['scope'], record['msg']].map((v) => String(v ?? '')).join('\t');
  return `${head}${fields.length > 0 ? `\t${fields.join(' ')}` : ''}${stack}\n`;
}
