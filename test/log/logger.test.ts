// The logger's own lines: what a field becomes in JSON and in text, and that a target which refuses
// the write never takes the caller down. Through a file target, read back.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { configureLogging, defaultLogOptions, scope } from '../../src/log/logger.js';

const dir = mkdtempSync(join(tmpdir(), 'pa-logger-'));
let n = 0;

/** A fresh file target (in a folder the logger makes); answers its path. */
function logTo(json: boolean): string {
  const file = join(dir, 'sub', `log-${n++}.txt`);
  configureLogging({ ...defaultLogOptions, json, targets: [file] });
  return file;
}

after(() => {
  configureLogging(defaultLogOptions);
  rmSync(dir, { recursive: true, force: true });
});

describe('logger', () => {
  const cyclic: Record<string, unknown> = { name: 'c' };
  cyclic['self'] = cyclic;
  const fields = { port: 53, gone: undefined, fn: () => 1, big: 10n, cyclic, text: 'a b' };

  it('writes JSON lines: level, time, scope, the fields in order, msg; what JSON cannot show is left out or named', () => {
    const file = logTo(true);
    scope('dns').info('hello', fields);
    const line = readFileSync(file, 'utf8');
    assert.ok(line.endsWith('}\n'));
    const record = JSON.parse(line) as Record<string, unknown>;
    assert.deepEqual(Object.keys(record), ['level', 'time', 'scope', 'port', 'big', 'cyclic', 'text', 'msg']);
    assert.equal(record['level'], 'info');
    assert.match(String(record['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(record['scope'], 'dns');
    assert.equal(record['big'], '10');
    assert.equal(record['cyclic'], '[object Object]');
    assert.equal(record['msg'], 'hello');
  });

  it('writes the same record as a text line', () => {
    const file = logTo(false);
    scope('dns').warn('hello', fields);
    const [time, level, name, msg, rest] = readFileSync(file, 'utf8').trimEnd().split('\t');
    assert.match(time!, /^\d{4}-/);
    assert.deepEqual([level, name, msg], ['warn', 'dns', 'hello']);
    assert.equal(rest, 'port=53 big=10 cyclic="[object Object]" text="a b"');
  });

  it('leaves out lines below the scope level', () => {
    const file = logTo(true);
    scope('dns').debug('not shown');
    scope('dns').info('shown');
    assert.deepEqual(readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => (JSON.parse(l) as { msg: string }).msg), ['shown']);
  });

  it('drops a line its target refuses (/dev/full: ENOSPC) instead of throwing', () => {
    configureLogging({ ...defaultLogOptions, targets: ['/dev/full'] });
    assert.doesNotThrow(() => scope('default').error('lost'));
  });
});
