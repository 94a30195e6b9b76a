// pflag (and so Istio) accepts `--flag=false` for boolean flags; operators write `--short=false`.
// Commander has no such form, so before parsing we rewrite `--flag=<bool>` into `--flag` or its
// hidden `--no-flag` twin. Every boolean flag is declared through `boolOption` to get that twin.
import { Option, type Command } from 'commander';
import { usageError } from '../errors/agent-error.js';
import { parseGoBool } from '../config/env/values.js';

/** A boolean flag plus a hidden negation, so `--flag=false` can be expressed. */
export function boolOption(flags: string, description: string, defaultValue?: boolean): Option[] {
  const option = new Option(flags, description);
  if (defaultValue !== undefined) option.default(defaultValue);
  const negation = new Option(`--no-${option.long!.slice(2)}`).hideHelp();
  return [option, negation];
}

export function addOptions(command: Command, options: readonly Option[]): Command {
  for (const option of options) command.addOption(option);
  return command;
}

interface BoolFlag {
  readonly long: string;
  /** Declared as `--no-x` (commander's negatable form): true means "pass it", false means "omit it". */
  readonly negated: boolean;
}

function boolFlagsOf(root: Command): Map<string, BoolFlag> {
  const flags = new Map<string, BoolFlag>();
  const visit = (command: Command): void => {
    for (const option of command.options) {
      if (option.required || option.optional || !option.long || option.hidden) continue;
      const flag = { long: option.long, negated: option.negate };
      flags.set(option.long, flag);
      if (option.short) flags.set(option.short, flag);
    }
    command.commands.forEach(visit);
  };
  visit(root);
  return flags;
}

/** Rewrites `--flag=<bool>` / `-f=<bool>` for the tree's boolean flags; stops at `--`. */
export function rewriteBoolAssignments(root: Command, argv: readonly string[]): string[] {
  const flags = boolFlagsOf(root);
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const m = /^(--?[^=\s]+)=(.*)$/s.exec(arg);
    const flag = m ? flags.get(m[1]!) : undefined;
    if (!m || !flag) {
      out.push(arg);
      continue;
    }
    const parsed = parseGoBool(m[2]!);
    if (!parsed.ok) throw usageError(`${m[1]}: "${m[2]}" is not ${parsed.expected}`);
    if (flag.negated) {
      if (parsed.value) out.push(flag.long);
    } else {
      out.push(parsed.value ? flag.long : `--no-${flag.long.slice(2)}`);
    }
  }
  return out;
}
