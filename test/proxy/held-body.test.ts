import assert from 'node:assert/strict';
import { it } from 'node:test';
import { heldBodyReady } from '../../src/proxy/held-body.js';

const b = (s: string): Buffer => Buffer.from(s);

it('waits until the body is whole or more than the limit came', () => {
  assert.equal(heldBodyReady([b('abc')], 3, false, 4, -1, false), undefined);
  assert.equal(heldBodyReady([b('abcd')], 4, false, 4, -1, false), undefined, 'exactly the limit: one more byte or the end says which');
  assert.deepEqual(heldBodyReady([b('ab'), b('cd')], 4, true, 4, -1, false), { bytes: b('abcd'), over: false });
  assert.deepEqual(heldBodyReady(undefined, 0, true, 4, -1, false), { bytes: b(''), over: false });
  assert.deepEqual(heldBodyReady([b('abc'), b('de')], 5, false, 4, -1, true), { bytes: b('abcd'), over: true }, 'only the first limit bytes are judged');
});

it('a declared length over the limit ends the wait at once, or once the limit is read when partial bodies are judged', () => {
  assert.deepEqual(heldBodyReady(undefined, 0, false, 4, 10, false), { bytes: b(''), over: true });
  assert.equal(heldBodyReady([b('abc')], 3, false, 4, 10, true), undefined);
  assert.deepEqual(heldBodyReady([b('abcd')], 4, false, 4, 10, true), { bytes: b('abcd'), over: true });
  assert.equal(heldBodyReady([b('abc')], 3, false, 4, 4, false), undefined, 'a declared length within the limit: wait for it');
});
