// `--network-namespace`: every command of the wrapped runner runs inside a network namespace, given
// by name (`ip netns exec NAME cmd...`, a name under /var/run/netns) or by path (`nsenter --net=PATH
// cmd...`, e.g. /proc/PID/ns/net as CNI plugins pass it). A missing program inside is reported as
// the program being missing, not as `ip` or `nsenter` failing.
import { AgentError } from '../errors/agent-error.js';
import { failedError, notFoundError } from './command-error.js';
import type { CommandResult, CommandRunner, RunOptions } from './runner.js';

export type NetnsRef = { readonly name: string } | { readonly path: string };

/** A path (contains `/`) is entered with nsenter; anything else is an `ip netns` name. */
export function netnsRef(namespace: string): NetnsRef {
  return namespace.includes('/') ? { path: namespace } : { name: namespace };
}

/** The command prefix that runs a program inside the namespace. */
export function netnsPrefix(ref: NetnsRef): [string, ...string[]] {
  return 'name' in ref ? ['ip', 'netns', 'exec', ref.name] : ['nsenter', `--net=${ref.path}`, '--'];
}

export class NetnsRunner implements CommandRunner {
  readonly ref: NetnsRef;
  readonly #inner: CommandRunner;

  constructor(inner: CommandRunner, namespace: string | NetnsRef) {
    this.#inner = inner;
    this.ref = typeof namespace === 'string' ? netnsRef(namespace) : namespace;
  }

  async run(command: string, args: readonly string[], options: RunOptions = {}): Promise<CommandResult> {
    const [wrapper, ...prefix] = netnsPrefix(this.ref);
    const result = await this.#inner.run(wrapper, [...prefix, command, ...args], { ...options, allowFailure: true });
    if (result.exitCode === 0) return result;
    const where = 'name' in this.ref ? `network namespace "${this.ref.name}"` : `network namespace ${this.ref.path}`;
    // ip: `Cannot open network namespace "x": No such file or directory`; nsenter: `cannot open /x: ...`
    if (/Cannot open network namespace|nsenter: cannot open|nsenter: reassociate to namespace/.test(result.stderr)) {
      throw new AgentError('ERR_COMMAND_FAILED', `cannot enter ${where}: ${result.stderr.trim()}`);
    }
    // ip: `exec of "x" failed: No such file or directory`; nsenter: `failed to execute x: No such file...`
    if (/(exec of "[^"]*" failed|failed to execute \S+): No such file or directory/.test(result.stderr)) {
      throw notFoundError(command, args);
    }
    if (options.allowFailure) return result;
    throw failedError(command, args, result);
  }
}
