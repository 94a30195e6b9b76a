// `pilot-agent mesh-iptables` (spec 4.4): program the pod's capture rules.
import type { Command } from 'commander';
import { runMeshIptables } from '../../iptables/run.js';
import { addOptions } from '../bool-flags.js';
import type { CliContext } from '../context.js';
import { commandRunner } from './iptables-runner.js';
import { iptablesIo } from './iptables-io.js';
import { iptablesOptionsFrom, meshIptablesOnlyFlags, sharedIptablesFlags } from './iptables-flags.js';

export function registerMeshIptables(program: Command, ctx: CliContext): void {
  const command = program.command('mesh-iptables')
    .description('Set up port forwarding for the sidecar: the iptables rules that capture the pod\'s traffic');
  addOptions(command, [...sharedIptablesFlags('1337'), ...meshIptablesOnlyFlags()]);
  command.action(async () => runMeshIptables(iptablesOptionsFrom(command, ctx), iptablesIo(ctx, commandRunner)));
}
