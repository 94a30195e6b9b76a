// Reading and watching the resource directories (the I/O side of the store).
// - Files read: `*.yaml`, `*.yml`, `*.json` directly in each directory. Subdirectories and dot-files
//   are not read: a Kubernetes ConfigMap volume keeps its real files in hidden `..data` folders
//   reached through top-level symlinks, which a recursive walk would load twice.
// - Any event in a directory marks the whole directory for a re-read once FILE_DEBOUNCE_DURATION
//   passes without another event (bounded, so a constant stream of writes still lands). Re-reading
//   the directory rather than the named file is what survives editors that write a temporary file
//   and rename it over the original, and ConfigMap updates that swap a symlink.
// - A directory that does not exist yet is polled until it appears, then watched. A watch that
//   cannot be set up (or fails later) is reported through onWatchFailure (the lead exports it as
//   num_file_watcher_failures_total) and the directory is polled instead.
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { AgentError } from '../../errors/agent-error.js';
import type { Rejection, ResourceSnapshot, ResourceWarning } from './types.js';
import { isResourceFile } from './documents.js';
import { ResourceStore } from './store.js';

export const DEFAULT_RESOURCE_DIR = './etc/mesh/resources';
const FS_SCHEME = 'fs://';

/** The directories named by the mesh config's configSources (`fs://DIR`, relative to cwd), absolute. */
export function sourceDirectories(configSources: readonly string[], cwd: string): string[] {
  const sources = configSources.length === 0 ? [`${FS_SCHEME}${DEFAULT_RESOURCE_DIR}`] : configSources;
  const dirs = sources.map((address) => {
    if (!address.startsWith(FS_SCHEME) || address.length === FS_SCHEME.length) {
      throw new AgentError('ERR_CONFIG', `configSources: ${JSON.stringify(address)} is not supported; expected fs://DIR (a directory, relative to the working directory or absolute)`);
    }
    return resolve(cwd, address.slice(FS_SCHEME.length));
  });
  return [...new Set(dirs)];
}

export type WatchFunction = (dir: string, listener: (event: string, filename: string | null) => void) => FSWatcher;

export interface WatchResourcesOptions {
  readonly directories: readonly string[];
  readonly defaultNamespace: string;
  /** FILE_DEBOUNCE_DURATION in ms. */
  readonly debounceMs: number;
  /** Called after a reload that changed the snapshot (not for the initial read). */
  onChange(snapshot: ResourceSnapshot, rejections: Rejection[]): void;
  /** Called for every rejection, the initial read's included. */
  onRejection?(r: Rejection): void;
  /** Called once for each warning of a resource as it is accepted (new or changed), the initial read's included. */
  onWarning?(w: ResourceWarning): void;
  /** A watch could not be set up, or failed; the directory is polled from then on. */
  onWatchFailure?(dir: string, err: Error): void;
  /** File names in origins and rejections are relative to this directory when inside it (default: absolute). */
  readonly cwd?: string;
  /** How often a missing or unwatchable directory is checked (ms; default 1000). */
  readonly pollIntervalMs?: number;
  /** An exception from onChange/onRejection or the file system during a reload; absent: it is thrown (unhandled). */
  onError?(err: Error): void;
  /** Replaces fs.watch (tests). */
  readonly watch?: WatchFunction;
}

export interface ResourceWatcher {
  snapshot(): ResourceSnapshot;
  readonly rejectCounts: ReadonlyMap<string, number>;
  /** The rejections of the initial read. */
  readonly initialRejections: readonly Rejection[];
  /** Re-reads every directory now (the debounce skipped); resolves when applied. */
  reload(): Promise<void>;
  close(): void;
}

interface DirState {
  readonly dir: string;
  watcher?: FSWatcher;
  /** Inode of the directory being watched: a directory deleted and made again needs a new watch. */
  ino?: number;
  poll?: NodeJS.Timeout;
  /** Polling because the watch failed (rather than because the directory is missing). */
  failed: boolean;
  /** Labels of the files last read from it. */
  files: Set<string>;
  /** Labels (files, or the directory) whose read failed last time: reported once until readable again. */
  unreadable: Set<string>;
}

