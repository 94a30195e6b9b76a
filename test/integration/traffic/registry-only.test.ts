// outboundTrafficPolicy end to end, as in a pod: a ServiceEntry covers one backend (by a virtual IP
// and its host), another backend is reached by its own address, which no service covers. With the
// mesh config's ALLOW_ANY (the default) both answer; with a Sidecar saying REGISTRY_ONLY the
// uncovered one gets 502 with flag NR over HTTP on a port where services take requests by Host
// (curl and node:http), and its connections to other ports are closed without a byte (Istio's
// BlackHoleCluster: no listener there), counted and logged; the covered one still answers. A Sidecar's egress hosts that leave the service out make it uncovered too.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, writeResources, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const VIP = '240.240.0.20';
const HOST = 'known.example.com';
const KNOWN = '198.18.0.21';
const UNKNOWN = '198.18.0.22';

const SERVICE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: known, namespace: default}
spec:
  hosts: [${HOST}]
  addresses: [${VIP}]
  ports:
  - {number: 80, name: http, protocol: HTTP}
  - {number: 9000, name: tcp, protocol: TCP}
  resolution: STATIC
  endpoints: [{address: ${KNOWN}, ports: {http: 8080}}]
`;
const sidecar = (spec: string): string => `---
apiVersion: networking.istio.io/v1beta1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
${spec}`;

describe('outboundTrafficPolicy: ALLOW_ANY passes unknown destinations through, REGISTRY_ONLY sends them to the BlackHoleCluster', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let backends: ChildProcess;

  const resources = (text: string): Promise<void> => writeResources(sp, 'etc/mesh/resources/r.yaml', text);
  const curl = (url: string): { code: string; body: string } => {
    const r = sp.pod.exec('curl', ['-sS', '--max-time', '5', '-o', '-', '-w', '\n%{http_code}', url], { allowFailure: true });
    const lines = r.stdout.split('\n');
    return { code: lines.pop() ?? '', body: lines.join('\n') };
  };
  const client = (kind: 'http' | 'tcp', o: Record<string, unknown>): { status?: number; backend?: string; error?: string }[] => {
    const r = sp.pod.exec(process.execPath, [join(FIXTURES, 'traffic-client.mjs'), kind, JSON.stringify(o)], { allowFailure: true });
    assert.equal(r.exitCode, 0, r.stderr);
    return JSON.parse(r.stdout) as { status?: number; backend?: string; error?: string }[];
  };
  const stat = async (name: string): Promise<number> => {
    const r = await runCli(['request', 'GET', '/stats'], { prefix: ['ip', 'netns', 'exec', sp.pod.name] });
    const m = new RegExp(`^${name.replace(/\./g, '\\.')}: (\\d+)$`, 'm').exec(r.stdout);
    return m ? Number(m[1]) : NaN;
  };
  const accessLog = (): string => (existsSync(join(sp.dir, 'access.log')) ? readFileSync(join(sp.dir, 'access.log'), 'utf8') : '');

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="client"\n',
        'etc/mesh/config/mesh': 'accessLogFile: ./access.log\n',
        'etc/mesh/resources/r.yaml': SERVICE,
      },
      writable: true,
      env: ['POD_NAMESPACE=default'],
      prepare: async (pod) => {
        for (const address of [KNOWN, UNKNOWN]) pod.peer.exec('ip', ['addr', 'add', `${address}/24`, 'dev', 'peer0']);
        backends = pod.peer.start(process.execPath, [join(FIXTURES, 'traffic-backends.mjs'),
          JSON.stringify([{ name: 'known', address: KNOWN }, { name: 'unknown', address: UNKNOWN }])], { stdin: true });
        let out = '';
        backends.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
        await waitFor('the backends listening', () => out.includes('listening') || undefined, 15_000);
      },
    });
  });
  after(() => sp?.close());

  it('ALLOW_ANY (the default): a destination no service covers is reached as it is', () => {
    assert.match(curl(`http://${UNKNOWN}:8080/`).body, /"backend":"unknown"/);
    assert.deepEqual(client('tcp', { host: UNKNOWN, port: 9000, count: 1 }).map((r) => r.backend), ['unknown']);
  });

  it('REGISTRY_ONLY: HTTP on a service port gets 502 NR, other connections are closed with nothing relayed; the service still answers', async () => {
    await resources(SERVICE + sidecar('  outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n'));
    const cxBefore = await stat('cluster.BlackHoleCluster.upstream_cx_total');
    // Port 80 takes requests by Host (the service's HTTP port): an unknown address there is Istio's catch-all route, 502.
    const blocked = curl(`http://${UNKNOWN}/`);
    assert.equal(blocked.code, '502');
    assert.doesNotMatch(blocked.body, /backend/);
    const viaNode = client('http', { url: `http://${UNKNOWN}/`, count: 2 });
    assert.deepEqual(viaNode.map((r) => r.status), [502, 502]);
    // Port 8080 is no service's: closed at once, whatever the bytes (Istio has no listener there), though the backend listens.
    assert.equal(curl(`http://${UNKNOWN}:8080/`).code, '000');
    const started = Date.now();
    const tcp = client('tcp', { host: UNKNOWN, port: 9000, count: 2 });
    assert.deepEqual(tcp.map((r) => r.backend), [undefined, undefined], JSON.stringify(tcp));
    assert.ok(tcp.every((r) => r.error === 'closed' || r.error === 'ECONNRESET'), JSON.stringify(tcp));
    // Closed at once: no wait for bytes that could not change the answer (the client gives up after 10 s).
    assert.ok(Date.now() - started < 5_000, `${Date.now() - started} ms for two refused connections`);
    // The service: by its virtual IP (HTTP and TCP) and by its host name.
    assert.match(curl(`http://${VIP}/`).body, /"backend":"known"/);
    assert.deepEqual(client('tcp', { host: VIP, port: 9000, count: 1 }).map((r) => r.backend), ['known']);
    await waitFor('the black hole counted', async () => ((await stat('cluster.BlackHoleCluster.upstream_cx_total')) >= cxBefore + 3 ? true : undefined), 5_000);
    await waitFor('the refusals logged', () => (/ 502 NR /.test(accessLog()) && /BlackHoleCluster/.test(accessLog()) ? true : undefined), 5_000);
  });

  it('egress hosts that leave the service out make it uncovered too; the Sidecar\'s ALLOW_ANY passes through again', async () => {
    await resources(SERVICE + sidecar('  egress: [{hosts: ["./other.example.com"]}]\n  outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n'));
    // No service seen at all: the virtual IP is an unknown address on a port no service has.
    assert.equal(curl(`http://${VIP}/`).code, '000');
    await resources(SERVICE + sidecar('  egress: [{hosts: ["*/known.example.com"]}]\n  outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n'));
    assert.match(curl(`http://${VIP}/`).body, /"backend":"known"/);
    assert.equal(curl(`http://${UNKNOWN}/`).code, '502');
    // Back to ALLOW_ANY by the Sidecar: passed through again.
    await resources(SERVICE + sidecar('  outboundTrafficPolicy: {mode: ALLOW_ANY}\n'));
    assert.match(curl(`http://${UNKNOWN}:8080/`).body, /"backend":"unknown"/);
  });
  it('a Telemetry turning the access log off for CLIENT (outbound) stops this sidecar\'s outbound lines; removed, they come back', async () => {
    const lines = (): number => accessLog().split('\n').filter((l) => l.includes(`${VIP}:80`) || l.includes('known.example.com')).length;
    const telemetry = `---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: quiet, namespace: default}
spec:
  accessLogging: [{providers: [{name: envoy}], disabled: true, match: {mode: CLIENT}}]
`;
    await resources(SERVICE + telemetry);
    const before = lines();
    assert.match(curl(`http://${VIP}/`).body, /"backend":"known"/);
    await new Promise((resolve) => setTimeout(resolve, 500)); // the log is written in batches
    assert.equal(lines(), before, 'no line for the request while CLIENT is off');
    await resources(SERVICE);
    assert.match(curl(`http://${VIP}/`).body, /"backend":"known"/);
    await waitFor('the line back', () => (lines() > before ? true : undefined), 5_000);
  });
});

