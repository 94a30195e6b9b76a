// A CommandRunner that runs nothing: it records every call and answers success with empty output.
// It is what `--dry-run` uses; tests script answers with `respond` (e.g. an iptables-save text).
import { failedError } from './command-error.js';
import type { CommandResult, CommandRunner, RunOptions } from './runner.js';

export interface RecordedCall {
  readonly command: string;
  readonly args: readonly string[];
  readonly input?: string;
}

export type Responder = (call: RecordedCall) => Partial<CommandResult> | undefined;

export class RecordingRunner implements CommandRunner {
  readonly calls: RecordedCall[] = [];
  readonly #respond: Responder | undefined;

  constructor(respond?: Responder) {
    this.#respond = respond;
  }

  async run(command: string, args: readonly string[], options: RunOptions = {}): Promise<CommandResult> {
    const call: RecordedCall = options.input === undefined
      ? { command, args: [...args] } : { command, args: [...args], input: options.input };
    this.calls.push(call);
    const answer = this.#respond?.(call);
    const result = { stdout: answer?.stdout ?? '', stderr: answer?.stderr ?? '', exitCode: answer?.exitCode ?? 0 };
    // A scripted failure behaves as the real runner's: rejected unless allowFailure.
    if (result.exitCode !== 0 && !options.allowFailure) throw failedError(command, args, result);
    return result;
  }

  /** The calls as command lines, for assertions and --dry-run listings. */
  lines(): string[] {
    return this.calls.map((c) => [c.command, ...c.args].join(' '));
  }
}
