// `pilot-agent request <method> <path> [<body>]`: the everyday debugging tool. Only the response
// body goes to stdout (tools parse it); statuses and errors go to stderr.
import { Option, type Command } from 'commander';
import { REQUEST_PORTS, prepareAdminRequest, sendAdminRequest } from '../../admin/client.js';
import { AgentError } from '../../errors/agent-error.js';
import { completeWith } from '../completion/model.js';
import type { CliContext } from '../context.js';
import { int32Value } from '../flag-values.js';

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'];

export function registerRequest(program: Command, ctx: CliContext): void {
  const command = program.command('request')
    .description('Makes an HTTP request to the proxy admin API (or another local agent port)')
    .argument('<method>', 'HTTP method, such as GET or POST')
    .argument('<path>', 'path, such as /stats or stats')
    .argument('[body]', 'request body')
    .addOption(new Option('--debug-port <port>',
      `Set the port to make a local request to. The default points to the proxy admin API; allowed: ${REQUEST_PORTS.join(', ')}`)
      .default(15000).argParser(int32Value));
  completeWith(command, { values: METHODS });
  command.action(async (method: string, path: string, body: string | undefined, flags: { debugPort: number }) => {
    const req = prepareAdminRequest({ port: flags.debugPort, method, path, ...(body === undefined ? {} : { body }) });
    const res = await sendAdminRequest(req);
    const ok = res.status >= 200 && res.status < 300;
    // As Istio does, the body of a redirect or a 404 (the admin lists its endpoints) is still printed.
    if (res.status < 400 || res.status === 404) ctx.stdout.write(res.body);
    if (!ok) {
      const detail = res.status < 400 || res.status === 404 ? '' : `: ${res.body.toString('utf8').trim()}`;
      throw new AgentError('ERR_REQUEST_FAILED',
        `${req.method} ${req.path} on port ${req.port}: received unsuccessful status code ${res.status} ${res.statusText}${detail}`);
    }
  });
}