describe('outboundTrafficPolicy REGISTRY_ONLY from the mesh config (no Sidecar)', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/config/mesh': 'outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n',
        'etc/mesh/resources/r.yaml': SERVICE,
      },
      env: ['POD_NAMESPACE=default'],
      prepare: async (pod) => {
        pod.peer.exec('ip', ['addr', 'add', `${UNKNOWN}/24`, 'dev', 'peer0']);
        const backends = pod.peer.start(process.execPath, [join(FIXTURES, 'traffic-backends.mjs'), JSON.stringify([{ name: 'unknown', address: UNKNOWN }])]);
        let out = '';
        backends.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
        await waitFor('the backend listening', () => out.includes('listening') || undefined, 15_000);
      },
    });
  });
  after(() => sp?.close());

  it('an unknown destination gets 502 on a service port and a closed connection elsewhere; the mesh config is not warned about', () => {
    const on80 = sp.pod.exec('curl', ['-sS', '--max-time', '5', '-o', '/dev/null', '-w', '%{http_code}', `http://${UNKNOWN}/`], { allowFailure: true });
    assert.equal(on80.stdout, '502');
    const on8080 = sp.pod.exec('curl', ['-sS', '--max-time', '5', '-o', '/dev/null', '-w', '%{http_code}', `http://${UNKNOWN}:8080/`], { allowFailure: true });
    assert.equal(on8080.stdout, '000', 'closed: the backend listening there is not reached');
    assert.doesNotMatch(sp.stdout() + sp.stderr(), /meshConfig\.outboundTrafficPolicy/);
  });
});
