import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { it } from 'node:test';
import { authorityOf, hasHeader, RequestView } from '../../src/proxy/request-view.js';

const view = (lines: string[], authority = ''): RequestView => new RequestView('GET', '/', 1, 1, lines, {} as Socket, authority);

it('finds a header in the lines whatever its case, without building `headers`', () => {
  const v = view(['Host', 'a.example', 'X-Forwarded-Client-Cert', 'By=x', 'x-forwarded-client-certs', 'no']);
  assert.equal(v.has('x-forwarded-client-cert'), true);
  assert.equal(v.has('host'), true);
  assert.equal(v.has('x-forwarded-client'), false, 'a prefix is not the name');
  assert.equal(v.has('cookie'), false);
  assert.equal((v as unknown as { headersCache?: unknown }).headersCache, undefined, 'headers never built');
  assert.equal(hasHeader(v.asIncomingMessage(), 'x-forwarded-client-cert'), true);
  assert.equal(hasHeader(view(['host', 'a']).asIncomingMessage(), 'x-forwarded-client-cert'), false);
});

it('reads node\'s headers for any other IncomingMessage', () => {
  const req = { headers: { host: 'b.example:8080', 'x-forwarded-client-cert': 'By=y' } } as unknown as IncomingMessage;
  assert.equal(hasHeader(req, 'x-forwarded-client-cert'), true);
  assert.equal(hasHeader(req, 'cookie'), false);
  assert.equal(authorityOf(req), 'b.example:8080');
  assert.equal(authorityOf(view(['host', 'ignored'], 'c.example').asIncomingMessage()), 'c.example', 'the parsed authority first');
});
