// `pilot-agent proxy --outlierLogPath FILE`: Envoy's outlier detection event log, one JSON line per
// EJECT / UNEJECT (src/traffic/outlier-event.ts formats them). Every worker appends the events it
// caused to the same file: each line is one write(2) on an O_APPEND descriptor, so lines from
// several threads never interleave. A file that cannot be opened or written is said once in the
// log and the events are dropped (the proxy goes on).
import { closeSync, openSync, writeSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { formatOutlierEvent, type OutlierEvent } from '../traffic/outlier-event.js';
import { scope } from './logger.js';

const log = scope('default');

export class OutlierLog {
  private fd: number | undefined;
  private failed = false;

  constructor(private readonly path: string, cwd: string) {
    const file = isAbsolute(path) ? path : join(cwd, path);
    try {
      this.fd = openSync(file, 'a');
    } catch (err) {
      this.fail(err as Error);
    }
  }

  write(e: OutlierEvent): void {
    if (this.fd === undefined) return;
    try {
      writeSync(this.fd, `${formatOutlierEvent(e)}\n`);
    } catch (err) {
      this.fail(err as Error);
    }
  }

  close(): void {
    if (this.fd === undefined) return;
    try {
      closeSync(this.fd);
    } catch { /* closing a log file: nothing left to do */ }
    this.fd = undefined;
  }

  private fail(err: Error): void {
    if (this.failed) return;
    this.failed = true;
    log.error(`outlier log ${this.path}: ${err.message}; outlier events are not written`);
  }
}
