// Generates the PowerShell completion script: the model as a table of hashtables plus a fixed
// driver inside one native argument completer.
import type { CompletionCommand, CompletionFlag } from './model.js';
import { commandsOf, flagNames, oneLine, valueKind, type RenderOptions } from './walk.js';

/**
 * A PowerShell single-quoted string. Its only special characters are the quotes, and PowerShell
 * takes the typographic single quotes (U+2018..U+201B) for quotes too; each is doubled.
 */
export function psQuote(text: string): string {
  return `'${text.replace(/['\u2018\u2019\u201a\u201b]/g, '$&$&')}'`;
}

const array = (items: readonly string[]): string => `@(${items.join(', ')})`;

function flagEntry(flag: CompletionFlag, describe: (text: string) => string): string {
  return `@{ Names = ${array(flagNames(flag).map(psQuote))}; Description = ${describe(flag.description)};`
    + ` Kind = '${valueKind(flag)}'; Values = ${array((flag.values ?? []).map(psQuote))} }`;
}

export function renderPowershell(root: CompletionCommand, opts: RenderOptions): string {
  const describe = (text: string): string => psQuote(opts.descriptions ? oneLine(text) : '');
  const table = commandsOf(root).map(({ path, command }) => {
    const subs = command.subcommands.map(
      (s) => `            @{ Name = ${psQuote(s.name)}; Description = ${describe(s.description)} }`,
    );
    const flags = command.flags.map((f) => `            ${flagEntry(f, describe)}`);
    const block = (items: string[]): string => (items.length === 0 ? '@()' : `@(\n${items.join('\n')}\n        )`);
    return `    $commands[${psQuote(path.join(' '))}] = @{
        Subcommands = ${block(subs)}
        Flags = ${block(flags)}
        Arguments = ${array((command.args ?? []).map(psQuote))}
    }`;
  });

  return `# powershell completion for ${root.name}.
# Load it into the current shell:  ${root.name} completion powershell | Out-String | Invoke-Expression
# To load it in every shell, add that line to your profile (see $PROFILE).

Register-ArgumentCompleter -Native -CommandName ${psQuote(root.name)} -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    if ($null -eq $wordToComplete) { $wordToComplete = '' }

    # Commands by path (names joined by spaces). Flags of the root are valid after every command.
    # Ordinal keys: command names are case-sensitive, unlike PowerShell's default hashtables.
    $rootName = ${psQuote(root.name)}
    $commands = [System.Collections.Hashtable]::new([System.StringComparer]::Ordinal)
${table.join('\n')}

    # The flag named $name under command $path: its own flags first, then the global ones.
    $findFlag = {
        param([string]$path, [string]$name)
        foreach ($flag in @($commands[$path].Flags) + @($commands[$rootName].Flags)) {
            if ($flag -and $flag.Names -ccontains $name) { return $flag }
        }
        return $null
    }

    # The words before the one being completed, as the program will receive them.
    $words = @(foreach ($element in $commandAst.CommandElements) {
        if ($element.Extent.EndOffset -ge $cursorPosition) { break }
        if ($element -is [System.Management.Automation.Language.StringConstantExpressionAst]) {
            $element.Value
        } else {
            $element.Extent.Text
        }
    })

    # Find the command being typed: skip flags and their values; the first other word is a
    # subcommand while there are some, and after any positional argument nothing is one.
    $path = $rootName
    $positional = $false
    $pending = $null
    for ($i = 1; $i -lt $words.Count; $i++) {
        $word = $words[$i]
        if ($pending) {
            $pending = $null
        } elseif ($word -ceq '--') {
            $positional = $true
        } elseif ($word -clike '-*=*') {
        } elseif ($word -clike '-?*') {
            $flag = & $findFlag $path $word
            if ($flag -and $flag.Kind -ne 'none') { $pending = $flag }
        } elseif (-not $positional -and $commands.ContainsKey("$path $word")) {
            $path = "$path $word"
        } else {
            $positional = $true
        }
    }

    # Candidates: complete text, description and kind of result.
    $candidates = [System.Collections.Generic.List[object]]::new()
    $add = {
        param([string]$text, [string]$description, [string]$type)
        if ($text.StartsWith($wordToComplete, [System.StringComparison]::OrdinalIgnoreCase)) {
            $candidates.Add(@{ Text = $text; Description = $description; Type = $type })
        }
    }
    # Values of $flag, each after $prefix ('--flag=' for the attached form).
    $addValues = {
        param($flag, [string]$prefix)
        if ($flag.Kind -eq 'enum') {
            foreach ($value in $flag.Values) { & $add ($prefix + $value) '' 'ParameterValue' }
        } elseif ($flag.Kind -eq 'file') {
            $typed = $wordToComplete.Substring($prefix.Length)
            foreach ($file in [System.Management.Automation.CompletionCompleters]::CompleteFilename($typed)) {
                $candidates.Add(@{ Text = $prefix + $file.CompletionText; Description = ''; Type = 'ProviderItem'; Quoted = $true })
            }
        }
    }

    $command = $commands[$path]
    if ($pending) {
        & $addValues $pending ''
    } elseif ($wordToComplete -clike '-*=*') {
        $name = $wordToComplete.Substring(0, $wordToComplete.IndexOf('='))
        $flag = & $findFlag $path $name
        if ($flag) { & $addValues $flag "$name=" }
    } elseif ($wordToComplete -clike '-*') {
        $seen = [System.Collections.Generic.HashSet[string]]::new([System.StringComparer]::Ordinal)
        foreach ($flag in @($command.Flags) + @($commands[$rootName].Flags)) {
            if (-not $flag) { continue }
            foreach ($name in $flag.Names) {
                if ($seen.Add($name)) { & $add $name $flag.Description 'ParameterName' }
            }
        }
    } elseif (-not $positional) {
        foreach ($sub in $command.Subcommands) { & $add $sub.Name $sub.Description 'ParameterValue' }
        foreach ($value in $command.Arguments) { & $add $value '' 'ParameterValue' }
    }

    foreach ($candidate in $candidates) {
        $text = $candidate.Text
        # Quote what PowerShell would otherwise parse (spaces, variables, operators).
        if (-not $candidate.Quoted -and $text -match '[\\s''"\`$;(){}@#,|&<>\\u2018-\\u201b]') {
            $text = "'" + ($text -replace "(['\\u2018-\\u201b])", '$1$1') + "'"
        }
        # A tooltip may not be empty: without a description it repeats the candidate.
        $tooltip = if ($candidate.Description) { $candidate.Description } else { $candidate.Text }
        [System.Management.Automation.CompletionResult]::new(
            $text, $candidate.Text, [System.Management.Automation.CompletionResultType]$candidate.Type, $tooltip)
    }
}
`;
}
