// A route's actions at the ingress gateway, a real `proxy router` in a namespace with an echo app
// that answers the request headers it got (/headers): fault injection after the policy, response
// header edits, header edits that cannot touch what the proxy asserts (a JWT claim header, XFCC),
// a regex rewrite (the policy judged the path as sent), a redirect to the listener's own port.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { httpGateway, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { waitFor } from '../../helpers/wait-for.js';

const ISSUER = 'https://issuer.test';
const URL = 'http://127.0.0.1:8080';

describe('route actions at the gateway', { skip: netnsSkip }, () => {
  let pod: GatewayPod;
  let token: string;
  const headersSeen = (body: string): Record<string, string> => (JSON.parse(body) as { headers: Record<string, string> }).headers;

  before(async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    token = await new SignJWT({ name: 'alice' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer(ISSUER)
      .setSubject('user-1').setIssuedAt().setExpirationTime('10m').sign(privateKey);
    const resources = `${httpGateway('gw', 8080)}---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: all, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /abort}}]
    fault: {abort: {httpStatus: 418, percentage: {value: 100}}}
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
  - match: [{uri: {prefix: /rw/}}]
    rewrite: {uriRegexRewrite: {match: "^/rw/(.*)$", rewrite: "/headers/\\\\1"}}
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
  - match: [{uri: {prefix: /moved}}]
    redirect: {scheme: https, derivePort: FROM_REQUEST_PORT, redirectCode: 302}
  - match: [{uri: {prefix: /headers}}]
    headers:
      request: {set: {x-name: route-set}, add: {x-extra: route}}
      response: {set: {x-resp: route}, remove: [content-type]}
    route:
    - destination: {host: 127.0.0.1, port: {number: 9080}}
      headers: {request: {add: {x-name: dest-add}}}
---
apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  jwtRules:
  - issuer: ${ISSUER}
    jwks: '${JSON.stringify({ keys: [jwk] })}'
    outputClaimToHeaders: [{header: x-name, claim: name}]
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: mesh-system}
spec:
  action: DENY
  rules: [{to: [{operation: {paths: ["/rw/admin*", "/abort/admin*"]}}]}]
`;
    pod = await startGatewayPod({ resources: { 'all.yaml': resources }, apps: { 9080: 'app' } });
  });
  after(() => pod?.close());

  it('a fault abort answers 418 FI after the policy: a request the policy denies is denied, not aborted', async () => {
    const [aborted, denied] = pod.send([{ url: `${URL}/abort/x` }, { url: `${URL}/abort/admin` }]);
    assert.equal(aborted!.status, 418);
    assert.equal(aborted!.body, 'fault filter abort');
    assert.equal(denied!.status, 403);
    await waitFor('the FI line', () => pod.output().split('\n').find((l) => /"GET \/abort\/x HTTP\/1\.1" 418 FI fault_filter_abort /.test(l)));
  });

  it('a claim header is the proxy\'s word: route edits of it are not applied, with or without a token; a client\'s XFCC is stripped', () => {
    const [withToken, without, forged] = pod.send([
      { url: `${URL}/headers`, headers: { authorization: `Bearer ${token}` } },
      { url: `${URL}/headers` },
      { url: `${URL}/headers`, headers: { 'x-name': 'client', 'x-forwarded-client-cert': 'By=spiffe://forged' } },
    ]);
    assert.equal(withToken!.status, 200, withToken!.body);
    assert.equal(headersSeen(withToken!.body)['x-name'], 'alice');
    assert.equal(headersSeen(withToken!.body)['x-extra'], 'route', 'other route edits apply');
    assert.equal(headersSeen(without!.body)['x-name'], undefined);
    assert.equal(headersSeen(forged!.body)['x-name'], undefined);
    assert.equal(headersSeen(forged!.body)['x-forwarded-client-cert'], undefined);
    // The response edits: set, and the app's content-type removed.
    assert.equal(withToken!.headers['x-resp'], 'route');
    assert.equal(withToken!.headers['content-type'], undefined);
  });

  it('a regex rewrite: the policy judges the path as sent, the app gets the rewritten one', () => {
    const [rewritten, denied] = pod.send([{ url: `${URL}/rw/a/b?q=1` }, { url: `${URL}/rw/admin/x` }]);
    assert.equal(rewritten!.status, 200, rewritten!.body);
    assert.equal((JSON.parse(rewritten!.body) as { url: string }).url, '/headers/a/b?q=1');
    assert.equal(denied!.status, 403, 'judged as /rw/admin/x, not /headers/admin/x');
  });

  it('a redirect with derivePort FROM_REQUEST_PORT: the listener\'s port', () => {
    const [moved] = pod.send([{ url: `${URL}/moved?x=1`, headers: { host: 'shop.example' } }]);
    assert.equal(moved!.status, 302);
    assert.equal(moved!.headers['location'], 'https://shop.example:8080/moved?x=1');
  });
});
