// The rule's header operations followed by the chosen destination's, as one list of edits.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { mergedEdits, responseEdits } from '../../src/routing/header-edits.js';

const ops = (o: { set?: Record<string, string>; add?: Record<string, string>; remove?: string[] }) => ({ set: o.set ?? {}, add: o.add ?? {}, remove: o.remove ?? [] });

it('a rule alone, a destination alone, neither', () => {
  assert.deepEqual(mergedEdits(ops({ set: { a: '1' }, add: { b: '2' }, remove: ['c'] }), undefined), { set: [['a', '1']], add: [['b', '2']], remove: ['c'] });
  assert.deepEqual(mergedEdits(undefined, ops({ add: { b: '2' } })), { set: [], add: [['b', '2']], remove: [] });
  assert.deepEqual(mergedEdits(undefined, undefined), { set: [], add: [], remove: [] });
});

it('the destination after the rule: its set replaces the rule\'s set and add of the name; adds of both stay; removals join', () => {
  const e = mergedEdits(ops({ set: { a: 'rule', x: 'rule' }, add: { b: 'rule', c: 'rule' }, remove: ['r'] }), ops({ set: { a: 'dest', b: 'dest' }, add: { c: 'dest' }, remove: ['r', 's'] }));
  assert.deepEqual(e, { set: [['a', 'dest'], ['x', 'rule'], ['b', 'dest']], add: [['c', 'rule'], ['c', 'dest']], remove: ['r', 's'] });
});

it('response edits: a set name\'s upstream lines go, then the set and added lines', () => {
  assert.deepEqual(responseEdits({ set: [['x-a', '1']], add: [['x-b', '2']], remove: ['server'] }), { remove: ['server', 'x-a'], add: [['x-a', '1'], ['x-b', '2']] });
});
