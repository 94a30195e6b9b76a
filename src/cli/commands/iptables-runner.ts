// Which command runner the iptables commands use: execa, inside --network-namespace when given.
import { ExecaRunner } from '../../exec/execa-runner.js';
import { NetnsRunner } from '../../exec/netns-runner.js';
import type { CommandRunner } from '../../exec/runner.js';
import type { MeshIptablesOptions } from '../../iptables/options.js';

export function commandRunner(o: MeshIptablesOptions): CommandRunner {
  return o.networkNamespace ? new NetnsRunner(new ExecaRunner(), o.networkNamespace) : new ExecaRunner();
}
