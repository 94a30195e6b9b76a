import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { AccessRecord } from '../../src/log/access-record.js';
import { SwitchedAccessLog } from '../../src/log/switched-access-log.js';

class Sink {
  readonly on = true;
  readonly responseHeaders: readonly string[] = [];
  readonly lines: AccessRecord[] = [];
  write(r: AccessRecord): void {
    this.lines.push(r);
  }
}

it('a switched log: off until a sink is set, writes go to the sink in force, none once it is off', () => {
  const log = new SwitchedAccessLog(['x-app']);
  const record = { kind: 'http' } as AccessRecord;
  assert.equal(log.on, false);
  assert.deepEqual(log.responseHeaders, ['x-app']);
  log.write(record); // a request begun before it went off: dropped
  const a = new Sink();
  const b = new Sink();
  log.set(a);
  assert.equal(log.on, true);
  log.write(record);
  log.set(b);
  log.write(record);
  log.set(undefined);
  assert.equal(log.on, false);
  log.write(record);
  assert.deepEqual([a.lines.length, b.lines.length], [1, 1]);
});
