import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { RequestAuthentication } from '../../../src/config/resources/types.js';
import { accept, acceptWarned, assertRejections, indent } from './helpers.js';

const head = `apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata:
  name: ingress-jwt
  namespace: mesh-system
`;
const ra = (spec: string): string => `${head}spec:\n${indent(spec)}\n`;
const rule = (r: string): string => ra(`jwtRules:\n- ${indent(r).trimStart()}`);
const JWKS = '{"keys":[{"kty":"RSA","e":"AQAB","n":"xyz","kid":"k1"}]}';

it('reads the RequestAuthentication of the spec (selector + issuer + jwksUri) with defaults', () => {
  const r = accept(`${head}spec:
  selector:
    matchLabels:
      mesh: ingressgateway
  jwtRules:
  - issuer: "testing@secure.mesh.io"
    jwksUri: "https://raw.example.com/security/tools/jwt/samples/jwks.json"
`).resource as RequestAuthentication;
  assert.deepEqual(r.selector, { mesh: 'ingressgateway' });
  assert.deepEqual(r.jwtRules, [{
    issuer: 'testing@secure.mesh.io',
    audiences: [],
    jwksUri: 'https://raw.example.com/security/tools/jwt/samples/jwks.json',
    fromHeaders: [],
    fromParams: [],
    fromCookies: [],
    forwardOriginalToken: false,
    outputClaimToHeaders: [],
  }]);
});

it('reads every jwtRule field; jwks inline; no selector means every workload in scope', () => {
  const r = accept(rule(`issuer: https://issuer.example.com
audiences: [api, web]
jwks: '${JWKS}'
fromHeaders:
- name: X-Jwt-Assertion
- name: Authorization
  prefix: "Bearer "
fromParams: [token]
fromCookies: [session]
outputPayloadToHeader: X-Jwt-Payload
forwardOriginalToken: true
outputClaimToHeaders:
- header: X-Sub
  claim: sub
- header: x-org
  claim: org.name`)).resource as RequestAuthentication;
  assert.equal(r.selector, undefined);
  const [j] = r.jwtRules;
  assert.deepEqual(j!.audiences, ['api', 'web']);
  assert.equal(j!.jwks, JWKS);
  assert.equal(j!.jwksUri, undefined);
  assert.deepEqual(j!.fromHeaders, [{ name: 'x-jwt-assertion', prefix: '' }, { name: 'authorization', prefix: 'Bearer ' }]);
  assert.deepEqual([j!.fromParams, j!.fromCookies], [['token'], ['session']]);
  assert.equal(j!.outputPayloadToHeader, 'x-jwt-payload');
  assert.equal(j!.forwardOriginalToken, true);
  assert.deepEqual(j!.outputClaimToHeaders, [{ header: 'x-sub', claim: ['sub'] }, { header: 'x-org', claim: ['org', 'name'] }]);
  const none = accept(ra(`selector: {matchLabels: {app: a}}`)).resource as RequestAuthentication;
  assert.deepEqual(none.jwtRules, []);
});

