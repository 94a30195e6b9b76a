// `pilot-agent proxy router` as a real process in a network namespace of the test's own: the
// spec's routing table (section 7) with Istio's sample JWKS and tokens, served by a real JWKS
// server; policies added and removed while it runs; a broken file beside good ones.
import assert from 'node:assert/strict';
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { httpGateway, istioToken as token, serveIstioJwks, startGatewayPod, type Answer, type GatewayPod } from '../../helpers/gateway.js';

const GATEWAY_PORT = 8080;
const APP_PORT = 9080;
const JWKS_PORT = 9999;
/** Accepts connections and never answers. */
const SILENT_JWKS_PORT = 9998;

const GATEWAY = httpGateway('ingressgateway', GATEWAY_PORT);

const ROUTES = `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: httpbin, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [ingressgateway]
  http:
  - match:
    - uri: {prefix: /headers}
      headers:
        "@request.auth.claims.groups": {exact: group1}
    route:
    - destination: {host: 127.0.0.1, port: {number: ${APP_PORT}}}
`;

const AUTHN = `apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  jwtRules:
  - issuer: testing@secure.istio.io
    jwksUri: http://127.0.0.1:${JWKS_PORT}/jwks.json
`;

const REQUIRE_JWT = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules:
  - from:
    - source: {notRequestPrincipals: ["*"]}
`;

describe('pilot-agent proxy router (process, Istio sample tokens)', () => {
  let pod: GatewayPod;
  const output = (): string => pod.output();

  const get = (path: string, jwt?: string): Answer =>
    pod.send([{ url: `http://127.0.0.1:${GATEWAY_PORT}${path}`, ...(jwt ? { headers: { authorization: `Bearer ${jwt}` } } : {}) }])[0]!;
  /** Waits (at most 5 s) until a request gets `status`: configuration changes apply after the debounce. */
  const eventually = async (path: string, status: number, jwt?: string): Promise<Answer> => {
    let last = get(path, jwt);
    for (let i = 0; i < 50 && last.status !== status; i++) {
      await new Promise((r) => setTimeout(r, 100));
      last = get(path, jwt);
    }
    assert.equal(last.status, status, `${path}: ${JSON.stringify(last)}\n${output()}`);
    return last;
  };

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'gateway.yaml': GATEWAY, 'routes.yaml': ROUTES, 'authn.yaml': AUTHN },
      apps: { [APP_PORT]: 'httpbin' },
      env: { FILE_DEBOUNCE_DURATION: '50ms' },
      prepare: async (p) => { await serveIstioJwks(p, JWKS_PORT); },
    });
  });
  after(() => pod?.close());

  it('no JWT: 404 (no route matches)', () => {
    assert.equal(get('/headers').status, 404, output());
  });

  it('a token that does not verify: 401', () => {
    const good = token('groups-scope.jwt');
    const tampered = `${good.slice(0, good.lastIndexOf('.') + 1)}${good.slice(good.lastIndexOf('.') + 1).split('').reverse().join('')}`;
    assert.equal(get('/headers', tampered).status, 401);
    assert.equal(get('/headers', 'not-a-jwt').status, 401);
  });

  it('groups-scope.jwt (groups contains group1): 200, routed, the token not forwarded', () => {
    const answer = get('/headers?x=1', token('groups-scope.jwt'));
    assert.equal(answer.status, 200, answer.body);
    const seen = JSON.parse(answer.body) as { app: string; url: string; headers: Record<string, string> };
    assert.equal(seen.app, 'httpbin');
    assert.equal(seen.url, '/headers?x=1');
    assert.equal(seen.headers['authorization'], undefined, 'the token is not forwarded without forwardOriginalToken');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');
  });

  it('demo.jwt (no groups claim): 404', () => {
    assert.equal(get('/headers', token('demo.jwt')).status, 404);
  });

  it('a path outside the rule: 404 even with the right token', () => {
    assert.equal(get('/ip', token('groups-scope.jwt')).status, 404);
  });

  it('/debug/decisions and /stats say why', async () => {
    get('/headers', token('demo.jwt'));
    const decisions = await pod.ns.runCli(['request', 'GET', '/debug/decisions?limit=1']);
    assert.equal(decisions.code, 0, decisions.stderr);
    const [last] = (JSON.parse(decisions.stdout) as { decisions: { jwt: string; principal: string; route: string; status: number }[] }).decisions;
    assert.equal(last?.status, 404);
    assert.equal(last?.jwt, 'valid');
    assert.equal(last?.principal, 'testing@secure.istio.io/testing@secure.istio.io');
    assert.match(last?.route ?? '', /no/);
    const stats = await pod.ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, /^http\.gateway\.decisions\.jwt\.invalid: [1-9]/m);
    assert.match(stats.stdout, /^http\.gateway\.decisions\.route\.routed: [1-9]/m);
    // Istio's default line, then this agent's decision fields (a decision was taken).
    assert.match(output(), /"GET \/headers HTTP\/1\.1" 404 NR route_not_found .* jwt="valid" principal="testing@secure\.istio\.io\/testing@secure\.istio\.io" authz="allowed: no policies" route="no route/,
      'the access log line carries the decision');
  });

  it('a DENY policy for requests without a principal, added then removed while running: 403, then 404 again', async () => {
    writeFileSync(join(pod.resources, 'require-jwt.yaml'), REQUIRE_JWT);
    await eventually('/headers', 403);
    assert.equal(get('/headers', token('groups-scope.jwt')).status, 200, 'a valid token still passes');
    unlinkSync(join(pod.resources, 'require-jwt.yaml'));
    await eventually('/headers', 404);
  });

  it('a jwtRules timeout bounds the key set fetch: a JWKS server that never answers is given up after it', async () => {
    await pod.start(['-e', `require('net').createServer(() => {}).listen(${SILENT_JWKS_PORT}, '127.0.0.1', () => console.log('listening'))`]);
    writeFileSync(join(pod.resources, 'slow-authn.yaml'), AUTHN.replace('name: jwt', 'name: slow-jwks').replace('testing@secure.istio.io', 'slow@example.com')
      .replace(`${JWKS_PORT}/jwks.json`, `${SILENT_JWKS_PORT}/jwks`) + '    timeout: 300ms\n');
    const failed = new RegExp(`JWKS fetch from http://127\\.0\\.0\\.1:${SILENT_JWKS_PORT}/jwks failed: no answer within 300 ms`);
    for (let i = 0; i < 30 && !failed.test(output()); i++) await new Promise((r) => setTimeout(r, 100)); // not the 5 s default
    assert.match(output(), failed);
    unlinkSync(join(pod.resources, 'slow-authn.yaml'));
  });

  it('a broken file beside good ones: rejected with a line naming it, the rest stays in force', async () => {
    writeFileSync(join(pod.resources, 'broken.yaml'), `${ROUTES.replace('name: httpbin', 'name: broken').replace('prefix: /headers', 'regex: "a("')}`);
    writeFileSync(join(pod.resources, 'typo.yaml'), 'kind: [unclosed\n');
    for (let i = 0; i < 50 && !/broken\.yaml/.test(output()); i++) await new Promise((r) => setTimeout(r, 100));
    assert.match(output(), /broken\.yaml.*VirtualService.*broken.*regex/);
    assert.equal(get('/headers', token('groups-scope.jwt')).status, 200);
    const stats = await pod.ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, /^config\.rejects\.VirtualService: [1-9]/m);
  });
});
