import assert from 'node:assert/strict';
import { it } from 'node:test';
import { readExtAuthzProviders, type HttpAuthzProvider } from '../../../src/config/ext-authz-providers.js';
import type { CheckInput } from '../../../src/security/ext-authz/check.js';
import { httpAnswer, httpCheckRequest } from '../../../src/security/ext-authz/http-check.js';

const provider = (fields: Record<string, unknown> = {}): HttpAuthzProvider =>
  readExtAuthzProviders([{ name: 'p', envoyExtAuthzHttp: { service: 'a', port: 1, ...fields } }]).providers[0] as HttpAuthzProvider;

const input: CheckInput = {
  method: 'POST', path: '/orders?id=1', host: 'shop.example:8080', scheme: 'http', protocol: 'HTTP/1.1',
  headers: new Map([['host', ['shop.example:8080']], ['x-a', ['1', '2']], ['x-b', ['b']], ['content-length', ['12']], ['connection', ['close']], ['authorization', ['Basic x']]]),
  source: { address: '10.0.0.1', port: 5000 }, destination: { address: '10.0.0.2', port: 8080 },
};

it('the check request: the client\'s method, the path behind the prefix, Host, the listed headers, no body', () => {
  const c = httpCheckRequest(provider({ pathPrefix: '/authz', includeRequestHeadersInCheck: ['x-a', 'connection', 'content-length'] }), input);
  assert.deepEqual(c, {
    method: 'POST', path: '/authz/orders?id=1',
    headers: [['host', 'shop.example:8080'], ['x-a', '1'], ['x-a', '2'], ['content-length', '0']],
  });
  // Nothing listed: Host and Content-Length only; additional headers replace the client's.
  assert.deepEqual(httpCheckRequest(provider({ includeRequestHeadersInCheck: ['x-b'], includeAdditionalHeadersInCheck: { 'X-B': 'fixed' } }), input).headers,
    [['host', 'shop.example:8080'], ['x-b', 'fixed'], ['content-length', '0']]);
});

it('a body held for the check is its body, with its length and whether it is cut short; a client\'s partial-body line is never sent', () => {
  const withClientLine: CheckInput = { ...input, headers: new Map([...input.headers, ['x-envoy-auth-partial-body', ['false']]]) };
  const c = httpCheckRequest(provider({ includeRequestHeadersInCheck: ['x-envoy-*'] }), { ...withClientLine, body: { bytes: Buffer.from('héllo'), partial: true } });
  assert.deepEqual(c.headers, [['host', 'shop.example:8080'], ['x-envoy-auth-partial-body', 'true'], ['content-length', '6']]);
  assert.deepEqual(c.body, Buffer.from('héllo'));
  assert.equal(httpCheckRequest(provider(), input).body, undefined);
});

it('200 allows: listed headers go upstream (replacing) and to the client; x-envoy-auth-headers-to-remove lists removals', () => {
  const p = provider({ headersToUpstreamOnAllow: ['x-user', 'x-gr*'], headersToDownstreamOnAllow: ['x-note'] });
  const a = httpAnswer(p, 200, ['X-User', 'alice', 'X-Groups', 'g1', 'X-Other', 'o', 'X-Note', 'n', 'x-envoy-auth-headers-to-remove', 'x-a, X-B', 'Content-Length', '0'], '');
  assert.deepEqual(a, {
    kind: 'allow',
    upstream: [{ name: 'x-user', value: 'alice', action: 'set' }, { name: 'x-groups', value: 'g1', action: 'set' }],
    remove: ['x-a', 'x-b'], downstream: [['x-note', 'n']],
  });
});

it('another status refuses with its body; the headers: all but Host and framing, or the listed ones plus WWW-Authenticate and Location', () => {
  const raw = ['Host', 'h', 'X-Why', 'w', 'WWW-Authenticate', 'Basic', 'Location', '/login', 'X-Other', 'o', 'Content-Length', '4'];
  assert.deepEqual(httpAnswer(provider(), 302, raw, 'body'), {
    kind: 'deny', status: 302, body: 'body', headers: [['x-why', 'w'], ['www-authenticate', 'Basic'], ['location', '/login'], ['x-other', 'o']],
  });
  assert.deepEqual(httpAnswer(provider({ headersToDownstreamOnDeny: ['x-why'] }), 401, raw, '').kind === 'deny'
    && httpAnswer(provider({ headersToDownstreamOnDeny: ['x-why'] }), 401, raw, ''), {
    kind: 'deny', status: 401, body: '', headers: [['x-why', 'w'], ['www-authenticate', 'Basic'], ['location', '/login']],
  });
});

it('a 5xx is a failed check, not a refusal (failOpen and statusOnError decide)', () => {
  assert.deepEqual(httpAnswer(provider(), 503, [], 'down'), { kind: 'error', reason: 'the authorizer answered 503' });
  assert.equal(httpAnswer(provider(), 500, [], '').kind, 'error');
  assert.equal(httpAnswer(provider(), 499, [], '').kind, 'deny');
});
