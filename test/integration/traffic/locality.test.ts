// Locality-aware balancing end to end, as in a pod: the sidecar's locality from the pod's
// `istio-locality` label (us-east/zone-a), four backends on the peer's addresses in four localities
// (test/fixtures/traffic-backends.mjs), an HTTP client in the pod (one keep-alive connection).
// - distribute: the weights hold per request, an uncovered locality gets nothing;
// - failover (outlierDetection): everything to the pod's own zone; once outlier detection ejects it,
//   to the same region's other zone; once that is ejected too, to the other region; /clusters shows
//   each endpoint's priority and /debug/decisions names the failover;
// - retryRemoteLocalities: a retry leaves the priorities already tried;
// - warmup: an endpoint that joins a ROUND_ROBIN cluster starts at a tenth of its share.
// The statistical bound is 4.5 standard deviations of a binomial either side: a correct sidecar fails
// it less than once in 100,000 runs (two-sided ≈ 6.8e-6).
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
const VIP = '240.240.0.20';
const HOST = 'loc.example.com';
const BACKENDS = {
  b1: { address: '198.18.1.11', locality: 'us-east/zone-a' },
  b2: { address: '198.18.1.12', locality: 'us-east/zone-b' },
  b3: { address: '198.18.1.13', locality: 'eu-west/zone-c' },
  b4: { address: '198.18.1.14', locality: 'eu-west/zone-d' },
} as const;
type Backend = keyof typeof BACKENDS;

const SERVICE_ENTRY = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: loc, namespace: default}
spec:
  hosts: [${HOST}]
  addresses: [${VIP}]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
${Object.values(BACKENDS).map((b) => `  - {address: ${b.address}, ports: {http: 8080}, locality: ${b.locality}}`).join('\n')}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: loc, namespace: default}
spec:
  hosts: [${HOST}]
  http:
  - route: [{destination: {host: ${HOST}}}]
    retries: {attempts: 0}
