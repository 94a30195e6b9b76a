// Starts and stops the agent's servers for `pilot-agent proxy`. The data plane lands with the
// proxy issue; until then the validated options are accepted and the command says so.
import type { EnvValues } from './config/env/registry.js';
import { AgentError } from './errors/agent-error.js';
import type { ProxyOptions } from './proxy/options.js';

export async function runProxy(options: ProxyOptions, _env: EnvValues): Promise<void> {
  throw new AgentError('ERR_NOT_IMPLEMENTED',
    `proxy ${options.type}: not implemented yet (flags and environment were validated; the data plane comes next)`);
}
