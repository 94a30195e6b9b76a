// `pilot-agent mesh-iptables` (spec 4.4): program the pod's capture rules.
import type { Command } from 'commander';
import { addOptions } from '../bool-flags.js';
import type { CliContext } from '../context.js';
import { loadIptables } from './iptables-io.js';
import { iptablesOptionsFrom, meshIptablesOnlyFlags, sharedIptablesFlags } from './iptables-flags.js';

export function registerMeshIptables(program: Command, ctx: CliContext): void {
  const command = program.command('mesh-iptables')
    .description('Set up port forwarding for the sidecar: the iptables rules that capture the pod\'s traffic');
  addOptions(command, [...sharedIptablesFlags('1337'), ...meshIptablesOnlyFlags()]);
  command.action(async () => {
    const { run, io } = await loadIptables(ctx);
    await run.runMeshIptables(iptablesOptionsFrom(command, ctx), io);
  });
}
