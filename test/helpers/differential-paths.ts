// The three paths of the differential test, each a real process setup: inbound (a client in the
// peer namespace to the pod's app, captured to 15006), outbound (a client in the pod, as a uid
// other than the proxy's, to an app in the peer, captured to 15001) and the ingress gateway
// (`proxy router` routing `/u/` to the app that switches and `/` to the plain one). The app is
// test/fixtures/recorder-app.mjs, read from its stdout (a flush on SIGUSR2 marks "all so far");
// the client is test/fixtures/raw-client.mjs, one process per batch of cases. Everything started
// is ended by PID and every namespace and directory removed by `close()` (and, for the pod, at exit).
// The agent under test is this checkout's, or the build PILOT_AGENT_BIN names (the rules and
// `wait` always come from this checkout).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { AppRecord, ClientOutcome } from './differential-oracle.js';
import { httpGateway, startGatewayPod, virtualService, type GatewayPod } from './gateway.js';
import { createPod, PEER_V4, POD_V4, type Pod } from './pod-netns.js';
import { binPath, repoRoot } from './repo.js';
import type { CorpusCase } from './request-corpus.js';
import { cleanEnv, runCli } from './run-cli.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const RECORDER = join(FIXTURES, 'recorder-app.mjs');
const CLIENT = join(FIXTURES, 'raw-client.mjs');
/** The app's ports: node:http without an 'upgrade' listener, and with one (switches). */
const PLAIN_PORT = 9080;
const SWITCH_PORT = 9082;
const GATEWAY_PORT = 8080;
/** The outbound client's uid: any but the proxy's (1337), so its connections are captured. */
const CLIENT_UID = 1000;

/** The agent under test: this checkout's, or another build (PILOT_AGENT_BIN, as the benches take it). */
export const AGENT = process.env['PILOT_AGENT_BIN'] || binPath;

/** Client pacing: a pause between the pieces of a split write, the quiet time that ends an open connection. */
const CLIENT_TIMING = { quietMs: 400, timeoutMs: 8_000, gapMs: 15, concurrency: 64 };

export type PathName = 'inbound' | 'outbound' | 'gateway';

/** The app's records, read from the recorder's stdout as they come. */
export class Recorder {
  private records: AppRecord[] = [];
  private flushed: (() => void) | undefined;
  readonly ready: Promise<void>;

  /** `listening`: its `listening` line was read already (by whoever started it). */
  constructor(private readonly child: ChildProcess, listening = false) {
    let buf = '';
    let onReady: () => void;
    this.ready = new Promise((resolve, reject) => {
      onReady = resolve;
      if (listening) resolve();
      child.once('exit', (code) => reject(new Error(`recorder exited with ${code}`)));
    });
    this.ready.catch(() => undefined); // an exit after the test is not an error
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.startsWith('listening')) onReady();
        else if (line.startsWith('{"flush"')) this.flushed?.();
        else this.records.push(JSON.parse(line) as AppRecord);
      }
    });
  }

  /** Every record made before this call, taken (the next call answers the later ones). */
  async take(): Promise<AppRecord[]> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) throw new Error('the recorder app has exited');
    const done = new Promise<void>((resolve) => { this.flushed = resolve; });
    process.kill(this.child.pid!, 'SIGUSR2');
    await done;
    const out = this.records;
    this.records = [];
    return out;
  }
}

export interface DifferentialPath {
  readonly name: PathName;
  readonly recorder: Recorder;
  /** Sends each case on its own connection; the client's outcomes by case id. */
  send(cases: readonly CorpusCase[]): Promise<Map<string, ClientOutcome>>;
  /** What the proxy printed (for a failure report). */
  proxyOutput(): string;
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null && c.pid) { try { process.kill(c.pid, 'SIGKILL'); } catch { /* gone */ } }
});

