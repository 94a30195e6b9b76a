// Which command runner the iptables commands use: execa, inside --network-namespace when given.
import { AgentError } from '../../errors/agent-error.js';
import type { CommandRunner } from '../../exec/runner.js';
import type { MeshIptablesOptions } from '../../iptables/options.js';

export function commandRunner(_o: MeshIptablesOptions): CommandRunner {
  return {
    run: async (command) => {
      throw new AgentError('ERR_NOT_IMPLEMENTED', `running ${command} is not implemented yet`);
    },
  };
}