it('rejects invalid RequestAuthentications with the field path', () => {
  assertRejections([
    { name: 'issuer missing', yaml: rule(`jwksUri: https://a/jwks`), field: 'spec.jwtRules[0].issuer', message: /required/ },
    { name: 'issuer empty', yaml: rule(`issuer: ""\njwksUri: https://a/jwks`), field: 'spec.jwtRules[0].issuer', message: /must not be empty/ },
    { name: 'jwksUri not a URL', yaml: rule(`issuer: a\njwksUri: not a url`), field: 'spec.jwtRules[0].jwksUri', message: /is not a URL/ },
    { name: 'jwksUri not http(s)', yaml: rule(`issuer: a\njwksUri: file:///etc/jwks.json`), field: 'spec.jwtRules[0].jwksUri', message: /expected an http or https URL/ },
    { name: 'jwks not JSON', yaml: rule(`issuer: a\njwks: "{keys"`), field: 'spec.jwtRules[0].jwks', message: /not valid JSON/ },
    { name: 'jwks not a key set', yaml: rule(`issuer: a\njwks: '{"kty":"RSA"}'`), field: 'spec.jwtRules[0].jwks', message: /expected a JWK set/ },
    { name: 'jwks key without kty', yaml: rule(`issuer: a\njwks: '{"keys":[{"n":"x"}]}'`), field: 'spec.jwtRules[0].jwks', message: /keys\[0\] is not a JWK/ },
    { name: 'audiences wrong type', yaml: rule(`issuer: a\njwksUri: https://a/j\naudiences: api`), field: 'spec.jwtRules[0].audiences', message: /expected a list/ },
    { name: 'fromHeaders without a name', yaml: rule(`issuer: a\njwksUri: https://a/j\nfromHeaders: [{prefix: "Bearer "}]`), field: 'spec.jwtRules[0].fromHeaders[0].name', message: /required/ },
    { name: 'forwardOriginalToken as a string', yaml: rule(`issuer: a\njwksUri: https://a/j\nforwardOriginalToken: "yes"`), field: 'spec.jwtRules[0].forwardOriginalToken', message: /expected true or false/ },
    { name: 'selector without matchLabels', yaml: ra(`selector: {mesh: ingressgateway}`), field: 'spec.selector.mesh', message: /unknown field "mesh" in spec.selector; accepted: matchLabels/ },
    { name: 'misspelt jwksURI', yaml: rule(`issuer: a\njwksURI: https://a/j`), field: 'spec.jwtRules[0].jwksURI', message: /unknown field "jwksURI"/ },
    { name: 'targetRef', yaml: ra(`targetRef: {kind: Gateway, name: gw}`), field: 'spec.targetRef', message: /not supported by this agent/ },
  ]);
});

it('reads timeout, the key set fetch\'s time-out (Istio\'s bounds: at least 1ms, whole milliseconds; absent: the 5 s default)', () => {
  const read = (t: string): number | undefined => (accept(rule(`issuer: a\njwksUri: https://a/j${t}`)).resource as RequestAuthentication).jwtRules[0]!.timeoutMs;
  assert.equal(read('\ntimeout: 2s'), 2000);
  assert.equal(read('\ntimeout: 1.5s'), 1500);
  assert.equal(read('\ntimeout: 1ms'), 1);
  assert.equal(read(''), undefined);
  assertRejections([
    { name: 'zero', yaml: rule('issuer: a\njwksUri: https://a/j\ntimeout: 0s'), field: 'spec.jwtRules[0].timeout', message: /shorter than 1ms/ },
    { name: 'negative', yaml: rule('issuer: a\njwksUri: https://a/j\ntimeout: -1s'), field: 'spec.jwtRules[0].timeout', message: /is negative/ },
    { name: 'sub-millisecond', yaml: rule('issuer: a\njwksUri: https://a/j\ntimeout: 1500us'), field: 'spec.jwtRules[0].timeout', message: /not a whole number of milliseconds/ },
    { name: 'a number', yaml: rule('issuer: a\njwksUri: https://a/j\ntimeout: 5'), field: 'spec.jwtRules[0].timeout', message: /expected a duration/ },
  ]);
  const inline = acceptWarned(rule(`issuer: a\njwks: '${JWKS}'\ntimeout: 2s`));
  assert.deepEqual(inline.warnings, ['spec.jwtRules[0].timeout: has no effect with an inline jwks: nothing is fetched (as in Istio)']);
  assert.deepEqual(acceptWarned(rule('issuer: a\njwksUri: https://a/j\ntimeout: 2s')).warnings, []);
});

it('neither jwksUri nor jwks: keys by OpenID discovery under the issuer; an issuer that is no URL is warned about (its tokens are refused)', () => {
  const discovered = acceptWarned(rule('issuer: https://accounts.example.com'));
  assert.deepEqual(discovered.warnings, []);
  const r = (discovered.value.resource as RequestAuthentication).jwtRules[0]!;
  assert.deepEqual([r.jwksUri, r.jwks], [undefined, undefined]);
  const opaque = acceptWarned(rule('issuer: testing@secure.istio.io'));
  assert.deepEqual(opaque.warnings, ['spec.jwtRules[0].issuer: "testing@secure.istio.io" is not an http(s) URL, so with neither jwksUri nor jwks no keys can be discovered for it: its tokens are refused (401), as in Istio']);
});
