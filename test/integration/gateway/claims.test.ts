// The gateway with keys and tokens this test makes (jose): routing on nested claims in both
// spellings, a dotted claim name, string and list claims; every kind of unverifiable token (401);
// a key rotation on the JWKS server (unknown kid → refetch); the JWKS server redirecting to another
// key set (not followed); the JWKS server going down (cached keys keep working). The JWKS server is a
// process in the test's namespace serving a file it rewrites (`302 <location>` makes it redirect).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SignJWT, exportJWK, generateKeyPair, type JWTPayload } from 'jose';
import { httpGateway, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'shop';

const RESOURCES = `${httpGateway('gw', 8080)}---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: claims, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - name: nested-dots
    match: [{uri: {prefix: /dots}, headers: {"@request.auth.claims.org.team": {exact: core}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
  - name: nested-brackets
    match: [{uri: {prefix: /brackets}, headers: {"@request.auth.claims[org][team]": {exact: core}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
  - name: dotted-name
    match: [{uri: {prefix: /dotted}, headers: {"@request.auth.claims[mesh.io/tier]": {exact: gold}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
  - name: list
    match: [{uri: {prefix: /list}, headers: {"@request.auth.claims.roles": {exact: admin}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
  - name: string-prefix
    match: [{uri: {prefix: /string}, headers: {"@REQUEST.AUTH.CLAIMS.sub": {prefix: "user-"}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
---
apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  jwtRules:
  - issuer: ${ISSUER}
    audiences: [${AUDIENCE}]
    jwksUri: http://127.0.0.1:9999/jwks.json
`;

interface Key {
  readonly kid: string;
  readonly privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
  readonly jwk: Record<string, unknown>;
}

async function makeKey(kid: string): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

const now = (): number => Math.floor(Date.now() / 1000);

function sign(key: Key, claims: JWTPayload, o: { issuer?: string; audience?: string; exp?: number; nbf?: number } = {}): Promise<string> {
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: key.kid })
    .setIssuer(o.issuer ?? ISSUER).setAudience(o.audience ?? AUDIENCE).setSubject(String(claims.sub ?? 'user-1'))
    .setIssuedAt().setExpirationTime(o.exp ?? now() + 600);
  if (o.nbf !== undefined) jwt.setNotBefore(o.nbf);
  return jwt.sign(key.privateKey);
}

