// A gateway pod for the tests: a network namespace of the test's own, a working directory with the
// workload's labels and the mesh resources, echo apps on loopback, and `pilot-agent proxy router`
// ready (`wait`). Requests are sent from inside the namespace; everything is ended by PID and removed
// by `close()`.
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNetns, type Netns } from './netns.js';
import { binPath, repoRoot } from './repo.js';
import { cleanEnv } from './run-cli.js';

export const FIXTURES = join(repoRoot, 'test', 'fixtures');

/** A Gateway selecting `mesh: ingressgateway`, one HTTP server on `port` for every host. */
export function httpGateway(name: string, port: number, namespace = 'mesh-system'): string {
  return `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${port}, name: http, protocol: HTTP}
    hosts: ["*"]
`;
}

/** A VirtualService for every host, bound to `gateway`; `http`: its rules as YAML list items at column 2. */
export function virtualService(name: string, gateway: string, http: string, namespace = 'mesh-system'): string {
  return `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  hosts: ["*"]
  gateways: [${gateway}]
  http:
${http}`;
}

/** A VirtualService sending every request for `hosts` through `gateway` to 127.0.0.1:`port`. */
export function routeTo(name: string, hosts: readonly string[], gateway: string, port: number, namespace = 'mesh-system'): string {
  return `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  hosts: ${JSON.stringify(hosts)}
  gateways: [${gateway}]
  http: [{route: [{destination: {host: 127.0.0.1, port: {number: ${port}}}}]}]
`;
}

/** The directory of `credentialName: name` under a gateway's working directory, made. */
export function credentialDir(podDir: string, name: string): string {
  const dir = join(podDir, 'etc', 'mesh', 'credentials', name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** `credentialName: name` holding the fixtures' localhost certificate and key. */
export function mountCredential(podDir: string, name: string): void {
  const dir = credentialDir(podDir, name);
  copyFileSync(join(FIXTURES, 'localhost.crt'), join(dir, 'tls.crt'));
  copyFileSync(join(FIXTURES, 'localhost.key'), join(dir, 'tls.key'));
}

/** Istio's sample token `name` (test/fixtures/jwt: `demo.jwt`, `groups-scope.jwt`; issuer testing@secure.istio.io). */
export function istioToken(name: string): string {
  return readFileSync(join(FIXTURES, 'jwt', name), 'utf8').trim();
}

/** Serves Istio's sample key set (test/fixtures/jwt/jwks.json) on 127.0.0.1:`port` in the pod, for a jwksUri. */
export function serveIstioJwks(pod: GatewayPod, port: number): Promise<ChildProcess> {
  return pod.start(['-e', `require('http').createServer((q, r) => r.end(require('fs').readFileSync(${JSON.stringify(join(FIXTURES, 'jwt', 'jwks.json'))})))`
    + `.listen(${port}, '127.0.0.1', () => console.log('listening'))`]);
}

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly error?: string;
}

export interface RequestSpec {
  readonly url: string;
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly servername?: string;
  /** The request body (http-requests.mjs sends it with a Content-Length unless the headers ask for chunked). */
  readonly body?: string;
}

export interface ExecResult {
  /** The exit code; null when killed (the time-out). */
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface GatewayPod {
  readonly ns: Netns;
  /** The gateway's working directory (./etc/mesh/... under it). */
  readonly dir: string;
  /** The `proxy router` process (set once it has started). */
  readonly gateway: () => ChildProcess | undefined;
  readonly resources: string;
  /** Everything the gateway printed so far (logs and access log). */
  output(): string;
  /** Sends the requests from inside the namespace, one after the other, each on its own connection. */
  send(specs: readonly RequestSpec[]): Answer[];
  /**
   * Runs a command inside the namespace to its end (killed after `timeoutMs`, default 20 s). Unlike
   * `send`, the test's event loop keeps reading the gateway's output meanwhile: a client that makes
   * the gateway log more than a pipe holds (h2load) cannot stall it.
   */
  exec(command: string, args: readonly string[], timeoutMs?: number): Promise<ExecResult>;
  /** Starts a process inside the namespace (ended by `close()`); resolves at its first line of output. */
  start(args: readonly string[]): Promise<ChildProcess>;
  close(): void;
}

export interface GatewayPodOptions {
  /** File name → content, written to ./etc/mesh/resources before the start. */
  readonly resources: Readonly<Record<string, string>>;
  /** Echo apps (test/fixtures/echo-app.mjs) on 127.0.0.1: port → name. */
  readonly apps?: Readonly<Record<number, string>>;
  readonly namespace?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly args?: readonly string[];
  /** The agent to run as the gateway (default: this checkout's bin/pilot-agent). */
  readonly bin?: string;
  /** Called before the gateway starts (certificates, a JWKS server...). */
  readonly prepare?: (pod: GatewayPod) => Promise<void> | void;
}

/**
 * Pods not closed yet. They are closed at exit too, and on SIGINT or SIGTERM (how the test runner
 * ends a file on Ctrl-C or a time-out; `after` hooks do not run then): else the namespace and its
 * processes would outlive the test, and the runner would wait for ever on the stderr they share.
 */
const openPods = new Set<GatewayPod>();
let hooked = false;

function closeOnExit(pod: GatewayPod): void {
  if (!hooked) {
    hooked = true;
    process.on('exit', () => { for (const p of [...openPods]) p.close(); });
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        for (const p of [...openPods]) p.close();
        process.kill(process.pid, signal); // the default action now: the process ends as it would have
      });
    }
  }
  openPods.add(pod);
}

