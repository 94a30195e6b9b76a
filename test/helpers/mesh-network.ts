// Several pods on one network, for the tests of traffic between sidecars: a "node" namespace with
// a bridge (198.18.10.1/24) and one namespace per pod, each joined to the bridge by a veth pair
// (eth0 in the pod), with an address of its own and a default route via the node. A capture on
// the bridge (tcpdump) shows exactly what crosses the wire between the pods. Namespaces and
// processes end with `close()`, or at process exit (pod-netns.ts keeps track of them).
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNamespace, type Namespace } from './pod-netns.js';

export const NODE_V4 = '198.18.10.1';

export interface MeshPodNamespace extends Namespace {
  /** Its address on the pod network. */
  readonly address: string;
  close(): void;
}

export interface Capture {
  /** Stops the capture (tcpdump wrote each packet as it came) and answers the raw capture file. */
  stop(): Promise<Buffer>;
}

export interface MeshNetwork {
  readonly node: Namespace;
  /** A pod namespace on the network, address 198.18.10.<n + 1> (n from 1). */
  addPod(): MeshPodNamespace;
  /** Starts tcpdump on the bridge (TCP only); resolves once it listens. */
  capture(): Promise<Capture>;
  close(): void;
}

export function createMeshNetwork(): MeshNetwork {
  const node = createNamespace();
  const pods: (Namespace & { close(): void })[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'pa-capture-'));
  const close = (): void => {
    for (const p of pods) p.close();
    node.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    node.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);
    node.exec('ip', ['addr', 'add', `${NODE_V4}/24`, 'dev', 'br0']);
    node.exec('ip', ['link', 'set', 'br0', 'up']);
  } catch (err) {
    close();
    throw err;
  }
  return {
    node,
    addPod() {
      const n = pods.length + 1;
      const ns = createNamespace();
      pods.push(ns);
      const address = `198.18.10.${n + 1}`;
      const link = `v${n}-${randomBytes(2).toString('hex')}`;
      ns.exec('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', link, 'netns', node.name]);
      ns.exec('ip', ['addr', 'add', `${address}/24`, 'dev', 'eth0']);
      ns.exec('ip', ['link', 'set', 'eth0', 'up']);
      ns.exec('ip', ['route', 'add', 'default', 'via', NODE_V4]);
      node.exec('ip', ['link', 'set', link, 'master', 'br0']);
      node.exec('ip', ['link', 'set', link, 'up']);
      return { ...ns, address };
    },
    async capture() {
      const file = join(dir, `capture-${randomBytes(3).toString('hex')}.pcap`);
      // -U: each packet written as it comes (the process is killed, not asked to flush).
      const child = node.start('tcpdump', ['-i', 'br0', '-n', '-U', '-s', '0', '-w', file, 'tcp']);
      await new Promise<void>((resolve, reject) => {
        let err = '';
        const timer = setTimeout(() => reject(new Error(`tcpdump did not start: ${err}`)), 5_000);
        child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`tcpdump exited with ${code}: ${err}`)); });
        child.stderr!.setEncoding('utf8').on('data', (d: string) => {
          err += d;
          if (err.includes('listening on')) { clearTimeout(timer); resolve(); }
        });
      });
      return {
        async stop() {
          await new Promise((resolve) => setTimeout(resolve, 200)); // the last packets reach the file
          if (child.pid) try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
          return readFileSync(file);
        },
      };
    },
    close,
  };
}
