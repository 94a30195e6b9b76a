// External authorization with the request body (`includeRequestBodyInCheck`) at the ingress
// gateway, end to end with the real authorizers of test/fixtures/ext-authz-servers.mjs (they refuse
// a body holding `deny-me`) and an echo app that logs the bodies it receives. The body is held
// until it is whole or over `maxRequestBytes`; the authorizer gets it (HTTP: as the check's body;
// gRPC: `raw_body` with packAsBytes); the app gets exactly the bytes judged, whatever the client's
// framing; a longer body is 413 (or its first bytes judged, with allowPartialMessage); a client
// that stalls mid-body is answered 408 once the provider's timeout passes.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIXTURES, httpGateway, startGatewayPod, virtualService, type Answer, type GatewayPod } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait-for.js';

const HTTP_PORT = 9191;
const GRPC_PORT = 9292;

const resources = (provider: string): Record<string, string> => ({
  'gateway.yaml': `${httpGateway('gw', 8080)}---\n${virtualService('all', 'gw', `  - route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
`)}`,
  'policy.yaml': `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: mesh-system}
spec:
  action: CUSTOM
  provider: {name: ${provider}}
  rules: [{to: [{operation: {notPaths: ["/public*"]}}]}]
`,
});

interface Pod {
  readonly pod: GatewayPod;
  /** The authorizer's check lines and the app's request lines so far. */
  readonly checks: () => Record<string, any>[];
  readonly received: () => { url: string; headers: Record<string, string>; body: string }[];
}

async function gatewayWith(provider: string, name: string): Promise<Pod> {
  let authzLog = '';
  let appLog = '';
  // Whole lines only: a long line (a 200 KiB body) may be read while its writer is still halfway through it.
  const lines = (text: string): Record<string, any>[] => text.slice(0, text.lastIndexOf('\n') + 1).split('\n')
    .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>);
  const pod = await startGatewayPod({
    resources: resources(name),
    prepare: async (p) => {
      mkdirSync(join(p.dir, 'etc', 'mesh', 'config'), { recursive: true });
      writeFileSync(join(p.dir, 'etc', 'mesh', 'config', 'mesh'), `extensionProviders:\n${provider}`);
      const authz = await p.start([join(FIXTURES, 'ext-authz-servers.mjs'), '127.0.0.1', String(HTTP_PORT), String(GRPC_PORT)]);
      authz.stdout!.setEncoding('utf8').on('data', (d: string) => { authzLog += d; });
      const app = await p.start([join(FIXTURES, 'echo-app.mjs'), '127.0.0.1', '9080', 'app', 'log']);
      app.stdout!.setEncoding('utf8').on('data', (d: string) => { appLog += d; });
    },
  });
  return {
    pod,
    checks: () => lines(authzLog).filter((l) => l['kind'] === 'http' || l['kind'] === 'grpc'),
    received: () => lines(appLog).filter((l) => l['request'] !== undefined).map((l) => l['request']),
  };
}

const post = (p: Pod, path: string, body: string, headers: Record<string, string> = {}): Answer =>
  p.pod.send([{ url: `http://127.0.0.1:8080${path}`, method: 'POST', headers: { host: 'shop.example', ...headers }, body }])[0]!;

/** What the app logged for `path` (waited for: its log is read by this process's event loop). */
const receivedAt = (p: Pod, path: string) => waitFor(`the app's request ${path}`, () => p.received().find((r) => r.url === path));
const checkOf = (p: Pod, path: string) => waitFor(`the check of ${path}`, () => p.checks().find((c) => JSON.stringify(c).includes(path)));

/**
 * A raw client inside the namespace: sends `head`, then (after a 100 Continue when `waitContinue`)
 * `body`, and prints all it read within `waitMs` (the connection is left open: a stalled client).
 */
async function raw(p: Pod, head: string, body: string, waitContinue: boolean, waitMs: number): Promise<string> {
  const script = `const s = require('net').connect(8080, '127.0.0.1'); let got = '';
    s.on('data', (d) => { got += d; if (${waitContinue} && got.includes('100 Continue') && !s.sent) { s.sent = true; s.write(${JSON.stringify(body)}); } });
    s.on('connect', () => { s.write(${JSON.stringify(head)}); if (!${waitContinue}) s.write(${JSON.stringify(body)}); });
    s.on('close', () => { process.stdout.write(got); process.exit(0); });
    setTimeout(() => { process.stdout.write(got); process.exit(0); }, ${waitMs});`;
  const r = await p.pod.exec(process.execPath, ['-e', script], waitMs + 5000);
  return r.stdout;
}

