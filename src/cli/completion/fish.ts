// Generates the fish completion script: `complete` lines guarded by a helper that finds which
// (possibly nested) command the cursor is in, so same-named words at different levels never mix.
import type { CompletionCommand, CompletionFlag } from './model.js';
import {
  commandsOf, flagNames, identifier, localFlags, localValueFlags, oneLine, valueKind, type RenderOptions,
} from './walk.js';

/** A fish single-quoted string: only `\` and `'` are special inside. */
export function fishQuote(text: string): string {
  return `'${text.replace(/[\\']/g, '\\$&')}'`;
}

/** One word of fish code (as in a `-n` condition or `-a` list): bare when plain, else quoted. */
const fishWord = (word: string): string => (/^[A-Za-z0-9_.,/+=:@%-]+$/.test(word) ? word : fishQuote(word));
/** A list of words as fish code, quoted again to pass as one argument (`-a`, `-n` expand it). */
const codeArg = (words: readonly string[]): string => fishQuote(words.map(fishWord).join(' '));

function flagLine(prog: string, flag: CompletionFlag, condition: string, opts: RenderOptions): string {
  const parts = [`complete -c ${prog}`, condition];
  if (flag.short) {
    const name = flag.short.replace(/^-/, '');
    parts.push(name.length === 1 ? `-s ${fishWord(name)}` : `-o ${fishWord(name)}`);
  }
  parts.push(`-l ${fishWord(flag.long.replace(/^--/, ''))}`);
  const kind = valueKind(flag);
  if (kind === 'enum') parts.push(`-x -a ${codeArg(flag.values ?? [])}`);
  else if (kind === 'file') parts.push('-r -F');
  else if (kind === 'text') parts.push('-x');
  if (opts.descriptions) parts.push(`-d ${fishQuote(oneLine(flag.description))}`);
  return parts.filter((p) => p !== '').join(' ');
}

export function renderFish(root: CompletionCommand, opts: RenderOptions): string {
  const prog = fishWord(root.name);
  const fn = `__${identifier(root.name)}`;
  const commands = commandsOf(root);
  const at = (path: readonly string[]): string => `-n ${codeArg([`${fn}_at`, ...path])}`;
  const inside = (path: readonly string[]): string => `-n ${codeArg([`${fn}_in`, ...path])}`;
  const desc = (text: string): string => (opts.descriptions ? ` -d ${fishQuote(oneLine(text))}` : '');

  const subcommandCases = commands
    .filter((c) => c.command.subcommands.length > 0)
    .map((c) => `        case ${fishQuote(c.path.join(' '))}\n`
      + `            printf '%s\\n' ${c.command.subcommands.map((s) => fishWord(s.name)).join(' ')}`);
  const valueFlagCases = commands
    .map((c) => ({ path: c.path, flags: localValueFlags(root, c) }))
    .filter((c) => c.flags.length > 0)
    .map((c) => {
      const check = (flags: CompletionFlag[], result: number): string[] => flags.length === 0 ? [] : [
        `            contains -- $flag ${flags.flatMap(flagNames).map(fishWord).join(' ')}; and return ${result}`,
      ];
      return [
        `        case ${fishQuote(c.path.join(' '))}`,
        ...check(c.flags.filter((f) => f.takesValue), 0),
        ...check(c.flags.filter((f) => !f.takesValue), 1),
      ].join('\n');
    });
  const globalValueFlags = root.flags.filter((f) => f.takesValue).flatMap(flagNames).map(fishWord);

  const lines = commands.flatMap((c) => [
    ...c.command.subcommands.map(
      (s) => `complete -c ${prog} -f ${at(c.path)} -a ${codeArg([s.name])}${desc(s.description)}`,
    ),
    ...(c.command.args && c.command.args.length > 0
      ? [`complete -c ${prog} -f ${at(c.path)} -a ${codeArg(c.command.args)}`] : []),
    // The root's flags are global: no condition.
    ...(c.command === root ? root.flags : localFlags(root, c)).map(
      (f) => flagLine(prog, f, c.command === root ? '' : inside(c.path), opts),
    ),
  ]);

  return `# fish completion for ${root.name}.
# Load it into the current shell:  ${root.name} completion fish | source
# To load it in every shell:       ${root.name} completion fish > ~/.config/fish/completions/${root.name}.fish

# ${fn}_subcommands PATH: prints the subcommands of the command PATH (names joined by spaces).
function ${fn}_subcommands --argument-names path
    switch $path
${subcommandCases.join('\n')}
    end
end

# ${fn}_takes_value PATH FLAG: whether FLAG consumes the next word under command PATH.
function ${fn}_takes_value --argument-names path flag
    switch $path
${valueFlagCases.join('\n')}
    end
    contains -- $flag ${globalValueFlags.join(' ')}
end

# Prints the command the cursor is in (names joined by spaces), followed by " +" once it has a
# positional argument (no subcommand can follow) or " =" when the word is a flag's value.
function ${fn}_state
    set -l path ${fishWord(root.name)}
    set -l mark ''
    set -l words (commandline -opc)
    for word in $words[2..-1]
        if test "$mark" = ' ='
            set mark ''
            continue
        end
        if test "$word" = --
            set mark ' +'
        else if string match -q -- '--*=*' $word
            continue
        else if string match -q -- '-*' $word; and test "$word" != -
            ${fn}_takes_value "$path" $word; and test "$mark" != ' +'; and set mark ' ='
        else if test -z "$mark"; and contains -- $word (${fn}_subcommands "$path")
            set path "$path $word"
        else
            set mark ' +'
        end
    end
    echo "$path$mark"
end

# ${fn}_at NAME...: the cursor is right after command NAME..., where its subcommands and first
# argument go.
function ${fn}_at
    test (${fn}_state) = "$argv"
end

# ${fn}_in NAME...: the cursor is anywhere within command NAME..., where its flags go.
function ${fn}_in
    test (string replace -r ' [+=]$' '' -- (${fn}_state)) = "$argv"
end

# Words are never file names unless a flag says so.
complete -c ${prog} -f
${lines.join('\n')}
`;
}
