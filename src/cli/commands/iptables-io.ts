// The real side effects of the iptables commands: this machine's files, interfaces and commands.
import { writeFileSync } from 'node:fs';
import type { IptablesIo } from '../../iptables/run.js';
import { localAddresses } from '../../net/local-addresses.js';
import type { CliContext } from '../context.js';

export function iptablesIo(ctx: CliContext, runner: IptablesIo['runner']): IptablesIo {
  return {
    stdout: ctx.stdout,
    readFile: ctx.readFile,
    writeFile: (path, text) => writeFileSync(path, text),
    localAddresses,
    runner,
  };
}

/**
 * What the iptables commands run with, loaded when one runs: the rule builder, apply and
 * validation are not needed by `proxy` or any other command, and cost start-up to load.
 */
export async function loadIptables(ctx: CliContext): Promise<{ run: typeof import('../../iptables/run.js'); io: IptablesIo }> {
  const [run, { commandRunner }] = await Promise.all([import('../../iptables/run.js'), import('./iptables-runner.js')]);
  return { run, io: iptablesIo(ctx, commandRunner) };
}
