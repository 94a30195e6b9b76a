// A ScopedLogger that keeps what it is told, for asserting what an operator would read.
import type { ScopedLogger } from '../../src/log/logger.js';

export interface LogRecord {
  readonly level: 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  readonly msg: string;
  readonly fields?: Record<string, unknown>;
}

export interface RecordingLogger extends ScopedLogger {
  readonly records: LogRecord[];
  /** Records at `level` whose message matches. */
  matching(level: LogRecord['level'], pattern: RegExp): LogRecord[];
}

/** Set LOG_TESTS=1 to also print the records while a test runs. */
export function recordingLogger(): RecordingLogger {
  const records: LogRecord[] = [];
  const echo = process.env['LOG_TESTS'] === '1';
  const at = (level: LogRecord['level']) => (msg: string, fields?: Record<string, unknown>): void => {
    records.push(fields === undefined ? { level, msg } : { level, msg, fields });
    if (echo) console.error(`[${level}] ${msg}${fields ? ` ${JSON.stringify(fields)}` : ''}`);
  };
  return {
    name: 'security',
    records,
    matching: (level, pattern) => records.filter((r) => r.level === level && pattern.test(r.msg)),
    debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), fatal: at('fatal'),
    enabled: () => true,
    v: () => false,
  };
}
