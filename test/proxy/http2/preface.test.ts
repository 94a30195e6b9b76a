import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CLIENT_PREFACE, http2Settings, prefaceKind } from '../../../src/proxy/http2/preface.js';

describe('prefaceKind', () => {
  it('the whole preface is h2, a prefix of it undecided, anything else http1', () => {
    assert.equal(prefaceKind(CLIENT_PREFACE), 'h2');
    assert.equal(prefaceKind(Buffer.concat([CLIENT_PREFACE, Buffer.from([0, 0, 0, 4])])), 'h2');
    assert.equal(prefaceKind(CLIENT_PREFACE.subarray(0, 10)), undefined);
    assert.equal(prefaceKind(Buffer.from('PRI / HTTP/1.1\r\n')), 'http1');
    assert.equal(prefaceKind(Buffer.from('GET / HTTP/1.1\r\n')), 'http1');
  });
});

describe('http2Settings: a server\'s first bytes', () => {
  const settings = (payload: number[], flags = 0, stream = 0): Buffer => {
    const h = Buffer.alloc(9);
    h.writeUIntBE(payload.length, 0, 3);
    h[3] = 0x04;
    h[4] = flags;
    h.writeUInt32BE(stream, 5);
    return Buffer.concat([h, Buffer.from(payload)]);
  };

  it('a SETTINGS frame on stream 0 (empty or whole settings) is HTTP/2', () => {
    assert.equal(http2Settings(settings([])), true);
    assert.equal(http2Settings(settings([0, 3, 0, 0, 0, 100])), true);
  });

  it('fewer than a frame header\'s bytes that could begin one: maybe', () => {
    assert.equal(http2Settings(settings([0, 3, 0, 0, 0, 100]).subarray(0, 5)), 'maybe');
    assert.equal(http2Settings(Buffer.from([0])), 'maybe');
  });

  it('a SETTINGS ACK, another stream, a length not a multiple of 6, a greeting: not HTTP/2', () => {
    assert.equal(http2Settings(settings([], 0x01)), false);
    assert.equal(http2Settings(settings([], 0, 1)), false);
    assert.equal(http2Settings(settings([1, 2, 3])), false);
    assert.equal(http2Settings(Buffer.from('220 smtp.example ESMTP\r\n')), false);
    assert.equal(http2Settings(Buffer.from('* OK IMAP4rev1\r\n')), false);
  });
});
