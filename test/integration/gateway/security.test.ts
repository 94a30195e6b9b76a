// The attacks of the security review at the ingress gateway: a gateway in a namespace of the test's
// own, routing everything to an app that logs what it parses; a raw client writes exact bytes.
// Keys and tokens are made here (jose); the mesh config trusts one proxy in front of the gateway.
import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { FIXTURES, httpGateway, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';
import { binPath } from '../../helpers/repo.js';
import { lastBody, rawConnections, statuses, type RawCase, type Received } from '../../helpers/raw-connections.js';

const ISSUER = 'https://issuer.test';

describe('the ingress gateway against the attacks of the security review', () => {
  let pod: GatewayPod;
  let app: ChildProcess;
  let appLog = '';
  let sign: (claims: Record<string, unknown>) => Promise<string>;

  const raw = (cases: RawCase[]): Received[] => rawConnections((command, args, input) => {
    const run = spawnSync('ip', ['netns', 'exec', pod.ns.name, command, ...args], { encoding: 'utf8', input });
    assert.equal(run.status, 0, run.stderr);
    return run.stdout;
  }, '127.0.0.1', 8080, cases);
  const requestsSeen = async (fn: () => void): Promise<{ method: string; url: string; headers: Record<string, string> }[]> => {
    const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 200));
    await settle();
    const before = appLog.length;
    fn();
    await settle();
    return appLog.slice(before).split('\n').filter((l) => l.startsWith('{"request"'))
      .map((l) => (JSON.parse(l) as { request: { method: string; url: string; headers: Record<string, string> } }).request);
  };
  const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: shop.example\r\n${extra}\r\n`;

  before(async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    sign = (claims) => new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer(ISSUER)
      .setSubject('user-1').setIssuedAt().setExpirationTime('10m').sign(privateKey);
    const resources = `${httpGateway('gw', 8080)}---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: all, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /ws}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9090}}}]
  - route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
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
  rules:
  - to: [{operation: {paths: ["/admin*"]}}]
  - from: [{source: {remoteIpBlocks: ["203.0.113.0/24"]}}]
