import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseGoBool, parseGoFloat, parseGoInt, parseVariable } from '../../../src/config/env/values.js';

describe('Go-compatible value parsers', () => {
  it('accepts exactly strconv.ParseBool\'s words', () => {
    for (const t of ['1', 't', 'T', 'TRUE', 'true', 'True']) assert.deepEqual(parseGoBool(t), { ok: true, value: true });
    for (const f of ['0', 'f', 'F', 'FALSE', 'false', 'False']) assert.deepEqual(parseGoBool(f), { ok: true, value: false });
    for (const bad of ['yes', 'no', 'tRUE', 'on', '2', ' true', '']) assert.equal(parseGoBool(bad).ok, false, bad);
  });

  it('parses decimal integers with an optional sign only', () => {
    assert.deepEqual(parseGoInt('42'), { ok: true, value: 42 });
    assert.deepEqual(parseGoInt('-7'), { ok: true, value: -7 });
    assert.deepEqual(parseGoInt('+7'), { ok: true, value: 7 });
    for (const bad of ['1.5', '0x10', '1e3', 'abc', '', ' 1', '99999999999999999999']) {
      assert.equal(parseGoInt(bad).ok, false, bad);
    }
  });

  it('parses floats in decimal, exponent, Inf and NaN forms', () => {
    assert.deepEqual(parseGoFloat('0.5'), { ok: true, value: 0.5 });
    assert.deepEqual(parseGoFloat('1e-3'), { ok: true, value: 0.001 });
    assert.deepEqual(parseGoFloat('.25'), { ok: true, value: 0.25 });
    assert.deepEqual(parseGoFloat('-Inf'), { ok: true, value: -Infinity });
    assert.equal(Number.isNaN((parseGoFloat('NaN') as { value: number }).value), true);
    for (const bad of ['abc', '1,5', '', '1.2.3', '0.5x']) assert.equal(parseGoFloat(bad).ok, false, bad);
  });

  it('checks allowed values and allowed lists after the type', () => {
    const mode = { name: 'M', type: 'string', default: '', description: '', here: 'honoured', allowed: ['', 'A', 'B'] } as const;
    assert.deepEqual(parseVariable(mode, 'A'), { ok: true, value: 'A' });
    assert.deepEqual(parseVariable(mode, ''), { ok: true, value: '' });
    const rejected = parseVariable(mode, 'a');
    assert.equal(rejected.ok, false);
    assert.match((rejected as { expected: string }).expected, /one of \(empty\), A, B/);
    const list = { name: 'L', type: 'string', default: '', description: '', here: 'honoured', allowedList: ['x', 'y'] } as const;
    assert.equal(parseVariable(list, 'x, y').ok, true);
    assert.equal(parseVariable(list, 'x,z').ok, false);
    const ranged = { name: 'R', type: 'int', default: 60, description: '', here: 'honoured', range: [1, 8192] } as const;
    assert.deepEqual(parseVariable(ranged, '8192'), { ok: true, value: 8192 });
    assert.deepEqual(parseVariable(ranged, '0'), { ok: false, expected: 'a number from 1 to 8192' });
  });
});