`;

/** The service with only these backends as endpoints (the same VirtualService). */
const serviceWith = (names: readonly Backend[]): string => SERVICE_ENTRY.replace(
  Object.values(BACKENDS).map((b) => `  - {address: ${b.address}, ports: {http: 8080}, locality: ${b.locality}}`).join('\n'),
  names.map((n) => `  - {address: ${BACKENDS[n].address}, ports: {http: 8080}, locality: ${BACKENDS[n].locality}}`).join('\n'),
);

const rule = (trafficPolicy: string): string => `---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: loc, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy:
${trafficPolicy.split('\n').map((l) => `    ${l}`).join('\n')}
`;

interface HttpResult { readonly status: number; readonly backend?: string }

describe('locality-aware balancing: distribute and failover', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let backends: ChildProcess;
  const events: { backend: string; mode?: string; ack?: number | null }[] = [];

  const admin = async (path: string): Promise<string> => {
    const r = await runCli(['request', 'GET', path], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  const configVersion = async (): Promise<number> => (JSON.parse(await admin('/config_dump')) as { configuration_version: number }).configuration_version;
  const resources = async (text: string): Promise<void> => {
    const before = await configVersion();
    writeFileSync(join(sp.dir, 'etc/mesh/resources/loc.yaml'), text);
    await waitFor('the new resources in force', async () => ((await configVersion()) > before ? true : undefined), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the other worker reads them too
  };
  let acks = 0;
  const mode = async (b: Backend, m: string): Promise<void> => {
    const id = ++acks;
    backends.stdin!.write(`${JSON.stringify({ name: b, mode: m, id })}\n`);
    await waitFor(`backend ${b} in mode ${m}`, () => events.find((e) => e.ack === id));
  };
  const http = (count: number): HttpResult[] => {
    const r = sp.pod.exec(process.execPath, [join(FIXTURES, 'traffic-client.mjs'), 'http', JSON.stringify({ url: `http://${VIP}/`, count })], { allowFailure: true });
    assert.equal(r.exitCode, 0, r.stderr);
    return JSON.parse(r.stdout) as HttpResult[];
  };
  const perBackend = (answers: readonly HttpResult[]): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const a of answers) {
      const k = a.status === 200 ? a.backend ?? '?' : String(a.status);
      out[k] = (out[k] ?? 0) + 1;
    }
    return out;
  };

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="client"\nistio-locality="us-east.zone-a"\n',
        'etc/mesh/resources/loc.yaml': SERVICE_ENTRY,
      },
      writable: true,
      env: ['POD_NAMESPACE=default'],
      prepare: async (pod) => {
        for (const b of Object.values(BACKENDS)) pod.peer.exec('ip', ['addr', 'add', `${b.address}/24`, 'dev', 'peer0']);
        backends = pod.peer.start(process.execPath, [join(FIXTURES, 'traffic-backends.mjs'),
          JSON.stringify(Object.entries(BACKENDS).map(([name, b]) => ({ name, address: b.address })))], { stdin: true });
        let out = '';
        backends.stdout!.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          let nl;
          while ((nl = out.indexOf('\n')) >= 0) {
            const line = out.slice(0, nl);
            out = out.slice(nl + 1);
            if (line.startsWith('{')) {
              const e = JSON.parse(line) as (typeof events)[number];
              if (e.ack !== undefined) events.push(e);
            } else if (line === 'listening') events.push({ backend: '', mode: 'listening' });
          }
        });
        await waitFor('the backends listening', () => events.find((e) => e.mode === 'listening'), 15_000);
      },
    });
  });
  after(() => sp?.close());

  it('without a rule (no outlierDetection): every endpoint takes traffic, whatever its locality', () => {
    const per = perBackend(http(400));
    for (const b of Object.keys(BACKENDS)) assert.ok((per[b] ?? 0) > 0, `${b}: ${JSON.stringify(per)}`);
  });

  it('distribute: 70 % to the pod\'s zone, 30 % to the other region, none to the zone no weight covers', async () => {
    await resources(SERVICE_ENTRY + rule(`loadBalancer:
  localityLbSetting:
    distribute:
    - from: us-east/zone-a
      to: {us-east/zone-a: 70, eu-west/*: 30}`));
    const per = perBackend(http(1000));
    assert.equal(per['b2'] ?? 0, 0, JSON.stringify(per));
    const remote = (per['b3'] ?? 0) + (per['b4'] ?? 0);
    // Binomial(1000, 0.3): mean 300, sd 14.5; [235, 365] is ±4.5 sd.
    assert.ok(remote >= 235 && remote <= 365, `eu-west got ${remote} of 1000: ${JSON.stringify(per)}`);
    assert.equal((per['b1'] ?? 0) + remote, 1000, JSON.stringify(per));
  });

  it('retryRemoteLocalities: the third attempt leaves the priority the first two tried', async () => {
    // Outlier detection that ejects nothing here (1000 errors): failover priorities without ejections.
    // (Before the failover test: its ejections would outlive it, the cluster being the same.)
    const od = 'outlierDetection: {consecutive5xxErrors: 1000}';
    const retries = (remote: boolean): string => SERVICE_ENTRY.replace('retries: {attempts: 0}',
      `retries: {attempts: 2, retryOn: 5xx, retryRemoteLocalities: ${remote}}`);
    await mode('b1', '503');
    try {
      await resources(retries(false) + rule(od));
      assert.deepEqual(perBackend(http(20)), { 503: 20 }, 'every attempt stays in the first priority (b1 alone)');
      await resources(retries(true) + rule(od));
      assert.deepEqual(perBackend(http(20)), { b2: 20 }, 'the third attempt goes to the next priority');
    } finally {
      await mode('b1', 'ok');
    }
  });

  it('failover: the pod\'s zone, then (ejected) the same region\'s other zone, then the other region; /clusters and /debug/decisions say so', async () => {
    await resources(SERVICE_ENTRY + rule(`outlierDetection: {consecutive5xxErrors: 3, interval: 1s, baseEjectionTime: 60s, maxEjectionPercent: 100}`));
    assert.deepEqual(perBackend(http(100)), { b1: 100 });
    const clusters = await admin('/clusters');
    const priority = (b: Backend): string | undefined =>
      new RegExp(`outbound\\|80\\|\\|${HOST.replace(/\./g, '\\.')}::${BACKENDS[b].address.replace(/\./g, '\\.')}:8080::priority::(\\d+)`).exec(clusters)?.[1];
    assert.deepEqual((Object.keys(BACKENDS) as Backend[]).map(priority), ['0', '1', '2', '2'], clusters);

    await mode('b1', '503');
    // Three 503s eject b1 (each worker sees the shared counters): then every answer comes from b2.
    await waitFor('b1 ejected', () => (perBackend(http(4))['b2'] === 4 ? true : undefined), 10_000);
    assert.deepEqual(perBackend(http(100)), { b2: 100 });
    const decisions = await admin('/debug/decisions');
    assert.match(decisions, /locality failover: priority 1 \(us-east\/zone-b: 198\.18\.1\.12:8080\)/);

    await mode('b2', '503');
    await waitFor('b2 ejected', () => {
      const per = perBackend(http(4));
      return (per['b3'] ?? 0) + (per['b4'] ?? 0) === 4 ? true : undefined;
    }, 10_000);
    const per = perBackend(http(200));
    assert.equal((per['b3'] ?? 0) + (per['b4'] ?? 0), 200, JSON.stringify(per));
    assert.ok((per['b3'] ?? 0) > 0 && (per['b4'] ?? 0) > 0, `the other region's two zones are one priority: ${JSON.stringify(per)}`);
    await mode('b1', 'ok');
    await mode('b2', 'ok');
  });

  it('warmup: an endpoint that joins gets a small share at first (ROUND_ROBIN, 60 s window from 10 %)', async () => {
    const warm = rule('loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 60s}}');
    await resources(serviceWith(['b1', 'b2']) + warm);
    assert.deepEqual(Object.keys(perBackend(http(100))).sort(), ['b1', 'b2']);
    await resources(serviceWith(['b1', 'b2', 'b3']) + warm);
    // Weights 1, 1 and 0.1 for its first 6 s: about 0.1 / 2.1 of the requests (29 of 600), against
    // 200 without warmup. Each worker's weighted rotation is deterministic: the bounds are wide.
    const per = perBackend(http(600));
    assert.ok((per['b3'] ?? 0) >= 5 && (per['b3'] ?? 0) <= 80, `the new endpoint got ${per['b3'] ?? 0} of 600: ${JSON.stringify(per)}`);
    assert.equal((per['b1'] ?? 0) + (per['b2'] ?? 0) + (per['b3'] ?? 0), 600, JSON.stringify(per));
  });
});
