// One logger per scope, all writing through one set of targets. Configuration (levels, targets,
// JSON or text) can change at run time (`/logging` on the admin port) without callers re-fetching
// their logger: `scope('dns')` returns a stable handle. Lines are written synchronously, as they
// are made: a line is never lost in a buffer when the process ends, and there are few (the hot
// paths log at debug, off by default). No logging library: what one gave us (a JSON line, a level
// filter, synchronous file descriptors) is a few lines here, and loading one cost ~10 ms per start.
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { usageError } from '../errors/agent-error.js';
import {
  DEFAULT_OUTPUT_LEVEL, DEFAULT_STACKTRACE_LEVEL, SCOPE_NAMES, passes,
  type Level, type ScopeName,
} from './levels.js';
import { formatTextLine } from './text-format.js';

export interface LogOptions {
  /** JSON lines instead of text lines. */
  readonly json: boolean;
  /** Levels per scope; scopes not named stay at `info`. */
  readonly outputLevels: ReadonlyMap<ScopeName, Level>;
  /** Level at and above which a stack trace is attached, per scope; default none. */
  readonly stacktraceLevels: ReadonlyMap<ScopeName, Level>;
  /** Scopes whose records carry the caller's file:line. */
  readonly callerScopes: ReadonlySet<ScopeName>;
  /** `stdout`, `stderr` or file paths (appended to, parent folders created). */
  readonly targets: readonly string[];
  /** klog verbosity (`--vklog`): `klog.v(n)` is on for n <= this. */
  readonly vklog: number;
}

export const defaultLogOptions: LogOptions = {
  json: false,
  outputLevels: new Map(),
  stacktraceLevels: new Map(),
  callerScopes: new Set(),
  targets: ['stdout'],
  vklog: 0,
};

type Fields = Record<string, unknown>;

export interface ScopedLogger {
  readonly name: ScopeName;
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  fatal(msg: string, fields?: Fields): void;
  enabled(level: Level): boolean;
  /** klog-style verbosity gate: true when `--vklog` is at least `n`. */
  v(n: number): boolean;
}

interface ScopeState {
  output: Level;
  stacktrace: Level;
  caller: boolean;
}

let options: LogOptions = defaultLogOptions;
/** Where lines go: the file descriptors of the targets. */
let targetFds: readonly number[] = openTargets(defaultLogOptions);
const states = new Map<ScopeName, ScopeState>();
const handles = new Map<ScopeName, ScopedLogger>();

/** stdout, stderr, or a file opened for appending (its folders made); a usage error if it cannot be. */
function openTargets(opts: LogOptions): number[] {
  return opts.targets.map((target) => {
    if (target === 'stdout') return 1;
    if (target === 'stderr') return 2;
    try {
      mkdirSync(dirname(target), { recursive: true });
      return openSync(target, 'a');
    } catch (err) {
      throw usageError(`--log_target: cannot open "${target}": ${(err as Error).message}`);
    }
  });
}

const retryPause = new Int32Array(new SharedArrayBuffer(4));

/**
 * All of `line` to `fd`. stdout and stderr may be non-blocking pipes: a full one (EAGAIN) is
 * waited out, a millisecond at a time. Any other failure (a closed pipe) drops the line: logging
 * must never take the proxy down.
 */
function writeLine(fd: number, line: Buffer): void {
  let at = 0;
  while (at < line.length) {
    try {
      at += writeSync(fd, line, at);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return;
      Atomics.wait(retryPause, 0, 0, 1);
    }
  }
}

/** A field's JSON; undefined for what JSON has no form for (undefined, functions), as JSON.stringify drops them. */
function fieldJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch { // a cycle, a BigInt
    return JSON.stringify(String(value));
  }
}

/** The record as a JSON line: level, time, scope, the fields in their order, msg. */
function jsonLine(level: string, time: string, name: ScopeName, msg: string, fields: Fields | undefined): string {
  let line = `{"level":"${level}","time":"${time}","scope":"${name}"`;
  if (fields) {
    for (const key of Object.keys(fields)) {
      const json = fieldJson(fields[key]);
      if (json !== undefined) line += `,${JSON.stringify(key)}:${json}`;
    }
  }
  return `${line},"msg":${JSON.stringify(msg)}}\n`;
}

