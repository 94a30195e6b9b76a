// Several pods on one network, for the tests of traffic between sidecars: a "node" namespace with
// a bridge (198.18.10.1/24) and one namespace per pod, each joined to the bridge by a veth pair
// (eth0 in the pod), with an address of its own and a default route via the node. A capture on a
// pod's link (tcpdump, in the node) shows exactly what crosses the wire to and from it. Namespaces and
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
  /** The node's end of its veth pair (what a capture of this pod's traffic listens on). */
  readonly link: string;
  close(): void;
}

export interface Captured {
  /** The capture file as tcpdump wrote it (pcap): headers and every packet, payloads whole. */
  readonly file: Buffer;
  /** Packets in it. */
  readonly packets: number;
}

export interface Capture {
  /** Stops the capture (SIGINT: tcpdump writes what it holds and exits) and answers what it saw. */
  stop(): Promise<Captured>;
}

/** Packets in a pcap file (classic format, either byte order): its record headers walked. */
export function pcapPackets(file: Buffer): number {
  if (file.length < 24) return 0;
  const le = file.readUInt32LE(0) === 0xa1b2c3d4 || file.readUInt32LE(0) === 0xa1b23c4d;
  let n = 0;
  for (let at = 24; at + 16 <= file.length; n++) at += 16 + (le ? file.readUInt32LE(at + 8) : file.readUInt32BE(at + 8));
  return n;
}

export interface MeshNetwork {
  readonly node: Namespace;
  /** A pod namespace on the network, address 198.18.10.<n + 1> (n from 1). */
  addPod(): MeshPodNamespace;
  /** Starts tcpdump on a pod's link (TCP only): every packet to or from it; resolves once it listens. */
  capture(pod: MeshPodNamespace): Promise<Capture>;
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
      return { ...ns, address, link };
    },
    async capture(pod) {
      const file = join(dir, `capture-${randomBytes(3).toString('hex')}.pcap`);
      // --immediate-mode and -U: each packet handed over and written as it comes, not in blocks.
      const child = node.start('tcpdump', ['-i', pod.link, '-n', '--immediate-mode', '-U', '-s', '0', '-w', file, 'tcp']);
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
          await new Promise((resolve) => setTimeout(resolve, 200)); // the last packets of the exchange arrive
          const exited = new Promise((resolve) => child.once('exit', resolve));
          if (child.pid) try { process.kill(child.pid, 'SIGINT'); } catch { /* gone */ }
          await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3_000))]);
          const captured = readFileSync(file);
          return { file: captured, packets: pcapPackets(captured) };
        },
      };
    },
    close,
  };
}
