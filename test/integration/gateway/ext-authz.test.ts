// External authorization (AuthorizationPolicy CUSTOM) at the ingress gateway, end to end: a gateway
// in a namespace of the test's own, an echo app, and real authorizers (test/fixtures/ext-authz-servers.mjs:
// an HTTP one and a gRPC one) in the same namespace, named by the mesh config's extensionProviders.
// Each kind gets its own gateway (Istio allows one provider per workload): allowed requests carry the
// authorizer's headers upstream and to the client, refusals come back as the authorizer wrote them,
// failures and time-outs fail closed (or open, where configured), and DENY judges the request as the
// authorizer edited it. A CUSTOM policy naming no provider of the mesh config denies what it selects.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIXTURES, httpGateway, startGatewayPod, virtualService, type Answer, type GatewayPod } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait-for.js';

const HTTP_PORT = 9191;
const GRPC_PORT = 9292;

const resources = (provider: string): Record<string, string> => ({
  // A route on a header the authorizer writes: the route is chosen before its edits, as in Envoy.
  'gateway.yaml': `${httpGateway('gw', 8080)}---\n${virtualService('all', 'gw', `  - match: [{headers: {x-authz-user: {exact: alice}}}]
    route: [{destination: {host: 127.0.0.1, port: {number: 9090}}}]
  - route: [{destination: {host: 127.0.0.1, port: {number: 9080}}}]
`)}`,
  'policy.yaml': `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: mesh-system}
spec:
  action: CUSTOM
  provider: {name: ${provider}}
  rules: [{to: [{operation: {notPaths: ["/public*"]}}]}]
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: after-authz, namespace: mesh-system}
spec:
  action: DENY
  rules:
  - to: [{operation: {paths: ["/headers/denied-after"]}}]
    when: [{key: "request.headers[x-authz-user]", values: [alice]}]
`,
});

const HTTP_PROVIDER = (extra: string): string => `  - name: authz-http
    envoyExtAuthzHttp:
      service: 127.0.0.1
      port: ${HTTP_PORT}
      pathPrefix: /check
      includeRequestHeadersInCheck: [x-custom, "x-pre*"]
      includeAdditionalHeadersInCheck: {x-from-proxy: "yes"}
      headersToUpstreamOnAllow: ["x-authz-*", x-forwarded-client-cert, x-envoy-peer-metadata]
      headersToDownstreamOnAllow: [x-downstream-note]
      headersToDownstreamOnDeny: [x-authz-reason]
${extra}`;
const GRPC_PROVIDER = (extra: string): string => `  - name: authz-grpc
    envoyExtAuthzGrpc:
      service: 127.0.0.1
      port: ${GRPC_PORT}
${extra}`;

interface Authorizers {
  readonly lines: () => Record<string, unknown>[];
}

/** A gateway whose mesh config defines `providers`; the authorizers run beside it, on 127.0.0.1. */
async function gatewayWith(providers: string, policyProvider: string): Promise<{ pod: GatewayPod; authz: Authorizers }> {
  let log = '';
  const pod = await startGatewayPod({
    resources: resources(policyProvider),
    apps: { 9080: 'app', 9090: 'other' },
    prepare: async (p) => {
      mkdirSync(join(p.dir, 'etc', 'mesh', 'config'), { recursive: true });
      writeFileSync(join(p.dir, 'etc', 'mesh', 'config', 'mesh'), `extensionProviders:\n${providers}`);
      const child: ChildProcess = await p.start([join(FIXTURES, 'ext-authz-servers.mjs'), '127.0.0.1', String(HTTP_PORT), String(GRPC_PORT)]);
      child.stdout!.setEncoding('utf8').on('data', (d: string) => { log += d; });
    },
  });
  return { pod, authz: { lines: () => log.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>) } };
}

const get = (pod: GatewayPod, path: string, headers: Record<string, string> = {}): Answer =>
  pod.send([{ url: `http://127.0.0.1:8080${path}`, headers: { host: 'shop.example', ...headers } }])[0]!;
const seen = (a: Answer): Record<string, string> => (JSON.parse(a.body) as { headers: Record<string, string> }).headers;

