// The one narrow interface through which the agent runs external commands (iptables, ip, ...).
// Real runs go through execa; `--dry-run` uses a recording runner that calls nothing.

export interface CommandResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

export interface RunOptions {
  /** Written to the command's stdin (iptables-restore input). */
  readonly input?: string;
  /** Resolve with the non-zero exit code instead of rejecting. */
  readonly allowFailure?: boolean;
}

export interface CommandRunner {
  run(command: string, args: readonly string[], options?: RunOptions): Promise<CommandResult>;
}
