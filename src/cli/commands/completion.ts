// `pilot-agent completion <shell>`: completion scripts generated from the command tree itself.
import { Option, type Command } from 'commander';
import type { Shell } from '../completion/index.js';
import { completionModel } from '../completion/model.js';
import type { CliContext } from '../context.js';

const SHELLS: readonly { name: Shell; about: string }[] = [
  { name: 'bash', about: 'Generate the autocompletion script for bash. Load it in the current shell with:\n'
    + '  source <(pilot-agent completion bash)\nor save it to /etc/bash_completion.d/pilot-agent to load it in every new shell.' },
  { name: 'fish', about: 'Generate the autocompletion script for fish. Load it with:\n'
    + '  pilot-agent completion fish | source\nor save it to ~/.config/fish/completions/pilot-agent.fish.' },
  { name: 'powershell', about: 'Generate the autocompletion script for PowerShell. Load it with:\n'
    + '  pilot-agent completion powershell | Out-String | Invoke-Expression\nor add that line to your profile.' },
  { name: 'zsh', about: 'Generate the autocompletion script for zsh. Shell completion must be enabled '
    + '(autoload -U compinit; compinit). Load it with:\n  source <(pilot-agent completion zsh)\n'
    + 'or save it as _pilot-agent in a directory of your $fpath.' },
];

export function registerCompletion(program: Command, ctx: CliContext): void {
  const completion = program.command('completion')
    .description('Generate the autocompletion script for the specified shell');
  completion.action(() => completion.outputHelp());
  for (const shell of SHELLS) {
    completion.command(shell.name)
      .summary(`Generate the autocompletion script for ${shell.name}`)
      .description(shell.about)
      .addOption(new Option('--no-descriptions', 'disable completion descriptions'))
      .action(async (flags: { descriptions: boolean }) => {
        const { renderCompletion } = await import('../completion/index.js'); // the generators: only for this command
        ctx.stdout.write(renderCompletion(shell.name, completionModel(program), { descriptions: flags.descriptions }));
      });
  }
}