describe('an HTTP authorizer is sent the request body (includeRequestBodyInCheck)', () => {
  let p: Pod;
  before(async () => {
    p = await gatewayWith(`  - name: authz-http
    envoyExtAuthzHttp:
      service: 127.0.0.1
      port: ${HTTP_PORT}
      timeout: 1s
      includeRequestBodyInCheck: {maxRequestBytes: 16}
`, 'authz-http');
  });
  after(() => p?.pod.close());

  it('a body within the limit goes to the authorizer as its check\'s body, then whole to the app', async () => {
    const r = post(p, '/length', 'hello body');
    assert.equal(r.status, 200, r.body);
    const check = await checkOf(p, '/length');
    assert.equal(check['body'], 'hello body');
    assert.equal(check['headers']['content-length'], '10');
    assert.equal(check['headers']['x-envoy-auth-partial-body'], 'false');
    assert.equal((await receivedAt(p, '/length')).body, 'hello body');
  });

  it('a chunked body is judged whole and reaches the app as judged', async () => {
    const r = post(p, '/chunked', 'chunked payload', { 'transfer-encoding': 'chunked' });
    assert.equal(r.status, 200, r.body);
    assert.equal((await checkOf(p, '/chunked'))['body'], 'chunked payload');
    const got = await receivedAt(p, '/chunked');
    assert.equal(got.body, 'chunked payload');
    assert.equal(got.headers['transfer-encoding'], 'chunked');
  });

  it('the authorizer refuses by the body: nothing reaches the app', async () => {
    const r = post(p, '/by-body', 'deny-me please');
    assert.equal(r.status, 401);
    await checkOf(p, '/by-body');
    assert.equal(p.received().find((x) => x.url === '/by-body'), undefined);
  });

  it('a body over maxRequestBytes is 413, declared or chunked, and the authorizer is not asked', () => {
    assert.equal(post(p, '/too-long', 'x'.repeat(17)).status, 413);
    assert.equal(post(p, '/too-long-chunked', 'y'.repeat(40), { 'transfer-encoding': 'chunked' }).status, 413);
    assert.equal(p.checks().find((c) => JSON.stringify(c).includes('/too-long')), undefined);
    assert.equal(p.received().find((x) => x.url.startsWith('/too-long')), undefined);
  });

  it('a client waiting for 100 Continue is told it, and its body judged', async () => {
    const out = await raw(p, 'POST /expect HTTP/1.1\r\nhost: shop.example\r\ncontent-length: 5\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n', 'hello', true, 3000);
    assert.match(out, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    assert.equal((await checkOf(p, '/expect'))['body'], 'hello');
    assert.equal((await receivedAt(p, '/expect')).body, 'hello');
    // Declared over the limit: 413 at once, the client never told to send its body.
    const over = await raw(p, 'POST /expect-long HTTP/1.1\r\nhost: shop.example\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n', 'x'.repeat(100), true, 2000);
    assert.match(over, /^HTTP\/1\.1 413 /);
  });

  it('a client that stalls mid-body is answered 408 once the provider\'s timeout passes; nothing is forwarded', async () => {
    const started = Date.now();
    const out = await raw(p, 'POST /stall HTTP/1.1\r\nhost: shop.example\r\ncontent-length: 12\r\n\r\n', 'only', false, 4000);
    assert.match(out, /^HTTP\/1\.1 408 /);
    assert.ok(Date.now() - started >= 1000);
    assert.equal(p.checks().find((c) => JSON.stringify(c).includes('/stall')), undefined);
    assert.equal(p.received().find((x) => x.url === '/stall'), undefined);
  });

  it('pipelined requests: each body is judged and forwarded with its own request', async () => {
    const out = await raw(p, 'POST /pipe-1 HTTP/1.1\r\nhost: shop.example\r\ncontent-length: 5\r\n\r\nfirst'
      + 'POST /pipe-2 HTTP/1.1\r\nhost: shop.example\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n7\r\ndeny-me\r\n0\r\n\r\n', '', false, 3000);
    assert.match(out, /HTTP\/1\.1 200 [\s\S]*HTTP\/1\.1 401 /);
    assert.equal((await checkOf(p, '/pipe-1'))['body'], 'first');
    assert.equal((await checkOf(p, '/pipe-2'))['body'], 'deny-me');
    assert.equal((await receivedAt(p, '/pipe-1')).body, 'first');
    assert.equal(p.received().find((x) => x.url === '/pipe-2'), undefined);
  });

  it('HTTP/2: the DATA frames are held and judged; the app gets the body; over the limit is 413', async () => {
    const curl = (path: string, body: string) => p.pod.exec('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code} %{http_version}',
      '--http2-prior-knowledge', '-H', 'host: shop.example', '--data-binary', body, `http://127.0.0.1:8080${path}`]);
    assert.equal((await curl('/h2', 'h2 body')).stdout, '200 2');
    assert.equal((await checkOf(p, '/h2'))['body'], 'h2 body');
    assert.equal((await receivedAt(p, '/h2')).body, 'h2 body');
    assert.equal((await curl('/h2-denied', 'deny-me')).stdout, '401 2');
    assert.equal((await curl('/h2-long', 'z'.repeat(17))).stdout, '413 2');
    assert.equal(p.received().find((x) => x.url === '/h2-denied' || x.url === '/h2-long'), undefined);
  });

  it('HTTP/2: a stream that stalls mid-body is answered 408 once the provider\'s timeout passes', async () => {
    const script = `const h = require('http2').connect('http://127.0.0.1:8080');
      const r = h.request({':method': 'POST', ':path': '/h2-stall', host: 'shop.example', 'content-length': '12'}, {endStream: false});
      r.write('only');
      r.on('response', (head) => { process.stdout.write(String(head[':status'])); process.exit(0); });
      setTimeout(() => { process.stdout.write('none'); process.exit(0); }, 4000);`;
    const started = Date.now();
    const r = await p.pod.exec(process.execPath, ['-e', script], 9000);
    assert.equal(r.stdout, '408');
    assert.ok(Date.now() - started >= 1000);
    assert.equal(p.received().find((x) => x.url === '/h2-stall'), undefined);
  });
});

