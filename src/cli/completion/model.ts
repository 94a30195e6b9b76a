// What a shell needs to know to complete pilot-agent: commands, their flags, and the values a flag or
// positional argument can take. Derived from the commander tree so help and completion never disagree.
import type { Command, Option } from 'commander';

export interface CompletionFlag {
  /** Long name with dashes, e.g. `--mesh-inbound-interception-mode`. */
  readonly long: string;
  /** Short form with its dash, e.g. `-m`, when the flag has one. */
  readonly short?: string;
  readonly description: string;
  /** The flag consumes a value (`--flag value` / `--flag=value`). */
  readonly takesValue: boolean;
  /** Enumerated values offered after the flag; absent: free text. */
  readonly values?: readonly string[];
  /** The value is a file path (complete file names). */
  readonly file?: boolean;
}

export interface CompletionCommand {
  readonly name: string;
  readonly description: string;
  /** Flags of this command. The root's flags are global: valid after every command. */
  readonly flags: readonly CompletionFlag[];
  readonly subcommands: readonly CompletionCommand[];
  /** Enumerated values of the first positional argument, if it has them. */
  readonly args?: readonly string[];
}

const extraValues = new WeakMap<Option | Command, { values?: readonly string[]; file?: boolean }>();

/** Records the values a flag (or a command's first argument) can take, for completion only. */
export function completeWith<T extends Option | Command>(
  target: T, hint: { values?: readonly string[]; file?: boolean },
): T {
  extraValues.set(target, hint);
  return target;
}

function flagOf(option: Option): CompletionFlag {
  const hint = extraValues.get(option);
  const values = option.argChoices ?? hint?.values;
  return {
    long: option.long ?? '',
    ...(option.short ? { short: option.short } : {}),
    description: option.description,
    takesValue: option.required || option.optional,
    ...(values ? { values } : {}),
    ...(hint?.file ? { file: true } : {}),
  };
}

/** Builds the completion model of a command tree; hidden options and commands are left out. */
export function completionModel(command: Command): CompletionCommand {
  const firstArg = command.registeredArguments[0];
  const args = firstArg?.argChoices ?? extraValues.get(command)?.values;
  return {
    name: command.name(),
    description: command.summary() || command.description(),
    flags: command.options.filter((o) => !o.hidden && o.long).map(flagOf),
    subcommands: command.commands
      .filter((c) => !(c as unknown as { _hidden?: boolean })._hidden)
      .map(completionModel),
    ...(args ? { args } : {}),
  };
}