function textLine(level: string, time: string, name: ScopeName, msg: string, fields: Fields | undefined): string {
  const record: Fields = { level, time, scope: name };
  if (fields) {
    for (const key of Object.keys(fields)) {
      const json = fieldJson(fields[key]);
      if (json !== undefined) record[key] = JSON.parse(json) as unknown; // as the JSON line shows it
    }
  }
  record['msg'] = msg;
  return formatTextLine(record);
}

function write(level: Exclude<Level, 'none'>, name: ScopeName, msg: string, fields: Fields | undefined): void {
  const time = new Date().toISOString();
  const line = Buffer.from((options.json ? jsonLine : textLine)(level, time, name, msg, fields));
  for (const fd of targetFds) writeLine(fd, line);
}

function stateOf(name: ScopeName): ScopeState {
  let state = states.get(name);
  if (!state) {
    state = { output: DEFAULT_OUTPUT_LEVEL, stacktrace: DEFAULT_STACKTRACE_LEVEL, caller: false };
    applyScope(name, state);
    states.set(name, state);
  }
  return state;
}

function applyScope(name: ScopeName, state: ScopeState): void {
  state.output = options.outputLevels.get(name) ?? DEFAULT_OUTPUT_LEVEL;
  state.stacktrace = options.stacktraceLevels.get(name) ?? DEFAULT_STACKTRACE_LEVEL;
  state.caller = options.callerScopes.has(name);
}

/**
 * Who called the log method: the frame below callerFrame, emit and the scope's method (by depth:
 * in the bundle, this module shares its file with others, so a file name cannot tell).
 */
function callerFrame(): string | undefined {
  const frame = (new Error().stack ?? '').split('\n')[4];
  return frame?.trim().replace(/^at\s+/, '');
}

function emit(name: ScopeName, level: Exclude<Level, 'none'>, msg: string, fields?: Fields): void {
  const state = stateOf(name);
  if (!passes(level, state.output)) return;
  let extra: Fields | undefined = fields;
  if (state.caller) extra = { ...extra, caller: callerFrame() };
  if (passes(level, state.stacktrace)) {
    extra = { ...extra, stack: (new Error().stack ?? '').split('\n').slice(3).join('\n') };
  }
  write(level, name, msg, extra);
}

/** Applies new options to every scope; throws a usage error if a target cannot be opened. */
export function configureLogging(next: LogOptions): void {
  const nextFds = openTargets(next);
  const previous = targetFds;
  options = next;
  targetFds = nextFds;
  for (const fd of previous) if (fd > 2 && !nextFds.includes(fd)) closeQuietly(fd);
  for (const [name, state] of states) applyScope(name, state);
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch { /* already closed */ }
}

/** Changes one scope's output level at run time. */
export function setScopeLevel(name: ScopeName, level: Level): void {
  const outputLevels = new Map(options.outputLevels).set(name, level);
  options = { ...options, outputLevels };
  applyScope(name, stateOf(name));
}

/** Current output level of every scope, for `/logging`. */
export function scopeLevels(): Record<ScopeName, Level> {
  return Object.fromEntries(SCOPE_NAMES.map((s) => [s, stateOf(s).output])) as Record<ScopeName, Level>;
}

export function scope(name: ScopeName): ScopedLogger {
  let handle = handles.get(name);
  if (!handle) {
    handle = {
      name,
      debug: (msg, fields) => emit(name, 'debug', msg, fields),
      info: (msg, fields) => emit(name, 'info', msg, fields),
      warn: (msg, fields) => emit(name, 'warn', msg, fields),
      error: (msg, fields) => emit(name, 'error', msg, fields),
      fatal: (msg, fields) => emit(name, 'fatal', msg, fields),
      enabled: (level) => passes(level, stateOf(name).output),
      v: (n) => n <= options.vklog,
    };
    handles.set(name, handle);
  }
  return handle;
}

/** The options in force (a worker thread starts its logging with the same). */
export function currentLogOptions(): LogOptions {
  return options;
}
