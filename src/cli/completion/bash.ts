// Generates the bash completion script. It needs nothing but bash itself (no bash-completion
// package): the model is compiled into two lookup functions, and a fixed driver walks the words.
import type { CompletionCommand, CompletionFlag } from './model.js';
import {
  commandsOf, flagNames, flagsAt, identifier, localValueFlags, oneLine, valueKind, type RenderOptions,
} from './walk.js';

/** Single-quotes a word for bash: nothing inside '…' is special except the quote itself. */
export function bashQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

const list = (words: readonly string[]): string => words.map(bashQuote).join(' ');

/** One arm of a bash `case`, its body lines ending with `return 0`. */
function caseArm(pattern: string, body: readonly string[], indent: string): string {
  return [`${indent}${pattern})`, ...[...body, 'return 0'].map((l) => `${indent}    ${l}`), `${indent}    ;;`]
    .join('\n');
}

export function renderBash(root: CompletionCommand, opts: RenderOptions): string {
  const fn = `_${identifier(root.name)}`;
  const commands = commandsOf(root);

  // _X_command: one arm per command path, filling the driver's locals.
  const commandCases = commands.map((at) => {
    const flags = flagsAt(root, at);
    const subs = at.command.subcommands;
    const args = at.command.args ?? [];
    const body: string[] = [];
    if (subs.length > 0) {
      body.push(`subs=(${list(subs.map((s) => s.name))})`);
      if (opts.descriptions) body.push(`sub_descs=(${list(subs.map((s) => oneLine(s.description)))})`);
    }
    if (flags.length > 0) {
      body.push(`flags=(${list(flags.flatMap(flagNames))})`);
      if (opts.descriptions) {
        body.push(`flag_descs=(${list(flags.flatMap((f) => flagNames(f).map(() => oneLine(f.description))))})`);
      }
    }
    if (args.length > 0) body.push(`args=(${list(args)})`);
    return caseArm(bashQuote(at.path.join(' ')), body, '    ');
  });

  // _X_flag: how each flag's value completes, the command's own flags before the global ones.
  const flagCases = (flags: readonly CompletionFlag[], indent: string): string[] =>
    flags.map((f) => {
      const kind = valueKind(f);
      const values = kind === 'enum' ? ` values=(${list(f.values ?? [])})` : '';
      return `${indent}${flagNames(f).map(bashQuote).join('|')}) kind=${kind}${values}; return 0 ;;`;
    });
  const localCases = commands.flatMap((at) => {
    const arms = flagCases(localValueFlags(root, at), '        ');
    return arms.length === 0 ? [] : [
      `    ${bashQuote(at.path.join(' '))})`, '        case $2 in', ...arms, '        esac', '        ;;',
    ].join('\n');
  });
  const globalCases = flagCases(root.flags.filter((f) => f.takesValue), '    ');

  return `# bash completion for ${root.name}.
# Load it into the current shell:  source <(${root.name} completion bash)
# To load it in every shell, add that line to ~/.bashrc. Needs only bash (no bash-completion package).

# ${fn}_command PATH: describes the command PATH (its names joined by spaces) in the caller's locals:
# subcommands (subs, sub_descs), flags in all spellings (flags, flag_descs) and the values of the
# first positional argument (args). Fails for an unknown PATH.
${fn}_command() {
    subs=() sub_descs=() flags=() flag_descs=() args=()
    case $1 in
${commandCases.join('\n')}
    esac
    return 1
}

# ${fn}_flag PATH FLAG: sets kind (none, enum, file or text) and values for FLAG under command PATH.
# Fails for a flag not listed there, which then takes no value.
${fn}_flag() {
    kind=none values=()
    case $1 in
${localCases.join('\n')}
    esac
    case $2 in
${globalCases.join('\n')}
    esac
    return 1
}

# Bash splits words at every COMP_WORDBREAKS character: "--mode=T" arrives as "--mode" "=" "T" and
# "default:debug" as "default" ":" "debug". Glue back the pieces no whitespace separates, giving the
# words the program will see, the last one cut at the cursor (sets words and cword).
${fn}_words() {
    local line=\${COMP_LINE-} i word
    line=\${line:0:\${COMP_POINT:-\${#line}}}
    [[ -n $line ]] || line="\${COMP_WORDS[*]:0:COMP_CWORD+1}"
    words=() cword=-1
    for ((i = 0; i <= COMP_CWORD; i++)); do
        word=\${COMP_WORDS[i]-}
        if [[ $cword -ge 0 && $line != [[:space:]]* ]]; then
            cword=$((cword - 1)) # continues the previous word
        fi
        line=\${line#"\${line%%[![:space:]]*}"}
        if ((i == COMP_CWORD)); then
            word=$line
        else
            line=\${line#"$word"}
        fi
        cword=$((cword + 1))
        words[cword]=\${words[cword]-}$word
    done
}

# ${fn}_add WORD [DESCRIPTION]: offers WORD when it starts with what is typed.
${fn}_add() {
    [[ $1 == "$cur"* ]] || return 0
    cands+=("$1")
    descs+=("\${2-}")
}

# ${fn}_values PREFIX: offers PREFIX followed by each value of the flag last looked up.
${fn}_values() {
    local value typed=\${cur:\${#1}}
    case $kind in
    enum)
        for value in "\${values[@]}"; do ${fn}_add "$1$value"; done
        ;;
    file)
        compopt -o filenames 2>/dev/null
        while IFS= read -r value; do cands+=("$1$value") descs+=(''); done < <(compgen -f -- "$typed")
        ;;
    esac
}

${fn}() {
    local words cword
    ${fn}_words
    local cur=\${words[cword]} path=${bashQuote(root.name)} positional=0 pending='' i word
    local subs sub_descs flags flag_descs args kind values
    local -a cands=() descs=()

    # Find the command being typed: skip flags and their values; the first other word is a
    # subcommand while there are some, and after any positional argument nothing is one.
    for ((i = 1; i < cword; i++)); do
        word=\${words[i]}
        if [[ -n $pending ]]; then
            pending=''
            continue
        fi
        case $word in
        --) positional=1 ;;
        -*=*) ;;
        -?*) ${fn}_flag "$path" "$word" && [[ $kind != none ]] && pending=$word ;;
        *)
            if ((!positional)) && ${fn}_command "$path $word"; then
                path+=" $word"
            else
                positional=1
            fi
            ;;
        esac
    done

    ${fn}_command "$path"
    if [[ -n $pending ]]; then
        ${fn}_flag "$path" "$pending" && ${fn}_values ''
    elif [[ $cur == -*=* ]]; then
        ${fn}_flag "$path" "\${cur%%=*}" && ${fn}_values "\${cur%%=*}="
    elif [[ $cur == -* ]]; then
        for i in "\${!flags[@]}"; do ${fn}_add "\${flags[i]}" "\${flag_descs[i]-}"; done
    elif ((!positional)); then
        for i in "\${!subs[@]}"; do ${fn}_add "\${subs[i]}" "\${sub_descs[i]-}"; done
        for word in "\${args[@]}"; do ${fn}_add "$word"; done
    fi

    # Readline replaces only the text after the last COMP_WORDBREAKS character before the cursor
    # ("T" of "--mode=T", "d" of "default:d"), so candidates must drop what precedes it.
    local breaks='' trim=''
    [[ \${COMP_WORDBREAKS-} == *=* ]] && breaks+='='
    [[ \${COMP_WORDBREAKS-} == *:* ]] && breaks+=':'
    [[ -n $breaks && $cur == *[$breaks]* ]] && trim=\${cur%"\${cur##*[$breaks]}"}

    # Descriptions only when there is a choice to show: a single candidate is inserted as it is.
    local width=\${COLUMNS:-80} room desc
    COMPREPLY=()
    for i in "\${!cands[@]}"; do
        word=\${cands[i]:\${#trim}}
        desc=\${descs[i]-}
        if ((\${#cands[@]} > 1)) && [[ -n $desc ]]; then
            room=$((width - \${#word} - 5))
            ((\${#desc} > room)) && desc="\${desc:0:room > 3 ? room - 3 : 0}..."
            word+="  ($desc)"
        fi
        COMPREPLY+=("$word")
    done
    return 0
}

complete -F ${fn} ${bashQuote(root.name)}
`;
}
