// The errors of running an external program, shared by every runner: a missing binary names the
// Debian package that provides it; a non-zero exit names the command, its exit code and its stderr.
import { AgentError } from '../errors/agent-error.js';
import type { CommandResult } from './runner.js';

/** Which package provides a program, for "not found: install ..." messages. */
const PACKAGE_OF: readonly [RegExp, string][] = [
  [/^(ip6?tables|xtables)/, 'iptables'],
  [/^(ip|ss|tc)$/, 'iproute2'],
  [/^(nsenter|setpriv|unshare)$/, 'util-linux'],
];

/** A command failed: keeps what a caller needs to classify it (the command's own exit code, stderr). */
export class CommandError extends AgentError {
  readonly command: string;
  readonly args: readonly string[];
  /** The program's exit code (not the CLI's: that is `exitCode`); undefined when it did not start. */
  readonly commandExitCode: number | undefined;
  readonly stderr: string;

  constructor(code: 'ERR_COMMAND_FAILED' | 'ERR_COMMAND_NOT_FOUND', message: string,
    details: { command: string; args: readonly string[]; exitCode?: number; stderr?: string; cause?: unknown }) {
    super(code, message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'CommandError';
    this.command = details.command;
    this.args = details.args;
    this.commandExitCode = details.exitCode;
    this.stderr = details.stderr ?? '';
  }
}

/** The command line as a person would type it, arguments with spaces quoted. */
export function commandLine(command: string, args: readonly string[]): string {
  return [command, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

export function notFoundError(command: string, args: readonly string[], cause?: unknown): CommandError {
  const base = command.split('/').pop() ?? command;
  const pkg = PACKAGE_OF.find(([re]) => re.test(base))?.[1];
  return new CommandError('ERR_COMMAND_NOT_FOUND',
    `${base} not found${pkg ? `: install ${pkg}` : ' on the PATH'}`, { command, args, cause });
}

export function failedError(command: string, args: readonly string[], result: CommandResult): CommandError {
  const stderr = result.stderr.trim();
  return new CommandError('ERR_COMMAND_FAILED',
    `${commandLine(command, args)} failed with exit code ${result.exitCode}${stderr ? `: ${stderr}` : ''}`,
    { command, args, exitCode: result.exitCode, stderr: result.stderr });
}
