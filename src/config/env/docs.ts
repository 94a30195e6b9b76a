// docs/ENVIRONMENT.md is rendered from the table; a test keeps the committed file equal to this.
import { declarations as variables, defaultText } from './registry.js';

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderEnvironmentDoc(): string {
  const own = variables.filter((v) => v.agentOwn).map((v) => v.name);
  const lines = [
    '# Environment variables',
    '',
    '<!-- Generated from src/config/env/variables.ts by `make docs`; do not edit by hand. -->',
    '',
    `All ${variables.length - own.length} variables of spec section 2.3${own.length > 0
      ? `, plus ${own.length} of this agent's own beyond Istio (${own.join(', ')})` : ''}. Every command reads`,
    'them once at start; a value that does not parse as its type is reported on stderr (variable, value, expected type, default used)',
    'and the default is used instead; `pilot-agent proxy` refuses to start on one. An empty value counts',
    'as unset for bool, int, float and duration variables. Booleans accept Go\'s forms (`true`, `false`,',
    '`1`, `0`, `t`, `f`, `TRUE`, `True`...); durations use Go syntax (`100ms`, `5m0s`, `24h0m0s`).',
    '',
    '| Name | Type | Default | Accepted values | Meaning |',
    '|---|---|---|---|---|',
  ];
  for (const v of variables) {
    const def = defaultText(v);
    const accepted = v.allowed ? v.allowed.map((a) => (a === '' ? '(empty)' : `\`${a}\``)).join(', ')
      : v.allowedList ? `comma-separated: ${v.allowedList.map((a) => `\`${a}\``).join(', ')}`
        : v.range ? `${v.range[0]} to ${v.range[1]}` : '';
    lines.push(`| ${v.name} | ${v.type} | ${def === '' ? '(empty)' : `\`${cell(def)}\``} | ${accepted} | ${cell(v.description)} |`);
  }
  return `${lines.join('\n')}\n`;
}
