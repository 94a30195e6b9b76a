// `mesh-iptables --run-validation`: prove that the rules redirect, with a real connection.
//
// How: listen on the proxy port (15001) and the inbound capture port (15006) on every address, and
// on the probe port (15002); connect to <target>:<probe port> and send a random token. The rules
// work when the token arrives on 15001 or 15006 within the time-out: the kernel rewrote the
// destination (nat OUTPUT, REDIRECT). Arriving on the probe port itself, or not at all, is a failure
// (ERR_IPTABLES_VALIDATION, exit 126) whose message says what was tried and the likely causes.
//
// The target (see `validationTarget`) is an address the outbound rules must capture:
//   -i '*'        → 192.0.2.1 (TEST-NET-1, RFC 5737: never a real host), or the next of
//                    198.51.100.1, 203.0.113.1 not excluded by -x (IPv6-only pod: 2001:db8::1...);
//   -i CIDR,...   → an address inside the first IPv4 CIDR (IPv6-only pod: the first IPv6 one);
//   -i ''         → no outbound capture: Istio's own check (`loopback`, below) is the check.
// The kernel routes before nat OUTPUT: a target with no route fails with ENETUNREACH before any
// rule runs. A pod without a default route (or one that cannot reach the address) would then fail
// although its rules are right, so there the check falls back to Istio's own (`loopback`, as
// tools/istio-iptables/pkg/validation does it): from 127.0.0.1 (::1) to 127.0.0.6 (::6) on the
// probe port, as the proxy's uid, which the loopback inbound rule (`-o lo ! -d 127.0.0.1 --uid-owner
// PROXY -j MESH_IN_REDIRECT`, in every configuration) must send to the inbound capture port (only
// the proxy's uid/gid is redirected there, so it connects as the proxy from a child process: root
// can do that). Those addresses are always routable: 127.0.0.0/8 is lo's, and the rules put ::6 on
// lo for IPv6. The result says which check passed. Nothing leaves the pod when the rules work;
// when they do not, one SYN goes to the pod's gateway for a documentation address.
//
// Network namespaces: the check runs in the current process's namespace. With `runner` given (a
// NetnsRunner for --network-namespace), it runs as a child process through that runner instead:
// `ip netns exec NAME node validation-child.js ...`.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { BlockList, connect, createServer, isIP, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { AgentError, type ErrorCode } from '../errors/agent-error.js';
import type { CommandRunner } from '../exec/runner.js';
import { INBOUND_PASSTHROUGH_ADDR_V4, INBOUND_PASSTHROUGH_ADDR_V6 } from './constants.js';
import { normalizeAddress } from './save-parse.js';
import { listenAll } from '../net/listen.js';

type Identity = { readonly uid: number; readonly gid: number };

/** Istio's check (see the file's comment): which family, and the proxy's uid/gid to connect as. */
export interface LoopbackCheck {
  readonly family: 'ipv4' | 'ipv6';
  /** Absent: this process already is the proxy's uid. */
  readonly connectAs?: Identity;
}

export interface ValidationOptions {
  readonly probePort: number;
  readonly proxyPort: number;
  readonly inboundCapturePort: number;
  readonly timeoutMs: number;
  /**
   * Address to connect to (port: probePort). Default: 192.0.2.1 (see `validationTarget`), unless
   * only `loopback` is given, which then is the check.
   */
  readonly target?: string;
  /** Run the check as a child process through this runner (e.g. a NetnsRunner); absent: in-process. */
  readonly runner?: CommandRunner;
  /** Connect to `target` from a child process with this uid/gid. */
  readonly connectAs?: Identity;
  /** Istio's check: the check itself without `target`, else the fallback when `target` has no route. */
  readonly loopback?: LoopbackCheck;
}

export interface ValidationResult {
  /** `outbound`: the connection to `target` was redirected; `loopback`: Istio's check passed. */
  readonly check: 'outbound' | 'loopback';
  readonly target: string;
  readonly port: number;
  /** The listener the connection reached: the proxy port or the inbound capture port. */
  readonly reachedPort: number;
  readonly elapsedMs: number;
  /** Why Istio's check ran instead of the outbound one (the outbound target had no route). */
  readonly fallbackReason?: string;
}

