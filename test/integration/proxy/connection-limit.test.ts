// MESH_MAX_DOWNSTREAM_CONNECTIONS at the sidecar: 15001 and 15006 draw on one count for the
// process, every worker (--concurrency 2) together. The pod holds idle outbound connections, the
// peer idle inbound ones; past the maximum the sidecar resets them at once, counts them and logs
// them (UO, in the access log on stdout).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, PEER_V4, POD_V4, type Pod } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');

/** Idle connections held from a namespace; resolves with how many the sidecar kept and closed. */
function hold(ns: Pod | Pod['peer'], host: string, port: number, count: number, holdMs: number): Promise<{ open: number; closed: number }> {
  const child = ns.start(process.execPath, [join(FIXTURES, 'hold-connections.mjs'), JSON.stringify([{ host, port, count }]), String(holdMs), '0']);
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  return new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve((JSON.parse(out) as { open: number; closed: number }[])[0]!) : reject(new Error(`exit ${code}`)))));
}

describe('the sidecar with MESH_MAX_DOWNSTREAM_CONNECTIONS=4 and 2 workers', { skip: netnsSkip }, () => {
  let pod: Pod;
  let sp: SidecarPod;

  before(async () => {
    sp = await startSidecarPod({
      files: { 'etc/mesh/config/mesh': 'accessLogFile: /dev/stdout\n' },
      env: ['MESH_MAX_DOWNSTREAM_CONNECTIONS=4'],
      args: ['--concurrency', '2'],
      prepare: async (p) => {
        await untilFirstOutput(p.peer.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), PEER_V4, '8080', 'peer']));
        await untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'app']));
      },
    });
    pod = sp.pod;
  });
  after(() => sp?.close());

  it('counts outbound and inbound connections against one maximum for the process', async () => {
    const outbound = hold(pod, PEER_V4, 8080, 3, 2500);
    await new Promise((resolve) => setTimeout(resolve, 600));
    const inbound = await hold(pod.peer, POD_V4, 9080, 3, 1000);
    assert.deepEqual([await outbound, inbound], [{ open: 3, closed: 0 }, { open: 1, closed: 2 }]);
    const stats = await runCli(['request', 'GET', '/stats'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.match(stats.stdout, /^listener\.[^ ]*_15006\.downstream_global_cx_overflow: 2$/m);
    assert.match(stats.stdout, /^listener\.[^ ]*_15001\.downstream_global_cx_overflow: 0$/m);
    assert.match(sp.stderr(), /downstream connections at (4 of 4|the maximum of 4) \(MESH_MAX_DOWNSTREAM_CONNECTIONS\)/);
    // Each refused connection has its line (Envoy's overload manager would say nothing), whichever worker refused it.
    const refused = sp.stdout().split('\n').filter((l) => / UO /.test(l));
    assert.equal(refused.length, 2, sp.stdout());
    for (const line of refused) {
      assert.match(line, new RegExp(`"- - -" 0 UO - downstream_global_cx_overflow "-" 0 0 0 - "-" "-" "-" "-" "-" - - ${POD_V4}:9080 ${PEER_V4}:\\d+ - -$`));
    }
  });
});