function errorOf(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** Reads every directory, then watches them; resolves once the first full read is applied. */
export async function watchResources(opts: WatchResourcesOptions): Promise<ResourceWatcher> {
  const store = new ResourceStore({
    defaultNamespace: opts.defaultNamespace,
    ...(opts.onWarning !== undefined ? { onWarning: (w: ResourceWarning) => opts.onWarning!(w) } : {}),
  });
  const watchFn: WatchFunction = opts.watch ?? ((dir, listener) => fsWatch(dir, { persistent: true }, listener));
  const pollMs = opts.pollIntervalMs ?? 1000;
  const maxWaitMs = Math.max(10 * opts.debounceMs, 1000);
  const dirs = [...new Set(opts.directories.map((d) => resolve(d)))].map((dir): DirState => ({ dir, failed: false, files: new Set(), unreadable: new Set() }));
  const dirty = new Set<DirState>();
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let firstEventAt: number | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let reported = 0;

  const label = (path: string): string => {
    if (opts.cwd === undefined) return path;
    const rel = relative(opts.cwd, path);
    return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
  };

  const stopWatching = (d: DirState): void => {
    d.watcher?.close();
    d.watcher = undefined;
    d.ino = undefined;
    if (d.poll) clearInterval(d.poll);
    d.poll = undefined;
  };

  const poll = (d: DirState, failed: boolean): void => {
    stopWatching(d);
    if (closed) return;
    d.failed = failed;
    d.poll = setInterval(() => markDirty(d, true), pollMs);
  };

  const failed = (d: DirState, err: unknown): void => {
    if (closed) return;
    opts.onWatchFailure?.(d.dir, errorOf(err));
    poll(d, true);
  };

  /** Sets up the watch of a directory (or polling for it); called again when it may have changed. */
  const startWatch = async (d: DirState): Promise<void> => {
    if (closed || d.failed) return;
    let ino: number;
    try {
      const st = await stat(d.dir);
      if (!st.isDirectory()) throw Object.assign(new Error(`${d.dir} is not a directory`), { code: 'ENOTDIR' });
      ino = st.ino;
    } catch {
      // Missing (or not a directory yet): poll for it, quietly; that is not a watcher failure.
      if (!closed && (d.poll === undefined || d.watcher !== undefined)) poll(d, false);
      return;
    }
    if (closed || (d.watcher !== undefined && d.ino === ino)) return;
    stopWatching(d);
    try {
      d.watcher = watchFn(d.dir, () => markDirty(d, false));
      d.watcher.on('error', (err) => failed(d, err));
      d.ino = ino;
    } catch (err) {
      failed(d, err);
    }
  };

  const markDirty = (d: DirState, fromPoll: boolean): void => {
    if (closed) return;
    dirty.add(d);
    // A poll tick reads at once, but never cuts short the quiet period of real events.
    if (fromPoll) {
      timer ??= setTimeout(fire, 0);
      return;
    }
    const t = Date.now();
    firstEventAt ??= t;
    if (timer) clearTimeout(timer);
    // Trailing debounce, but never later than maxWait after the first event of a burst.
    timer = setTimeout(fire, Math.max(0, Math.min(opts.debounceMs, firstEventAt + maxWaitMs - t)));
  };

  const fire = (): void => {
    timer = undefined;
    firstEventAt = undefined;
    if (running) {
      again = true;
      return;
    }
    running = flush().catch(report).finally(() => {
      running = undefined;
      if (again && !closed) {
        again = false;
        fire();
      }
    });
  };

  const report = (err: unknown): void => {
    if (opts.onError === undefined) throw err;
    opts.onError(errorOf(err));
  };

  /** A read failure, reported the first time only (a poll would otherwise repeat it every tick). */
  const unreadable = (d: DirState, unreadableNow: Set<string>, file: string, err: unknown): Rejection[] => {
    unreadableNow.add(file);
    return d.unreadable.has(file) ? [] : [store.readFailed(file, errorOf(err))];
  };

  /** Reads one directory into the store; returns the rejections. */
  const readDir = async (d: DirState): Promise<Rejection[]> => {
    const rejections: Rejection[] = [];
    const unreadableNow = new Set<string>();
    let names: string[] | undefined;
    try {
      names = (await readdir(d.dir)).filter((n) => !n.startsWith('.') && isResourceFile(n)).sort();
    } catch (err) {
      if (codeOf(err) !== 'ENOENT' && codeOf(err) !== 'ENOTDIR') {
        // Unreadable (EACCES...): what its files held stays in force until it can be read again.
        const r = unreadable(d, unreadableNow, label(d.dir), err);
        d.unreadable = unreadableNow;
        return r;
      }
    }
    const seen = new Set<string>();
    for (const name of names ?? []) {
      if (closed) return rejections;
      const file = label(join(d.dir, name));
      let text: string;
      try {
        const st = await stat(join(d.dir, name));
        if (!st.isFile()) continue;
        text = await readFile(join(d.dir, name), 'utf8');
      } catch (err) {
        // Gone between listing and reading, or a dangling symlink: absent.
        if (codeOf(err) === 'ENOENT') continue;
        seen.add(file);
        rejections.push(...unreadable(d, unreadableNow, file, err));
        continue;
      }
      seen.add(file);
      rejections.push(...store.update(file, text));
    }
    for (const file of d.files) if (!seen.has(file)) rejections.push(...store.update(file, undefined));
    d.files = seen;
    d.unreadable = unreadableNow;
    // The directory appeared, vanished, or was replaced: watch what is there now.
    await startWatch(d);
    return rejections;
  };

  const flush = async (): Promise<void> => {
    const rejections: Rejection[] = [];
    while (dirty.size > 0 && !closed) {
      const [d] = dirty;
      dirty.delete(d!);
      rejections.push(...(await readDir(d!)));
    }
    if (closed) return;
    for (const r of rejections) opts.onRejection?.(r);
    const snap = store.snapshot();
    if (snap.version !== reported) {
      reported = snap.version;
      opts.onChange(snap, rejections);
    }
  };

  // Watch first, then read: a change made during the first read is not lost.
  for (const d of dirs) await startWatch(d);
  const initialRejections: Rejection[] = [];
  for (const d of dirs) initialRejections.push(...(await readDir(d)));
  for (const r of initialRejections) opts.onRejection?.(r);
  reported = store.snapshot().version;

  return {
    snapshot: () => store.snapshot(),
    rejectCounts: store.rejectCounts,
    initialRejections,
    reload: async () => {
      if (closed) return;
      for (const d of dirs) dirty.add(d);
      if (timer) clearTimeout(timer);
      fire();
      while (running) await running;
    },
    close: () => {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      for (const d of dirs) stopWatching(d);
      dirty.clear();
    },
  };
}
