// Generates the zsh completion script: one `_arguments` function per command. Subcommands hand the
// rest of the line to their own function, which lists its flags plus the global ones.
import type { CompletionCommand, CompletionFlag } from './model.js';
import { commandsOf, flagsAt, identifier, oneLine, valueKind, type CommandAt, type RenderOptions } from './walk.js';

/** Single-quotes a word for zsh. */
export function zshQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

const backslash = (text: string, special: RegExp): string => text.replace(special, '\\$&');
/** Text of an `_arguments` spec part (`[explanation]`, message): its brackets and colons are syntax. */
const specText = (text: string): string => backslash(text, /[\\\]:[]/g);
/** A word in an `(a b c)` action, which goes through word splitting and quote removal. */
const actionWord = (word: string): string => backslash(word, /[^A-Za-z0-9_.,/+@%=-]/g);
/** The name part of a `_describe` entry `name:description`. */
const describeName = (name: string): string => backslash(name, /[\\:]/g);

function flagSpec(flag: CompletionFlag, opts: RenderOptions): string {
  const kind = valueKind(flag);
  const label = specText(flag.long.replace(/^-+/, '') || 'value');
  const help = opts.descriptions ? `[${specText(oneLine(flag.description))}]` : '';
  const action = {
    none: '',
    enum: `:${label}:(${(flag.values ?? []).map(actionWord).join(' ')})`,
    file: `:${label}:_files`,
    text: `:${label}: `,
  }[kind];
  // `--x=` takes its value after `=` or as the next word; `-x+` attached or as the next word.
  const long = kind === 'none' ? flag.long : `${flag.long}=`;
  if (!flag.short) return zshQuote(`${long}${help}${action}`);
  const short = kind === 'none' ? flag.short : `${flag.short}+`;
  // The two spellings exclude each other once one is on the line.
  const rest = `${help}${action}`;
  return `${zshQuote(`(${flag.short} ${flag.long})`)}{${short},${long}}${rest === '' ? '' : zshQuote(rest)}`;
}

function commandFunction(root: CompletionCommand, at: CommandAt, opts: RenderOptions): string {
  const fn = `_${identifier(...at.path)}`;
  const { subcommands, args = [] } = at.command;
  const specs = flagsAt(root, at).map((f) => flagSpec(f, opts));
  const continued = (lines: readonly string[]): string => lines.map((s) => ` \\\n    ${s}`).join('');
  if (subcommands.length === 0) {
    if (args.length > 0) specs.push(zshQuote(`1: :(${args.map(actionWord).join(' ')})`));
    return `${fn}() {\n  _arguments${continued(specs)}\n}`;
  }

  const entries = subcommands.map((s) => zshQuote(
    opts.descriptions ? `${describeName(s.name)}:${oneLine(s.description)}` : describeName(s.name),
  ));
  const dispatch = subcommands.map(
    (s) => `      (${zshQuote(s.name)}) _${identifier(...at.path, s.name)} && ret=0 ;;`,
  );
  const argsLine = args.length > 0 ? `\n      compadd -- ${args.map(zshQuote).join(' ')} && ret=0` : '';
  return `${fn}() {
  local curcontext=$curcontext state state_descr line ret=1
  typeset -A opt_args
  _arguments -C${continued([...specs, `': :->command'`, `'*:: :->argument'`])} && ret=0
  case $state in
    (command)
      local -a commands=(
        ${entries.join('\n        ')}
      )
      _describe -t commands ${zshQuote(`${at.path.join(' ')} command`)} commands && ret=0${argsLine}
      ;;
    (argument)
      # The words now start at the subcommand; its function sees only its own part of the line.
      curcontext=\${curcontext%:*:*}:${identifier(...at.path)}-$words[1]:
      case $words[1] in
${dispatch.join('\n')}
      esac
      ;;
  esac
  return ret
}`;
}

export function renderZsh(root: CompletionCommand, opts: RenderOptions): string {
  const fn = `_${identifier(root.name)}`;
  const functions = commandsOf(root).map((at) => commandFunction(root, at, opts));
  return `#compdef ${root.name}
# zsh completion for ${root.name}.
# Load it into the current shell (compinit must have run: autoload -U compinit && compinit):
#   source <(${root.name} completion zsh)
# Or save it as _${root.name} in a directory of $fpath, before compinit runs.

${functions.join('\n\n')}

# Autoloaded from $fpath, this file is the body of the completion function (run as loadautofunc the
# first time, shfunc after): complete. Sourced or eval'd: register the function.
if [[ \${zsh_eval_context[-1]-} == (loadautofunc|shfunc) ]]; then
  ${fn} "$@"
else
  compdef ${fn} ${zshQuote(root.name)}
fi
`;
}
