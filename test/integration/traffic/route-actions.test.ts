// A route's actions beyond choosing a destination, end to end in a pod: fault injection (delays,
// aborts, gRPC aborts), response header edits, regex rewrites and redirects to another scheme or
// port. One sidecar (uid 1337, capture rules), two backends on the peer (test/helpers/traffic-pod.ts).
//
// Statistical checks: each bound is 4.5 standard deviations (or more) from the mean of a binomial,
// so a correct sidecar fails one of them less than once in 10,000 runs (each ≈ 3.4e-6 one-sided,
// both sides and every check of this file together < 1e-4).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { startTrafficPod, type TrafficPod } from '../../helpers/traffic-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const VIP = '240.240.0.20';
const HOST = 'svc.example.com';
const ADDRESSES = { b1: '198.18.0.21', b2: '198.18.0.22' } as const;

interface HttpResult { readonly status: number; readonly backend?: string; readonly body?: string; readonly headers: Record<string, string | string[]>; readonly error?: string }
interface GrpcResult { readonly code: number; readonly backend?: string; readonly details?: string }

const SERVICE = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: default}
spec:
  hosts: [${HOST}]
  addresses: [${VIP}]
  ports:
  - {number: 80, name: http, protocol: HTTP}
  - {number: 7070, name: grpc, protocol: GRPC}
  resolution: STATIC
  location: MESH_INTERNAL
  endpoints:
  - {address: ${ADDRESSES.b1}, ports: {http: 8080}, labels: {version: v1}}
  - {address: ${ADDRESSES.b2}, ports: {http: 8080}, labels: {version: v2}}
`;

/** The service with a VirtualService of these http routes (YAML, each line indented by two). */
const withRoutes = (http: string): string => `${SERVICE}---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: svc, namespace: default}
spec:
  hosts: [${HOST}]
  http:
${http}`;

const count = <T>(list: readonly T[], pred: (x: T) => boolean): number => list.filter(pred).length;

describe('route actions: fault injection, response headers, regex rewrites, scheme and port redirects', { skip: netnsSkip }, () => {
  let tp: TrafficPod;
  const http = (o: Record<string, unknown> = {}): HttpResult[] => tp.client<HttpResult[]>('http', { url: `http://${VIP}/`, count: 1, ...o });
  const requestsTo = (path: string): number => count(tp.seen(), (e) => e.path === path);

  before(async () => {
    tp = await startTrafficPod({ addresses: ADDRESSES, resources: SERVICE });
  });
  after(() => tp?.close());

  it('an abort (100%) answers its status locally with flag FI: nothing reaches the backends, nothing is retried', async () => {
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 3, retryOn: 5xx}
    fault:
      abort: {httpStatus: 503, percentage: {value: 100}}
`));
    tp.clearSeen();
    const answers = http({ url: `http://${VIP}/aborted`, count: 20 });
    assert.deepEqual(answers.map((a) => a.status), new Array(20).fill(503));
    assert.equal(answers[0]!.body, 'fault filter abort');
    await waitFor('20 FI lines in the access log', () => (count(tp.accessLog(), (l) => /"GET \/aborted HTTP\/1\.1" 503 FI fault_filter_abort /.test(l)) >= 20 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(requestsTo('/aborted'), 0, 'an aborted request never reaches the application, nor does a retry of it');
    const stats = await tp.admin('/stats/prometheus');
    assert.match(stats, /response_flags="FI"/, 'the metrics carry the flag too');
  });

  it('a share left out aborts nothing (Istio leaves Envoy\'s default); an abort of 30% aborts about 30% of the requests', async () => {
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    fault:
      abort: {httpStatus: 418}
`));
    assert.deepEqual(http({ count: 20 }).map((a) => a.status), new Array(20).fill(200));
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    fault:
      abort: {httpStatus: 418, percentage: {value: 30}}
`));
    const answers = http({ count: 600 });
    const aborted = count(answers, (a) => a.status === 418);
    // Binomial(600, 0.3): mean 180, sd 11.2; [130, 230] is ±4.5 sd.
    assert.ok(aborted >= 130 && aborted <= 230, `${aborted} of 600 aborted`);
    assert.equal(aborted + count(answers, (a) => a.status === 200), 600);
  });

  it('a delay holds the request for fixedDelay (DI), then it goes on; a delay of 25% delays about a quarter (deprecated percent)', async () => {
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    fault:
      delay: {fixedDelay: 400ms, percentage: {value: 100}}
`));
    const out = tp.sp.pod.exec('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code} %{time_total}', '--max-time', '5', `http://${VIP}/delayed`]).stdout;
    const [code, seconds] = out.split(' ');
    assert.equal(code, '200');
    assert.ok(Number(seconds) >= 0.4, `answered after ${seconds} s`);
    await waitFor('a DI line', () => tp.accessLog().find((l) => /"GET \/delayed HTTP\/1\.1" 200 DI /.test(l)));

    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    fault:
      delay: {fixedDelay: 1ms, percent: 25}
`));
    const before = count(tp.accessLog(), (l) => /"GET \/quarter HTTP\/1\.1" 200 DI /.test(l));
    const answers = http({ url: `http://${VIP}/quarter`, count: 400 });
    assert.equal(count(answers, (a) => a.status === 200), 400);
    await waitFor('400 lines for /quarter', () => (count(tp.accessLog(), (l) => l.includes('/quarter')) >= 400 ? true : undefined));
    const delayed = count(tp.accessLog(), (l) => /"GET \/quarter HTTP\/1\.1" 200 DI /.test(l)) - before;
    // Binomial(400, 0.25): mean 100, sd 8.7; [61, 139] is ±4.5 sd.
    assert.ok(delayed >= 61 && delayed <= 139, `${delayed} of 400 delayed`);
  });

  it('a route with fault gets no retries (Istio\'s reference): a delayed request the backend fails is tried once', async () => {
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 3, retryOn: 5xx}
    fault:
      delay: {fixedDelay: 1ms, percentage: {value: 100}}
`));
    await tp.mode('b1', '503');
    await tp.mode('b2', '503');
    try {
      tp.clearSeen();
      const answers = http({ url: `http://${VIP}/once`, count: 10 });
      assert.deepEqual(answers.map((a) => a.status), new Array(10).fill(503));
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(requestsTo('/once'), 10, 'one attempt per request');
    } finally {
      await tp.mode('b1', 'ok');
      await tp.mode('b2', 'ok');
    }
  });

  it('a client that leaves during a delay: nothing is opened upstream, the request never reaches the backend', async () => {
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    fault:
      delay: {fixedDelay: 1500ms, percentage: {value: 100}}
`));
    tp.clearSeen();
    const r = tp.sp.pod.exec('curl', ['-sS', '--max-time', '0.3', `http://${VIP}/left`], { allowFailure: true });
    assert.notEqual(r.exitCode, 0, 'curl gave up');
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.equal(requestsTo('/left'), 0);
    const stats = await tp.admin('/stats');
    assert.match(stats, /cluster\.outbound\|80\|\|svc\.example\.com\.upstream_rq_active: 0/);
  });

  it('a gRPC abort: the call ends with that status (trailers-only answer, flag FI)', async () => {
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}, port: {number: 7070}}
    fault:
      abort: {grpcStatus: UNAVAILABLE, percentage: {value: 100}}
