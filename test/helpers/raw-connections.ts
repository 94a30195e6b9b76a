// Exact bytes on real connections, for the end-to-end security tests: each case is one connection
// opened by test/fixtures/raw-client.mjs wherever `run` executes it (a namespace), and what came back
// is read as HTTP/1.1 responses by response-stream.ts (independently of the proxy's parser).
import { join } from 'node:path';
import { repoRoot } from './repo.js';
import { readResponses } from './response-stream.js';

export const RAW_CLIENT = join(repoRoot, 'test', 'fixtures', 'raw-client.mjs');

export interface RawCase {
  /** The bytes to write, as a latin1 string. */
  readonly data: string;
  /** Wait this long without a byte before giving up on more (default 300 ms). */
  readonly quietMs?: number;
  /** Send a FIN after the bytes. */
  readonly halfClose?: boolean;
}

export interface Received {
  /** What came back, as a latin1 string. */
  readonly received: string;
  /** The server closed the connection (or reset it). */
  readonly closed: boolean;
}

/** Runs a command with `input` on stdin where the connections must start; answers its stdout. */
export type Runner = (command: string, args: readonly string[], input: string) => string;

/** Opens one connection per case to host:port (all at once with `parallel`), in the order given. */
export function rawConnections(run: Runner, host: string, port: number, cases: readonly RawCase[], o: { parallel?: boolean } = {}): Received[] {
  const quietMs = Math.max(...cases.map((c) => c.quietMs ?? 300));
  const input = JSON.stringify({
    host, quietMs, timeoutMs: quietMs + 10_000, gapMs: 20, concurrency: o.parallel ? cases.length : 1,
    cases: cases.map((c, id) => ({ id, port, bytes: Buffer.from(c.data, 'latin1').toString('base64'), splits: [], halfClose: c.halfClose ?? false })),
  });
  const lines = run(process.execPath, [RAW_CLIENT], input).split('\n').filter((l) => l !== '');
  const byId = new Map(lines.map((l) => JSON.parse(l) as { id: number; received: string; end: string }).map((r) => [r.id, r]));
  return cases.map((_, id) => {
    const r = byId.get(id);
    if (!r) throw new Error(`no result for connection ${id}`);
    return { received: Buffer.from(r.received, 'base64').toString('latin1'), closed: r.end === 'close' || r.end === 'error' };
  });
}

/** Status codes of the final responses received, in order. */
export function statuses(r: Received): number[] {
  return readResponses(Buffer.from(r.received, 'latin1')).responses.map((x) => x.status);
}

/** The content of the last response received, as a latin1 string. */
export function lastBody(r: Received): string {
  const responses = readResponses(Buffer.from(r.received, 'latin1')).responses;
  return responses.at(-1)?.body.toString('latin1') ?? '';
}
