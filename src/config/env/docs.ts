// docs/ENVIRONMENT.md is rendered from the table; a test keeps the committed file equal to this.
import { declarations as variables, defaultText, effectText } from './registry.js';

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderEnvironmentDoc(): string {
  const count = (here: string): number => variables.filter((v) => v.here === here).length;
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
    'The "This agent" column says what this agent does with each: the Meaning column is Istio\'s, and only',
    `${count('honoured')} variables are honoured here. The others are accepted (a manifest written for Istio`,
    'still starts) but have no effect: `pilot-agent proxy` logs one warning at start for each that is set',
    '(to a non-empty value), naming it and why, unless its value asks for what this agent does anyway.',
    `${count('istiod')} are istiod settings that Istio's own pilot-agent ignores too, ${count('not-applicable')} configure`,
    `machinery this agent does not have (Envoy, xDS, a Go runtime), and ${count('not-supported')} change what Istio's`,
    'proxy does and are not supported by this agent yet. `src/config/env/variables.ts` (`here`) is the source;',
    'a test fails when a variable marked honoured is not read under src/, or one read there is not marked so.',
    '',
    '| Name | Type | Default | Accepted values | Meaning | This agent |',
    '|---|---|---|---|---|---|',
  ];
  for (const v of variables) {
    const def = defaultText(v);
    const accepted = v.allowed ? v.allowed.map((a) => (a === '' ? '(empty)' : `\`${a}\``)).join(', ')
      : v.allowedList ? `comma-separated: ${v.allowedList.map((a) => `\`${a}\``).join(', ')}`
        : v.range ? `${v.range[0]} to ${v.range[1]}` : '';
    lines.push(`| ${v.name} | ${v.type} | ${def === '' ? '(empty)' : `\`${cell(def)}\``} | ${accepted} | ${cell(v.description)} | ${cell(effectText(v))} |`);
  }
  return `${lines.join('\n')}\n`;
}
