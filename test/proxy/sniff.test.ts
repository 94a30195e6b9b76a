import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sniff } from '../../src/proxy/sniff.js';

const b = (s: string | number[]): Buffer => (typeof s === 'string' ? Buffer.from(s, 'latin1') : Buffer.from(s));

it('recognises HTTP/1.x request lines by their method', () => {
  for (const m of ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH', 'CONNECT']) {
    assert.equal(sniff(b(`${m} /x HTTP/1.1\r\n`)), 'http1', m);
  }
  assert.equal(sniff(b('GET ')), 'http1');
});

it('waits while the bytes could still become a method', () => {
  assert.equal(sniff(b('')), undefined);
  assert.equal(sniff(b('G')), undefined);
  assert.equal(sniff(b('POS')), undefined);
  assert.equal(sniff(b('PROPPATC')), undefined);
});

it('passes TLS and everything else through as TCP', () => {
  assert.equal(sniff(b([0x16, 0x03, 0x01, 0x02, 0x00])), 'tls');
  assert.equal(sniff(b([0x16])), undefined);
  assert.equal(sniff(b('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')), 'tcp');
  assert.equal(sniff(b('get / HTTP/1.1\r\n')), 'tcp');
  assert.equal(sniff(b('SSH-2.0-OpenSSH\r\n')), 'tcp');
  assert.equal(sniff(b([0x00, 0x00, 0x00, 0x01])), 'tcp');
  assert.equal(sniff(b('GETX / HTTP/1.1')), 'tcp');
});