/** One connection attempt: where to, from where and as whom, and which listeners count. */
interface Attempt {
  readonly check: ValidationResult['check'];
  readonly target: string;
  readonly localAddress?: string;
  readonly connectAs?: Identity;
  readonly expectPorts: readonly number[];
}

export const DEFAULT_TARGETS_V4 = ['192.0.2.1', '198.51.100.1', '203.0.113.1'] as const;
export const DEFAULT_TARGETS_V6 = ['2001:db8::1', '2001:db8:1::1', '2001:db8:2::1'] as const;

function blockList(cidrs: readonly string[]): BlockList {
  const bl = new BlockList();
  for (const c of cidrs) {
    const [addr = '', len] = normalizeAddress(c).split('/');
    const type = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (isIP(addr)) bl.addSubnet(addr, Number(len ?? (type === 'ipv6' ? 128 : 32)), type);
  }
  return bl;
}

/** An address inside a CIDR: its first host (network + 1) when there is room, else the network. */
function addressIn(cidr: string): string {
  const [net = '', lenText = ''] = normalizeAddress(cidr).split('/');
  const len = Number(lenText);
  if (isIP(net) === 4) {
    if (len >= 31) return net;
    const n = net.split('.').reduce((a, p) => a * 256 + Number(p), 0) + 1;
    return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
  }
  if (len >= 127) return net;
  const candidate = net.endsWith('::') ? `${net}1` : `${net.replace(/:[0-9a-f]*$/, '')}:1`;
  const bl = blockList([cidr]);
  return isIP(candidate) === 6 && bl.check(candidate, 'ipv6') ? candidate : net;
}

/**
 * The address `--run-validation` connects to, from the outbound capture flags (see the file's
 * comment). `loopback`: the 127.0.0.6 path, which only the proxy's uid/gid is redirected on.
 */
export function validationTarget(o: {
  readonly serviceCidrs: { readonly all: true } | { readonly all: false; readonly items: readonly string[] };
  readonly serviceExcludeCidrs?: readonly string[];
  /** The pod has IPv6 only (no IPv4 address to route from). */
  readonly ipv6Only?: boolean;
}): { readonly address: string; readonly loopback: boolean } {
  if (o.serviceCidrs.all) {
    const excluded = blockList(o.serviceExcludeCidrs ?? []);
    const candidates = o.ipv6Only ? DEFAULT_TARGETS_V6 : DEFAULT_TARGETS_V4;
    const address = candidates.find((a) => !excluded.check(a, o.ipv6Only ? 'ipv6' : 'ipv4'));
    if (address) return { address, loopback: false };
  } else {
    const want = o.ipv6Only ? 6 : 4;
    const cidr = o.serviceCidrs.items.find((c) => isIP(c.split('/')[0] ?? '') === want) ?? o.serviceCidrs.items[0];
    if (cidr) return { address: addressIn(cidr), loopback: false };
  }
  return { address: o.ipv6Only ? INBOUND_PASSTHROUGH_ADDR_V6 : INBOUND_PASSTHROUGH_ADDR_V4, loopback: true };
}

const fail = (message: string, code: ErrorCode = 'ERR_IPTABLES_VALIDATION'): AgentError => new AgentError(code, message);

/** Listens on every address (dual-stack where the kernel has IPv6, else IPv4 only). */
function listen(port: number, onConnection: (s: Socket) => void): Promise<Server> {
  const server = createServer(onConnection);
  return listenAll(server, port).then(() => server, (err: NodeJS.ErrnoException) => {
    throw fail(`--run-validation: cannot listen on port ${port} (${err.code ?? err.message})`
      + (err.code === 'EADDRINUSE' ? ': something already listens there (the proxy?); validation needs the port free' : ''));
  });
}

/** Connects and sends the token; resolves when sent, rejects with the socket error. */
function connectHere(host: string, port: number, token: string, localAddress?: string): { done: Promise<void>; close: () => void } {
  let socket: Socket | undefined;
  const done = new Promise<void>((resolve, reject) => {
    socket = connect({ host, port, ...(localAddress ? { localAddress } : {}) });
    socket.on('error', reject);
    socket.on('connect', () => socket!.write(`${token}\n`, () => resolve()));
  });
  return { done, close: () => socket?.destroy() };
}

