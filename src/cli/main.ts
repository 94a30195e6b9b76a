// The library's entry: argv and environment in, exit code out. bin/pilot-agent is the only caller
// that touches process.*; tests call this directly or run the binary.
import { readFileSync } from 'node:fs';
import { CommanderError } from 'commander';
import { describeProblem, readEnvironment } from '../config/env/registry.js';
import { AgentError, ExitCode } from '../errors/agent-error.js';
import { rewriteBoolAssignments } from './bool-flags.js';
import type { CliContext, Output } from './context.js';
import { buildProgram } from './program.js';

/** Commander codes that are not failures: help or version was displayed. */
const DISPLAY_CODES = new Set(['commander.helpDisplayed', 'commander.help', 'commander.version']);

function readFileOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

export async function main(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  io: { stdout: Output; stderr: Output } = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  const ctx: CliContext = { env: readEnvironment(env), ...io, readFile: readFileOrUndefined };
  for (const problem of ctx.env.problems) io.stderr.write(`pilot-agent: warning: ${describeProblem(problem)}\n`);
  const program = buildProgram(ctx);
  try {
    if (argv.length === 0) {
      program.outputHelp();
      return ExitCode.ok;
    }
    // `help completion bash` reaches nested commands (commander's help takes one name).
    const args = argv[0] === 'help' && argv.length > 2 ? [...argv.slice(1), '--help'] : argv;
    await program.parseAsync(rewriteBoolAssignments(program, args), { from: 'user' });
    return ExitCode.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander has already written its message.
      return DISPLAY_CODES.has(err.code) ? ExitCode.ok : ExitCode.usage;
    }
    if (err instanceof AgentError) {
      io.stderr.write(`Error: ${err.message}\n`);
      return err.exitCode;
    }
    io.stderr.write(`Error: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    return ExitCode.failure;
  }
}
