// The DNS server without capture (MESH_META_ENABLE_DNS_SERVER, as gateways use it) in a network
// namespace of the test's own: DNS_PROXY_ADDR ending in :53 is listened on directly by an agent
// running as root, and an agent that may not bind port 53 listens on 15053 instead. The namespace's
// resolv.conf names 127.0.0.1, the agent's own address: it must not forward to itself.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { binPath, repoRoot } from '../../helpers/repo.js';
import { cleanEnv } from '../../helpers/run-cli.js';

const QUERY = join(repoRoot, 'test', 'integration', 'dns', 'fixtures', 'query.mjs');

describe('DNS server without capture (MESH_META_ENABLE_DNS_SERVER)', { skip: netnsSkip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'pa-dns-server-'));
  const children: ChildProcess[] = [];
  const namespaces: Netns[] = [];
  const etcDirs: string[] = [];

  before(() => {
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, 'etc', 'mesh', 'resources'), { recursive: true });
    for (const d of ['etc', 'etc/mesh', 'etc/mesh/resources']) chmodSync(join(dir, d), 0o755);
    // The agent is in ns1: an entry of ns2 is answered only when exported to ns1 (Istio's DNS table is per proxy namespace).
    const entry = (ns: string, name: string, address: string, exportTo = ''): string[] => [
      'apiVersion: networking.mesh.io/v1', 'kind: ServiceEntry', `metadata: { name: ${name}, namespace: ${ns} }`,
      `spec: { hosts: [${name}.example.com], addresses: [${address}]${exportTo} }`, '---',
    ];
    writeFileSync(join(dir, 'etc', 'mesh', 'resources', 'se.yaml'), [
      ...entry('ns1', 'upstream', '192.0.2.44'), ...entry('ns2', 'shared', '192.0.2.45', ', exportTo: [ns1]'),
      ...entry('ns2', 'hidden', '192.0.2.46', ', exportTo: ["."]'), ...entry('ns1', 'none', '192.0.2.47', ', exportTo: ["~"]'), '',
    ].join('\n'));
  });
  after(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const ns of namespaces) ns.close();
    for (const d of etcDirs) rmSync(d, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  const setup = async (asUid?: number): Promise<{ ns: Netns; output: () => string }> => {
    const ns = createNetns();
    assert.ok(ns, 'needs root to create a network namespace');
    namespaces.push(ns);
    const etc = join('/etc/netns', ns.name);
    etcDirs.push(etc);
    mkdirSync(etc, { recursive: true });
    writeFileSync(join(etc, 'resolv.conf'), 'nameserver 127.0.0.1\n');
    const user = asUid === undefined ? [] : ['setpriv', `--reuid=${asUid}`, `--regid=${asUid}`, '--clear-groups', '--'];
    const child = spawn('ip', ['netns', 'exec', ns.name, ...user, process.execPath, binPath, 'proxy', '--log_target', 'stderr'], {
      cwd: dir, stdio: ['ignore', 'ignore', 'pipe'],
      env: cleanEnv({ POD_NAMESPACE: 'ns1', MESH_META_ENABLE_DNS_SERVER: 'true', DNS_PROXY_ADDR: '127.0.0.1:53', DISABLE_PROXY: 'true' }),
    });
    children.push(child);
    let out = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    const wait = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '10']);
    assert.equal(wait.code, 0, `${wait.stderr}\n${out}`);
    return { ns, output: () => out };
  };

  const ask = (ns: Netns, port: number, name: string, transport: string): { rcode?: number; aa?: number; answers?: string[]; error?: string } => {
    const r = spawnSyncIn(ns, [process.execPath, QUERY, '127.0.0.1', name, 'A', transport, '2000'], { QUERY_PORT: String(port) });
    return JSON.parse(r) as { rcode?: number; aa?: number; answers?: string[]; error?: string };
  };

  it('as root, listens on DNS_PROXY_ADDR 127.0.0.1:53 itself; answers its names, SERVFAIL rather than asking itself', async () => {
    const { ns, output } = await setup();
    for (const transport of ['udp', 'tcp']) {
      assert.deepEqual(ask(ns, 53, 'upstream.example.com', transport), { rcode: 0, aa: 1, answers: ['A 192.0.2.44 30'] }, output());
      assert.equal(ask(ns, 53, 'other.example.com', transport).rcode, 2);
      assert.deepEqual(ask(ns, 53, 'shared.example.com', transport), { rcode: 0, aa: 1, answers: ['A 192.0.2.45 30'] }, 'exported to ns1');
      assert.equal(ask(ns, 53, 'hidden.example.com', transport).rcode, 2, 'exported to ns2 only: not answered here (forwarded)');
      assert.equal(ask(ns, 53, 'none.example.com', transport).rcode, 2, 'exported to no namespace');
    }
    assert.match(output(), /127\.0\.0\.1:53 is this DNS proxy itself; not forwarding to it/);
  });

  it('without the right to bind port 53 (uid 1337), listens on 15053 instead, and says so', async () => {
    const { ns, output } = await setup(1337);
    assert.deepEqual(ask(ns, 15053, 'upstream.example.com', 'udp'), { rcode: 0, aa: 1, answers: ['A 192.0.2.44 30'] }, output());
    assert.match(output(), /no permission to bind port 53 \(not root\); listening on 15053 instead/);
  });
});

/** Runs a command in the namespace and returns its stdout (or the error as a JSON result). */
function spawnSyncIn(ns: Netns, cmd: string[], env: Record<string, string>): string {
  const r = spawnSync('ip', ['netns', 'exec', ns.name, ...cmd], { encoding: 'utf8', env: { ...process.env, ...env } });
  return r.stdout || JSON.stringify({ error: r.stderr });
}