for (const kind of ['http', 'grpc'] as const) {
  describe(`the gateway asks an ${kind.toUpperCase()} authorizer for CUSTOM policies`, () => {
    let pod: GatewayPod;
    let authz: Authorizers;
    before(async () => {
      const timeout = '      timeout: 2s\n';
      ({ pod, authz } = await gatewayWith(
        kind === 'http' ? HTTP_PROVIDER(timeout) : GRPC_PROVIDER(`${timeout}      statusOnError: "503"\n`),
        kind === 'http' ? 'authz-http' : 'authz-grpc',
      ));
    });
    after(() => pod?.close());

    it('an allowed request reaches the app with the authorizer\'s headers; the client gets its response headers', () => {
      const r = get(pod, '/headers/ok', { 'x-custom': 'c1', 'x-secret': 's', 'x-drop-me': 'bye', 'x-forwarded-client-cert': 'By=client' });
      assert.equal(r.status, 200, r.body);
      const h = seen(r);
      assert.equal(h['x-authz-user'], 'alice');
      assert.equal((JSON.parse(r.body) as { app: string }).app, 'app', 'routed on the request before the authorizer\'s edits');
      assert.equal(h['x-drop-me'], undefined, 'the authorizer removed it');
      // Owned by the proxy: neither the client's nor the authorizer's copy reaches the app.
      assert.equal(h['x-forwarded-client-cert'], undefined);
      assert.equal(h['x-envoy-peer-metadata'], undefined);
      if (kind === 'grpc') assert.equal(h['x-authz-extra'], 'one');
      assert.equal(r.headers['x-downstream-note'], 'checked');
    });

    it('the check carries what Envoy\'s ext_authz sends', async () => {
      get(pod, '/headers/what?q=1', { 'x-custom': 'c1', 'x-prefixed': 'p', 'x-secret': 's', 'x-from-proxy': 'client' });
      // The authorizer's log is read by this process's event loop, which the request above held up.
      const check = await waitFor('the check', () => authz.lines().find((l) => l['kind'] === kind && JSON.stringify(l).includes('/headers/what')));
      if (kind === 'http') {
        assert.equal(check['method'], 'GET');
        assert.equal(check['path'], '/check/headers/what?q=1');
        const h = check['headers'] as Record<string, string>;
        assert.deepEqual([h['host'], h['x-custom'], h['x-prefixed'], h['x-secret'], h['x-from-proxy'], h['content-length']],
          ['shop.example', 'c1', 'p', undefined, 'yes', '0']);
      } else {
        const attrs = (check['request'] as { attributes: Record<string, any> }).attributes;
        const http = attrs['request'].http;
        assert.deepEqual([http.method, http.path, http.host, http.scheme, http.protocol, http.query], ['GET', '/headers/what?q=1', 'shop.example', 'http', 'HTTP/1.1', 'q=1']);
        assert.equal(http.headers['x-secret'], 's');
        assert.equal(http.headers[':path'], '/headers/what?q=1');
        assert.equal(attrs['source'].address.socket_address.address, '127.0.0.1');
        assert.equal(attrs['destination'].address.socket_address.port_value, 8080);
      }
    });

    it('a refusal goes back to the client with the authorizer\'s status, body and allowed headers', () => {
      const r = get(pod, '/deny/this');
      assert.equal(r.status, 401);
      assert.equal(r.body, `denied by the ${kind} authorizer`);
      assert.equal(r.headers['x-authz-reason'], 'nope');
      if (kind === 'http') {
        assert.equal(r.headers['www-authenticate'], 'Basic realm="authz"', 'always let through with a refusal');
        assert.equal(r.headers['x-hidden'], undefined, 'not in headersToDownstreamOnDeny');
      }
    });

    it('the route matches the request as the client sent it', () => {
      assert.match(get(pod, '/public/x', { 'x-authz-user': 'alice' }).body, /^other saw /);
    });

    it('a path no CUSTOM rule selects is not checked', async () => {
      const before = authz.lines().length;
      assert.equal(get(pod, '/public/x').status, 200);
      // A checked request after it: once its check is logged, a check of /public would be too.
      assert.equal(get(pod, '/headers/marker').status, 200);
      const logged = await waitFor('the marker\'s check', () => {
        const lines = authz.lines().slice(before);
        return lines.some((l) => JSON.stringify(l).includes('/headers/marker')) && lines;
      });
      assert.equal(logged.filter((l) => JSON.stringify(l).includes('/public')).length, 0);
    });

    it('a failed check fails closed with statusOnError (default 403)', () => {
      const r = get(pod, '/error/x');
      assert.equal(r.status, kind === 'http' ? 403 : 503);
      assert.equal(r.body, '');
    });

    it('no answer within the time-out fails closed', () => {
      const start = Date.now();
      const r = get(pod, '/slow/x');
      assert.equal(r.status, kind === 'http' ? 403 : 503);
      const took = Date.now() - start;
      assert.ok(took >= 1900 && took < 8000, `${took} ms`);
    });

    it('DENY judges the request with the authorizer\'s headers (CUSTOM first)', () => {
      const r = get(pod, '/headers/denied-after');
      assert.equal(r.status, 403);
      assert.equal(r.body, 'RBAC: access denied');
    });

    if (kind === 'http') {
      it('a client that leaves during the check ends it at once', async () => {
        const script = "const s=require('net').connect(8080,'127.0.0.1',()=>{s.write('GET /slow/leaving HTTP/1.1\\r\\nHost: shop.example\\r\\n\\r\\n');setTimeout(()=>s.destroy(),200)})";
        await pod.exec(process.execPath, ['-e', script]);
        const abandoned = await waitFor('the abandoned check', () => authz.lines().find((l) => l['kind'] === 'http-abandoned' && l['path'] === '/check/slow/leaving'));
        assert.ok((abandoned['afterMs'] as number) < 1500, JSON.stringify(abandoned));
      });

      it('an HTTP/2 client that resets its stream during the check ends it at once (its connection stays open)', async () => {
        const script = "const h=require('http2').connect('http://127.0.0.1:8080');const r=h.request({':path':'/slow/leaving-h2',':authority':'shop.example'});r.on('error',()=>{});r.end();setTimeout(()=>r.close(h.constructor.NGHTTP2_CANCEL??8),200);setTimeout(()=>h.close(),3000)";
        await pod.exec(process.execPath, ['-e', script]);
        const abandoned = await waitFor('the abandoned check', () => authz.lines().find((l) => l['kind'] === 'http-abandoned' && l['path'] === '/check/slow/leaving-h2'));
        assert.ok((abandoned['afterMs'] as number) < 1500, JSON.stringify(abandoned));
      });
    }
  });
}

