// Shell-independent views of the completion model that every script generator needs: the command
// tree flattened with paths, the flags valid at each command, and single-line descriptions.
import type { CompletionCommand, CompletionFlag } from './model.js';

export interface RenderOptions {
  /** Show descriptions of commands and flags next to the candidates. */
  readonly descriptions: boolean;
}

/** A command together with the names leading to it from the root (root included). */
export interface CommandAt {
  readonly path: readonly string[];
  readonly command: CompletionCommand;
}

/** Every command of the tree, parents before their children, in declaration order. */
export function commandsOf(root: CompletionCommand): CommandAt[] {
  const out: CommandAt[] = [];
  const visit = (command: CompletionCommand, path: readonly string[]): void => {
    out.push({ path, command });
    for (const sub of command.subcommands) visit(sub, [...path, sub.name]);
  };
  visit(root, [root.name]);
  return out;
}

/** The spellings of a flag on the command line: long first, then short. */
export function flagNames(flag: CompletionFlag): string[] {
  return flag.short ? [flag.long, flag.short] : [flag.long];
}

/** Flags that only `at` has, i.e. not the global ones (none for the root). */
export function localFlags(root: CompletionCommand, at: CommandAt): readonly CompletionFlag[] {
  return at.command === root ? [] : at.command.flags;
}

/** Flags accepted at `at`: its own first, then the global ones it does not redefine. */
export function flagsAt(root: CompletionCommand, at: CommandAt): CompletionFlag[] {
  const own = localFlags(root, at);
  const taken = new Set(own.flatMap(flagNames));
  return [...own, ...root.flags.filter((f) => !flagNames(f).some((n) => taken.has(n)))];
}

/**
 * The flags of `at` a word-walker must look up before the global ones to know whether a flag
 * consumes the next word: those taking a value, and those without one that shadow a global flag
 * taking one. Flags found nowhere are taken to have no value.
 */
export function localValueFlags(root: CompletionCommand, at: CommandAt): CompletionFlag[] {
  const globalWithValue = new Set(root.flags.filter((f) => f.takesValue).flatMap(flagNames));
  return localFlags(root, at).filter(
    (f) => f.takesValue || flagNames(f).some((n) => globalWithValue.has(n)),
  );
}

/** How the value of a flag is completed. */
export type ValueKind = 'none' | 'enum' | 'file' | 'text';

export function valueKind(flag: CompletionFlag): ValueKind {
  if (!flag.takesValue) return 'none';
  if (flag.values && flag.values.length > 0) return 'enum';
  return flag.file ? 'file' : 'text';
}

/**
 * A description fit for one completion line: its first line, cut after the first sentence (help
 * texts go on with usage details), control characters dropped and whitespace collapsed, so no
 * shell ever sees a newline or an escape sequence in it.
 */
export function oneLine(description: string): string {
  const firstLine = description.trim().split('\n')[0] ?? '';
  const sentence = /^.*?[.!?](?=\s+[A-Z])/.exec(firstLine)?.[0] ?? firstLine;
  return sentence.replace(/[\u0000-\u001f\u007f]+/g, ' ').replace(/\s+/g, ' ').trim();
}

/** A shell identifier made of names: `pilot-agent` → `pilot_agent`. */
export function identifier(...names: string[]): string {
  const id = names.join('_').replace(/[^A-Za-z0-9_]/g, '_');
  return /^[0-9]/.test(id) ? `_${id}` : id;
}
