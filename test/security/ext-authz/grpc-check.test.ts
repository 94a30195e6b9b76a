import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { CheckInput } from '../../../src/security/ext-authz/check.js';
import { checkAnswer, checkRequest } from '../../../src/security/ext-authz/grpc-check.js';
import { checkMethod } from '../../../src/security/ext-authz/grpc-messages.js';

const input: CheckInput = {
  method: 'GET', path: '/a/b?x=1', host: 'shop.example', scheme: 'https', protocol: 'HTTP/2',
  headers: new Map([['host', ['shop.example']], ['x-a', ['1', '2']], ['content-length', ['7']]]),
  source: { address: '10.0.0.1', port: 5000, principal: 'spiffe://cluster.local/ns/a/sa/b' }, destination: { address: '10.0.0.2', port: 8443 },
};

it('the CheckRequest carries the attribute context Envoy sends, and survives the wire', () => {
  const wire = checkRequest(input, 1_700_000_000_250);
  const decoded = checkMethod.requestDeserialize(checkMethod.requestSerialize(wire));
  const a = decoded.attributes!;
  assert.deepEqual(a.source, { address: { socket_address: { address: '10.0.0.1', port_value: 5000 } }, principal: 'spiffe://cluster.local/ns/a/sa/b' });
  assert.deepEqual(a.destination, { address: { socket_address: { address: '10.0.0.2', port_value: 8443 } } });
  assert.deepEqual(a.request?.time, { seconds: '1700000000', nanos: 250_000_000 });
  assert.deepEqual(a.request?.http, {
    method: 'GET', path: '/a/b?x=1', host: 'shop.example', scheme: 'https', protocol: 'HTTP/2', query: 'x=1', size: '7',
    headers: { 'x-a': '1,2', 'content-length': '7', ':authority': 'shop.example', ':method': 'GET', ':path': '/a/b?x=1', ':scheme': 'https' },
  });
});

it('a held body goes as text (body) or, packAsBytes, as bytes (raw_body), with x-envoy-auth-partial-body; none without one', () => {
  const bytes = Buffer.from([0x61, 0xff, 0x00, 0x62]);
  const partial = { ...input, headers: new Map([...input.headers, ['x-envoy-auth-partial-body', ['forged']]]), body: { bytes, partial: true } };
  const asText = checkMethod.requestDeserialize(checkMethod.requestSerialize(checkRequest(partial, 0))).attributes!.request!.http!;
  assert.equal(asText.body, 'a\ufffd\u0000b');
  assert.equal(asText.raw_body, undefined);
  assert.equal(asText.headers!['x-envoy-auth-partial-body'], 'true');
  const asBytes = checkMethod.requestDeserialize(checkMethod.requestSerialize(checkRequest({ ...input, body: { bytes, partial: false } }, 0, true))).attributes!.request!.http!;
  assert.deepEqual(Buffer.from(asBytes.raw_body!), bytes);
  assert.equal(asBytes.body, undefined);
  assert.equal(asBytes.headers!['x-envoy-auth-partial-body'], 'false');
  const none = checkRequest(input, 0).attributes!.request!.http!;
  assert.deepEqual([none.body, none.raw_body, none.headers!['x-envoy-auth-partial-body']], [undefined, undefined, undefined]);
});

it('the request size is -1 without a Content-Length', () => {
  assert.equal(checkRequest({ ...input, headers: new Map() }, 0).attributes?.request?.http?.size, '-1');
});

it('OK allows with the header edits (append and append_action read), a denial carries status (403 unset), headers, body', () => {
  const ok = checkAnswer({
    status: { code: 0 },
    ok_response: {
      headers: [
        { header: { key: 'X-Set', value: 's' } },
        { header: { key: 'x-app', value: 'a' }, append: { value: true } },
        { header: { key: 'x-absent', value: 'b' }, append_action: 1 },
        { header: { key: 'x-present', value: 'c' }, append_action: 3 },
        { header: { key: 'x-raw', raw_value: Buffer.from('r') } },
      ],
      headers_to_remove: ['X-Gone'], response_headers_to_add: [{ header: { key: 'x-note', value: 'n' } }],
    },
  });
  assert.deepEqual(ok, {
    kind: 'allow',
    upstream: [
      { name: 'x-set', value: 's', action: 'set' }, { name: 'x-app', value: 'a', action: 'append' }, { name: 'x-absent', value: 'b', action: 'if-absent' },
      { name: 'x-present', value: 'c', action: 'if-present' }, { name: 'x-raw', value: 'r', action: 'set' },
    ],
    remove: ['x-gone'], downstream: [['x-note', 'n']],
  });
  assert.deepEqual(checkAnswer({}), { kind: 'allow', upstream: [], remove: [], downstream: [] });
  assert.deepEqual(checkAnswer({ status: { code: 7 }, denied_response: { status: { code: 401 }, body: 'no', headers: [{ header: { key: 'X-Why', value: 'w' } }] } }),
    { kind: 'deny', status: 401, body: 'no', headers: [['x-why', 'w']] });
  assert.deepEqual(checkAnswer({ status: { code: 16 } }), { kind: 'deny', status: 403, body: '', headers: [] });
});

it('a response decoded from the wire reads the same', () => {
  const bytes = checkMethod.responseSerialize({ status: { code: 7 }, denied_response: { status: { code: 429 }, body: 'slow down' } });
  assert.deepEqual(checkAnswer(checkMethod.responseDeserialize(bytes)), { kind: 'deny', status: 429, body: 'slow down', headers: [] });
});