const childScript = (): string => fileURLToPath(new URL('./validation-child.js', import.meta.url));

/** Connects from a child process running as another user (the proxy's uid/gid). */
function connectAs(as: Identity, host: string, port: number, token: string, localAddress?: string): { done: Promise<void>; close: () => void } {
  const child = spawn(process.execPath, [childScript(), 'connect', JSON.stringify({ host, port, token, localAddress })],
    { uid: as.uid, gid: as.gid, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const done = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve()
      : reject(Object.assign(new Error(stderr.trim() || `connecting as uid ${as.uid} failed (exit ${code})`),
        { code: /\b(E[A-Z]+)\b/.exec(stderr)?.[1] }))));
  });
  return { done, close: () => { if (child.exitCode === null) child.kill('SIGKILL'); } };
}

const CAUSES = 'Likely causes: the rules were not applied (or were applied in another network namespace, or with '
  + 'the other iptables backend); the outbound capture flags exclude this address or port (-i, -x, -o); the '
  + 'connecting user is the proxy\'s uid/gid, which is exempt; or there is no route to the address (the kernel '
  + 'routes before nat OUTPUT runs: the pod needs a default route).';

function explainClientError(err: NodeJS.ErrnoException, where: string): string {
  switch (err.code) {
    case 'ENETUNREACH':
    case 'EHOSTUNREACH':
      return `no route to ${where} (${err.code}): the kernel routes before nat OUTPUT, so no rule could redirect it; `
        + 'the pod needs a route (a default route) to the target';
    case 'ECONNREFUSED':
      return `the connection to ${where} was refused: it was not redirected to a listening port`;
    default:
      return `connecting to ${where} failed: ${err.code ?? err.message}`;
  }
}

/** Connection errors that mean "the kernel has no route": no rule could have run. */
const UNROUTABLE = new Set(['ENETUNREACH', 'EHOSTUNREACH']);

/** An attempt whose target the kernel could not route: the error to give, and why, for a fallback. */
class Unroutable extends Error {
  constructor(readonly reason: string, readonly failure: AgentError) { super(reason); }
}

