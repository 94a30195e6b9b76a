// Mirroring and CORS at the ingress gateway, end to end: `proxy router` in a namespace of its own,
// the app and two mirrors as recorder apps on loopback (test/fixtures/recorder-app.mjs: what each
// receives, method, target, header lines, body). One mirror is an address no ServiceEntry declares
// (reached as a route destination would be), the other a ServiceEntry host (its cluster's endpoints).
// Requests from node:http inside the namespace (test/fixtures/http-requests.mjs).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIXTURES, httpGateway, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { waitFor } from '../../helpers/wait-for.js';

const PORT = 8080;
const APPS = { app: 9180, direct: 9182, cluster: 9184 } as const;
type App = keyof typeof APPS;
interface Recorded { readonly kind: string; readonly method: string; readonly url: string; readonly headers: string[]; readonly body: string }

const SHADOW_ENTRY = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: shadow, namespace: mesh-system}
spec:
  hosts: [shadow.internal]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 127.0.0.1, ports: {http: ${APPS.cluster}}}]
`;
const routes = (extra: string): string => `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: web, namespace: mesh-system}
spec:
  hosts: ["web.example"]
  gateways: [gw]
  http:
  - route: [{destination: {host: 127.0.0.1, port: {number: ${APPS.app}}}}]
${extra.split('\n').map((l) => `    ${l}`).join('\n')}
`;
const header = (r: Recorded, name: string): string | undefined => {
  for (let i = 0; i < r.headers.length; i += 2) if (r.headers[i]!.toLowerCase() === name) return r.headers[i + 1];
  return undefined;
};

describe('mirroring and CORS at the gateway', { skip: netnsSkip }, () => {
  let pod: GatewayPod;
  const seen: Record<App, Recorded[]> = { app: [], direct: [], cluster: [] };
  const reset = (): void => { for (const k of Object.keys(seen) as App[]) seen[k] = []; };
  const listen = (child: ChildProcess, into: App): void => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      let nl;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        if (!line.startsWith('{')) continue;
        const r = JSON.parse(line) as Recorded;
        if (r.kind === 'request') seen[into].push({ ...r, body: Buffer.from(r.body, 'base64').toString('latin1') });
      }
    });
  };
  /** Writes the routes and waits until a request shows them in force (`ready` says when). */
  const configure = async (extra: string, ready: () => Promise<boolean>): Promise<void> => {
    writeFileSync(join(pod.resources, 'routes.yaml'), routes(extra));
    await waitFor('the routes in force', async () => ((await ready()) ? true : undefined), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the probes' copies still on their way
    reset();
  };
  const curl = async (args: readonly string[]): Promise<{ code: number; headers: string; body: string }> => {
    const r = await pod.exec('curl', ['-sS', '--max-time', '10', '-D', '-', ...args]);
    const [head = '', ...rest] = r.stdout.split('\r\n\r\n');
    return { code: Number(/^HTTP\/[\d.]+ (\d+)/.exec(head)?.[1] ?? 0), headers: head.toLowerCase(), body: rest.join('\r\n\r\n') };
  };
  const url = (path: string): string => `http://127.0.0.1:${PORT}${path}`;

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'gateway.yaml': httpGateway('gw', PORT), 'shadow.yaml': SHADOW_ENTRY, 'routes.yaml': routes('') },
      env: { FILE_DEBOUNCE_DURATION: '50ms' },
      prepare: async (p) => {
        for (const [name, port] of Object.entries(APPS)) listen(await p.start([join(FIXTURES, 'recorder-app.mjs'), '127.0.0.1', String(port), String(port + 1)]), name as App);
      },
    });
  });
  after(() => pod?.close());

  it('copies each request to both mirrors (an address, a ServiceEntry host): the same method, target, headers and body; the client gets the app\'s answer', async () => {
    await configure(`mirrors:
- destination: {host: 127.0.0.1, port: {number: ${APPS.direct}}}
- destination: {host: shadow.internal, port: {number: 80}}`, async () => {
      await curl(['-H', 'host: web.example', url('/probe')]);
      return seen.direct.length > 0 && seen.cluster.length > 0;
    });
    const r = await curl(['-X', 'POST', '-H', 'host: web.example', '-H', 'x-test: gw', '--data-binary', 'gateway body', url('/things?id=7')]);
    assert.equal(r.code, 200);
    assert.match(r.body, /^ok \d+/);
    await waitFor('both copies', () => (seen.direct.length >= 1 && seen.cluster.length >= 1) || undefined, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const app of ['direct', 'cluster'] as const) {
      assert.equal(seen[app].length, 1, app);
      const s = seen[app][0]!;
      assert.deepEqual([s.method, s.url, s.body, header(s, 'host'), header(s, 'x-test')], ['POST', '/things?id=7', 'gateway body', 'web.example', 'gw'], app);
      assert.equal(header(s, 'x-forwarded-for'), header(seen.app[0]!, 'x-forwarded-for'), `${app}: the head as forwarded to the app`);
    }
  });

  it('CORS: preflights answered at the gateway, actual requests from allowed origins get the headers, others none', async () => {
    await configure(`corsPolicy:
  allowOrigins: [{prefix: "https://app."}]
  allowMethods: [GET, DELETE]
  allowHeaders: ["*"]
  allowCredentials: false`, async () => {
      const r = await curl(['-X', 'OPTIONS', '-H', 'host: web.example', '-H', 'origin: https://app.x', '-H', 'access-control-request-method: DELETE', url('/')]);
      return /access-control-allow-origin/.test(r.headers);
    });
    const pre = await curl(['-X', 'OPTIONS', '-H', 'host: web.example', '-H', 'origin: https://app.x', '-H', 'access-control-request-method: DELETE',
      '-H', 'access-control-request-headers: authorization, x-b', url('/a')]);
    assert.equal(pre.code, 200);
    assert.match(pre.headers, /\naccess-control-allow-origin: https:\/\/app\.x(\r?\n|$)/);
    assert.match(pre.headers, /\naccess-control-allow-methods: get,delete(\r?\n|$)/);
    assert.match(pre.headers, /\naccess-control-allow-headers: authorization, x-b(\r?\n|$)/, '`*` echoes the headers asked for');
    assert.doesNotMatch(pre.headers, /access-control-allow-credentials/, 'allowCredentials false: no line');
    const actual = await curl(['-H', 'host: web.example', '-H', 'origin: https://app.x', url('/b')]);
    assert.match(actual.headers, /\naccess-control-allow-origin: https:\/\/app\.x(\r?\n|$)/);
    const other = await curl(['-H', 'host: web.example', '-H', 'origin: https://other.x', url('/c')]);
    assert.equal(other.code, 200);
    assert.doesNotMatch(other.headers, /access-control-/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(seen.app.map((a) => a.url), ['/b', '/c'], 'the preflight did not reach the app');
  });
});