describe('an authorizer configured to fail open', () => {
  let pod: GatewayPod;
  before(async () => {
    ({ pod } = await gatewayWith(HTTP_PROVIDER('      timeout: 300ms\n      failOpen: true\n'), 'authz-http'));
  });
  after(() => pod?.close());

  it('lets requests through when the check fails or times out, without the authorizer\'s headers', () => {
    const failed = get(pod, '/error/headers');
    assert.equal(failed.status, 200, failed.body);
    assert.match(failed.body, /app saw .* GET \/error\/headers/);
    assert.equal(get(pod, '/slow/x').status, 200);
  });

  it('counts the checks let through (Envoy\'s failure_mode_allowed)', async () => {
    const stats = await pod.ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, /^http\.gateway\.decisions\.ext_authz\.failure_mode_allowed: 2$/m, stats.stdout);
  });
});

describe('a CUSTOM policy whose provider the mesh config does not define', () => {
  let pod: GatewayPod;
  before(async () => {
    ({ pod } = await gatewayWith(HTTP_PROVIDER(''), 'nowhere'));
  });
  after(() => pod?.close());

  it('denies the requests it selects, lets the others through, and says why at load', () => {
    const r = get(pod, '/headers/ok');
    assert.equal(r.status, 403);
    assert.equal(get(pod, '/public/ok').status, 200);
    assert.match(pod.output(), /AuthorizationPolicy mesh-system\/ext: spec\.provider\.name: "nowhere" is not an envoyExtAuthzHttp or envoyExtAuthzGrpc provider/);
  });
});