/** An unsigned token (`alg: none`) with the right issuer and audience. */
function unsigned(claims: JWTPayload): string {
  const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ iss: ISSUER, aud: AUDIENCE, sub: 'user-1', exp: now() + 600, ...claims })}.`;
}

describe('pilot-agent proxy router: claims of tokens made here, keys rotated', () => {
  let pod: GatewayPod;
  let jwksFile: string;
  let foreignFile: string;
  let jwksServer: ChildProcess;
  let first: Key;
  let second: Key;

  const status = (path: string, token?: string): number =>
    pod.send([{ url: `http://127.0.0.1:8080${path}`, headers: token ? { authorization: `Bearer ${token}` } : {} }])[0]!.status;

  before(async () => {
    first = await makeKey('first');
    pod = await startGatewayPod({
      resources: { 'claims.yaml': RESOURCES },
      apps: { 9080: 'app' },
      prepare: async (p) => {
        jwksFile = join(p.dir, 'jwks.json');
        writeFileSync(jwksFile, JSON.stringify({ keys: [first.jwk] }));
        foreignFile = join(p.dir, 'foreign.json');
        jwksServer = await p.start(['-e', `const fs = require('fs'); require('http').createServer((q, r) => {`
          + ` const body = fs.readFileSync(q.url === '/foreign.json' ? ${JSON.stringify(foreignFile)} : ${JSON.stringify(jwksFile)}, 'utf8');`
          + ` if (body.startsWith('302 ')) r.writeHead(302, { location: body.slice(4) }).end(); else r.end(body); })`
          + `.listen(9999, '127.0.0.1', () => console.log('listening'))`]);
      },
    });
  });
  after(() => pod?.close());

  it('nested claims match in both spellings; another value does not', async () => {
    const core = await sign(first, { org: { team: 'core' } });
    const other = await sign(first, { org: { team: 'edge' } });
    assert.equal(status('/dots', core), 200, pod.output());
    assert.equal(status('/brackets', core), 200);
    assert.equal(status('/dots', other), 404);
    assert.equal(status('/brackets', other), 404);
  });

  it('a claim name with a dot, in brackets; a list claim containing the value; a string claim by prefix', async () => {
    assert.equal(status('/dotted', await sign(first, { 'mesh.io/tier': 'gold' })), 200);
    assert.equal(status('/dotted', await sign(first, { mesh: { io: 'gold' } })), 404, 'brackets name one claim, not a path');
    assert.equal(status('/list', await sign(first, { roles: ['reader', 'admin'] })), 200);
    assert.equal(status('/list', await sign(first, { roles: ['reader'] })), 404);
    assert.equal(status('/string', await sign(first, { sub: 'user-7' })), 200);
    assert.equal(status('/string', await sign(first, { sub: 'robot-7' })), 404);
  });

  it('tokens that do not verify are 401: expired, not yet valid, wrong issuer, wrong audience, alg none, malformed, another key', async () => {
    const claims = { org: { team: 'core' } };
    const stranger = await makeKey('first'); // same kid, another key: the signature fails
    const cases: [string, string][] = [
      ['expired', await sign(first, claims, { exp: now() - 30 })],
      ['not yet valid', await sign(first, claims, { nbf: now() + 300 })],
      ['wrong issuer', await sign(first, claims, { issuer: 'https://elsewhere.test' })],
      ['wrong audience', await sign(first, claims, { audience: 'billing' })],
      ['alg none', unsigned(claims)],
      ['malformed', 'abc.def'],
      ['another key', await sign(stranger, claims)],
    ];
    for (const [name, token] of cases) assert.equal(status('/dots', token), 401, name);
  });

  it('a key rotated on the JWKS server: a token with the new kid verifies (the keys are refetched)', async () => {
    second = await makeKey('second');
    writeFileSync(jwksFile, JSON.stringify({ keys: [second.jwk] }));
    assert.equal(status('/dots', await sign(second, { org: { team: 'core' } })), 200, pod.output());
  });

  it('the JWKS server redirecting to another key set: not followed, its token is 401, the keys held keep working', async () => {
    const foreign = await makeKey('foreign');
    writeFileSync(foreignFile, JSON.stringify({ keys: [foreign.jwk] }));
    writeFileSync(jwksFile, '302 http://127.0.0.1:9999/foreign.json');
    const token = await sign(foreign, { org: { team: 'core' } });
    // Its unknown kid makes the gateway refetch (at most once a second): until the refusal is logged.
    for (const deadline = Date.now() + 5000; !pod.output().includes('redirected (HTTP 302)');) {
      assert.equal(status('/dots', token), 401);
      assert.ok(Date.now() < deadline, pod.output());
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(status('/dots', token), 401);
    assert.equal(status('/dots', await sign(second, { org: { team: 'core' } })), 200);
    assert.match(pod.output(), /JWKS fetch from http:\/\/127\.0\.0\.1:9999\/jwks\.json failed: .* redirected \(HTTP 302\) to http:\/\/127\.0\.0\.1:9999\/foreign\.json; redirects are not followed/);
  });

  it('the JWKS server down: keys already fetched keep working; a kid it can no longer give is 401', async () => {
    jwksServer.kill('SIGKILL');
    await new Promise((r) => jwksServer.once('exit', r));
    assert.equal(status('/dots', await sign(second, { org: { team: 'core' } })), 200, pod.output());
    assert.equal(status('/dots', await sign(await makeKey('third'), { org: { team: 'core' } })), 401);
  });
});
