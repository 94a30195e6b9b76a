// The real side effects of the iptables commands: this machine's files, interfaces and commands.
import { writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type { IptablesIo } from '../../iptables/run.js';
import type { CliContext } from '../context.js';

/** Addresses in the kernel's order: interfaces as listed, IPv4 before IPv6 within one. */
function localAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address));
}

export function iptablesIo(ctx: CliContext, runner: IptablesIo['runner']): IptablesIo {
  return {
    stdout: ctx.stdout,
    readFile: ctx.readFile,
    writeFile: (path, text) => writeFileSync(path, text),
    localAddresses,
    runner,
  };
}

