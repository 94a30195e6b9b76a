import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { AgentError } from '../../src/errors/agent-error.js';
import { AccessLog, chunksOf, PIPE_BUF, type LineSink } from '../../src/log/access-log.js';
import { clusterName, connectionRecord, flagsText, FLAG, hostPort, RESPONSE_FLAGS } from '../../src/log/access-record.js';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A connection record whose line is `<n>` padded to `width` characters (a custom format prints BYTES_SENT). */
const numbered = (n: number) => connectionRecord({ role: 'outbound', startMs: 0, durationMs: 0, flags: 0, bytesReceived: 0, bytesSent: n });

class RecordingSink implements LineSink {
  readonly writes: string[] = [];
  pendingDone: (() => void) | undefined;
  constructor(private readonly async = false) {}
  write(text: string, done: () => void): void {
    this.writes.push(text);
    if (this.async) this.pendingDone = done;
    else done();
  }
  writeNow(text: string): void {
    this.writes.push(`now:${text}`);
  }
  close(): void { /* nothing */ }
}

describe('response flags and names', () => {
  it('prints flags in Envoy\'s order, short or long, none as undefined', () => {
    assert.equal(flagsText(0), undefined);
    assert.equal(flagsText(FLAG.DC | FLAG.UF), 'UF,DC');
    assert.equal(flagsText(FLAG.UAEX | FLAG.RBAC, true), 'UnauthorizedExternalService,RbacAccessDenied');
    assert.deepEqual(RESPONSE_FLAGS.map(([s]) => s), ['UH', 'UT', 'LR', 'UR', 'UF', 'UC', 'UO', 'NR', 'DI', 'FI', 'UAEX', 'RBAC', 'DC', 'URX', 'DPE', 'UPE', 'NC']);
  });

  it('prints addresses as Envoy does', () => {
    assert.equal(hostPort('10.0.0.1', 80), '10.0.0.1:80');
    assert.equal(hostPort('::ffff:10.0.0.1', 80), '10.0.0.1:80');
    assert.equal(hostPort('2001:db8::1', 443), '[2001:db8::1]:443');
    assert.equal(hostPort(undefined, 80), undefined);
  });

  it('names clusters as Istio: the passthrough ones, a gateway route\'s outbound|port||host', () => {
    assert.equal(clusterName('outbound', '10.0.0.1', 80), 'PassthroughCluster');
    assert.equal(clusterName('inbound', '10.0.0.1', 80), 'InboundPassthroughCluster');
    assert.equal(clusterName('gateway', 'reviews.shop', 9080), 'outbound|9080||reviews.shop');
  });
});

describe('chunksOf (pipes keep a write whole up to PIPE_BUF)', () => {
  it('keeps a small batch whole and cuts a large one at line ends', () => {
    assert.deepEqual(chunksOf('a\nb\n', 10), ['a\nb\n']);
    assert.deepEqual(chunksOf('aaaa\nbbbb\ncccc\n', 10), ['aaaa\nbbbb\n', 'cccc\n']);
    assert.deepEqual(chunksOf('aaaaaaaaaaaa\nb\n', 10), ['aaaaaaaaaaaa\n', 'b\n'], 'a line longer than the limit is a chunk of its own');
  });

  it('counts bytes, not characters', () => {
    assert.deepEqual(chunksOf('é\né\n', 4), ['é\n', 'é\n']);
  });

  it('never cuts a line, whatever the sizes', () => {
    const lines = Array.from({ length: 500 }, (_, i) => `${'x'.repeat(i % 97)}${i}\n`).join('');
    const chunks = chunksOf(lines, PIPE_BUF);
    assert.equal(chunks.join(''), lines);
    for (const c of chunks) {
      assert.ok(c.endsWith('\n'));
      assert.ok(Buffer.byteLength(c) <= PIPE_BUF);
    }
  });
});

