// A pod with its sidecar and the traffic-management backends on its peer (test/fixtures/
// traffic-backends.mjs, one per address, each answering with its name), for tests that write
// resources, run the clients of test/fixtures/traffic-client.mjs inside the pod and read what the
// backends saw. The sidecar runs as uid 1337 with an access log; resources are hot-reloaded.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './repo.js';
import { runCli } from './run-cli.js';
import { startSidecarPod, type SidecarPod } from './sidecar-pod.js';
import { waitFor } from './wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');

/** One line a backend printed: a request it saw (or an acknowledgement of a mode). */
export interface SeenRequest {
  readonly backend: string;
  readonly method?: string;
  readonly path?: string;
  readonly conn?: number;
  readonly tags?: readonly string[];
  readonly xfcc?: string;
  readonly host?: string;
  readonly proto?: string;
  readonly mode?: string;
  readonly ack?: number | null;
}

export interface TrafficPod {
  readonly sp: SidecarPod;
  /** What the backends printed since the last `clearSeen()`. */
  seen(): readonly SeenRequest[];
  clearSeen(): void;
  /** Writes the resources file and waits until the sidecar has a newer configuration in force. */
  resources(text: string): Promise<void>;
  /** Sets a backend's mode (ok, 503, stall, slow:N...) and waits for its acknowledgement. */
  mode(name: string, mode: string): Promise<void>;
  /** Runs traffic-client.mjs in the pod; its JSON answer. */
  client<T>(kind: 'http' | 'h2' | 'grpc' | 'tcp', o: Record<string, unknown>): T;
  accessLog(): string[];
  /** `pilot-agent request GET <path>` in the pod. */
  admin(path: string): Promise<string>;
  close(): void;
}

export async function startTrafficPod(o: { readonly addresses: Readonly<Record<string, string>>; readonly resources: string }): Promise<TrafficPod> {
  let seen: SeenRequest[] = [];
  let backends: ChildProcess | undefined;
  const sp = await startSidecarPod({
    files: {
      'etc/mesh/pod/labels': 'app="client"\n',
      'etc/mesh/config/mesh': 'accessLogFile: ./access.log\n',
      'etc/mesh/resources/traffic.yaml': o.resources,
    },
    writable: true,
    env: ['POD_NAMESPACE=default'],
    prepare: async (pod) => {
      for (const address of Object.values(o.addresses)) pod.peer.exec('ip', ['addr', 'add', `${address}/24`, 'dev', 'peer0']);
      backends = pod.peer.start(process.execPath, [join(FIXTURES, 'traffic-backends.mjs'),
        JSON.stringify(Object.entries(o.addresses).map(([name, address]) => ({ name, address })))], { stdin: true });
      let out = '';
      backends.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        let nl;
        while ((nl = out.indexOf('\n')) >= 0) {
          const line = out.slice(0, nl);
          out = out.slice(nl + 1);
          if (line.startsWith('{')) seen.push(JSON.parse(line) as SeenRequest);
          else if (line === 'listening') seen.push({ backend: '', mode: 'listening' });
        }
      });
      await waitFor('the backends listening', () => seen.find((e) => e.mode === 'listening'), 15_000);
    },
  });
  const admin = async (path: string): Promise<string> => {
    const r = await runCli(['request', 'GET', path], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
    return r.code === 0 ? r.stdout : '';
  };
  const configVersion = async (): Promise<number> => {
    const text = await admin('/config_dump');
    return text === '' ? 0 : (JSON.parse(text) as { configuration_version: number }).configuration_version;
  };
  let acks = 0;
  return {
    sp,
    seen: () => seen,
    clearSeen: () => { seen = []; },
    async resources(text) {
      const before = await configVersion();
      writeFileSync(join(sp.dir, 'etc/mesh/resources/traffic.yaml'), text);
      await waitFor('the new resources in force', async () => ((await configVersion()) > before ? true : undefined), 10_000);
      // Every worker reads the files on its own: give the other worker the same moment.
      await new Promise((resolve) => setTimeout(resolve, 300));
    },
    async mode(name, m) {
      const id = ++acks;
      backends!.stdin!.write(`${JSON.stringify({ name, mode: m, id })}\n`);
      await waitFor(`backend ${name} in mode ${m}`, () => seen.find((e) => e.ack === id));
    },
    client<T>(kind: 'http' | 'h2' | 'grpc' | 'tcp', opts: Record<string, unknown>): T {
      const r = sp.pod.exec(process.execPath, [join(FIXTURES, 'traffic-client.mjs'), kind, JSON.stringify(opts)], { allowFailure: true });
      assert.equal(r.exitCode, 0, r.stderr);
      return JSON.parse(r.stdout) as T;
    },
    accessLog: () => (existsSync(join(sp.dir, 'access.log')) ? readFileSync(join(sp.dir, 'access.log'), 'utf8').split('\n') : []),
    admin,
    close: () => sp.close(),
  };
}
