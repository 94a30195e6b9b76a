// Istio's standard metrics between two meshed pods over mutual TLS, end to end: A (`sleep`, default
// prefix `mesh_`) calls B (`httpbin`, MESH_METRICS_PREFIX=istio) with HTTP/1.1, gRPC and raw TCP; each
// side's 15090 is scraped and every standard metric checked with the labels Istio would give the same
// traffic, the peer's workload learnt through Istio's metadata exchange. The exchange's headers never
// reach an application, and a plaintext client's forged ones are dropped. A burst of distinct
// clients, paths and forged headers adds no series. Then a real Prometheus scrapes both pods and
// queries shaped like Istio's dashboards get answers.
import assert from 'node:assert/strict';
import { chownSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { spawnSync } from 'node:child_process';
import { encodeStruct } from '../../../src/metrics/proto-struct.js';
import { metadataOfHeader } from '../../../src/metrics/peer-metadata.js';
import { encodeExchangeFrame, readExchangeFrame } from '../../../src/metrics/tcp-exchange-frame.js';
import { envoyFrame, sidecarFields } from '../../helpers/exchange-frames.js';
import { grpcCallsIn, H2_APPS } from '../../helpers/h2-fixtures.js';
import { createRootCa, issueWorkloadCert, writeCertFiles, type TestCa, type WorkloadCertSet } from '../../helpers/mesh-certs.js';
import { createMeshNetwork, type MeshNetwork, type MeshPodNamespace } from '../../helpers/mesh-network.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { matching, samples, type Sample } from '../../helpers/prom-samples.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const B = '198.18.10.3';
const spiffe = (sa: string): string => `spiffe://cluster.local/ns/default/sa/${sa}`;
const HTTPBIN = 'httpbin.default.svc.cluster.local';
/** D's address (the fourth pod): an Envoy-shaped mesh server runs there for A's outbound exchange. */
const ENVOY = '198.18.10.4';
const ENVOY_HOST = 'reviews.default.svc.cluster.local';

const A_RESOURCES = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: httpbin, namespace: default}
spec:
  hosts: [${HTTPBIN}]
  addresses: [${B}]
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 8081, name: tcp, protocol: TCP}, {number: 7070, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: ${B}}]
  location: MESH_INTERNAL
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: httpbin, namespace: default}
spec:
  host: ${HTTPBIN}
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
---
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [${ENVOY_HOST}]
  addresses: [${ENVOY}]
  ports: [{number: 9101, name: tcp-mx, protocol: TCP}, {number: 9102, name: tcp-istio, protocol: TCP}, {number: 9103, name: tcp-noframe, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: ${ENVOY}}]
  location: MESH_INTERNAL
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: ${ENVOY_HOST}
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
`;

/** B: mutual TLS where A calls it, PERMISSIVE on 9080 where a plaintext client (D) calls it. */
const B_RESOURCES = `apiVersion: security.mesh.io/v1
kind: PeerAuthentication
metadata: {name: httpbin, namespace: default}
spec:
  selector: {matchLabels: {app: httpbin}}
  mtls: {mode: STRICT}
  portLevelMtls:
    9080: {mode: PERMISSIVE}
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: no-denied, namespace: default}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: DENY
  rules:
  - to: [{operation: {ports: ["8080"], paths: ["/denied"]}}]
`;

/** The ingress gateway routes /headers to B's PERMISSIVE port; auto mTLS (the pod network) makes that mutual TLS. */
const GATEWAY_RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: ingressgateway, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 9000, name: tcp, protocol: TCP}
    hosts: ["*"]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: to-b, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [ingressgateway]
  http:
  - match: [{uri: {prefix: /headers}}]
    route: [{destination: {host: ${B}, port: {number: 9080}}}]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: to-b-tcp, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [ingressgateway]
  tcp:
  - match: [{port: 9000}]
    route: [{destination: {host: ${B}, port: {number: 8081}}}]
`;

const prometheusSkip = spawnSync('prometheus', ['--version']).status === 0 ? false : 'prometheus is not installed (scripts/install-deps.sh installs the Debian package)';

/** The one sample of `name` whose labels include `want`; fails naming what there is otherwise. */
function one(text: string, name: string, want: Record<string, string>): Sample {
  const all = samples(text, name);
  const found = matching(text, name, want);
  assert.equal(found.length, 1, `${name} ${JSON.stringify(want)}: ${found.length} samples among\n${all.map((s) => JSON.stringify(s.labels)).join('\n')}`);
  return found[0]!;
}

/** Istio's labels of a sample, as an object of the ones named (to compare whole). */
const pick = (s: Sample, names: readonly string[]): Record<string, string | undefined> => Object.fromEntries(names.map((n) => [n, s.labels[n]]));

const SIDE_LABELS = [
  'source_workload', 'source_workload_namespace', 'source_principal', 'source_app', 'source_version', 'source_canonical_service',
  'source_canonical_revision', 'source_cluster', 'destination_workload', 'destination_workload_namespace', 'destination_principal',
  'destination_app', 'destination_version', 'destination_service', 'destination_service_name', 'destination_service_namespace',
  'destination_canonical_service', 'destination_canonical_revision', 'destination_cluster',
] as const;

