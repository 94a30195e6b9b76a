// withoutHeaderLines: a response head's lines minus the names the proxy sets itself (CORS), no copy.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { withoutHeaderLines } from '../../../src/proxy/http1/response-parser.js';

const text = (parts: readonly Buffer[]): string => Buffer.concat(parts).toString('latin1');

it('drops every line of the names given, whatever their case, across parts; keeps the status line and the rest', () => {
  const head = Buffer.from('200 OK\r\nAccess-Control-Allow-Origin: *\r\nx-a: 1\r\naccess-control-allow-origin: https://x\r\nX-B: 2\r\n');
  const parts = [head.subarray(0, 40), head.subarray(40)]; // parts hold whole lines (the parser cuts at line ends)
  assert.equal(text(withoutHeaderLines(parts, ['access-control-allow-origin'])), '200 OK\r\nx-a: 1\r\nX-B: 2\r\n');
  assert.equal(text(withoutHeaderLines([head], ['x-none'])), head.toString('latin1'), 'nothing named: unchanged');
  assert.equal(text(withoutHeaderLines([Buffer.from('200 OK\r\n')], ['x-a'])), '200 OK\r\n');
});
