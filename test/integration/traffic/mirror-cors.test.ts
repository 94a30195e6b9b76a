// Mirroring and CORS at the sidecar, end to end, as in a pod: the capture rules, the sidecar as uid
// 1337, ServiceEntries for the app and for its mirrors, each endpoint a real server in the peer
// namespace (test/fixtures/recorder-app.mjs records what it receives, method, target, header lines
// and body; stall-app.mjs reads requests and never answers; one address has nothing listening).
// Clients in the pod: curl, node:http (keep-alive), node:http2 (prior knowledge).
//
// The statistical check (mirrorPercentage 50 over 400 requests) allows 5 standard deviations of
// the binomial either way: a correct sidecar fails it less than once in a million runs.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const APP_VIP = '240.240.0.20';
const APP = 'app.example.com';
const ADDRESSES = { app: '198.18.0.21', shadow: '198.18.0.22', stall: '198.18.0.23', refused: '198.18.0.24' } as const;

interface Recorded { readonly kind: string; readonly method: string; readonly url: string; readonly headers: string[]; readonly body: string }

const entry = (name: string, host: string, address: string, vip?: string): string => `---
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: default}
spec:
  hosts: [${host}]
${vip ? `  addresses: [${vip}]\n` : ''}  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: ${address}, ports: {http: 9080}}]
`;
const ENTRIES = entry('app', APP, ADDRESSES.app, APP_VIP) + entry('shadow', 'shadow.example.com', ADDRESSES.shadow)
  + entry('stall', 'stall.example.com', ADDRESSES.stall) + entry('refused', 'refused.example.com', ADDRESSES.refused);

/** The app's VirtualService with these lines in its one rule (indented by four). */
const appRoute = (extra: string): string => `${ENTRIES}---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: app, namespace: default}
spec:
  hosts: [${APP}]
  http:
  - route: [{destination: {host: ${APP}}}]
${extra.split('\n').map((l) => `    ${l}`).join('\n')}
`;

/** Header value of a recorded request (first line of that name). */
const header = (r: Recorded, name: string): string | undefined => {
  for (let i = 0; i < r.headers.length; i += 2) if (r.headers[i]!.toLowerCase() === name) return r.headers[i + 1];
  return undefined;
};

