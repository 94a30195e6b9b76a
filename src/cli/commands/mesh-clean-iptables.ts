// `pilot-agent mesh-clean-iptables` (spec 4.3): remove what mesh-iptables installed.
import type { Command } from 'commander';
import { addOptions } from '../bool-flags.js';
import type { CliContext } from '../context.js';
import { loadIptables } from './iptables-io.js';
import { iptablesOptionsFrom, sharedIptablesFlags } from './iptables-flags.js';

export function registerMeshCleanIptables(program: Command, ctx: CliContext): void {
  const command = program.command('mesh-clean-iptables')
    .description('Clean up iptables rules: every MESH_ chain, the jumps into them and the TPROXY policy routes');
  addOptions(command, sharedIptablesFlags());
  command.action(async () => {
    const { run, io } = await loadIptables(ctx);
    await run.runMeshCleanIptables(iptablesOptionsFrom(command, ctx), io);
  });
}
