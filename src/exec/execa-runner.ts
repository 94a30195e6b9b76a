// The real CommandRunner: runs a program through execa, feeds `input` on stdin, and rejects with a
// CommandError naming the command, exit code and stderr (unless `allowFailure`). Messages of the
// programs are asked in English (LC_ALL=C) because callers classify them.
import { failedError, notFoundError } from './command-error.js';
import type { CommandResult, CommandRunner, RunOptions } from './runner.js';

export class ExecaRunner implements CommandRunner {
  async run(command: string, args: readonly string[], options: RunOptions = {}): Promise<CommandResult> {
    // Loaded on first use: the proxy process, which never runs a command, does not pay for it.
    const { execa } = await import('execa');
    const r = await execa(command, args, {
      reject: false,
      stripFinalNewline: false,
      env: { LC_ALL: 'C' },
      ...(options.input === undefined ? { stdin: 'ignore' as const } : { input: options.input }),
    });
    const stdout = r.stdout ?? '';
    const stderr = r.stderr ?? '';
    if (r.exitCode === undefined) {
      if (r.code === 'ENOENT') throw notFoundError(command, args, r);
      // Killed by a signal, or could not start for another reason (EACCES...).
      const result = { stdout, stderr: stderr || String(r.originalMessage ?? r.message ?? 'could not start'), exitCode: -1 };
      if (options.allowFailure) return result;
      throw failedError(command, args, result);
    }
    const result: CommandResult = { stdout, stderr, exitCode: r.exitCode };
    if (result.exitCode !== 0 && !options.allowFailure) throw failedError(command, args, result);
    return result;
  }
}