describe('mirroring and CORS at the sidecar', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  const seen: Record<'app' | 'shadow', Recorded[]> = { app: [], shadow: [] };
  let stalled = 0;

  const configVersion = async (): Promise<number> => {
    const r = await runCli(['request', 'GET', '/config_dump'], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
    return r.code === 0 ? (JSON.parse(r.stdout) as { configuration_version: number }).configuration_version : 0;
  };
  const resources = async (text: string): Promise<void> => {
    const before = await configVersion();
    writeFileSync(join(sp.dir, 'etc/mesh/resources/mirror.yaml'), text);
    await waitFor('the new resources in force', async () => ((await configVersion()) > before ? true : undefined), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the other worker reads them too
  };
  const stats = async (): Promise<Record<string, number>> => {
    const r = await runCli(['request', 'GET', '/stats'], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
    const out: Record<string, number> = {};
    for (const line of r.stdout.split('\n')) {
      const m = /^(\S+): (\d+)$/.exec(line);
      if (m) out[m[1]!] = Number(m[2]);
    }
    return out;
  };
  const reset = (): void => {
    seen.app = [];
    seen.shadow = [];
    stalled = 0;
  };
  /** Lets copies still on their way arrive. */
  const settle = (ms = 500): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  const record = (child: ChildProcess, into: 'app' | 'shadow'): Promise<void> => new Promise((resolve) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      let nl;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        if (line.startsWith('listening')) resolve();
        else if (line.startsWith('{')) {
          const r = JSON.parse(line) as Recorded;
          if (r.kind === 'request') seen[into].push({ ...r, body: Buffer.from(r.body, 'base64').toString('latin1') });
        }
      }
    });
  });

  const curl = (args: readonly string[]): { code: number; headers: string; body: string; ms: number } => {
    const t0 = performance.now();
    const r = sp.pod.exec('curl', ['-sS', '--max-time', '10', '-D', '-', ...args], { allowFailure: true });
    const ms = performance.now() - t0;
    const [head = '', ...rest] = r.stdout.split('\r\n\r\n');
    return { code: Number(/^HTTP\/[\d.]+ (\d+)/.exec(head)?.[1] ?? 0), headers: head.toLowerCase(), body: rest.join('\r\n\r\n'), ms };
  };
  const client = (kind: 'http' | 'h2', o: Record<string, unknown>): { status: number; body?: string }[] => {
    const r = sp.pod.exec(process.execPath, [join(FIXTURES, 'traffic-client.mjs'), kind, JSON.stringify(o)], { allowFailure: true });
    assert.equal(r.exitCode, 0, r.stderr);
    return JSON.parse(r.stdout) as { status: number; body?: string }[];
  };

  before(async () => {
    sp = await startSidecarPod({
      files: { 'etc/mesh/pod/labels': 'app="client"\n', 'etc/mesh/resources/mirror.yaml': ENTRIES },
      writable: true,
      env: ['POD_NAMESPACE=default'],
      prepare: async (pod) => {
        for (const address of Object.values(ADDRESSES)) pod.peer.exec('ip', ['addr', 'add', `${address}/24`, 'dev', 'peer0']);
        const app = pod.peer.start(process.execPath, [join(FIXTURES, 'recorder-app.mjs'), ADDRESSES.app, '9080', '9081']);
        const shadow = pod.peer.start(process.execPath, [join(FIXTURES, 'recorder-app.mjs'), ADDRESSES.shadow, '9080', '9081']);
        const stall = pod.peer.start(process.execPath, [join(FIXTURES, 'stall-app.mjs'), ADDRESSES.stall, '9080']);
        const stallUp = new Promise<void>((resolve) => {
          stall.stdout!.setEncoding('utf8').on('data', (d: string) => {
            if (d.includes('listening')) resolve();
            stalled += d.split('\n').filter((l) => l.startsWith('request ')).length;
          });
        });
        await Promise.race([Promise.all([record(app, 'app'), record(shadow, 'shadow'), stallUp]),
          new Promise((_, reject) => setTimeout(() => reject(new Error('the apps did not listen within 15 s')), 15_000).unref())]);
      },
    });
  });
  after(() => sp?.close());

  it('copies a request to the mirror: same method, target, header lines and body, Host unchanged; the client gets the app\'s answer', async () => {
    await resources(appRoute('mirror: {host: shadow.example.com}\nheaders: {request: {set: {x-routed: "yes"}}}'));
    reset();
    const r = curl(['-X', 'POST', '-H', 'x-test: one', '-H', 'content-type: text/plain', '--data-binary', 'hello mirror', `http://${APP}/path/a?q=1`,
      '--resolve', `${APP}:80:${APP_VIP}`]);
    assert.equal(r.code, 200, r.headers);
    assert.match(r.body, /^ok \d+/, 'the app\'s answer');
    await waitFor('the copy at the mirror', () => seen.shadow.length >= 1 || undefined, 5_000);
    await settle();
    assert.equal(seen.app.length, 1);
    assert.equal(seen.shadow.length, 1, 'one copy');
    const [a, s] = [seen.app[0]!, seen.shadow[0]!];
    assert.deepEqual([s.method, s.url, s.body], ['POST', '/path/a?q=1', 'hello mirror']);
    assert.equal(header(s, 'host'), APP, 'Host unchanged (no -shadow suffix)');
    assert.equal(header(s, 'x-test'), 'one');
    assert.equal(header(s, 'x-routed'), 'yes', 'the route\'s request edits are in the copy, as in what the app got');
    const names = (x: Recorded): string[] => x.headers.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()).filter((n) => n !== 'connection').sort();
    assert.deepEqual(names(s), names(a), 'the same header lines as the app received');
  });

  it('copies chunked bodies, and the requests of an HTTP/2 client', async () => {
    reset();
    const chunked = curl(['-X', 'PUT', '-H', 'transfer-encoding: chunked', '--data-binary', 'chunk body', `http://${APP_VIP}/chunked`, '-H', `host: ${APP}`]);
    assert.equal(chunked.code, 200);
    const h2 = client('h2', { url: `http://${APP_VIP}:80/over-h2`, count: 3, headers: { host: APP } });
    assert.deepEqual(h2.map((x) => x.status), [200, 200, 200]);
    await waitFor('4 copies', () => seen.shadow.length >= 4 || undefined, 5_000);
    await settle();
    assert.deepEqual(seen.shadow.map((s) => [s.method, s.url]).sort(), [['GET', '/over-h2'], ['GET', '/over-h2'], ['GET', '/over-h2'], ['PUT', '/chunked']]);
    assert.equal(seen.shadow.find((s) => s.url === '/chunked')?.body, 'chunk body');
  });

  it('a mirror that never answers or refuses changes nothing the client sees, and is counted', async () => {
    await resources(appRoute('mirrors:\n- destination: {host: stall.example.com}\n- destination: {host: refused.example.com}\ntimeout: 3s'));
    reset();
    const before = await stats();
    const t0 = performance.now();
    const answers = client('http', { url: `http://${APP_VIP}/`, count: 20, headers: { host: APP } });
    const ms = performance.now() - t0;
    assert.deepEqual(answers.map((a) => a.status), new Array(20).fill(200));
    // Each copy to the stalled mirror waits up to 3 s (the route's timeout): 20 requests in sequence
    // take well under one such wait when nothing of the copies is waited for.
    assert.ok(ms < 2_500, `20 requests took ${Math.round(ms)} ms`);
    await waitFor('the 20 requests at the app', () => seen.app.length >= 20 || undefined, 5_000);
    await waitFor('the stalled copies at the stalled mirror', () => stalled >= 20 || undefined, 5_000);
    // The refused copies fail at once; the stalled ones when the route's timeout passes.
    const after = await waitFor('every copy failed and counted', async () => {
      const s = await stats();
      return (s['http.outbound.mirror_rq_failed'] ?? 0) - (before['http.outbound.mirror_rq_failed'] ?? 0) >= 40 ? s : undefined;
    }, 10_000);
    assert.equal((after['http.outbound.mirror_rq_total'] ?? 0) - (before['http.outbound.mirror_rq_total'] ?? 0), 40);
  });

  it('copies never exceed the mirror cluster\'s maxConnections: over it they are dropped and counted, never queued', async () => {
    await resources(`${appRoute('mirror: {host: stall.example.com}\ntimeout: 5s')}---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: stall, namespace: default}
spec:
  host: stall.example.com
  trafficPolicy: {connectionPool: {tcp: {maxConnections: 1}}}
`);
    await settle(1_000); // the stalled copies of the test before are over (counted failed there): their connections closed
    reset();
    const before = await stats();
    const answers = client('http', { url: `http://${APP_VIP}/`, count: 10, headers: { host: APP } });
    assert.deepEqual(answers.map((a) => a.status), new Array(10).fill(200));
    await waitFor('one copy at the stalled mirror', () => stalled >= 1 || undefined, 5_000);
    await settle();
    assert.equal(stalled, 1, 'one connection: the one copy it carries holds it');
    const after = await stats();
    assert.equal((after['http.outbound.mirror_rq_total'] ?? 0) - (before['http.outbound.mirror_rq_total'] ?? 0), 1);
    assert.equal((after['http.outbound.mirror_rq_dropped'] ?? 0) - (before['http.outbound.mirror_rq_dropped'] ?? 0), 9);
  });

  it('a body over 64 KiB is not mirrored (counted); the app gets it whole', async () => {
    await resources(appRoute('mirror: {host: shadow.example.com}'));
    reset();
    const before = await stats();
    const big = 'x'.repeat(100 * 1024);
    const r = sp.pod.exec('curl', ['-sS', '--max-time', '10', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'POST', '--data-binary', '@-', '-H', `host: ${APP}`, `http://${APP_VIP}/big`],
      { input: big });
    assert.equal(r.stdout, '200');
    const small = curl(['-X', 'POST', '--data-binary', 'small', '-H', `host: ${APP}`, `http://${APP_VIP}/small`]);
    assert.equal(small.code, 200);
    await waitFor('the small copy', () => seen.shadow.some((s) => s.url === '/small') || undefined, 5_000);
    await settle();
    assert.equal(seen.app.find((a) => a.url === '/big')?.body.length, big.length);
    assert.deepEqual(seen.shadow.map((s) => s.url), ['/small'], 'the large one is not copied');
    const after = await stats();
    assert.equal((after['http.outbound.mirror_rq_too_large'] ?? 0) - (before['http.outbound.mirror_rq_too_large'] ?? 0), 1);
  });

  it('mirrorPercentage draws per request, on one connection; 0 turns the mirror off', async () => {
    await resources(appRoute('mirror: {host: shadow.example.com}\nmirrorPercentage: {value: 50}'));
    reset();
    const n = 400;
    client('http', { url: `http://${APP_VIP}/`, count: n, headers: { host: APP } });
    await settle(1_000);
    // Binomial(400, 0.5): mean 200, sd 10; 5 sd either way.
    assert.ok(Math.abs(seen.shadow.length - 200) <= 50, `${seen.shadow.length} of ${n} copied at 50%`);
    await resources(appRoute('mirror: {host: shadow.example.com}\nmirrorPercentage: {value: 0}'));
    reset();
    client('http', { url: `http://${APP_VIP}/`, count: 50, headers: { host: APP } });
    await settle();
    assert.equal(seen.app.length, 50);
    assert.equal(seen.shadow.length, 0, 'an explicit 0 copies nothing');
  });

  it('CORS: a preflight from an allowed origin is answered by the sidecar; actual requests get the headers; other origins get none', async () => {
    await resources(appRoute(`corsPolicy:
  allowOrigins: [{exact: "https://web.example"}, {regex: "https://.*\\\\.trusted\\\\.example"}]
  allowMethods: [GET, POST]
  allowHeaders: [x-custom]
  exposeHeaders: [x-recorder-seq]
  maxAge: 24h
  allowCredentials: true`));
    reset();
    const pre = curl(['-X', 'OPTIONS', '-H', 'origin: https://web.example', '-H', 'access-control-request-method: POST', '-H', `host: ${APP}`, `http://${APP_VIP}/api`]);
    assert.equal(pre.code, 200);
    assert.match(pre.headers, /\naccess-control-allow-origin: https:\/\/web\.example(\r?\n|$)/);
    assert.match(pre.headers, /\naccess-control-allow-methods: get,post(\r?\n|$)/, 'GET,POST (the head is read lower-cased)');
    assert.match(pre.headers, /\naccess-control-allow-headers: x-custom(\r?\n|$)/);
    assert.match(pre.headers, /\naccess-control-max-age: 86400(\r?\n|$)/);
    assert.match(pre.headers, /\naccess-control-allow-credentials: true(\r?\n|$)/);
    const regex = curl(['-X', 'OPTIONS', '-H', 'origin: https://a.trusted.example', '-H', 'access-control-request-method: GET', '-H', `host: ${APP}`, `http://${APP_VIP}/api`]);
    assert.match(regex.headers, /\naccess-control-allow-origin: https:\/\/a\.trusted\.example(\r?\n|$)/);
    await settle(200);
    assert.equal(seen.app.length, 0, 'preflights from allowed origins never reach the app');

    const actual = curl(['-H', 'origin: https://web.example', '-H', `host: ${APP}`, `http://${APP_VIP}/api`]);
    assert.equal(actual.code, 200);
    assert.match(actual.headers, /\naccess-control-allow-origin: https:\/\/web\.example(\r?\n|$)/);
    assert.match(actual.headers, /\naccess-control-expose-headers: x-recorder-seq(\r?\n|$)/);
    assert.equal(actual.headers.match(/access-control-allow-origin/g)?.length, 1);

    const other = curl(['-H', 'origin: https://evil.example', '-H', `host: ${APP}`, `http://${APP_VIP}/api`]);
    assert.equal(other.code, 200);
    assert.doesNotMatch(other.headers, /access-control-/, 'no CORS header for an origin not allowed');
    // A preflight from another origin goes to the app (unmatchedPreflights FORWARD, the default).
    const forwarded = curl(['-X', 'OPTIONS', '-H', 'origin: https://evil.example', '-H', 'access-control-request-method: POST', '-H', `host: ${APP}`, `http://${APP_VIP}/api`]);
    assert.match(forwarded.body, /^ok \d+/, 'answered by the app');
    assert.doesNotMatch(forwarded.headers, /access-control-/);
    await settle(200);
    assert.deepEqual(seen.app.map((a) => a.method), ['GET', 'GET', 'OPTIONS']);
  });

  it('CORS: unmatchedPreflights IGNORE answers other origins\' preflights here, without CORS headers', async () => {
    await resources(appRoute(`corsPolicy:
  allowOrigins: [{prefix: "https://web."}]
  unmatchedPreflights: IGNORE
headers: {request: {set: {x-x: y}}}`));
    reset();
    const ignored = curl(['-X', 'OPTIONS', '-H', 'origin: https://evil.example', '-H', 'access-control-request-method: POST', '-H', `host: ${APP}`, `http://${APP_VIP}/api`]);
    assert.equal(ignored.code, 200);
    assert.doesNotMatch(ignored.headers, /access-control-allow-origin/);
    assert.equal(ignored.body, '');
    await settle(200);
    assert.equal(seen.app.length, 0, 'not forwarded');
  });
});