async function attemptHere(o: ValidationOptions, a: Attempt): Promise<ValidationResult> {
  const where = isIP(a.target) === 6 ? `[${a.target}]:${o.probePort}` : `${a.target}:${o.probePort}`;
  const token = randomBytes(12).toString('hex');
  const start = Date.now();
  const sockets = new Set<Socket>();
  let settle: ((port: number | Error) => void) | undefined;
  const outcome = new Promise<number | Error>((resolve) => { settle = resolve; });
  const onConnection = (port: number) => (s: Socket): void => {
    sockets.add(s);
    let buf = '';
    s.setEncoding('utf8');
    s.on('error', () => s.destroy());
    s.on('data', (d: string) => {
      buf += d;
      if (buf.includes('\n') || buf.length > 64) {
        if (buf.split('\n')[0] === token) settle?.(port);
        s.destroy();
      }
    });
  };
  const ports = [...new Set([o.proxyPort, o.inboundCapturePort, o.probePort])];
  const servers: Server[] = [];
  let client: { done: Promise<void>; close: () => void } | undefined;
  const timer = setTimeout(() => settle?.(new Error('timeout')), o.timeoutMs);
  const portName = (p: number): string => (p === o.proxyPort ? `the proxy port ${p}` : `the inbound capture port ${p}`);
  const expected = a.expectPorts.map(portName).join(' or ');
  const how = a.check === 'loopback'
    ? `Istio's check: from ${a.localAddress} to ${where}${a.connectAs ? ` as uid ${a.connectAs.uid}` : ''}, which the loopback `
      + 'inbound rule (-o lo ! -d localhost --uid-owner PROXY -j MESH_IN_REDIRECT) must redirect'
    : `expected: the nat OUTPUT rules redirect it${a.connectAs ? ` (connecting as uid ${a.connectAs.uid})` : ''}`;
  try {
    for (const p of ports) servers.push(await listen(p, onConnection(p)));
    client = a.connectAs ? connectAs(a.connectAs, a.target, o.probePort, token, a.localAddress)
      : connectHere(a.target, o.probePort, token, a.localAddress);
    client.done.catch((err: NodeJS.ErrnoException) => settle?.(err));
    const got = await outcome;
    if (typeof got === 'number' && a.expectPorts.includes(got)) {
      return { check: a.check, target: a.target, port: o.probePort, reachedPort: got, elapsedMs: Date.now() - start };
    }
    if (typeof got === 'number') {
      const what = got === o.probePort ? 'the probe port itself' : portName(got);
      throw fail(`iptables validation failed: a connection to ${where} reached ${what}, not ${expected}: `
        + `the rules did not redirect it (${how}). ${CAUSES}`);
    }
    const err = got as NodeJS.ErrnoException;
    const what = err.message === 'timeout'
      ? `a connection to ${where} did not reach ${expected} within ${o.timeoutMs} ms`
      : `a connection to ${where} did not reach ${expected}: ${explainClientError(err, where)}`;
    const failure = fail(`iptables validation failed: ${what} (${how}). ${CAUSES}`);
    if (err.code && UNROUTABLE.has(err.code)) throw new Unroutable(`no route to ${where} (${err.code})`, failure);
    throw failure;
  } finally {
    clearTimeout(timer);
    client?.close();
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
}

/** Istio's check for a family (see the file's comment). */
function loopbackAttempt(o: ValidationOptions, l: LoopbackCheck): Attempt {
  const v6 = l.family === 'ipv6';
  return {
    check: 'loopback',
    target: v6 ? INBOUND_PASSTHROUGH_ADDR_V6 : INBOUND_PASSTHROUGH_ADDR_V4,
    localAddress: v6 ? '::1' : '127.0.0.1',
    ...(l.connectAs ? { connectAs: l.connectAs } : {}),
    expectPorts: [o.inboundCapturePort],
  };
}

async function validateHere(o: ValidationOptions): Promise<ValidationResult> {
  const unwrap = (err: unknown): never => { throw err instanceof Unroutable ? err.failure : err; };
  if (o.target === undefined && o.loopback) return attemptHere(o, loopbackAttempt(o, o.loopback)).catch(unwrap);
  const outbound: Attempt = {
    check: 'outbound',
    target: o.target ?? DEFAULT_TARGETS_V4[0],
    ...(o.connectAs ? { connectAs: o.connectAs } : {}),
    expectPorts: [o.proxyPort, o.inboundCapturePort],
  };
  try {
    return await attemptHere(o, outbound);
  } catch (err) {
    if (!(err instanceof Unroutable) || !o.loopback) return unwrap(err);
    const fallbackReason = `the outbound check could not run: ${err.reason} (the kernel routes before nat OUTPUT)`;
    const result = await attemptHere(o, loopbackAttempt(o, o.loopback)).catch((e: unknown) => {
      const failure = e instanceof Unroutable ? e.failure : e;
      throw failure instanceof AgentError ? fail(`${failure.message} (Istio's check ran because ${fallbackReason})`) : failure;
    });
    return { ...result, fallbackReason };
  }
}

/** Runs the check in a child process through `runner` (which may enter a network namespace). */
async function validateThrough(runner: CommandRunner, o: ValidationOptions): Promise<ValidationResult> {
  const { runner: _omit, ...rest } = o;
  const r = await runner.run(process.execPath, [childScript(), 'validate', JSON.stringify(rest)], { allowFailure: true });
  const last = r.stdout.trim().split('\n').pop() ?? '';
  let answer: { ok: true; result: ValidationResult } | { ok: false; code: ErrorCode; message: string } | undefined;
  try { answer = JSON.parse(last) as typeof answer; } catch { answer = undefined; }
  if (!answer) throw fail(`iptables validation could not run in the network namespace: ${r.stderr.trim() || `exit ${r.exitCode}`}`);
  if (!answer.ok) throw fail(answer.message, answer.code);
  return answer.result;
}

/** Proves the rules redirect (see the file's comment); throws ERR_IPTABLES_VALIDATION (exit 126) if not. */
export async function validateRedirect(o: ValidationOptions): Promise<ValidationResult> {
  return o.runner ? validateThrough(o.runner, o) : validateHere(o);
}