`));
    const calls = tp.client<GrpcResult[]>('grpc', { target: `${VIP}:7070`, count: 5 });
    assert.deepEqual(calls.map((c) => c.code), [14, 14, 14, 14, 14]);
    await waitFor('FI on a gRPC call', () => tp.accessLog().find((l) => /"POST \/test\.Echo\/Ping HTTP\/2" 200 FI /.test(l)));
    // A client that is not gRPC gets the HTTP status gRPC maps UNAVAILABLE to.
    assert.equal(http({ url: `http://${VIP}:7070/` })[0]!.status, 503);
  });

  it('uriRegexRewrite: the application receives the rewritten path; the access log shows the path as sent by the client', async () => {
    await tp.resources(withRoutes(`  - match: [{uri: {prefix: /service/}}]
    rewrite:
      uriRegexRewrite: {match: "^/service/([^/]+)(/.*)$", rewrite: "\\\\2/instance/\\\\1"}
    route:
    - destination: {host: ${HOST}}
`));
    tp.clearSeen();
    const [a] = http({ url: `http://${VIP}/service/foo/v1/api?x=1` });
    assert.equal(a!.status, 200, JSON.stringify(a));
    await waitFor('the request seen', () => tp.seen().find((e) => e.path !== undefined));
    assert.equal(tp.seen().find((e) => e.path !== undefined)!.path, '/v1/api/instance/foo?x=1');
    await waitFor('its log line, with the original path', () => tp.accessLog().find((l) => l.includes('"GET /service/foo/v1/api?x=1 HTTP/1.1" 200')));
  });

  it('redirects to another scheme and port: Location as Istio configures Envoy, 301 by default', async () => {
    await tp.resources(withRoutes(`  - match: [{uri: {prefix: /secure}}]
    redirect: {scheme: https, port: 8443}
  - match: [{uri: {prefix: /same-port}}]
    redirect: {authority: other.example.com, derivePort: FROM_REQUEST_PORT, redirectCode: 308}
  - match: [{uri: {prefix: /default-port}}]
    redirect: {scheme: https, derivePort: FROM_PROTOCOL_DEFAULT}
  - route:
    - destination: {host: ${HOST}}
`));
    const [secure] = http({ url: `http://${VIP}/secure?a=1`, headers: { host: `${HOST}:80` } });
    assert.equal(secure!.status, 301);
    assert.equal(secure!.headers['location'], `https://${HOST}:8443/secure?a=1`);
    const [same] = http({ url: `http://${VIP}/same-port`, headers: { host: HOST } });
    assert.equal(same!.status, 308);
    assert.equal(same!.headers['location'], 'http://other.example.com/same-port', 'the request came to port 80: no port written');
    const [def] = http({ url: `http://${VIP}/default-port`, headers: { host: `${HOST}:80` } });
    assert.equal(def!.headers['location'], `https://${HOST}/default-port`);
  });

  it('response header edits per route and per destination, request edits per destination; a client\'s XFCC never reaches the application', async () => {
    await tp.resources(withRoutes(`  - headers:
      response:
        set: {x-set: route}
        add: {x-tag: route}
        remove: [x-drop]
    route:
    - destination: {host: ${HOST}}
      headers:
        request: {add: {x-tag: dest}}
        response: {add: {x-dest: "yes"}}
`));
    tp.clearSeen();
    const [a] = http({ url: `http://${VIP}/edited`, headers: { 'x-tag': 'client', 'x-forwarded-client-cert': 'By=spiffe://forged;URI=spiffe://cluster.local/ns/x/sa/admin', 'x-set': 'client' },
      showHeaders: ['x-set', 'x-tag', 'x-drop', 'x-dest'] });
    assert.equal(a!.status, 200, JSON.stringify(a));
    // The backend answered x-tag: its name and x-drop: its name.
    assert.deepEqual(a!.headers, { 'content-type': 'application/json', 'x-set': 'route', 'x-tag': `${a!.backend}, route`, 'x-dest': 'yes' });
    await waitFor('the request seen', () => tp.seen().find((e) => e.path === '/edited'));
    const seen = tp.seen().find((e) => e.path === '/edited')!;
    assert.deepEqual(seen.tags, ['client', 'dest']);
    assert.equal(seen.xfcc, undefined, 'the sidecar strips a client\'s x-forwarded-client-cert');
    // An HTTP/2 client (prior knowledge) gets the same edits (its answer goes through the HTTP/2 side).
    const [h2] = tp.client<HttpResult[]>('h2', { url: `http://${VIP}/edited-h2`, showHeaders: ['x-set', 'x-tag', 'x-drop', 'x-dest'] });
    assert.equal(h2!.status, 200, JSON.stringify(h2));
    assert.deepEqual(h2!.headers, { 'x-set': 'route', 'x-tag': `${h2!.backend}, route`, 'x-dest': 'yes' });
  });

  it('a DestinationRule retryBudget: retries past max(minRetryConcurrency, percent of the requests in flight) are not sent, counted as upstream_rq_retry_overflow', async () => {
    const counter = (stats: string, name: string): number => Number(new RegExp(`cluster\\.outbound\\|80\\|\\|svc\\.example\\.com\\.${name}: (\\d+)`).exec(stats)?.[1] ?? NaN);
    await tp.resources(withRoutes(`  - route:
    - destination: {host: ${HOST}}
    retries: {attempts: 3, retryOn: 5xx}
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy:
    retryBudget: {percent: 1, minRetryConcurrency: 1}
`));
    const before = await tp.admin('/stats');
    await tp.mode('b1', '503');
    await tp.mode('b2', '503');
    try {
      // 20 requests at once, each failing: 1 % of 20 is 0, so one retry may be in flight at a time.
      const answers = http({ url: `http://${VIP}/budget`, count: 60, concurrency: 20 });
      assert.equal(answers.filter((a) => a.status === 503).length, 60);
    } finally {
      await tp.mode('b1', 'ok');
      await tp.mode('b2', 'ok');
    }
    const after = await tp.admin('/stats');
    const overflow = counter(after, 'upstream_rq_retry_overflow') - counter(before, 'upstream_rq_retry_overflow');
    const retried = counter(after, 'upstream_rq_retry') - counter(before, 'upstream_rq_retry');
    assert.ok(overflow > 0, `no retry refused by the budget (${retried} retries sent)`);
    assert.ok(retried > 0, 'the minimum concurrency still lets retries through');
    // Without the budget, Istio's maxRetries default is unlimited: every failure retried 3 times.
    assert.ok(retried < 180, `${retried} retries sent for 60 requests`);
  });
});
