import assert from 'node:assert/strict';
import { it } from 'node:test';
import { decodeHealthCheckResponse, encodeHealthCheckRequest } from '../../src/status/probe.js';

it('encodes HealthCheckRequest{service} as a length-prefixed gRPC message', () => {
  assert.deepEqual([...encodeHealthCheckRequest('')], [0, 0, 0, 0, 0]);
  assert.deepEqual([...encodeHealthCheckRequest('a.B')], [0, 0, 0, 0, 5, 0x0a, 3, 0x61, 0x2e, 0x42]);
  // A name of 200 bytes needs a two-byte varint length: 200 = 0xc8 0x01.
  const long = encodeHealthCheckRequest('x'.repeat(200));
  assert.deepEqual([...long.subarray(0, 8)], [0, 0, 0, 0, 203, 0x0a, 0xc8, 0x01]);
  assert.equal(long.length, 5 + 203);
});

it('decodes HealthCheckResponse.status, skipping unknown fields', () => {
  const frame = (...msg: number[]): Buffer => Buffer.from([0, 0, 0, 0, msg.length, ...msg]);
  assert.equal(decodeHealthCheckResponse(frame(0x08, 1)), 1);
  assert.equal(decodeHealthCheckResponse(frame(0x08, 2)), 2);
  assert.equal(decodeHealthCheckResponse(frame()), 0, 'proto3 default: UNKNOWN');
  // field 2 (string "hi"), field 3 (fixed32), then field 1 = 3.
  assert.equal(decodeHealthCheckResponse(frame(0x12, 2, 0x68, 0x69, 0x1d, 1, 2, 3, 4, 0x08, 3)), 3);
});

it('rejects malformed responses with a message', () => {
  assert.throws(() => decodeHealthCheckResponse(Buffer.from([0, 0, 0])), /shorter than a gRPC message header/);
  assert.throws(() => decodeHealthCheckResponse(Buffer.from([1, 0, 0, 0, 0])), /compressed/);
  assert.throws(() => decodeHealthCheckResponse(Buffer.from([0, 0, 0, 0, 4, 0x08])), /truncated at 1/);
  assert.throws(() => decodeHealthCheckResponse(Buffer.from([0, 0, 0, 0, 2, 0x08, 0x80])), /malformed protobuf varint/);
  assert.throws(() => decodeHealthCheckResponse(Buffer.from([0, 0, 0, 0, 2, 0x12, 5])), /truncated protobuf field/);
});