describe('a gRPC authorizer is sent the first bytes of a longer body (allowPartialMessage, packAsBytes)', () => {
  let p: Pod;
  before(async () => {
    p = await gatewayWith(`  - name: authz-grpc
    envoyExtAuthzGrpc:
      service: 127.0.0.1
      port: ${GRPC_PORT}
      timeout: 1s
      includeRequestBodyInCheck: {maxRequestBytes: 8, allowPartialMessage: true, packAsBytes: true}
`, 'authz-grpc');
  });
  after(() => p?.pod.close());

  it('the first maxRequestBytes go as raw_body; the app gets the whole body', async () => {
    const r = post(p, '/partial', 'abcdefghijklmnop', { 'transfer-encoding': 'chunked' });
    assert.equal(r.status, 200, r.body);
    const http = (await checkOf(p, '/partial'))['request'].attributes.request.http;
    assert.equal(Buffer.from(http.raw_body.data).toString('latin1'), 'abcdefgh');
    assert.equal(http.body, undefined, 'packAsBytes: not as text');
    assert.equal(http.headers['x-envoy-auth-partial-body'], 'true');
    assert.equal((await receivedAt(p, '/partial')).body, 'abcdefghijklmnop');
  });

  it('a body of many reads and frames: the first bytes are judged, the app gets every byte in order (HTTP/1 chunked and HTTP/2)', async () => {
    // 256 KiB of a counting pattern: a lost, repeated or reordered piece changes the text. The app
    // answers once it has read the body whole (an answer before it would end the upload early).
    const big = Array.from({ length: 16384 }, (_, i) => `${String(i).padStart(15, '0')}\n`).join('');
    writeFileSync(join(p.pod.dir, 'big.txt'), big);
    const h1 = await p.pod.exec('curl', ['-s', '--max-time', '10', '-o', '/dev/null', '-w', '%{http_code}', '-H', 'host: shop.example', '-H', 'transfer-encoding: chunked',
      '--data-binary', `@${join(p.pod.dir, 'big.txt')}`, 'http://127.0.0.1:8080/whole-body/big-h1']);
    assert.equal(h1.stdout, '200', h1.stderr);
    const h2 = await p.pod.exec('curl', ['-s', '--max-time', '10', '-o', '/dev/null', '-w', '%{http_code}', '--http2-prior-knowledge', '-H', 'host: shop.example',
      '--data-binary', `@${join(p.pod.dir, 'big.txt')}`, 'http://127.0.0.1:8080/whole-body/big-h2']);
    assert.equal(h2.stdout, '200', h2.stderr.slice(-3000));
    for (const path of ['/whole-body/big-h1', '/whole-body/big-h2']) {
      const http = (await checkOf(p, path))['request'].attributes.request.http;
      assert.equal(Buffer.from(http.raw_body.data).toString('latin1'), big.slice(0, 8));
      const got = await receivedAt(p, path);
      assert.equal(got.body.length, big.length, path);
      assert.ok(got.body === big, `${path}: the app got the bytes in order`);
    }
  });

  it('a whole body within the limit is not partial; a refusal on its first bytes stops the request', async () => {
    assert.equal(post(p, '/small', 'tiny').status, 200);
    const http = (await checkOf(p, '/small'))['request'].attributes.request.http;
    assert.equal(http.headers['x-envoy-auth-partial-body'], 'false');
    assert.equal(post(p, '/refused', 'deny-me and more bytes').status, 401);
    assert.equal(p.received().find((x) => x.url === '/refused'), undefined);
  });
});
