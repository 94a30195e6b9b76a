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

