// The access log (mesh config `accessLogFile`, `accessLogEncoding`, `accessLogFormat`): one line per
// HTTP request and per connection carried as opaque bytes, formatted by access-format.ts. Lines
// are batched and written once per event-loop turn (one write per burst, not per request).
//
// Every worker thread (--concurrency) has its own AccessLog on the same destination, so no line
// may ever be cut by another's: a regular file is opened O_APPEND by each worker and every batch is
// one write() call, which the kernel appends whole; a pipe (stdout under a container runtime, a
// FIFO) only keeps a write whole up to PIPE_BUF bytes, so batches for anything but a regular file
// are cut at line boundaries into writes of at most PIPE_BUF. Worker threads' process.stdout goes
// through the main thread, one write per chunk, beside the logger's own synchronous writes to fd 1.
import { closeSync, fstatSync, openSync, write, writeSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { AgentError } from '../errors/agent-error.js';
import { compileAccessLogFormat, type AccessLogEncoding, type AccessLogFormat } from './access-format.js';
import type { AccessLogSink, AccessRecord } from './access-record.js';

/** Linux's PIPE_BUF: a write to a pipe up to this size is never interleaved with another's. */
export const PIPE_BUF = 4096;

/** Where batches go: one call per chunk, the next only after `done`. */
export interface LineSink {
  write(text: string, done: () => void): void;
  /** Writes now, synchronously (shutdown). */
  writeNow(text: string): void;
  close(): void;
}

/**
 * `batch` (whole lines) cut at line ends into chunks of at most `max` bytes; a line longer than
 * `max` is a chunk of its own (it cannot be kept whole on a pipe anyway). Pure.
 */
export function chunksOf(batch: string, max: number): string[] {
  if (max === Number.POSITIVE_INFINITY || Buffer.byteLength(batch) <= max) return [batch];
  const chunks: string[] = [];
  let chunk = '';
  let bytes = 0;
  let from = 0;
  while (from < batch.length) {
    const nl = batch.indexOf('\n', from);
    const end = nl < 0 ? batch.length : nl + 1;
    const line = batch.slice(from, end);
    const n = Buffer.byteLength(line);
    if (bytes > 0 && bytes + n > max) {
      chunks.push(chunk);
      chunk = '';
      bytes = 0;
    }
    chunk += line;
    bytes += n;
    from = end;
  }
  if (chunk !== '') chunks.push(chunk);
  return chunks;
}

/** A file descriptor of our own (a path): written with fs.write from the thread pool. */
function fdSink(fd: number): LineSink {
  return {
    write(text, done) {
      write(fd, text, null, 'utf8', () => done()); // a failed write loses its lines, never the proxy
    },
    writeNow(text) {
      try {
        writeSync(fd, text);
      } catch { /* as above */ }
    },
    close() {
      try {
        closeSync(fd);
      } catch { /* closed */ }
    },
  };
}

/** process.stdout / stderr (synchronous for files and pipes in the main thread). */
function streamSink(stream: NodeJS.WriteStream): LineSink {
  stream.on('error', () => undefined);
  return {
    write(text, done) {
      stream.write(text, () => done());
    },
    writeNow(text) {
      stream.write(text);
    },
    close() { /* not ours */ },
  };
}

export interface AccessLogOptions {
  /** `/dev/stdout`, `/dev/stderr` or a path (relative to `cwd`), appended to. */
  readonly path: string;
  readonly encoding: AccessLogEncoding;
  /** The mesh config's `accessLogFormat` (undefined or '': the default). */
  readonly format?: string | undefined;
  readonly cwd: string;
  readonly hostname?: string;
}

export class AccessLog implements AccessLogSink {
  /** A destination of its own is always on (the switch in front of it turns a direction off). */
  readonly on = true;
  readonly format: AccessLogFormat;
  private pending = '';
  private scheduled = false;
  private writing = false;
  private closed = false;
  private readonly sink: LineSink;
  private readonly maxChunk: number;

  /** Opens the destination now: a path that cannot be opened is an error at start, not lines lost later. */
  constructor(o: AccessLogOptions, sink?: { sink: LineSink; maxChunk: number }) {
    this.format = compileAccessLogFormat(o.encoding, o.format, o.hostname !== undefined ? { hostname: o.hostname } : {});
    if (sink) {
      this.sink = sink.sink;
      this.maxChunk = sink.maxChunk;
    } else if (o.path === '/dev/stdout' || o.path === '/dev/stderr') {
      // Not reopened by path: under systemd or some runtimes fd 1 is a socket, which open() refuses.
      this.sink = streamSink(o.path === '/dev/stdout' ? process.stdout : process.stderr);
      this.maxChunk = PIPE_BUF;
    } else {
      const path = isAbsolute(o.path) ? o.path : resolve(o.cwd, o.path);
      let fd: number;
      try {
        fd = openSync(path, 'a');
      } catch (err) {
        throw new AgentError('ERR_CONFIG', `accessLogFile: cannot open ${path}: ${(err as Error).message}`, { cause: err });
      }
      this.sink = fdSink(fd);
      this.maxChunk = fstatSync(fd).isFile() ? Number.POSITIVE_INFINITY : PIPE_BUF;
    }
  }

  /** Response header names the format reads (the engine keeps only those). */
  get responseHeaders(): readonly string[] {
    return this.format.responseHeaders;
  }

  write(record: AccessRecord): void {
    if (this.closed) return;
    this.pending += this.format.format(record);
    if (!this.scheduled && !this.writing) {
      this.scheduled = true;
      setImmediate(this.flush);
    }
  }

  /** Writes what this turn produced; while a write is out, lines gather for the next one. */
  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.writing || this.pending === '') return;
    const chunks = chunksOf(this.pending, this.maxChunk);
    this.pending = '';
    this.writing = true;
    let i = 0;
    const next = (): void => {
      if (i < chunks.length) {
        this.sink.write(chunks[i++]!, next);
        return;
      }
      this.writing = false;
      if (this.pending !== '' && !this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    };
    next();
  };

  /** Shutdown: what is pending is written now; nothing after. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.pending !== '') for (const chunk of chunksOf(this.pending, this.maxChunk)) this.sink.writeNow(chunk);
    this.pending = '';
    if (!this.writing) this.sink.close();
  }
}