describe('AccessLog', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pa-access-log-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('batches the lines of one event-loop turn into one write', async () => {
    const sink = new RecordingSink();
    const log = new AccessLog({ path: 'x', encoding: 'TEXT', format: '%BYTES_SENT%', cwd: dir }, { sink, maxChunk: Number.POSITIVE_INFINITY });
    for (let i = 0; i < 3; i++) log.write(numbered(i));
    assert.deepEqual(sink.writes, [], 'nothing before the turn ends');
    await tick();
    assert.deepEqual(sink.writes, ['0\n1\n2\n']);
  });

  it('while a write is out, lines gather for the next one (one write in flight)', async () => {
    const sink = new RecordingSink(true);
    const log = new AccessLog({ path: 'x', encoding: 'TEXT', format: '%BYTES_SENT%', cwd: dir }, { sink, maxChunk: Number.POSITIVE_INFINITY });
    log.write(numbered(1));
    await tick();
    log.write(numbered(2));
    await tick();
    log.write(numbered(3));
    await tick();
    assert.deepEqual(sink.writes, ['1\n']);
    sink.pendingDone!();
    await tick();
    assert.deepEqual(sink.writes, ['1\n', '2\n3\n']);
  });

  it('writes a batch to a pipe in chunks of at most PIPE_BUF, one after the other', async () => {
    const sink = new RecordingSink(true);
    const log = new AccessLog({ path: 'x', encoding: 'TEXT', format: `%BYTES_SENT% ${'y'.repeat(1000)}`, cwd: dir }, { sink, maxChunk: PIPE_BUF });
    for (let i = 0; i < 10; i++) log.write(numbered(i));
    await tick();
    assert.equal(sink.writes.length, 1, 'the next chunk waits for the first');
    while (sink.pendingDone) {
      const done = sink.pendingDone;
      sink.pendingDone = undefined;
      done();
    }
    assert.equal(sink.writes.length, 3);
    assert.ok(sink.writes.every((w) => Buffer.byteLength(w) <= PIPE_BUF && w.endsWith('\n')));
    assert.equal(sink.writes.join('').split('\n').length, 11);
  });

  it('close() writes what is pending at once, and nothing after', () => {
    const sink = new RecordingSink();
    const log = new AccessLog({ path: 'x', encoding: 'TEXT', format: '%BYTES_SENT%', cwd: dir }, { sink, maxChunk: Number.POSITIVE_INFINITY });
    log.write(numbered(7));
    log.close();
    log.write(numbered(8));
    assert.deepEqual(sink.writes, ['now:7\n']);
  });

  it('a path that cannot be opened is an error at start naming accessLogFile', () => {
    assert.throws(() => new AccessLog({ path: join(dir, 'no', 'such', 'dir', 'log'), encoding: 'TEXT', cwd: dir }),
      (err: unknown) => err instanceof AgentError && err.code === 'ERR_CONFIG' && /accessLogFile: cannot open .*no\/such\/dir\/log/.test(err.message));
  });

  it('appends to a file relative to the working directory', async () => {
    const log = new AccessLog({ path: 'relative.log', encoding: 'TEXT', format: '%BYTES_SENT%', cwd: dir });
    log.write(numbered(1));
    await tick();
    await new Promise((resolve) => setTimeout(resolve, 50));
    log.close();
    assert.equal(readFileSync(join(dir, 'relative.log'), 'utf8'), '1\n');
  });

  it('several threads appending to one file never cut each other\'s lines', async () => {
    const file = join(dir, 'shared.log');
    const moduleUrl = new URL('../../src/log/access-log.js', import.meta.url).href;
    const recordUrl = new URL('../../src/log/access-record.js', import.meta.url).href;
    // Each thread writes 40 bursts of 50 long lines (batches well over PIPE_BUF), as workers do.
    const script = `
      const { workerData, parentPort } = require('node:worker_threads');
      (async () => {
        const { AccessLog } = await import(workerData.moduleUrl);
        const { connectionRecord } = await import(workerData.recordUrl);
        const log = new AccessLog({ path: workerData.file, encoding: 'TEXT', format: 'w' + workerData.id + ' %BYTES_SENT% ' + 'z'.repeat(300), cwd: '/' });
        for (let burst = 0; burst < 40; burst++) {
          for (let i = 0; i < 50; i++) log.write(connectionRecord({ role: 'outbound', startMs: 0, durationMs: 0, flags: 0, bytesReceived: 0, bytesSent: burst * 50 + i }));
          await new Promise((r) => setImmediate(r));
        }
        await new Promise((r) => setTimeout(r, 200));
        log.close();
        parentPort.postMessage('done');
      })();`;
    const threads = [1, 2, 3, 4].map((id) => new Worker(script, { eval: true, workerData: { id, file, moduleUrl, recordUrl } }));
    await Promise.all(threads.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); })));
    const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 4 * 2000);
    const tail = ` ${'z'.repeat(300)}`;
    const seen = new Map<string, number[]>();
    for (const line of lines) {
      const m = /^(w\d) (\d+)( z+)$/.exec(line);
      assert.ok(m && m[3] === tail, `a whole line: ${line.slice(0, 60)}...`);
      (seen.get(m[1]!) ?? seen.set(m[1]!, []).get(m[1]!)!).push(Number(m[2]));
    }
    for (const [, numbers] of seen) assert.deepEqual(numbers, Array.from({ length: 2000 }, (_, i) => i), 'each thread\'s lines in order');
  });
});
