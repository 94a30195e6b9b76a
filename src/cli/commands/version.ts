// `pilot-agent version`: build information, short, full, JSON or YAML.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { buildInfo, type BuildInfo } from '../../version/build-info.js';
import { addOptions, boolOption } from '../bool-flags.js';
import { completeWith } from '../completion/model.js';
import type { CliContext } from '../context.js';
import { yaml } from '../../config/yaml.js';

const FORMATS = ['yaml', 'json'] as const;

function outputFormat(value: string): string {
  if (value !== '' && !(FORMATS as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`--output must be 'yaml' or 'json'.`);
  }
  return value;
}

/** Istio's long form, so scripts that grep it keep working. */
export function longVersion(info: BuildInfo): string {
  return `version.BuildInfo{Version:"${info.version}", GitRevision:"${info.revision}", `
    + `NodeVersion:"${info.nodeVersion}", Platform:"${info.platform}", BuildTime:"${info.buildTime}", `
    + `BuildStatus:"${info.status}"}`;
}

export function structuredVersion(info: BuildInfo): object {
  return {
    clientVersion: {
      version: info.version,
      revision: info.revision,
      node_version: info.nodeVersion,
      platform: info.platform,
      build_time: info.buildTime,
      status: info.status,
    },
  };
}

export function registerVersion(program: Command, ctx: CliContext): void {
  const command = program.command('version').description('Prints out build version information');
  addOptions(command, [
    completeWith(new Option('-o, --output <format>', "One of 'yaml' or 'json'.").default('').argParser(outputFormat),
      { values: FORMATS }),
    ...boolOption('-s, --short', 'Use --short=false to generate full version information', true),
  ]);
  command.action(async (flags: { output: string; short: boolean }) => {
    const info = buildInfo();
    if (flags.output === 'json') ctx.stdout.write(`${JSON.stringify(structuredVersion(info), null, 2)}\n`);
    // Loaded on demand: the yaml module costs every command ~25 ms of start-up otherwise.
    else if (flags.output === 'yaml') ctx.stdout.write(yaml().stringify(structuredVersion(info)));
    else ctx.stdout.write(`${flags.short ? info.version : longVersion(info)}\n`);
  });
}
