// The command tree. Built fresh per run (no global state), so tests can build and parse it freely.
import { Command } from 'commander';
import { configureLogging } from '../log/logger.js';
import { addCommonFlags, logOptionsFrom, type CommonFlags } from './common-flags.js';
import type { CliContext } from './context.js';
import { registerCompletion } from './commands/completion.js';
import { registerMeshCleanIptables } from './commands/mesh-clean-iptables.js';
import { registerMeshIptables } from './commands/mesh-iptables.js';
import { registerProxy } from './commands/proxy.js';
import { registerRequest } from './commands/request.js';
import { registerVersion } from './commands/version.js';
import { registerWait } from './commands/wait.js';

export function buildProgram(ctx: CliContext): Command {
  const program = new Command('pilot-agent')
    .description('Mesh agent: bootstraps the data-plane proxy from a sidecar or gateway container')
    .usage('[command] [flags]')
    // Settings set here are copied into every command created below with .command().
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void ctx.stdout.write(text),
      writeErr: (text) => void ctx.stderr.write(text),
    })
    .configureHelp({ showGlobalOptions: true })
    .showSuggestionAfterError(true)
    .helpCommand('help [command]', 'Help about any command');
  addCommonFlags(program);
  program.hook('preAction', (_root, action) => {
    // `request` prints the response body on stdout and nothing else: its logs go to stderr.
    const flags = action.optsWithGlobals<CommonFlags>();
    configureLogging(logOptionsFrom(flags, action.name() === 'request' ? 'stderr' : 'stdout'));
  });
  registerCompletion(program, ctx);
  registerMeshCleanIptables(program, ctx);
  registerMeshIptables(program, ctx);
  registerProxy(program, ctx);
  registerRequest(program, ctx);
  registerVersion(program, ctx);
  registerWait(program);
  return program;
}
