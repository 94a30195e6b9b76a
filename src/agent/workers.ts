// `--concurrency N`: N workers carry the traffic. The primary (this thread) is one of them and also
// runs the agent's surfaces; the N-1 others are worker threads, each with its own data plane on the
// same ports (SO_REUSEPORT: the kernel spreads connections). The primary asks them for their
// counters and decisions whenever /stats, the metrics or /debug/decisions are read, so what an
// operator sees is exact, and tells them to drain, or to stop.
import { Worker } from 'node:worker_threads';
import type { EnvValues } from '../config/env/registry.js';
import type { MeshConfig } from '../config/mesh-config.js';
import type { DataPlaneSnapshot } from './data-plane.js';
import { scope, type LogOptions } from '../log/logger.js';
import type { ProxyOptions } from '../proxy/options.js';
import type { WorkloadCertificate } from '../identity/workload-certificate.js';

const log = scope('default');

/** What a worker thread is started with (cloned into it). */
export interface WorkerInit {
  readonly options: ProxyOptions;
  readonly env: EnvValues;
  readonly mesh: MeshConfig;
  readonly cwd: string;
  readonly logOptions: LogOptions;
  /** The process's count of downstream connections (shared memory) and its maximum. */
  readonly connections: { readonly shared: SharedArrayBuffer; readonly max: number };
  /** Traffic management's shared memory (createTrafficMemory): counts, limits and ejections of every cluster. */
  readonly traffic: SharedArrayBuffer;
}

/** What one worker thread is started with: the common part and its number (1..N-1; 0 is the primary). */
export interface WorkerData extends WorkerInit {
  readonly worker: number;
}

export type ToWorker =
  | { readonly type: 'snapshot'; readonly id: number }
  | { readonly type: 'drainInbound' | 'drainAll' | 'closeIdle' | 'close' }
  /** The workload certificate now in force (the primary holds the identity source). */
  | { readonly type: 'certificate'; readonly certificate: WorkloadCertificate | undefined }
  /** A name the DNS proxy (the primary's) answered with these addresses. */
  | { readonly type: 'dnsNames'; readonly name: string; readonly addresses: readonly string[] }
  /** The process is quiet after a burst: release pooled buffers, collect the heap (`collect`), malloc_trim. */
  | { readonly type: 'trim'; readonly collect: boolean };
export type FromWorker =
  | { readonly type: 'ready' }
  | { readonly type: 'failed'; readonly message: string }
  | { readonly type: 'snapshot'; readonly id: number; readonly snapshot: DataPlaneSnapshot };

/** A worker that does not answer in this time is left out of a snapshot. */
const SNAPSHOT_TIMEOUT_MS = 1_000;
const RESTART_DELAY_MS = 1_000;

export class WorkerPool {
  private readonly workers: (Worker | undefined)[];
  private readonly pending = new Map<number, (s: DataPlaneSnapshot | undefined) => void>();
  private nextId = 0;
  private closing = false;
  /** The certificate every worker should hold (a restarted worker gets it too). */
  private certificate: WorkloadCertificate | undefined;

  /** `count` threads besides the primary; `onExit(worker)` when one has stopped (1..count). */
  constructor(count: number, private readonly init: WorkerInit, private readonly onExit: (worker: number) => void = () => undefined) {
    this.workers = new Array<Worker | undefined>(count).fill(undefined);
  }

  get size(): number {
    return this.workers.length;
  }

  /** Starts every worker; resolves when all listen, rejects with the first one's failure. */
  async start(): Promise<void> {
    await Promise.all(this.workers.map((_, i) => this.spawn(i)));
  }

  /** The workers' current counters and decisions (the primary adds its own). */
  async snapshots(): Promise<DataPlaneSnapshot[]> {
    const answers = await Promise.all(this.workers.map((w) => (w ? this.ask(w) : Promise.resolve(undefined))));
    return answers.filter((s): s is DataPlaneSnapshot => s !== undefined);
  }

  tell(type: 'drainInbound' | 'drainAll' | 'closeIdle'): void {
    for (const w of this.workers) w?.postMessage({ type } satisfies ToWorker);
  }

  /** Every worker gives memory back (memory-trim.ts). */
  trim(collect: boolean): void {
    for (const w of this.workers) w?.postMessage({ type: 'trim', collect } satisfies ToWorker);
  }

  /** Tells every worker of a name the DNS proxy answered (a worker started later learns the next ones). */
  addDnsNames(name: string, addresses: readonly string[]): void {
    for (const w of this.workers) w?.postMessage({ type: 'dnsNames', name, addresses } satisfies ToWorker);
  }

  /** Puts a workload certificate in force in every worker, now and in any started later. */
  setCertificate(certificate: WorkloadCertificate | undefined): void {
    this.certificate = certificate;
    for (const w of this.workers) w?.postMessage({ type: 'certificate', certificate } satisfies ToWorker);
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.workers.map((w) => (w ? new Promise<void>((resolve) => {
      const timer = setTimeout(() => void w.terminate().then(() => resolve()), 2_000);
      w.once('exit', () => { clearTimeout(timer); resolve(); });
      w.postMessage({ type: 'close' } satisfies ToWorker);
    }) : undefined)));
  }

  private ask(w: Worker): Promise<DataPlaneSnapshot | undefined> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.pending.delete(id); resolve(undefined); }, SNAPSHOT_TIMEOUT_MS);
      this.pending.set(id, (s) => { clearTimeout(timer); resolve(s); });
      w.postMessage({ type: 'snapshot', id } satisfies ToWorker);
    });
  }

  private spawn(index: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const data: WorkerData = { ...this.init, worker: index + 1 };
      const w = new Worker(new URL('./worker-main.js', import.meta.url), { workerData: data, name: `worker-${index + 1}` });
      this.workers[index] = w;
      if (this.certificate) w.postMessage({ type: 'certificate', certificate: this.certificate } satisfies ToWorker);
      let started = false;
      w.on('message', (m: FromWorker) => {
        if (m.type === 'ready') {
          started = true;
          resolve();
        } else if (m.type === 'failed') {
          reject(new Error(`worker ${index + 1}: ${m.message}`));
        } else {
          this.pending.get(m.id)?.(m.snapshot);
          this.pending.delete(m.id);
        }
      });
      w.on('error', (err) => log.error(`worker ${index + 1} failed: ${err.message}`, { stack: err.stack }));
      w.on('exit', (code) => {
        this.workers[index] = undefined;
        this.onExit(index + 1);
        if (!started) {
          reject(new Error(`worker ${index + 1} exited with ${code} before listening`));
          return;
        }
        if (this.closing) return;
        // Its connections are gone; the others carry on. A new worker takes its place.
        log.error(`worker ${index + 1} exited with ${code}: starting another in ${RESTART_DELAY_MS}ms`);
        setTimeout(() => {
          if (!this.closing) this.spawn(index).catch((err: Error) => log.error(`worker ${index + 1}: ${err.message}`));
        }, RESTART_DELAY_MS).unref();
      });
    });
  }
}
