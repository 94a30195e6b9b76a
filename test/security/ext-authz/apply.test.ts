import assert from 'node:assert/strict';
import { it } from 'node:test';
import { applyAnswer, ownedByProxy } from '../../../src/security/ext-authz/apply.js';

const request = new Map<string, readonly string[]>([['x-a', ['1']], ['x-b', ['2']]]);
const current = (n: string): readonly string[] | undefined => request.get(n);
const closed = { failOpen: false, statusOnError: 403 };
const NONE = new Set<string>();

it('allowed: set, append (every line then set), if-absent, if-present, removals', () => {
  const o = applyAnswer({
    kind: 'allow', remove: ['x-b'], downstream: [['x-note', 'n'], ['content-length', '9']],
    upstream: [
      { name: 'x-new', value: 'n', action: 'set' }, { name: 'x-a', value: 'more', action: 'append' },
      { name: 'x-a', value: 'skip', action: 'if-absent' }, { name: 'x-c', value: 'c', action: 'if-absent' },
      { name: 'x-d', value: 'skip', action: 'if-present' },
    ],
  }, closed, current, NONE);
  assert.deepEqual(o, {
    allowed: true, set: [['x-new', 'n'], ['x-a', '1'], ['x-a', 'more'], ['x-c', 'c']], remove: ['x-b'],
    responseHeaders: [['x-note', 'n']], note: 'allowed by the authorizer',
  });
});

it('names the proxy owns are never edited by an authorizer, nor the JWT filter\'s', () => {
  const jwt = new Set(['x-jwt-sub', 'authorization']);
  for (const n of ['host', ':path', 'x-forwarded-client-cert', 'x_forwarded_client_cert', 'x-envoy-peer-metadata', 'content-length', 'transfer-encoding', 'x-jwt-sub', 'x_jwt_sub', 'x-forwarded-for']) {
    assert.equal(ownedByProxy(n, jwt), true, n);
  }
  assert.equal(ownedByProxy('x-user', jwt), false);
  const o = applyAnswer({
    kind: 'allow', remove: ['x-jwt-sub', 'host'], downstream: [],
    upstream: [{ name: 'x-forwarded-client-cert', value: 'By=me', action: 'set' }, { name: 'x-jwt-sub', value: 'root', action: 'set' }, { name: 'x-ok', value: 'a\r\nb', action: 'set' }],
  }, closed, current, jwt);
  assert.deepEqual(o.allowed && [o.set, o.remove], [[], []]);
});

it('a refusal keeps the authorizer\'s status, body and headers (repeated ones joined); framing headers dropped', () => {
  const o = applyAnswer({ kind: 'deny', status: 401, body: 'no', headers: [['x-why', 'a'], ['x-why', 'b'], ['transfer-encoding', 'chunked']] }, closed, current, NONE);
  assert.deepEqual(o, {
    allowed: false, note: 'denied by the authorizer with 401',
    reply: { kind: 'reply', status: 401, body: 'no', headers: { 'x-why': 'a, b' }, flag: 'UAEX', details: 'ext_authz_denied' },
  });
});

it('a failed check: statusOnError (fail closed), or through untouched with failOpen', () => {
  const error = { kind: 'error', reason: 'no answer within 10ms (timeout)' } as const;
  const shut = applyAnswer(error, { failOpen: false, statusOnError: 503 }, current, NONE);
  assert.deepEqual(shut.allowed === false && shut.reply, { kind: 'reply', status: 503, body: '', flag: 'UAEX', details: 'ext_authz_error' });
  const open = applyAnswer(error, { failOpen: true, statusOnError: 503 }, current, NONE);
  assert.deepEqual(open, { allowed: true, set: [], remove: [], responseHeaders: [], note: 'check failed (no answer within 10ms (timeout)); allowed: failOpen' });
});
