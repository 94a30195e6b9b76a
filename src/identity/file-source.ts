// Mounted certificate files (`cert-chain.pem`, `key.pem`, `root-cert.pem` in one directory) as an
// IdentitySource. The directory is watched, not the files: a file renamed over, or Kubernetes
// swapping its `..data` symlink, replaces the inode a file watch would hold, while the directory
// sees every such change. A slow poll backs the watch up (network file systems, a directory that
// does not exist yet or is replaced). Each change is read and checked whole; a bad set is logged once
// and the last good one stays in force.
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { AgentError } from '../errors/agent-error.js';
import type { ScopedLogger } from '../log/logger.js';
import { certFilePaths, type CertFilePaths } from './cert-files.js';
import { checkCertificateSet, type CertificateSetText } from './check.js';
import { CertificateHolder } from './certificate-holder.js';
import type { IdentitySource, WorkloadCertificate } from './workload-certificate.js';

export interface FileSourceOptions {
  /** The directory holding the three files. */
  readonly dir: string;
  readonly log: ScopedLogger;
  /** Quiet time after the last change before reading (writers replace files one by one). Default 200 ms. */
  readonly debounceMs?: number;
  /** Interval of the fallback poll, which also re-arms a lost watch and notices expiry. Default 10 s. */
  readonly pollMs?: number;
  readonly now?: () => number;
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'does not exist' : code === 'EACCES' ? 'is not readable (permission denied)' : `cannot be read (${(err as Error).message})`;
    throw new AgentError('ERR_CERT_FILE', `${path} ${why}`, { cause: err });
  }
}

/** The three files, read together; a failure names the first of them (chain, key, root) that failed, whichever finished first. */
async function readSet(paths: CertFilePaths): Promise<CertificateSetText> {
  const [chain, key, root] = await Promise.allSettled([readText(paths.chain), readText(paths.key), readText(paths.root)]);
  for (const r of [chain, key, root]) if (r.status === 'rejected') throw r.reason;
  return { chainPem: (chain as PromiseFulfilledResult<string>).value, keyPem: (key as PromiseFulfilledResult<string>).value, rootPem: (root as PromiseFulfilledResult<string>).value };
}

/** Same texts as what is in force: a rewrite with identical content is no change. */
const sameSet = (a: WorkloadCertificate | undefined, text: CertificateSetText, checked: WorkloadCertificate): boolean =>
  a !== undefined && a.serial === checked.serial && a.keyPem === text.keyPem && a.rootPem === checked.rootPem
  && a.certChainPem === checked.certChainPem;

class FileIdentitySource extends CertificateHolder {
  readonly #dir: string;
  readonly #paths: CertFilePaths;
  readonly #log: ScopedLogger;
  readonly #debounceMs: number;
  readonly #pollMs: number;
  readonly #now: () => number;
  /** What the last read saw (texts or the read error), so one change is logged once. */
  #lastSeen: string | undefined;
  #watcher: FSWatcher | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  #readAgain = false;

  constructor(options: FileSourceOptions) {
    super(`reading certificates in ${options.dir}`);
    this.#dir = options.dir;
    this.#paths = certFilePaths(options.dir);
    this.#log = options.log;
    this.#debounceMs = options.debounceMs ?? 200;
    this.#pollMs = options.pollMs ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  async start(): Promise<void> {
    this.#watch();
    await this.#reload();
    if (this.closed) return;
    this.#poll = setInterval(() => this.#onPoll(), this.#pollMs);
    this.#poll.unref();
  }

  protected stop(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
    clearTimeout(this.#debounce);
    clearInterval(this.#poll);
  }

  /** Watches the directory; when it is missing or the watch fails, the poll tries again. */
  #watch(): void {
    if (this.#watcher || this.closed) return;
    try {
      const watcher = watch(this.#dir, { persistent: false }, () => this.#changed());
      watcher.on('error', () => {
        watcher.close();
        if (this.#watcher === watcher) this.#watcher = undefined;
        this.#changed();
      });
      this.#watcher = watcher;
    } catch {
      this.#watcher = undefined;
    }
  }

  #changed(): void {
    if (this.closed) return;
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => void this.#reload(), this.#debounceMs);
    this.#debounce.unref();
  }

  #onPoll(): void {
    // Reading three small files is cheap; reading even with a watch covers events a watch misses
    // (network file systems, a directory replaced as a whole, a watch re-armed after changes).
    this.#watch();
    void this.#reload().then(() => this.#checkExpiry());
  }

  /** A set that expires while in force is reported (a peer would refuse it) but stays: there is no other. */
  #checkExpiry(): void {
    const cert = this.held;
    if (!cert || this.state().state !== 'ready' || this.#now() <= cert.notAfterMs) return;
    const message = `${this.#paths.chain}: the certificate in force (serial ${cert.serial}) expired at ${new Date(cert.notAfterMs).toISOString()}; waiting for new files`;
    this.#log.error(message);
    this.markFailed(message);
  }

  /** One read at a time; a change during a read triggers one more. */
  async #reload(): Promise<void> {
    if (this.#reading) {
      this.#readAgain = true;
      return this.#reading;
    }
    this.#reading = (async () => {
      do {
        this.#readAgain = false;
        await this.#readOnce();
      } while (this.#readAgain && !this.closed);
    })();
    try {
      await this.#reading;
    } finally {
      this.#reading = undefined;
    }
  }

  async #readOnce(): Promise<void> {
    let text: CertificateSetText;
    try {
      text = await readSet(this.#paths);
    } catch (err) {
      this.#reject(err as Error, `unreadable:${(err as Error).message}`);
      return;
    }
    if (this.closed) return;
    const seen = JSON.stringify(text);
    let checked: WorkloadCertificate;
    try {
      checked = checkCertificateSet(text, { names: this.#paths, source: `files ${this.#dir}`, nowMs: this.#now() });
    } catch (err) {
      this.#reject(err as Error, seen);
      return;
    }
    this.#lastSeen = seen;
    if (sameSet(this.held, text, checked)) {
      this.markReady();
      return;
    }
    this.#log.info('workload certificate in force', {
      source: checked.source, spiffeId: checked.spiffeId, serial: checked.serial, notAfter: new Date(checked.notAfterMs).toISOString(),
    });
    this.putInForce(checked);
  }

  #reject(err: Error, seen: string): void {
    if (this.closed || seen === this.#lastSeen) return;
    this.#lastSeen = seen;
    const kept = this.held ? `; keeping the certificate in force (serial ${this.held.serial})` : '';
    const message = `${err.message}${kept}`;
    this.#log.error(`mounted certificates rejected: ${message}`, { code: (err as AgentError).code });
    this.markFailed(message);
  }
}

/** An IdentitySource over `<dir>/cert-chain.pem`, `<dir>/key.pem`, `<dir>/root-cert.pem`. */
export function createFileSource(options: FileSourceOptions): IdentitySource {
  return new FileIdentitySource(options);
}
