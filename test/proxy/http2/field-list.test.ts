// Field lists (name, value...) as the exchange edits a message's head: the first value, every value
// joined, lines taken out in place, trailers as they go on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fieldValue, joinedValue, removeFields, trailerList } from '../../../src/proxy/http2/field-list.js';

describe('field lists', () => {
  const fields = (): string[] => [':status', '200', 'x-a', '1', 'vary', 'a', 'x-b', '2', 'vary', 'b', 'x-a', '3'];

  it('fieldValue: the first value of a name; undefined when absent (a value is never taken for a name)', () => {
    assert.equal(fieldValue(fields(), 'x-a'), '1');
    assert.equal(fieldValue(fields(), 'x-c'), undefined);
    assert.equal(fieldValue(fields(), '1'), undefined);
  });

  it('joinedValue: every value of a name, in order, joined by ", "', () => {
    assert.equal(joinedValue(fields(), 'vary'), 'a, b');
    assert.equal(joinedValue(fields(), 'x-b'), '2');
    assert.equal(joinedValue(fields(), 'x-c'), undefined);
  });

  it('removeFields: every line of the names, the rest in order; lines before `from` never taken', () => {
    const f = fields();
    removeFields(f, ['x-a', 'vary'], 2);
    assert.deepEqual(f, [':status', '200', 'x-b', '2']);
    const g = fields();
    removeFields(g, [':status', 'x-b'], 2);
    assert.deepEqual(g, [':status', '200', 'x-a', '1', 'vary', 'a', 'vary', 'b', 'x-a', '3']);
    const h = fields();
    removeFields(h, ['absent']);
    assert.deepEqual(h, fields());
  });

  it('trailerList: an HTTP/2 peer\'s trailers go on as they are (the same list, no copy)', () => {
    const grpc = ['grpc-status', '0', 'grpc-message', 'ok', 'x-t', 'a', 'x-t', 'b'];
    assert.equal(trailerList(grpc), grpc);
    assert.deepEqual(grpc, ['grpc-status', '0', 'grpc-message', 'ok', 'x-t', 'a', 'x-t', 'b']);
  });

  it('trailerList: names in lower case; pseudo-headers, content-length, transfer-encoding and connection out', () => {
    const raw = ['Grpc-Status', '14', 'content-length', '5', ':status', '200', 'Transfer-Encoding', 'chunked', 'Connection', 'close', 'X-T', 'a'];
    assert.deepEqual(trailerList(raw), ['grpc-status', '14', 'x-t', 'a']);
    assert.deepEqual(trailerList(['x-a', '1', 'Content-Length', '3', 'x-b', '2']), ['x-a', '1', 'x-b', '2']);
    assert.deepEqual(trailerList([]), []);
  });
});
