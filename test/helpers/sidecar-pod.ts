// A pod with its sidecar, for the end-to-end tests: a pod namespace and its peer (pod-netns.ts),
// the capture rules applied by `pilot-agent mesh-iptables` (REDIRECT, everything captured but the
// agent's own ports), a working directory with the sidecar's files, the apps the test starts, and
// `pilot-agent proxy` as uid 1337, ready (`wait`). `close()` ends it all, even after a failed start.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createPod, type Namespace, type Pod } from './pod-netns.js';
import { binPath } from './repo.js';
import { cleanEnv, runCli } from './run-cli.js';
import { waitFor } from './wait-for.js';

/** Resolves at a child's first output (the fixtures print a line when they listen); rejects if it exits first. */
export function untilFirstOutput(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`exited with ${code}`)));
    child.stdout!.setEncoding('utf8').once('data', () => resolve());
  });
}

export interface SidecarPodOptions<P extends Namespace & { close(): void } = Pod> {
  /** Files of the sidecar's working directory: relative path → content (mesh config, labels, resources). */
  readonly files?: Readonly<Record<string, string>>;
  /** The sidecar may write in its working directory (uid 1337 owns it): an access log file there. */
  readonly writable?: boolean;
  /** More `mesh-iptables` flags (`--redirect-dns`...). */
  readonly iptablesArgs?: readonly string[];
  /** False: no capture rules (a gateway, which clients reach on its own ports). */
  readonly capture?: boolean;
  /** `NAME=value` for the sidecar's environment. */
  readonly env?: readonly string[];
  /** After `proxy`: `--concurrency 2`... */
  readonly args?: readonly string[];
  /** Starts the apps, before the sidecar. */
  readonly prepare?: (pod: P) => Promise<void> | void;
  /** After the files are written, before the sidecar starts: more files (certificates...) in its directory. */
  readonly beforeStart?: (dir: string) => Promise<void> | void;
  /** Makes the pod's namespace (default: a pod and its peer, pod-netns.ts). */
  readonly namespace?: () => P;
  /** Let the sidecar take this long to be ready (a CA to ask first...). */
  readonly readyTimeoutSeconds?: number;
  /** False: return once the sidecar is started, ready or not (a test of readiness itself). */
  readonly waitReady?: boolean;
}

export interface SidecarPod<P extends Namespace & { close(): void } = Pod> {
  readonly pod: P;
  /** The sidecar's working directory. */
  readonly dir: string;
  readonly sidecar: ChildProcess;
  /** What the sidecar printed so far. */
  stdout(): string;
  stderr(): string;
  close(): void;
}

export async function startSidecarPod<P extends Namespace & { close(): void } = Pod>(o: SidecarPodOptions<P> = {}): Promise<SidecarPod<P>> {
  const pod = o.namespace ? o.namespace() : createPod() as unknown as P;
  const dir = mkdtempSync(join(tmpdir(), 'pa-sidecar-'));
  let out = '';
  let err = '';
  const close = (): void => {
    pod.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    chmodSync(dir, 0o755); // uid 1337 reads its files there
    for (const [file, text] of Object.entries(o.files ?? {})) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), text);
    }
    if (o.writable) chownSync(dir, 1337, 1337);
    if (o.capture !== false) {
      const init = await runCli(['mesh-iptables', '-m', 'REDIRECT', '-i', '*', '-b', '*', '-d', '15020,15021,15090', '-u', '1337', '-g', '1337', ...(o.iptablesArgs ?? [])],
        { prefix: ['ip', 'netns', 'exec', pod.name], env: cleanEnv() });
      assert.equal(init.code, 0, init.stderr);
    }
    await o.prepare?.(pod);
    await o.beforeStart?.(dir);
    const sidecar = pod.start('env', ['-C', dir, ...(o.env ?? []), 'setpriv', '--reuid=1337', '--regid=1337', '--clear-groups', '--',
      process.execPath, binPath, 'proxy', ...(o.args ?? []), '--log_target', 'stderr']);
    sidecar.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    sidecar.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
    if (o.waitReady === false) return { pod, dir, sidecar, stdout: () => out, stderr: () => err, close };
    const wait = await runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', String(o.readyTimeoutSeconds ?? 10)], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.equal(wait.code, 0, `${wait.stderr}\n${err}`);
    return { pod, dir, sidecar, stdout: () => out, stderr: () => err, close };
  } catch (e) {
    close();
    throw e;
  }
}

/** The configuration version the sidecar's admin port reports (0 before it answers). */
export async function configVersion(sp: SidecarPod<Namespace & { close(): void }>): Promise<number> {
  const r = await runCli(['request', 'GET', '/config_dump'], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
  return r.code === 0 ? (JSON.parse(r.stdout) as { configuration_version: number }).configuration_version : 0;
}

/** Writes a resource file (relative to the pod's directory) and waits until the sidecar has a new configuration version. */
export async function writeResources(sp: SidecarPod<Namespace & { close(): void }>, file: string, text: string): Promise<void> {
  const before = await configVersion(sp);
  writeFileSync(join(sp.dir, file), text);
  await waitFor('the new resources in force', async () => ((await configVersion(sp)) > before ? true : undefined), 10_000);
  // Every worker reads the files on its own: give the other worker the same moment.
  await new Promise((resolve) => setTimeout(resolve, 300));
}

/** A GET by node's fetch from inside `ns`: its status (0 when none came within 4 s). */
export function statusFrom(ns: Namespace, url: string, headers: Readonly<Record<string, string>> = {}): number {
  const script = `fetch(${JSON.stringify(url)}, { headers: ${JSON.stringify(headers)}, signal: AbortSignal.timeout(4000) })
    .then(async (r) => { await r.text(); process.stdout.write(String(r.status)); }).catch(() => process.stdout.write('0'))`;
  return Number(ns.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout);
}

/** Connects from inside `ns`, sends `ping\n`, half-closes, reads until the close: what came back. */
export function tcpFrom(ns: Namespace, host: string, port: number): string {
  const script = `const s = require('net').connect(${port}, ${JSON.stringify(host)}, () => s.end('ping\\n'));
    let got = ''; s.on('data', (d) => got += d); s.on('close', () => process.stdout.write(got));
    s.on('error', (e) => process.stdout.write('error ' + e.code)); setTimeout(() => process.exit(0), 4000).unref();`;
  return ns.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
}
