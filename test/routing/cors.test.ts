// corsPolicy against requests, as Envoy's CORS filter answers them.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { CorsPolicy } from '../../src/config/resources/types.js';
import { compileFullMatch } from '../../src/config/resources/string-match.js';
import { applyCors, type CorsRequest } from '../../src/routing/cors.js';

const policy: CorsPolicy = {
  allowOrigins: [{ kind: 'exact', value: 'https://a.com' }, { kind: 'prefix', value: 'https://b.' }, { kind: 'regex', value: 'https://[a-z]+\\.c\\.com', regex: compileFullMatch('https://[a-z]+\\.c\\.com') }],
  allowMethods: 'GET,POST', allowHeaders: 'x-a', exposeHeaders: 'x-e', maxAge: '60', allowCredentials: true, unmatchedPreflights: 'FORWARD',
};
const req = (over: Partial<CorsRequest>): CorsRequest => ({ method: 'GET', origin: undefined, requestMethod: undefined, requestHeaders: undefined, ...over });
const preflight = (origin: string, extra: Partial<CorsRequest> = {}): CorsRequest => req({ method: 'OPTIONS', origin, requestMethod: 'POST', ...extra });

it('leaves a request without Origin alone (not CORS), preflight-looking or not', () => {
  assert.equal(applyCors(policy, req({})), undefined);
  assert.equal(applyCors(policy, req({ method: 'OPTIONS', requestMethod: 'POST' })), undefined);
  assert.equal(applyCors(policy, req({ origin: '' })), undefined);
});

it('answers a preflight from an allowed origin (exact, prefix, regex) with 200 and the policy', () => {
  for (const origin of ['https://a.com', 'https://b.example', 'https://x.c.com']) {
    assert.deepEqual(applyCors(policy, preflight(origin)), { kind: 'preflight', headers: {
      'access-control-allow-origin': origin, 'access-control-allow-credentials': 'true', 'access-control-allow-methods': 'GET,POST',
      'access-control-allow-headers': 'x-a', 'access-control-max-age': '60',
    } }, origin);
  }
});

it('forwards a preflight from another origin by default; answers it without CORS headers with IGNORE', () => {
  assert.equal(applyCors(policy, preflight('https://evil.com')), undefined);
  assert.equal(applyCors(policy, preflight('https://A.com')), undefined, 'origins are compared case-sensitively');
  assert.equal(applyCors(policy, preflight('https://x.c.com.evil')), undefined, 'a regex matches whole origins');
  const ignored = applyCors({ ...policy, unmatchedPreflights: 'IGNORE' }, preflight('https://evil.com'));
  assert.deepEqual(ignored, { kind: 'preflight', headers: {
    'access-control-allow-credentials': 'true', 'access-control-allow-methods': 'GET,POST', 'access-control-allow-headers': 'x-a', 'access-control-max-age': '60',
  } });
  assert.equal(ignored?.kind === 'preflight' && ignored.headers['access-control-allow-origin'], undefined, 'no Allow-Origin for an origin not allowed');
});

it('adds the response headers to an actual request from an allowed origin only', () => {
  assert.deepEqual(applyCors(policy, req({ method: 'POST', origin: 'https://a.com' })), { kind: 'response', headers: [
    ['access-control-allow-origin', 'https://a.com'], ['access-control-allow-credentials', 'true'], ['access-control-expose-headers', 'x-e'],
  ] });
  assert.equal(applyCors(policy, req({ method: 'POST', origin: 'https://evil.com' })), undefined);
  // OPTIONS without Access-Control-Request-Method is no preflight: an actual request.
  assert.equal(applyCors(policy, req({ method: 'OPTIONS', origin: 'https://a.com' }))?.kind, 'response');
  assert.deepEqual(applyCors({ allowOrigins: [{ kind: 'exact', value: 'https://a.com' }], unmatchedPreflights: 'FORWARD' }, req({ origin: 'https://a.com' })),
    { kind: 'response', headers: [['access-control-allow-origin', 'https://a.com']] }, 'only what the policy sets');
});

it('treats a `*` origin entry as any origin, and `*` methods / headers as an echo of the preflight', () => {
  const star: CorsPolicy = { allowOrigins: [{ kind: 'exact', value: '*' }], allowMethods: '*', allowHeaders: '*', unmatchedPreflights: 'FORWARD' };
  assert.deepEqual(applyCors(star, preflight('https://any.org', { requestMethod: 'PATCH', requestHeaders: 'x-y, x-z' })), { kind: 'preflight', headers: {
    'access-control-allow-origin': 'https://any.org', 'access-control-allow-methods': 'PATCH', 'access-control-allow-headers': 'x-y, x-z',
  } });
  const none: CorsPolicy = { allowOrigins: [], unmatchedPreflights: 'FORWARD' };
  assert.equal(applyCors(none, preflight('https://a.com')), undefined, 'no origin allowed: every preflight is forwarded');
  assert.equal(applyCors(none, req({ origin: 'https://a.com' })), undefined);
});
