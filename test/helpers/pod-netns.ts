// A "pod" for the iptables tests: a network namespace with loopback up, joined by a veth pair to a
// "peer" namespace (another pod, the node), with addresses and a default route via the peer — the
// kernel routes before nat OUTPUT runs, so outbound capture needs a route. Addresses are from the
// benchmarking range 198.18.0.0/15 (RFC 2544) and 2001:db8::/32 (documentation); nothing here
// leaves the two namespaces. Every process started is ended by its PID, both namespaces deleted by
// `close()`, and, should a test crash first, at process exit.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ExecaRunner } from '../../src/exec/execa-runner.js';
import { NetnsRunner } from '../../src/exec/netns-runner.js';
import type { CommandResult, CommandRunner, RunOptions } from '../../src/exec/runner.js';
import { repoRoot } from './repo.js';

export const POD_V4 = '198.18.0.2';
export const PEER_V4 = '198.18.0.1';
export const POD_V6 = '2001:db8:18::2';
export const PEER_V6 = '2001:db8:18::1';

const alive = new Set<string>();
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) kill(c);
  for (const name of alive) spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
});

/** Whether this process may make network namespaces (root); tests skip with this reason otherwise. */
export const netnsSkip: string | false = process.getuid?.() === 0 ? false : 'needs root (network namespaces)';

export function sh(command: string, args: readonly string[], input?: string): CommandResult {
  const r = spawnSync(command, args, { encoding: 'utf8', input });
  return { stdout: r.stdout ?? '', stderr: r.stderr ?? String(r.error ?? ''), exitCode: r.status ?? -1 };
}