/** What Istio reports for sleep → httpbin over mutual TLS, on either side. */
const SLEEP_TO_HTTPBIN = {
  source_workload: 'sleep', source_workload_namespace: 'default', source_principal: spiffe('sleep'), source_app: 'sleep', source_version: 'v1',
  source_canonical_service: 'sleep', source_canonical_revision: 'v1', source_cluster: 'Kubernetes',
  destination_workload: 'httpbin', destination_workload_namespace: 'default', destination_principal: spiffe('httpbin'), destination_app: 'httpbin',
  destination_version: 'v2', destination_service: HTTPBIN, destination_service_name: 'httpbin', destination_service_namespace: 'default',
  destination_canonical_service: 'httpbin', destination_canonical_revision: 'v2', destination_cluster: 'Kubernetes',
};

describe('Istio\'s standard metrics between two meshed pods', { skip: netnsSkip }, () => {
  let net: MeshNetwork;
  let ca: TestCa;
  let a: SidecarPod<MeshPodNamespace>;
  let b: SidecarPod<MeshPodNamespace>;
  let d: MeshPodNamespace;
  let g: SidecarPod<MeshPodNamespace>;
  const bApp: string[] = [];

  const mount = async (dir: string, set: WorkloadCertSet): Promise<void> => {
    await writeCertFiles(join(dir, 'etc', 'certs'), set);
    for (const f of readdirSync(join(dir, 'etc', 'certs'))) chownSync(join(dir, 'etc', 'certs', f), 1337, 1337);
  };
  const meshedPod = async (sa: string, pod: string, labels: string, resources: string, env: string[],
    prepare?: (ns: MeshPodNamespace) => Promise<void>): Promise<SidecarPod<MeshPodNamespace>> => {
    const cert = await issueWorkloadCert(ca, { spiffeId: spiffe(sa) });
    return startSidecarPod<MeshPodNamespace>({
      namespace: () => net.addPod(),
      files: { 'etc/mesh/pod/labels': labels, 'etc/mesh/resources/mesh.yaml': resources },
      env: ['POD_NAMESPACE=default', `POD_NAME=${pod}`, `SERVICE_ACCOUNT=${sa}`, 'FILE_MOUNTED_CERTS=true', ...env],
      prepare: async (p) => { await prepare?.(p); },
      beforeStart: (dir) => mount(dir, cert),
    });
  };
  const http = (from: MeshPodNamespace, specs: object[]): { status: number; headers: Record<string, string>; body: string }[] =>
    JSON.parse(from.exec(process.execPath, [join(FIXTURES, 'http-requests.mjs'), JSON.stringify(specs)]).stdout) as { status: number; headers: Record<string, string>; body: string }[];
  const tcp = (from: MeshPodNamespace, line: string): string => {
    const script = `const s = require('net').connect(8081, '${B}'); let d = ''; let sent = false;
      s.on('data', (c) => { d += c; if (!sent && d.includes('\\n')) { sent = true; s.write(${JSON.stringify(`${line}\n`)}); } else if (sent && d.includes(${JSON.stringify(line)})) s.end(); });
      s.on('error', () => {}); s.on('close', () => process.stdout.write(d)); setTimeout(() => s.destroy(), 5000).unref();`;
    return from.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
  };
  /** A client shaped like an Envoy sidecar's upstream connection (test/fixtures/mesh-tls-client.mjs), from `from`. */
  const meshTlsClient = (from: MeshPodNamespace, o: { port: number; alpn: string[]; cert?: string; first?: Buffer; send?: string; until?: string; ms?: number }):
    { alpn: string | null; received: Buffer; error?: string } => {
    const certs = o.cert === undefined ? {} : { cert: join(o.cert, 'cert-chain.pem'), key: join(o.cert, 'key.pem') };
    const out = from.exec(process.execPath, [join(FIXTURES, 'mesh-tls-client.mjs'), JSON.stringify({
      host: B, port: o.port, alpn: o.alpn, ...certs, first: o.first?.toString('base64'), send: o.send, until: o.until, ms: o.ms,
    })]).stdout;
    const r = JSON.parse(out) as { alpn: string | null; received: string; error?: string };
    return { ...r, received: Buffer.from(r.received, 'base64') };
  };
  /** Where the certificates of the Envoy-like clients are (a workload of the mesh's root, and one of another root). */
  let certDir: string;
  const RATINGS = { pod: 'ratings-v1-7dc98c7588-kx2l9', namespace: 'default', workload: 'ratings-v1', app: 'ratings', version: 'v1', ip: '198.18.10.9' };
  const scrape = (pod: MeshPodNamespace): string => pod.exec('curl', ['-s', '--max-time', '5', 'http://127.0.0.1:15090/stats/prometheus']).stdout;
  /** Scrapes until `ready` holds (TCP closes and late completions are counted a moment after the client is done). */
  const scrapeUntil = async (pod: MeshPodNamespace, ready: (text: string) => boolean): Promise<string> => {
    let text = scrape(pod);
    for (let i = 0; i < 50 && !ready(text); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      text = scrape(pod);
    }
    return text;
  };

  before(async () => {
    net = createMeshNetwork();
    ca = await createRootCa();
    a = await meshedPod('sleep', 'sleep-5f8b9c7d6e-abcde', 'app="sleep"\nversion="v1"\n', A_RESOURCES, []);
    b = await meshedPod('httpbin', 'httpbin-7d9f8c6b5a-fghij', 'app="httpbin"\nversion="v2"\n', B_RESOURCES, ['MESH_METRICS_PREFIX=istio'], async (p) => {
      const app = p.start('env', ['ECHO_LOG=1', process.execPath, join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '8080', 'httpbin']);
      app.stdout!.setEncoding('utf8').on('data', (s: string) => { bApp.push(...s.split('\n').filter((l) => l !== '')); });
      await new Promise<void>((resolve) => { const t = setInterval(() => { if (bApp.some((l) => l.startsWith('listening'))) { clearInterval(t); resolve(); } }, 20); });
      await untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'httpbin-permissive']));
      await untilFirstOutput(p.start(process.execPath, [H2_APPS, '0.0.0.0', 'httpbin'])); // gRPC on 7070
    });
    assert.equal(b.pod.address, B);
    d = net.addPod(); // no sidecar: a client outside the mesh
    certDir = mkdtempSync(join(tmpdir(), 'pa-mx-'));
    await writeCertFiles(join(certDir, 'ratings'), await issueWorkloadCert(ca, { spiffeId: spiffe('ratings') }));
    await writeCertFiles(join(certDir, 'stranger'), await issueWorkloadCert(await createRootCa(), { spiffeId: spiffe('ratings') }));
    const gCert = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/mesh-system/sa/ingressgateway' });
    g = await startSidecarPod<MeshPodNamespace>({
      namespace: () => net.addPod(),
      files: { 'etc/mesh/pod/labels': 'mesh="ingressgateway"\napp="ingressgateway"\n', 'etc/mesh/resources/gateway.yaml': GATEWAY_RESOURCES, 'etc/mesh/config/mesh': 'autoMtlsCidrs: [198.18.10.0/24]\n' },
      env: ['POD_NAMESPACE=mesh-system', 'POD_NAME=ingressgateway-6f9c8d7b5c-k2j4m', 'SERVICE_ACCOUNT=ingressgateway', 'FILE_MOUNTED_CERTS=true'],
      args: ['router'],
      beforeStart: (dir) => mount(dir, gCert),
    });
  });

  after(() => {
    for (const p of [a, b, g]) p?.close();
    net?.close();
    if (certDir !== undefined) rmSync(certDir, { recursive: true, force: true });
  });

  it('HTTP/1.1: both reporters label the request as Istio would, the peer\'s workload learnt through the exchange; no app sees the exchange', async () => {
    const answers = http(a.pod, [{ url: `http://${B}:8080/headers` }, { url: `http://${B}:8080/anything` }, { url: `http://${B}:8080/headers`, method: 'POST', body: 'x'.repeat(1500) }]);
    assert.equal(answers[0]!.status, 200, answers[0]!.body);
    const seen = (JSON.parse(answers[0]!.body) as { headers: Record<string, string> }).headers;
    assert.equal(seen['x-envoy-peer-metadata'], undefined, 'B\'s app does not see the exchange');
    assert.equal(seen['x-envoy-peer-metadata-id'], undefined);
    assert.equal(answers[0]!.headers['x-envoy-peer-metadata'], undefined, 'A\'s app does not see B\'s answer of it');
    assert.equal(answers[0]!.headers['x-envoy-peer-metadata-id'], undefined);

    const bText = await scrapeUntil(b.pod, (t) => samples(t, 'istio_requests_total').some((s) => s.value === 3));
    const inbound = one(bText, 'istio_requests_total', { reporter: 'destination', response_code: '200', request_protocol: 'http' });
    assert.deepEqual(pick(inbound, SIDE_LABELS), SLEEP_TO_HTTPBIN);
    assert.equal(inbound.value, 3);
    assert.equal(inbound.labels['connection_security_policy'], 'mutual_tls');
    assert.equal(inbound.labels['response_flags'], '-');
    assert.equal(inbound.labels['grpc_response_status'], '');
    assert.equal(samples(bText, 'mesh_requests_total').length, 0, 'B exports Istio\'s names only');

    const aText = await scrapeUntil(a.pod, (t) => samples(t, 'mesh_requests_total').some((s) => s.value === 3));
    const outbound = one(aText, 'mesh_requests_total', { reporter: 'source', response_code: '200', request_protocol: 'http' });
    assert.deepEqual(pick(outbound, SIDE_LABELS), SLEEP_TO_HTTPBIN);
    assert.equal(outbound.labels['connection_security_policy'], 'unknown', 'Istio\'s source reporter cannot know the server\'s policy');
    assert.equal(samples(aText, 'istio_requests_total').length, 0);

    // The histograms, on both sides: one POST of 1500 bytes among the three.
    const reqBytes = one(aText, 'mesh_request_bytes_bucket', { reporter: 'source', response_code: '200', le: '1000' });
    assert.equal(reqBytes.value, 2, 'the two GETs (0 bytes) under 1000, the POST above');
    assert.equal(one(aText, 'mesh_request_bytes_count', { reporter: 'source', response_code: '200' }).value, 3);
    assert.equal(one(bText, 'istio_request_duration_milliseconds_count', { reporter: 'destination', response_code: '200' }).value, 3);
    assert.ok(one(bText, 'istio_response_bytes_sum', { reporter: 'destination', response_code: '200' }).value > 0);
    assert.equal(one(bText, 'istio_request_duration_milliseconds_bucket', { reporter: 'destination', response_code: '200', le: '+Inf' }).value, 3);
  });

  it('a 403 of B\'s policy: B reports it with RBAC, A still learns who answered', async () => {
    const [denied] = http(a.pod, [{ url: `http://${B}:8080/denied` }]);
    assert.equal(denied!.status, 403, denied!.body);
    assert.equal(denied!.headers['x-envoy-peer-metadata'], undefined);
    const bText = await scrapeUntil(b.pod, (t) => samples(t, 'istio_requests_total').some((s) => s.labels['response_code'] === '403'));
    const inbound = one(bText, 'istio_requests_total', { reporter: 'destination', response_code: '403' });
    assert.equal(inbound.labels['response_flags'], 'RBAC');
    assert.equal(inbound.labels['source_workload'], 'sleep');
    const aText = await scrapeUntil(a.pod, (t) => samples(t, 'mesh_requests_total').some((s) => s.labels['response_code'] === '403'));
    const outbound = one(aText, 'mesh_requests_total', { reporter: 'source', response_code: '403' });
    assert.deepEqual(pick(outbound, SIDE_LABELS), SLEEP_TO_HTTPBIN);
  });

  it('gRPC: request_protocol grpc, grpc_response_status and the messages each way, on both sides', async () => {
    const results = grpcCallsIn(a.pod, `${B}:7070`, [{ method: 'Ping', text: 'one' }, { method: 'Ping', text: 'two' }]);
    assert.deepEqual(results.map((r) => r.code), [0, 0]);
    const bText = await scrapeUntil(b.pod, (t) => samples(t, 'istio_request_messages_total').length > 0);
    const call = one(bText, 'istio_requests_total', { reporter: 'destination', request_protocol: 'grpc' });
    assert.deepEqual(pick(call, SIDE_LABELS), { ...SLEEP_TO_HTTPBIN, destination_service: HTTPBIN });
    assert.equal(call.value, 2);
    assert.equal(call.labels['grpc_response_status'], '0');
    assert.equal(one(bText, 'istio_request_messages_total', { reporter: 'destination', request_protocol: 'grpc' }).value, 2);
    assert.equal(one(bText, 'istio_response_messages_total', { reporter: 'destination', request_protocol: 'grpc' }).value, 2);
    const aText = await scrapeUntil(a.pod, (t) => samples(t, 'mesh_response_messages_total').length > 0);
    const out = one(aText, 'mesh_requests_total', { reporter: 'source', request_protocol: 'grpc' });
    assert.deepEqual(pick(out, SIDE_LABELS), SLEEP_TO_HTTPBIN);
    assert.equal(one(aText, 'mesh_request_messages_total', { reporter: 'source', request_protocol: 'grpc' }).value, 2);
    assert.equal(one(aText, 'mesh_response_messages_total', { reporter: 'source', request_protocol: 'grpc' }).value, 2);
  });

  it('TCP: the four TCP metrics on both sides, each side\'s peer workload learnt through the TCP metadata exchange (request_protocol tcp)', async () => {
    const got = tcp(a.pod, 'tcp-metrics-marker');
    assert.match(got, /tcp-metrics-marker/);
    const closed = (name: string) => (t: string): boolean => samples(t, name).some((s) => s.value > 0);
    const bText = await scrapeUntil(b.pod, closed('istio_tcp_connections_closed_total'));
    const opened = one(bText, 'istio_tcp_connections_opened_total', { reporter: 'destination' });
    assert.equal(opened.value, 1);
    assert.equal(opened.labels['request_protocol'], 'tcp');
    assert.equal(opened.labels['source_principal'], spiffe('sleep'));
    assert.equal(opened.labels['destination_principal'], spiffe('httpbin'));
    assert.equal(opened.labels['destination_workload'], 'httpbin');
    assert.equal(opened.labels['destination_service'], HTTPBIN);
    assert.equal(opened.labels['connection_security_policy'], 'mutual_tls');
    assert.deepEqual(pick(opened, SIDE_LABELS), SLEEP_TO_HTTPBIN, 'B knows A\'s workload from A\'s frame');
    assert.equal(one(bText, 'istio_tcp_connections_closed_total', { reporter: 'destination' }).value, 1);
    assert.ok(one(bText, 'istio_tcp_received_bytes_total', { reporter: 'destination' }).value >= 'tcp-metrics-marker\n'.length);
    assert.ok(one(bText, 'istio_tcp_sent_bytes_total', { reporter: 'destination' }).value >= got.length);
    const aText = await scrapeUntil(a.pod, closed('mesh_tcp_connections_closed_total'));
    const aOpened = one(aText, 'mesh_tcp_connections_opened_total', { reporter: 'source' });
    assert.equal(aOpened.value, 1);
    assert.equal(aOpened.labels['destination_service'], HTTPBIN);
    assert.equal(aOpened.labels['source_workload'], 'sleep');
    assert.equal(aOpened.labels['source_principal'], spiffe('sleep'), 'over mutual TLS: its own identity');
    assert.equal(aOpened.labels['destination_principal'], spiffe('httpbin'), 'the upstream sidecar\'s verified identity');
    assert.deepEqual(pick(aOpened, SIDE_LABELS), SLEEP_TO_HTTPBIN, 'A knows B\'s workload from B\'s frame');
    assert.equal(got.includes('\x3d\x23\x04\x67'), false, 'no frame reached A\'s client');
    assert.equal(one(aText, 'mesh_tcp_sent_bytes_total', { reporter: 'source' }).value, got.length);
  });

  it('an Envoy sidecar\'s TCP exchange (its frame made from the documented format): B selects istio-peer-exchange, answers with its own frame first, reports the client\'s workload; B\'s app sees no frame', async () => {
    // As an Envoy client with the TCP cluster's ALPN (istio-peer-exchange, istio) and its metadata_exchange upstream filter.
    const r = meshTlsClient(d, { port: 8081, alpn: ['istio-peer-exchange', 'istio'], cert: join(certDir, 'ratings'),
      first: envoyFrame(sidecarFields(RATINGS)), send: 'envoy-marker\n', until: 'envoy-marker' });
    assert.equal(r.error, undefined);
    assert.equal(r.alpn, 'istio-peer-exchange');
    const frame = readExchangeFrame(r.received);
    assert.equal(frame.kind, 'frame', 'B\'s frame comes first');
    if (frame.kind !== 'frame') return;
    // The node id's address is INSTANCE_IP, which these pods are not given.
    assert.match(frame.id ?? '', /^sidecar~[^~]*~httpbin-7d9f8c6b5a-fghij\.default~default\.svc\.cluster\.local$/);
    assert.deepEqual(metadataOfHeader(frame.peerKey!), {
      workload: 'httpbin', namespace: 'default', app: 'httpbin', version: 'v2', canonicalService: 'httpbin', canonicalRevision: 'v2', cluster: 'Kubernetes',
    });
    const app = r.received.subarray(frame.frameBytes).toString('latin1');
    assert.match(app, /^httpbin-tcp-hello from /, 'the app\'s greeting right after the frame: it saw no frame of the client\'s');
    assert.match(app, /envoy-marker\n$/, 'the client\'s bytes echoed as they were sent, without its frame');
    const bText = await scrapeUntil(b.pod, (t) => samples(t, 'istio_tcp_connections_closed_total').some((x) => x.labels['source_workload'] === 'ratings-v1'));
    const opened = one(bText, 'istio_tcp_connections_opened_total', { reporter: 'destination', source_workload: 'ratings-v1' });
    assert.deepEqual(pick(opened, ['source_workload', 'source_app', 'source_version', 'source_canonical_service', 'source_workload_namespace', 'source_principal']), {
      source_workload: 'ratings-v1', source_app: 'ratings', source_version: 'v1', source_canonical_service: 'ratings', source_workload_namespace: 'default',
      source_principal: spiffe('ratings'),
    });
  });

  it('A to an Envoy sidecar\'s TCP chain: its frame (made from the format) is read off before its bytes and A reports its workload; a server selecting istio, or sending no frame, is relayed as it is', async () => {
    assert.equal(d.address, ENVOY);
    const reviews = { ...RATINGS, pod: 'reviews-v1-6c9f7d8b5a-zz9x1', workload: 'reviews-v1', app: 'reviews', ip: ENVOY };
    const ports = [
      { port: 9101, alpn: ['istio-peer-exchange', 'istio'], frame: envoyFrame(sidecarFields(reviews)).toString('base64'), greeting: 'envoy-hello\n' },
      { port: 9102, alpn: ['istio'], greeting: 'istio-hello\n' },
      { port: 9103, alpn: ['istio-peer-exchange', 'istio'], greeting: 'noframe-hello\n' },
    ];
    const server = d.start(process.execPath, [join(FIXTURES, 'mesh-tls-server.mjs'), JSON.stringify({
      cert: join(certDir, 'ratings', 'cert-chain.pem'), key: join(certDir, 'ratings', 'key.pem'), ports,
    })]);
    const lines: string[] = [];
    server.stdout!.setEncoding('utf8').on('data', (t: string) => { lines.push(...t.split('\n').filter((l) => l !== '')); });
    try {
      await new Promise<void>((resolve) => { const t = setInterval(() => { if (lines.includes('listening')) { clearInterval(t); resolve(); } }, 20); });
      for (const p of ports) {
        const line = `line-${p.port}`;
        const script = `const s = require('net').connect(${p.port}, '${ENVOY}'); let d = ''; let sent = false;
          s.on('data', (c) => { d += c; if (!sent && d.includes('\\n')) { sent = true; s.write('${line}\\n'); } else if (sent && d.includes('${line}')) s.end(); });
          s.on('error', () => {}); s.on('close', () => process.stdout.write(d)); setTimeout(() => s.destroy(), 5000).unref();`;
        const got = a.pod.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
        if (p.port === 9103) { // no filter there: it echoes A's frame too, as the application's bytes they are to it
          assert.ok(got.startsWith(p.greeting) && got.endsWith(`${line}\n`), got);
        } else {
          assert.equal(got, `${p.greeting}${line}\n`, `port ${p.port}: the server's bytes as it sent them, without its frame`);
        }
      }
      const seen = new Map<number, { alpn: string | null; received: Buffer }>();
      for (let i = 0; i < 50 && seen.size < 3; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        for (const l of lines.filter((x) => x.startsWith('{'))) {
          const r = JSON.parse(l) as { port: number; alpn: string | null; received: string };
          seen.set(r.port, { alpn: r.alpn, received: Buffer.from(r.received, 'base64') });
        }
      }
      const withFrame = (port: number): string => {
        const r = seen.get(port)!;
        assert.equal(r.alpn, 'istio-peer-exchange', `port ${port}`);
        const frame = readExchangeFrame(r.received);
        assert.equal(frame.kind, 'frame', `port ${port}: A's frame first`);
        if (frame.kind !== 'frame') return '';
        assert.equal(metadataOfHeader(frame.peerKey!)?.workload, 'sleep');
        return r.received.subarray(frame.frameBytes).toString('latin1');
      };
      assert.equal(withFrame(9101), 'line-9101\n');
      assert.equal(withFrame(9103), 'line-9103\n', 'a server that selected the exchange gets A\'s frame, whatever it does with it');
      assert.equal(seen.get(9102)?.alpn, 'istio');
      assert.equal(seen.get(9102)?.received.toString('latin1'), 'line-9102\n', 'no frame to a server that did not select the exchange');
    } finally {
      server.kill('SIGKILL');
    }
    const aText = await scrapeUntil(a.pod, (t) => samples(t, 'mesh_tcp_connections_closed_total').filter((x) => x.labels['destination_service'] === ENVOY_HOST)
      .reduce((n, x) => n + x.value, 0) === 3);
    const learnt = one(aText, 'mesh_tcp_connections_opened_total', { reporter: 'source', destination_service: ENVOY_HOST, destination_workload: 'reviews-v1' });
    assert.equal(learnt.value, 1);
    assert.equal(learnt.labels['destination_app'], 'reviews');
    assert.equal(learnt.labels['destination_principal'], spiffe('ratings'), 'the principal is the certificate\'s, whatever the frame says');
    assert.equal(one(aText, 'mesh_tcp_connections_opened_total', { reporter: 'source', destination_service: ENVOY_HOST, destination_workload: 'unknown' }).value, 2);
  });

  it('an HTTP port with a client offering istio-peer-exchange first: the exchange, then HTTP as usual; an HTTP client\'s ALPN still gets istio-http', async () => {
    const r = meshTlsClient(d, { port: 8080, alpn: ['istio-peer-exchange', 'istio'], cert: join(certDir, 'ratings'),
      first: envoyFrame(sidecarFields(RATINGS)), send: 'GET /headers HTTP/1.1\r\nHost: httpbin\r\nConnection: close\r\n\r\n' });
    assert.equal(r.alpn, 'istio-peer-exchange');
    const frame = readExchangeFrame(r.received);
    assert.equal(frame.kind, 'frame');
    if (frame.kind !== 'frame') return;
    const answer = r.received.subarray(frame.frameBytes).toString('latin1');
    assert.match(answer, /^HTTP\/1\.1 200 /);
    const seen = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { headers: Record<string, string> };
    assert.equal(seen.headers['host'], 'httpbin', 'the request reached the app whole, without the frame');
    assert.equal(seen.headers['x-envoy-peer-metadata'], undefined);
    // Envoy's HTTP connections offer istio-http/* (its ALPN override), whatever else follows: B answers that.
    const h = meshTlsClient(d, { port: 8080, alpn: ['istio-peer-exchange', 'istio-http/1.1', 'istio'], cert: join(certDir, 'ratings'),
      send: 'GET /headers HTTP/1.1\r\nHost: httpbin\r\nConnection: close\r\n\r\n' });
    assert.equal(h.alpn, 'istio-http/1.1');
    assert.match(h.received.toString('latin1'), /^HTTP\/1\.1 200 /);
  });

  it('no metadata from outside the mesh: a plaintext client\'s frame is its application\'s bytes, a TLS client of another root is refused', async () => {
    const forged = encodeExchangeFrame({ NAME: 'forged-0', NAMESPACE: 'kube-system', WORKLOAD_NAME: 'forged', LABELS: { app: 'forged' } }, 'sidecar~1.2.3.4~forged-0.kube-system~kube-system.svc.cluster.local');
    // Plaintext to the PERMISSIVE port: carried as TCP to the app as it came (the app, an HTTP server, refuses it).
    const plain = d.exec(process.execPath, ['-e', `const s = require('net').connect(9080, '${B}', () => s.end(Buffer.from('${forged.toString('base64')}', 'base64')));
      s.on('data', () => {}); s.on('error', () => {}); s.on('close', () => process.stdout.write('closed')); setTimeout(() => s.destroy(), 3000).unref();`], { allowFailure: true });
    assert.equal(plain.stdout, 'closed');
    // A client of another root offering the exchange: no handshake, nothing read.
    const stranger = meshTlsClient(d, { port: 9080, alpn: ['istio-peer-exchange', 'istio'], cert: join(certDir, 'stranger'), first: forged, ms: 2000 });
    assert.equal(stranger.alpn === 'istio-peer-exchange' && stranger.received.length > 0, false, 'no exchange with a certificate of another root');
    // Nor a mesh ALPN without a certificate at all.
    const anonymous = meshTlsClient(d, { port: 9080, alpn: ['istio-peer-exchange', 'istio'], first: forged, ms: 2000 });
    assert.equal(anonymous.received.length, 0);
    // The control: the same port, a client of the mesh (verified certificate): its frame is taken.
    const details = { ...RATINGS, pod: 'details-v1-5f4d8c9b7a-q8w2e', workload: 'details-v1', app: 'details' };
    const meshed = meshTlsClient(d, { port: 9080, alpn: ['istio-peer-exchange', 'istio'], cert: join(certDir, 'ratings'),
      first: envoyFrame(sidecarFields(details)), send: '\u0000 not http\r\n\r\n' });
    assert.equal(meshed.alpn, 'istio-peer-exchange');
    const bText = await scrapeUntil(b.pod, (t) => samples(t, 'istio_tcp_connections_closed_total').some((x) => x.labels['connection_security_policy'] === 'none')
      && samples(t, 'istio_tcp_connections_opened_total').some((x) => x.labels['source_workload'] === 'details-v1'));
    const opened = one(bText, 'istio_tcp_connections_opened_total', { reporter: 'destination', connection_security_policy: 'none' });
    assert.equal(opened.labels['source_workload'], 'unknown', 'the plaintext client\'s frame says nothing of it');
    assert.equal(bText.includes('forged'), false);
    assert.equal(one(bText, 'istio_tcp_connections_opened_total', { reporter: 'destination', source_workload: 'details-v1' }).labels['source_principal'], spiffe('ratings'));
  });

  it('a client outside the mesh cannot forge the exchange: its headers are dropped and its requests are unknown; a burst of distinct clients adds no series', async () => {
    const forged = encodeStruct({ NAME: 'admin-0', NAMESPACE: 'kube-system', WORKLOAD_NAME: 'admin', LABELS: { app: 'admin' } }).toString('base64');
    const [answer] = http(d, [{ url: `http://${B}:9080/headers`, headers: { 'x-envoy-peer-metadata': forged, 'x-envoy-peer-metadata-id': 'sidecar~1.2.3.4~admin-0.kube-system~kube-system.svc.cluster.local' } }]);
    assert.equal(answer!.status, 200, answer!.body);
    const seen = (JSON.parse(answer!.body) as { headers: Record<string, string> }).headers;
    assert.equal(seen['x-envoy-peer-metadata'], undefined, 'a plaintext client\'s forged metadata does not reach the app');
    assert.equal(seen['x-envoy-peer-metadata-id'], undefined);
    assert.equal(answer!.headers['x-envoy-peer-metadata'], undefined, 'nor does B tell its metadata to a client outside the mesh');
    const before = await scrapeUntil(b.pod, (t) => samples(t, 'istio_requests_total').some((s) => s.labels['connection_security_policy'] === 'none'));
    const plain = one(before, 'istio_requests_total', { reporter: 'destination', connection_security_policy: 'none' });
    assert.equal(plain.labels['source_workload'], 'unknown');
    assert.equal(plain.labels['source_principal'], 'unknown');
    assert.equal(before.includes('kube-system'), false);
    // B exports the standard metrics under istio_ (its own series keep mesh_): their sample lines.
    const series = (t: string): number => t.split('\n').filter((l) => l.startsWith('istio_')).length;

    // 300 requests, each with its own path, user agent, authority, forged metadata: the series stay as they were.
    const burst = Array.from({ length: 300 }, (_, i) => ({
      url: `http://${B}:9080/client-${i}?q=${i}`,
      headers: { 'user-agent': `client-${i}`, host: `h${i}.example`, 'x-envoy-peer-metadata': encodeStruct({ WORKLOAD_NAME: `w${i}` }).toString('base64') },
    }));
    assert.ok(http(d, burst).every((r) => r.status === 200));
    const afterBurst = await scrapeUntil(b.pod, (t) => one(t, 'istio_requests_total', { reporter: 'destination', connection_security_policy: 'none' }).value === 301);
    assert.equal(one(afterBurst, 'istio_requests_total', { reporter: 'destination', connection_security_policy: 'none' }).value, 301);
    assert.equal(series(afterBurst), series(before), 'no series from a path, a header or a client\'s own metadata');
    console.log(`# series of the standard metrics on B after the traffic and the burst of 300 distinct clients: ${series(afterBurst)} sample lines`);
  });

  it('the ingress gateway reports as the source, learns B through the exchange, and its client sees none of it', async () => {
    // From inside the gateway's pod (the test pods capture inbound ports; a gateway pod's are its own).
    const [answer] = http(g.pod, [{ url: 'http://127.0.0.1:8080/headers', headers: { 'x-envoy-peer-metadata': encodeStruct({ WORKLOAD_NAME: 'forged' }).toString('base64') } }]);
    assert.equal(answer!.status, 200, answer!.body);
    assert.equal(answer!.headers['x-envoy-peer-metadata'], undefined, 'B\'s metadata does not leave the mesh through the gateway');
    assert.equal(answer!.headers['x-envoy-peer-metadata-id'], undefined);
    const seen = (JSON.parse(answer!.body) as { headers: Record<string, string> }).headers;
    assert.equal(seen['x-envoy-peer-metadata'], undefined, 'nor does B\'s app see the gateway\'s, or the client\'s forged one');
    const gText = await scrapeUntil(g.pod, (t) => samples(t, 'mesh_requests_total').length > 0);
    const out = one(gText, 'mesh_requests_total', { reporter: 'source', response_code: '200' });
    assert.equal(out.labels['source_workload'], 'ingressgateway');
    assert.equal(out.labels['source_workload_namespace'], 'mesh-system');
    assert.equal(out.labels['source_principal'], 'spiffe://cluster.local/ns/mesh-system/sa/ingressgateway');
    assert.equal(out.labels['destination_workload'], 'httpbin');
    assert.equal(out.labels['destination_principal'], spiffe('httpbin'));
    const bText = await scrapeUntil(b.pod, (t) => samples(t, 'istio_requests_total').some((s) => s.labels['source_workload'] === 'ingressgateway'));
    const inbound = one(bText, 'istio_requests_total', { reporter: 'destination', source_workload: 'ingressgateway' });
    assert.equal(inbound.labels['source_workload_namespace'], 'mesh-system');
    assert.equal(inbound.labels['connection_security_policy'], 'mutual_tls');
    assert.equal(bText.includes('forged'), false);
  });

  it('the ingress gateway\'s TCP route to B runs the TCP exchange too: B reports the gateway\'s workload, the gateway\'s client sees no frame', async () => {
    const script = `const s = require('net').connect(9000, '127.0.0.1'); let d = '';
      s.on('data', (c) => { d += c; if (d.includes('\\n')) s.end(); }); s.on('error', () => {});
      s.on('close', () => process.stdout.write(d)); setTimeout(() => s.destroy(), 5000).unref();`;
    const got = g.pod.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
    assert.match(got, /^httpbin-tcp-hello from /, 'the greeting first: no frame reached the client');
    const bText = await scrapeUntil(b.pod, (t) => samples(t, 'istio_tcp_connections_closed_total').some((x) => x.labels['source_workload'] === 'ingressgateway'));
    const opened = one(bText, 'istio_tcp_connections_opened_total', { reporter: 'destination', source_workload: 'ingressgateway' });
    assert.equal(opened.labels['source_workload_namespace'], 'mesh-system');
    assert.equal(opened.labels['source_principal'], 'spiffe://cluster.local/ns/mesh-system/sa/ingressgateway');
  });

  it('a real Prometheus scraping both pods answers queries shaped like Istio\'s dashboards', { skip: prometheusSkip }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pa-prom-'));
    try {
      writeFileSync(join(dir, 'prometheus.yml'), `global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: envoy-stats
  metrics_path: /stats/prometheus
  static_configs: [{targets: ['${a.pod.address}:15090', '${B}:15090']}]
`);
      const prom = d.start('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, '--web.listen-address=127.0.0.1:9090']);
      try {
        const query = (q: string): unknown[] => {
          const r = d.exec('curl', ['-s', '--max-time', '5', '--data-urlencode', `query=${q}`, 'http://127.0.0.1:9090/api/v1/query'], { allowFailure: true });
          if (r.exitCode !== 0 || r.stdout === '') return [];
          const body = JSON.parse(r.stdout) as { status: string; data?: { result: unknown[] } };
          return body.status === 'success' ? body.data!.result : [];
        };
        const queries = [
          // Mesh dashboard: global request volume and success rate.
          'round(sum(irate(istio_requests_total{reporter="destination"}[1m])), 0.001) >= 0',
          'sum(rate(istio_requests_total{reporter="destination", response_code!~"5.*"}[1m])) / sum(rate(istio_requests_total{reporter="destination"}[1m])) >= 0',
          // Service dashboard: by destination_service, source workload, the P90 of durations.
          `sum(istio_requests_total{reporter="destination", destination_service=~"${HTTPBIN}"}) by (source_workload, source_workload_namespace)`,
          `histogram_quantile(0.90, sum(irate(istio_request_duration_milliseconds_bucket{reporter="destination", destination_service=~"${HTTPBIN}"}[1m])) by (le)) >= 0`,
          `histogram_quantile(0.50, sum(rate(istio_request_bytes_bucket{reporter="destination", destination_service=~"${HTTPBIN}"}[1m])) by (le)) >= 0`,
          // Workload dashboard: inbound by source, TCP bytes, gRPC messages.
          'sum(istio_requests_total{reporter="destination", destination_workload="httpbin", destination_workload_namespace="default"}) by (source_workload)',
          'sum(istio_tcp_received_bytes_total{reporter="destination", destination_workload="httpbin"}) by (source_principal)',
          'sum(istio_request_messages_total{reporter="destination", destination_workload="httpbin"})',
          // The source reporter, from A (default names).
          `sum(mesh_requests_total{reporter="source", source_workload="sleep", destination_service="${HTTPBIN}"}) by (destination_workload, response_code)`,
          `histogram_quantile(0.99, sum(rate(mesh_request_duration_milliseconds_bucket{reporter="source", source_workload="sleep"}[1m])) by (le, destination_workload)) >= 0`,
        ];
        // The traffic of the other tests is there already; some more keeps the rates above zero.
        const deadline = Date.now() + 30_000;
        let empty = queries;
        while (empty.length > 0 && Date.now() < deadline) {
          http(a.pod, [{ url: `http://${B}:8080/headers` }, { url: `http://${B}:8080/headers` }]);
          grpcCallsIn(a.pod, `${B}:7070`, [{ method: 'Ping', text: 'p' }]);
          await new Promise((resolve) => setTimeout(resolve, 1000));
          empty = empty.filter((q) => query(q).length === 0);
        }
        assert.deepEqual(empty, [], 'every dashboard query has an answer');
        const byWorkload = query(`sum(istio_requests_total{reporter="destination", destination_service="${HTTPBIN}"}) by (source_workload)`) as { metric: Record<string, string> }[];
        assert.ok(byWorkload.some((r) => r.metric['source_workload'] === 'sleep'), JSON.stringify(byWorkload));
      } finally {
        prom.kill('SIGTERM');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
