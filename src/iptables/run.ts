// Entry points of the iptables capability. The rule builder and applier land with the
// mesh-iptables issue; until then the validated options are accepted and the command says so.
import { AgentError } from '../errors/agent-error.js';
import type { MeshIptablesOptions } from './options.js';

export async function runMeshIptables(_options: MeshIptablesOptions): Promise<void> {
  throw new AgentError('ERR_NOT_IMPLEMENTED',
    'mesh-iptables: not implemented yet (flags were validated; rule building and applying come next)');
}

export async function runMeshCleanIptables(_options: MeshIptablesOptions): Promise<void> {
  throw new AgentError('ERR_NOT_IMPLEMENTED',
    'mesh-clean-iptables: not implemented yet (flags were validated; clean-up comes with mesh-iptables)');
}