function must(command: string, ...args: string[]): string {
  const r = sh(command, args);
  if (r.exitCode !== 0) throw new Error(`${command} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

export interface Namespace {
  readonly name: string;
  /** Runs a command inside, synchronously; throws unless it exits 0 (or `allowFailure`). */
  exec(command: string, args: readonly string[], o?: { input?: string; allowFailure?: boolean }): CommandResult;
  /** Starts a long-running process inside; ended by PID in `close()`. `stdin`: a pipe to write to (else none). */
  start(command: string, args: readonly string[], o?: { stdin?: boolean }): ChildProcess;
  /** A CommandRunner (execa) whose commands run inside. */
  readonly runner: NetnsRunner;
  /** Ends (SIGKILL, by PID) every process `start` started here. */
  stopAll(): void;
}

export interface Pod extends Namespace {
  readonly peer: Namespace;
  close(): void;
}

function kill(c: ChildProcess): void {
  if (c.exitCode === null && c.signalCode === null && c.pid) { try { process.kill(c.pid, 'SIGKILL'); } catch { /* gone */ } }
}

function namespace(name: string): Namespace {
  must('ip', 'netns', 'add', name);
  alive.add(name);
  must('ip', '-n', name, 'link', 'set', 'lo', 'up');
  const mine = new Set<ChildProcess>();
  return {
    name,
    exec(command, args, o = {}) {
      const r = sh('ip', ['netns', 'exec', name, command, ...args], o.input);
      if (r.exitCode !== 0 && !o.allowFailure) throw new Error(`[${name}] ${command} ${args.join(' ')}: exit ${r.exitCode}: ${r.stderr}`);
      return r;
    },
    start(command, args, o = {}) {
      // `ip netns exec` execs the command: the PID is the command's own.
      const child = spawn('ip', ['netns', 'exec', name, command, ...args], { stdio: [o.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
      children.add(child);
      mine.add(child);
      return child;
    },
    runner: new NetnsRunner(new ExecaRunner(), name),
    stopAll() {
      for (const c of mine) kill(c);
    },
  };
}

/** A lone namespace with loopback up (no links): for reading rules back. */
export function createNamespace(): Namespace & { close(): void } {
  const ns = namespace(`pa-ipt-${randomBytes(3).toString('hex')}`);
  return {
    ...ns,
    close() {
      ns.stopAll();
      if (alive.delete(ns.name)) spawnSync('ip', ['netns', 'del', ns.name], { stdio: 'ignore' });
    },
  };
}

/** A pod namespace and its peer, joined by veth (pod0 ↔ peer0), IPv4 and, with `ipv6`, IPv6. */
export function createPod(o: { ipv6?: boolean } = {}): Pod {
  const id = randomBytes(3).toString('hex');
  const pod = namespace(`pa-ipt-${id}`);
  let peer: Namespace | undefined;
  const close = (): void => {
    pod.stopAll();
    peer?.stopAll();
    for (const name of [pod.name, peer?.name]) {
      if (name && alive.has(name)) {
        spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
        alive.delete(name);
      }
    }
  };
  try {
    peer = namespace(`pa-ipt-${id}-peer`);
    must('ip', '-n', pod.name, 'link', 'add', 'pod0', 'type', 'veth', 'peer', 'name', 'peer0', 'netns', peer.name);
    must('ip', '-n', pod.name, 'addr', 'add', `${POD_V4}/24`, 'dev', 'pod0');
    must('ip', '-n', peer.name, 'addr', 'add', `${PEER_V4}/24`, 'dev', 'peer0');
    if (o.ipv6) {
      must('ip', '-n', pod.name, 'addr', 'add', `${POD_V6}/64`, 'dev', 'pod0', 'nodad');
      must('ip', '-n', peer.name, 'addr', 'add', `${PEER_V6}/64`, 'dev', 'peer0', 'nodad');
    }
    must('ip', '-n', pod.name, 'link', 'set', 'pod0', 'up');
    must('ip', '-n', peer.name, 'link', 'set', 'peer0', 'up');
    must('ip', '-n', pod.name, 'route', 'add', 'default', 'via', PEER_V4);
    if (o.ipv6) must('ip', '-n', pod.name, '-6', 'route', 'add', 'default', 'via', PEER_V6);
  } catch (err) {
    close();
    throw err;
  }
  return { ...pod, peer, close };
}

/** A runner that records every call and passes it on (to count restores, for instance). */
export class SpyRunner implements CommandRunner {
  readonly calls: { command: string; args: readonly string[]; input?: string }[] = [];
  constructor(readonly inner: CommandRunner) {}
  run(command: string, args: readonly string[], options?: RunOptions): Promise<CommandResult> {
    this.calls.push({ command, args: [...args], ...(options?.input === undefined ? {} : { input: options.input }) });
    return this.inner.run(command, args, options);
  }
  count(re: RegExp): number {
    return this.calls.filter((c) => re.test(c.command)).length;
  }
}

export const listenerScript = join(repoRoot, 'test', 'fixtures', 'tcp-probe.py');
/** The system's Python (a per-user shim such as pyenv's may not run as another uid). */
export const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/**
 * Starts the Python listener (test/fixtures/tcp-probe.py) inside a namespace and waits until it
 * listens. Each accepted connection is reported on stdout as a JSON line: local address (with
 * TPROXY, the original destination), peer, and SO_ORIGINAL_DST (REDIRECT).
 */
export async function startListener(ns: Namespace, port: number, o: { transparent?: boolean; ipv6?: boolean } = {}):
  Promise<{ child: ChildProcess; next: () => Promise<{ local: string; peer: string; origdst?: string }> }> {
  const child = ns.start(PYTHON, [listenerScript, 'listen', String(port),
    ...(o.transparent ? ['--transparent'] : []), ...(o.ipv6 ? ['--ipv6'] : [])]);
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let buf = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) !== -1) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const w = waiting.shift();
      if (w) w(line); else lines.push(line);
    }
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const nextLine = (timeoutMs = 5000): Promise<string> => new Promise((resolve, reject) => {
    const l = lines.shift();
    if (l !== undefined) { resolve(l); return; }
    const t = setTimeout(() => reject(new Error(`listener on ${port}: no line within ${timeoutMs} ms ${stderr}`)), timeoutMs);
    waiting.push((line) => { clearTimeout(t); resolve(line); });
  });
  const first = await nextLine();
  if (first !== 'listening') throw new Error(`listener on ${port} said: ${first} ${stderr}`);
  return { child, next: async () => JSON.parse(await nextLine()) as { local: string; peer: string; origdst?: string } };
}

/** Connects from inside a namespace (Python, as the given uid); resolves with what the listener answered, or the error. */
export function connectFrom(ns: Namespace, host: string, port: number, timeoutSec = 2): CommandResult {
  return ns.exec(PYTHON, [listenerScript, 'connect', host, String(port), String(timeoutSec)], { allowFailure: true });
}

/** Sends one ICMPv6 echo from inside a namespace (test/fixtures/ping6.py; no ping on the test machines). */
export function ping6From(ns: Namespace, host: string, timeoutSec = 2): CommandResult {
  return ns.exec(PYTHON, [join(repoRoot, 'test', 'fixtures', 'ping6.py'), host, String(timeoutSec)], { allowFailure: true });
}

/**
 * The link-local (fe80::/64) address the kernel gave an interface when it came up, once duplicate
 * address detection is over: until then it is "tentative" and cannot be used as either end of a
 * connection.
 */
export async function linkLocalAddress(ns: Namespace, dev: string, timeoutMs = 5000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const shown = ns.exec('ip', ['-6', '-o', 'addr', 'show', 'dev', dev, 'scope', 'link']).stdout;
    const m = /\binet6 (fe80:[0-9a-f:]+)\/64 .*$/m.exec(shown);
    if (m && !/tentative/.test(m[0])) return m[1]!;
    if (Date.now() > deadline) throw new Error(`[${ns.name}] ${dev}: no usable link-local address within ${timeoutMs} ms: ${shown}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