/** Runs the client inside `ns` (as `uid` when given) on `cases` to `host`. */
function runClient(ns: string, uid: number | undefined, host: string, cases: readonly CorpusCase[], portOf: (c: CorpusCase) => number): Promise<Map<string, ClientOutcome>> {
  const asUid = uid === undefined ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--'];
  const child = spawn('ip', ['netns', 'exec', ns, ...asUid, process.execPath, CLIENT], { stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { err += d; });
  child.stdin.end(JSON.stringify({
    host, ...CLIENT_TIMING,
    cases: cases.map((c) => ({ id: c.id, port: portOf(c), bytes: c.bytes.toString('base64'), splits: c.splits, halfClose: c.halfClose })),
  }));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      children.delete(child);
      if (code !== 0) {
        reject(new Error(`raw-client exited with ${code}: ${err}`));
        return;
      }
      const outcomes = new Map<string, ClientOutcome>();
      for (const line of out.split('\n')) {
        if (line === '') continue;
        const r = JSON.parse(line) as Omit<ClientOutcome, 'received'> & { received: string };
        outcomes.set(r.id, { ...r, received: Buffer.from(r.received, 'base64') });
      }
      resolve(outcomes);
    });
  });
}

/** Keeps the last bytes a process printed (and keeps its pipes flowing). */
function tail(child: ChildProcess): () => string {
  let text = '';
  const keep = (d: string): void => { text = (text + d).slice(-20_000); };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  return () => text;
}

/** Inbound and outbound through one sidecar: a pod with its rules, the sidecar as uid 1337, an app on each side. */
export async function startSidecarPaths(): Promise<{ inbound: DifferentialPath; outbound: DifferentialPath; close(): void }> {
  const pod: Pod = createPod();
  try {
    const init = await runCli(['mesh-iptables', '-i', '*', '-b', '*', '-d', '15020,15021,15090', '-u', '1337', '-g', '1337'],
      { prefix: ['ip', 'netns', 'exec', pod.name], env: cleanEnv() });
    assert.equal(init.code, 0, init.stderr);
    const inApp = new Recorder(pod.start(process.execPath, [RECORDER, '0.0.0.0', String(PLAIN_PORT), String(SWITCH_PORT)]));
    const outApp = new Recorder(pod.peer.start(process.execPath, [RECORDER, PEER_V4, String(PLAIN_PORT), String(SWITCH_PORT)]));
    await Promise.all([inApp.ready, outApp.ready]);
    const sidecar = pod.start('setpriv', ['--reuid=1337', '--regid=1337', '--clear-groups', '--', process.execPath, AGENT, 'proxy', '--log_target', 'stderr']);
    const output = tail(sidecar);
    const wait = await runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '15'], { prefix: ['ip', 'netns', 'exec', pod.name] });
    assert.equal(wait.code, 0, `${wait.stderr}\n${output()}`);
    const portOf = (c: CorpusCase): number => (c.switching ? SWITCH_PORT : PLAIN_PORT);
    return {
      inbound: { name: 'inbound', recorder: inApp, proxyOutput: output, send: (cases) => runClient(pod.peer.name, undefined, POD_V4, cases, portOf) },
      outbound: { name: 'outbound', recorder: outApp, proxyOutput: output, send: (cases) => runClient(pod.name, CLIENT_UID, PEER_V4, cases, portOf) },
      close: () => pod.close(),
    };
  } catch (err) {
    pod.close();
    throw err;
  }
}

/** `/u/...` to the app that switches, the rest to the plain one. */
const ROUTES = virtualService('recorder', 'differential', `  - match: [{uri: {prefix: /u/}}]
    route: [{destination: {host: 127.0.0.1, port: {number: ${SWITCH_PORT}}}}]
  - route: [{destination: {host: 127.0.0.1, port: {number: ${PLAIN_PORT}}}}]
`);

/**
 * The ingress gateway in a namespace of its own, the app beside it. HTTP/1.0 accepted and 100
 * answered by the proxy here (the sidecar keeps the defaults), so both readings are exercised.
 */
export async function startGatewayPath(): Promise<{ gateway: DifferentialPath; close(): void }> {
  let app: Recorder | undefined;
  const pod: GatewayPod = await startGatewayPod({
    resources: { 'gateway.yaml': httpGateway('differential', GATEWAY_PORT), 'routes.yaml': ROUTES },
    env: { PILOT_HTTP10: 'true', ENABLE_100_CONTINUE_HEADERS: 'false' },
    bin: AGENT,
    prepare: async (p) => {
      app = new Recorder(await p.start([RECORDER, '127.0.0.1', String(PLAIN_PORT), String(SWITCH_PORT)]), true);
    },
  });
  return {
    gateway: {
      name: 'gateway', recorder: app!, proxyOutput: () => pod.output(),
      send: (cases) => runClient(pod.ns.name, undefined, '127.0.0.1', cases, () => GATEWAY_PORT),
    },
    close: () => pod.close(),
  };
}
