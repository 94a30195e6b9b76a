// One logger per scope, all writing through one pino instance. Configuration (levels, targets,
// JSON or text) can change at run time (`/logging` on the admin port) without callers re-fetching
// their logger: `scope('dns')` returns a stable handle.
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
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

const PINO_LEVEL: Record<Level, pino.LevelWithSilent> = {
  debug: 'debug', info: 'info', warn: 'warn', error: 'error', fatal: 'fatal', none: 'silent',
};

interface ScopeState {
  output: Level;
  stacktrace: Level;
  caller: boolean;
  pino: PinoLogger;
}

let options: LogOptions = defaultLogOptions;
let root: PinoLogger = createRoot(defaultLogOptions);
const states = new Map<ScopeName, ScopeState>();
const handles = new Map<ScopeName, ScopedLogger>();

/** Fans one formatted line out to every target. */
function destinationFor(opts: LogOptions): DestinationStream {
  const sinks = opts.targets.map((target) => {
    const dest = target === 'stdout' ? 1 : target === 'stderr' ? 2 : target;
    try {
      return pino.destination({ dest, sync: true, mkdir: typeof dest === 'string', append: true });
    } catch (err) {
      throw usageError(`--log_target: cannot open "${target}": ${(err as Error).message}`);
    }
  });
  return {
    write(line: string): void {
      const out = opts.json ? line : formatTextLine(JSON.parse(line) as Record<string, unknown>);
      for (const sink of sinks) sink.write(out);
    },
  };
}

function createRoot(opts: LogOptions): PinoLogger {
  return pino({
    level: 'debug',
    base: undefined,
    messageKey: 'msg',
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  }, destinationFor(opts));
}

function stateOf(name: ScopeName): ScopeState {
  let state = states.get(name);
  if (!state) {
    state = { output: DEFAULT_OUTPUT_LEVEL, stacktrace: DEFAULT_STACKTRACE_LEVEL, caller: false, pino: root };
    applyScope(name, state);
    states.set(name, state);
  }
  return state;
}

function applyScope(name: ScopeName, state: ScopeState): void {
  state.output = options.outputLevels.get(name) ?? DEFAULT_OUTPUT_LEVEL;
  state.stacktrace = options.stacktraceLevels.get(name) ?? DEFAULT_STACKTRACE_LEVEL;
  state.caller = options.callerScopes.has(name);
  state.pino = root.child({ scope: name }, { level: PINO_LEVEL[state.output] });
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
  if (extra) state.pino[level](extra, msg);
  else state.pino[level](msg);
}

/** Applies new options to every scope; throws a usage error if a target cannot be opened. */
export function configureLogging(next: LogOptions): void {
  const nextRoot = createRoot(next);
  options = next;
  root = nextRoot;
  for (const [name, state] of states) applyScope(name, state);
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
