import assert from 'node:assert/strict';
import { it } from 'node:test';
import { formatTextLine } from '../../src/log/text-format.js';

it('prints time, level, scope and message tab-separated, then fields', () => {
  const line = formatTextLine({ time: '2026-11-21T10:00:00.000Z', level: 'info', scope: 'dns', msg: 'hello', port: 53, name: 'a b' });
  assert.equal(line, '2026-11-21T10:00:00.000Z\tinfo\tdns\thello\tport=53 name="a b"\n');
});

it('puts a stack trace on the following lines', () => {
  const line = formatTextLine({ time: 't', level: 'error', scope: 'default', msg: 'boom', stack: '    at x (y.js:1:1)' });
  assert.equal(line, 't\terror\tdefault\tboom\n    at x (y.js:1:1)\n');
});