`;
    pod = await startGatewayPod({
      resources: { 'all.yaml': resources },
      env: { MESH_REQUEST_HEADERS_TIMEOUT: '1s' },
      prepare: async (p) => {
        mkdirSync(join(p.dir, 'etc', 'mesh', 'config'), { recursive: true });
        writeFileSync(join(p.dir, 'etc', 'mesh', 'config', 'mesh'), 'defaultConfig:\n  gatewayTopology:\n    numTrustedProxies: 1\n');
        app = await p.start([join(FIXTURES, 'echo-app.mjs'), '127.0.0.1', '9080', 'app', 'log']);
        await p.start([join(FIXTURES, 'upgrade-echo.mjs'), '127.0.0.1', '9090']);
        app.stdout!.setEncoding('utf8').on('data', (d: string) => { appLog += d; });
      },
    });
  });
  after(() => pod?.close());

  it('1. Connection cannot take Content-Length or Host away; gzip, chunked is 501', async () => {
    const smuggled = get('/admin');
    const seen = await requestsSeen(() => {
      const r = raw([
        { data: `POST /public HTTP/1.1\r\nHost: shop.example\r\nConnection: close, Content-Length\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}` },
        { data: get('/public/host', 'Connection: host\r\n') },
        { data: 'POST /public HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n' },
      ]);
      assert.deepEqual(r.map(statuses), [[200], [200], [501]]);
    });
    assert.deepEqual(seen.map((q) => [q.method, q.url, q.headers['host']]), [['POST', '/public', 'shop.example'], ['GET', '/public/host', 'shop.example']]);
  });

  it('3. an Upgrade answered without 101 keeps the connection HTTP: the next request is judged', () => {
    const [r] = raw([{ data: get('/public/ws', 'Connection: Upgrade\r\nUpgrade: websocket\r\n') + get('/admin') + get('/public/next') }]);
    assert.deepEqual(statuses(r!), [200, 403, 200]);
  });

  it('4. absolute-form and path tricks are judged by the path the app gets; CONNECT is refused', async () => {
    const seen = await requestsSeen(() => {
      const r = raw([
        { data: 'GET http://shop.example/admin/x HTTP/1.1\r\nHost: shop.example\r\n\r\n' },
        { data: get('/public/../admin') },
        { data: get('/%61dmin') },
        { data: get('/public/%2e%2e/admin') },
        { data: get('/admin#x') },
        { data: 'CONNECT shop.example:443 HTTP/1.1\r\nHost: shop.example:443\r\n\r\n' },
        { data: 'GET http://shop.example/public/ok HTTP/1.1\r\nHost: other\r\n\r\n' },
      ]);
      assert.deepEqual(r.map(statuses), [[403], [403], [403], [403], [403], [405], [200]]);
    });
    assert.deepEqual(seen.map((q) => [q.url, q.headers['host']]), [['/public/ok', 'shop.example']]);
  });

  it('4. every Bearer token is verified: a forged one in a second line or after Basic is 401', async () => {
    const good = await sign({ name: 'n' });
    const forged = `${good.slice(0, -4)}AAAA`;
    const r = raw([
      { data: get('/public', `Authorization: Basic Zm9v, Bearer ${forged}\r\n`) },
      { data: get('/public', `Authorization: Bearer ${good}\r\nAuthorization: Bearer ${forged}\r\n`) },
      { data: get('/public', `Authorization: Bearer ${good}\r\n`) },
    ]);
    assert.deepEqual(r.map(statuses), [[401], [401], [200]]);
    assert.match(r[0]!.received, /www-authenticate: Bearer realm="shop\.example", error="invalid_token"/i);
  });

  it('6. headers only the mesh asserts are stripped; claims go out as UTF-8', async () => {
    const token = await sign({ name: 'José Ωmega' });
    const [forged, real] = raw([
      { data: get('/headers', 'X-Forwarded-Client-Cert: By=spiffe://evil;URI=spiffe://admin\r\nx-envoy-internal: true\r\nx-name: admin\r\n') },
      { data: get('/headers', `Authorization: Bearer ${token}\r\nx-name: admin\r\n`) },
    ]);
    // The app answers JSON in UTF-8; the client's text is latin1.
    const headers = (r: Received): Record<string, string> => (JSON.parse(Buffer.from(lastBody(r), 'latin1').toString('utf8')) as { headers: Record<string, string> }).headers;
    const f = headers(forged!);
    assert.equal(f['x-forwarded-client-cert'], undefined);
    assert.equal(f['x-envoy-internal'], undefined);
    assert.equal(f['x-name'], undefined);
    // node:http reads header bytes as latin1: the UTF-8 bytes come back as their latin1 characters.
    assert.equal(Buffer.from(headers(real!)['x-name']!, 'latin1').toString('utf8'), 'José Ωmega');
  });

  it('6. the client address policies see follows numTrustedProxies (1 here): the entry the trusted proxy wrote', () => {
    const r = raw([
      { data: get('/public', 'X-Forwarded-For: 203.0.113.7\r\n') },
      { data: get('/public', 'X-Forwarded-For: 203.0.113.7, 198.51.100.1\r\n') },
      { data: get('/public', 'X-Forwarded-For: 198.51.100.1, 203.0.113.9\r\n') },
      { data: get('/public') },
    ]);
    assert.deepEqual(r.map(statuses), [[403], [200], [403], [200]]);
  });

  it('a WebSocket upgrade is a request like any other: judged, then counted and logged with its 101', async () => {
    const [denied, ws] = raw([
      { data: get('/admin/ws', 'Connection: Upgrade\r\nUpgrade: websocket\r\n') },
      { data: `${get('/ws/chat', 'Connection: Upgrade\r\nUpgrade: websocket\r\n')}hello through` },
    ]);
    assert.deepEqual(statuses(denied!), [403], 'judged before any switch');
    assert.match(ws!.received, /^HTTP\/1\.1 101 Switching Protocols\r\n[^]*\r\n\r\nhello through$/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const run = spawnSync('ip', ['netns', 'exec', pod.ns.name, process.execPath, binPath, 'request', 'GET', '/debug/decisions'], { encoding: 'utf8' });
    const decisions = (JSON.parse(run.stdout) as { decisions: { path: string; status?: number; upstream?: string }[] }).decisions;
    assert.ok(decisions.some((d) => d.path === '/ws/chat' && d.status === 101 && d.upstream === '127.0.0.1:9090'), run.stdout);
    assert.match(pod.output(), /"GET \/ws\/chat HTTP\/1\.1" 101 - via_upstream /, 'the access log line');
  });

  it('7. a Host the grammar refuses is 400; half a head is closed at the head time-out', () => {
    const r = raw([{ data: 'GET /public HTTP/1.1\r\nHost: a"b\r\n\r\n' }, { data: 'GET /public HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n' }]);
    assert.deepEqual(r.map(statuses), [[400], [400]]);
    const started = Date.now();
    const [slow] = raw([{ data: 'GET /public HTTP/1.1\r\nHost: shop.exa', quietMs: 4000 }]);
    assert.deepEqual(statuses(slow!), [408]);
    assert.equal(slow!.closed, true);
    assert.ok(Date.now() - started < 3500, 'closed at the 1 s head time-out, not by the client');
  });
});