export async function startGatewayPod(o: GatewayPodOptions): Promise<GatewayPod> {
  const ns = createNetns();
  assert.ok(ns, 'needs root to create a network namespace');
  const dir = mkdtempSync(join(tmpdir(), 'pa-gateway-'));
  chmodSync(dir, 0o755);
  const resources = join(dir, 'etc', 'mesh', 'resources');
  mkdirSync(resources, { recursive: true });
  mkdirSync(join(dir, 'etc', 'mesh', 'pod'), { recursive: true });
  writeFileSync(join(dir, 'etc', 'mesh', 'pod', 'labels'), 'mesh="ingressgateway"\napp="gateway"\n');
  for (const [file, text] of Object.entries(o.resources)) writeFileSync(join(resources, file), text);
  const children: ChildProcess[] = [];
  let output = '';
  let gatewayProcess: ChildProcess | undefined;
  const pod: GatewayPod = {
    gateway: () => gatewayProcess,
    ns, dir, resources,
    output: () => output,
    send(specs) {
      const run = spawnSync('ip', ['netns', 'exec', ns.name, process.execPath, join(FIXTURES, 'http-requests.mjs'), JSON.stringify(specs)], { encoding: 'utf8' });
      assert.equal(run.status, 0, run.stderr);
      return JSON.parse(run.stdout) as Answer[];
    },
    exec(command, args, timeoutMs = 20_000) {
      return new Promise((resolve) => {
        execFile('ip', ['netns', 'exec', ns.name, command, ...args], { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 << 20 },
          (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }));
      });
    },
    start(args) {
      const child = spawn('ip', ['netns', 'exec', ns.name, process.execPath, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(child);
      return new Promise((resolve, reject) => {
        child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
        child.stdout!.once('data', () => resolve(child));
      });
    },
    close() {
      openPods.delete(pod);
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      ns.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  closeOnExit(pod);
  try {
    for (const [port, name] of Object.entries(o.apps ?? {})) await pod.start([join(FIXTURES, 'echo-app.mjs'), '127.0.0.1', port, name]);
    await o.prepare?.(pod);
    const gateway = spawn('ip', ['netns', 'exec', ns.name, process.execPath, o.bin ?? binPath, 'proxy', 'router', ...(o.args ?? [])], {
      cwd: dir, env: cleanEnv({ POD_NAMESPACE: o.namespace ?? 'mesh-system', ...o.env }), stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(gateway);
    gatewayProcess = gateway;
    gateway.stdout!.setEncoding('utf8').on('data', (d: string) => { output += d; });
    gateway.stderr!.setEncoding('utf8').on('data', (d: string) => { output += d; });
    const wait = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '15']);
    assert.equal(wait.code, 0, `${wait.stderr}\n${output}`);
  } catch (err) {
    pod.close();
    throw err;
  }
  return pod;
}
