// Turns `mesh-iptables` arguments and environment into validated options through the real CLI
// parsing, without running the command: what the builder tests feed on.
import { buildProgram } from '../../src/cli/program.js';
import { readEnvironment } from '../../src/config/env/registry.js';
import { iptablesOptionsFrom } from '../../src/cli/commands/iptables-flags.js';
import { rewriteBoolAssignments } from '../../src/cli/bool-flags.js';
import type { MeshIptablesOptions } from '../../src/iptables/options.js';

const sink = { write: () => true };

export function optionsFromArgs(args: readonly string[], env: Record<string, string> = {}): MeshIptablesOptions {
  const ctx = { env: readEnvironment(env), stdout: sink, stderr: sink, readFile: () => undefined };
  const program = buildProgram(ctx);
  const name = args[0] ?? 'mesh-iptables';
  const command = program.commands.find((c) => c.name() === name)!;
  let options: MeshIptablesOptions | undefined;
  command.action(() => { options = iptablesOptionsFrom(command, ctx); });
  program.parse(rewriteBoolAssignments(program, [name, ...args.slice(1)]), { from: 'user' });
  if (!options) throw new Error(`no options parsed from ${args.join(' ')}`);
  return options;
}
