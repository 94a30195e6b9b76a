// `pilot-agent mesh-clean-iptables` (spec 4.3): remove what mesh-iptables installed.
import type { Command } from 'commander';
import { runMeshCleanIptables } from '../../iptables/run.js';
import { addOptions } from '../bool-flags.js';
import type { CliContext } from '../context.js';
import { commandRunner } from './iptables-runner.js';
import { iptablesIo } from './iptables-io.js';
import { iptablesOptionsFrom, sharedIptablesFlags } from './iptables-flags.js';

export function registerMeshCleanIptables(program: Command, ctx: CliContext): void {
  const command = program.command('mesh-clean-iptables')
    .description('Clean up iptables rules: every MESH_ chain, the jumps into them and the TPROXY policy routes');
  addOptions(command, sharedIptablesFlags());
  command.action(async () => runMeshCleanIptables(iptablesOptionsFrom(command, ctx), iptablesIo(ctx, commandRunner)));
}
