// A hand-built completion model shaped like pilot-agent's, with descriptions that stress every
// shell's quoting: quotes, $, backticks, brackets, braces, colons, backslashes and a newline.
import type { CompletionCommand, CompletionFlag } from '../../../src/cli/completion/model.js';

const help = (what: string): CompletionFlag => ({
  long: '--help', short: '-h', description: `help for ${what}`, takesValue: false,
});

const shell = (name: string): CompletionCommand => ({
  name,
  description: `Generate the autocompletion script for ${name}. Load it with:\n  source <(pilot-agent completion ${name})`,
  flags: [
    { long: '--no-descriptions', description: 'disable completion descriptions', takesValue: false },
    help(name),
  ],
  subcommands: [],
});

export const fixtureModel: CompletionCommand = {
  name: 'pilot-agent',
  description: 'Istio Pilot agent.',
  flags: [
    {
      long: '--log_output_level',
      description: 'Comma-separated minimum per-scope logging level, in the form <scope>:<level>,'
        + ' where level is one of [debug, info, warn, error, none]',
      takesValue: true,
      values: ['default:debug', 'default:info', 'default:warn', 'default:error', 'default:none'],
    },
    {
      long: '--log_as_json',
      description: 'Whether to format output as JSON or in plain console-friendly format',
      takesValue: false,
    },
    { long: '--log_target', description: 'The set of paths where to output the log', takesValue: true },
    help('pilot-agent'),
  ],
  subcommands: [
    {
      name: 'completion',
      description: 'Generate the autocompletion script for the specified shell',
      flags: [help('completion')],
      subcommands: ['bash', 'zsh', 'fish', 'powershell'].map(shell),
    },
    {
      name: 'mesh-iptables',
      description: 'Set up iptables rules: `redirect` traffic [to the sidecar] for $POD_NAME',
      flags: [
        {
          long: '--mesh-inbound-interception-mode',
          short: '-m',
          description: 'The mode used to redirect inbound connections to Envoy, either "REDIRECT" or "TPROXY"',
          takesValue: true,
          values: ['REDIRECT', 'TPROXY'],
        },
        {
          long: '--envoy-port', short: '-p',
          description: 'Specify the envoy port to which redirect all TCP traffic (default $ENVOY_PORT)',
          takesValue: true,
        },
        {
          long: '--dry-run', short: '-n',
          description: "Don't apply rules; print them; it's a \\dry\\ run",
          takesValue: false,
        },
        help('mesh-iptables'),
      ],
      subcommands: [],
    },
    {
      name: 'proxy',
      description: 'XDS proxy agent\nwith a second line that must not reach any shell',
      flags: [
        {
          long: '--proxyLogLevel',
          description: 'The log level used to start the Envoy proxy (choose from {trace, debug, info})',
          takesValue: true,
          values: ['trace', 'debug', 'info', 'warning', 'error', 'critical', 'off'],
        },
        { long: '--templateFile', description: 'Go template bootstrap config', takesValue: true, file: true },
        help('proxy'),
      ],
      subcommands: [],
      args: ['sidecar', 'router'],
    },
    {
      name: 'request',
      description: "Makes an HTTP request to the Envoy admin API: 'quoted' & \"double\" | <redirect> ; # \u2019smart\u2019",
      flags: [help('request')],
      subcommands: [],
      args: ['GET', 'POST', 'PUT', 'DELETE'],
    },
    {
      name: 'version',
      description: 'Prints out build version information',
      flags: [
        { long: '--output', short: '-o', description: "One of 'yaml' or 'json'.", takesValue: true, values: ['yaml', 'json'] },
        { long: '--short', short: '-s', description: 'Use --short=false to generate full version information', takesValue: false },
        help('version'),
      ],
      subcommands: [],
    },
    {
      name: 'wait',
      description: 'Waits until the Envoy proxy is ready',
      flags: [
        { long: '--timeoutSeconds', description: 'maximum number of seconds to wait for Envoy to be ready', takesValue: true },
        help('wait'),
      ],
      subcommands: [],
    },
  ],
};
