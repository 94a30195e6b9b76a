// Runs bin/pilot-agent as a real process and collects what it printed.
import { spawn } from 'node:child_process';
import { binPath } from './repo.js';

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Environment for a child: PATH and HOME only, plus what the test adds, so the host's env can't leak in. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: process.env['HOME'] ?? '/root', ...extra };
}

export interface RunOptions {
  readonly env?: Record<string, string>;
  readonly cwd?: string;
  readonly timeoutMs?: number;
  /** Command to run the binary under, such as `ip netns exec NAME`. */
  readonly prefix?: readonly string[];
}

export function runCli(args: readonly string[], opts: RunOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const [command, ...commandArgs] = [...(opts.prefix ?? []), process.execPath, binPath, ...args];
    const child = spawn(command!, commandArgs, {
      env: opts.env ?? cleanEnv(), cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
