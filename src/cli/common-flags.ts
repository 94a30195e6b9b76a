// The flags every command accepts (spec 4.2 "Common flags"), and their translation into log options.
import { Option, type Command } from 'commander';
import { usageError } from '../errors/agent-error.js';
import { LEVELS, SCOPE_NAMES, isScope, parseScopedLevels, type ScopeName } from '../log/levels.js';
import type { LogOptions } from '../log/logger.js';
import { completeWith } from './completion/model.js';
import { addOptions, boolOption } from './bool-flags.js';
import { collect, nonNegativeIntValue } from './flag-values.js';

const DEFAULT_TARGETS: readonly string[] = ['stdout'];
const SCOPED_LEVELS = [...SCOPE_NAMES, 'all'].flatMap((s) => LEVELS.map((l) => `${s}:${l}`));

export interface CommonFlags {
  log_as_json?: boolean;
  log_caller: string;
  log_output_level: string;
  log_stacktrace_level: string;
  log_target: readonly string[];
  vklog: number;
}

export function addCommonFlags(program: Command): void {
  addOptions(program, [
    ...boolOption('--log_as_json', 'Whether to format output as JSON or in plain console-friendly format'),
    completeWith(new Option('--log_caller <scopes>',
      `Comma-separated list of scopes for which to include caller information, scopes can be any of [${SCOPE_NAMES.join(', ')}]`)
      .default(''), { values: SCOPE_NAMES }),
    completeWith(new Option('--log_output_level <levels>',
      `Comma-separated minimum per-scope logging level of messages to output, in the form of <scope>:<level>,<scope>:<level>,... `
      + `where scope can be one of [all, ${SCOPE_NAMES.join(', ')}] and level can be one of [${LEVELS.join(', ')}]`)
      .default(''), { values: SCOPED_LEVELS }),
    completeWith(new Option('--log_stacktrace_level <levels>',
      'Comma-separated minimum per-scope logging level at which stack traces are captured, in the form of '
      + `<scope>:<level>,<scope>:<level>,... where scope and level are as for --log_output_level`)
      .default('default:none'), { values: SCOPED_LEVELS }),
    completeWith(new Option('--log_target <path>',
      'The set of paths where to output the log. This can be any path as well as the special values stdout and stderr; repeat the flag for several')
      .default(DEFAULT_TARGETS).argParser((v: string, prev: string[] | undefined) => collect(v, prev, DEFAULT_TARGETS)),
    { values: ['stdout', 'stderr'], file: true }),
    new Option('--vklog <level>', 'Number for the log level verbosity of klog messages (like -v flag), for example 9')
      .default(0).argParser(nonNegativeIntValue),
  ]);
}

/** Turns the common flags into logger options; `stdoutTo` reroutes `stdout` (for `request`). */
export function logOptionsFrom(flags: CommonFlags, stdoutTo: 'stdout' | 'stderr' = 'stdout'): LogOptions {
  const callerScopes = new Set<ScopeName>();
  for (const name of flags.log_caller.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    if (name === 'all') SCOPE_NAMES.forEach((s) => callerScopes.add(s));
    else if (isScope(name)) callerScopes.add(name);
    else throw usageError(`--log_caller: unknown scope "${name}"; scopes are all, ${SCOPE_NAMES.join(', ')}`);
  }
  return {
    json: flags.log_as_json === true,
    outputLevels: parseScopedLevels('--log_output_level', flags.log_output_level),
    stacktraceLevels: parseScopedLevels('--log_stacktrace_level', flags.log_stacktrace_level),
    callerScopes,
    targets: flags.log_target.map((t) => (t === 'stdout' ? stdoutTo : t)),
    vklog: flags.vklog,
  };
}
