// Two meshed pods and their sidecars, end to end, on one network (mesh-network.ts): A (service
// account `sleep`) calls B (`httpbin`) over HTTP and raw TCP; what crosses the wire between them is
// TLS (a capture on the bridge holds no plaintext of the request), and B's app gets plaintext with
// Istio's x-forwarded-client-cert. B's PeerAuthentication is STRICT on 8080 (a plaintext client from
// another namespace is reset) and PERMISSIVE on 9080 (served); its AuthorizationPolicy lets
// `sleep` through and refuses C (`other`, a meshed pod of another service account). Certificates
// are mounted files (FILE_MOUNTED_CERTS) signed by a root made here; A's are replaced while it
// runs and the next connection shows the new one. cert_expiry_seconds matches the certificate.
import assert from 'node:assert/strict';
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { grpcCallsIn, H2_APPS, type GrpcResult } from '../../helpers/h2-fixtures.js';
import { createIntermediateCa, createRootCa, issueWorkloadCert, writeCertFiles, type TestCa, type WorkloadCertSet } from '../../helpers/mesh-certs.js';
import { createMeshNetwork, NODE_V4, type MeshNetwork, type MeshPodNamespace } from '../../helpers/mesh-network.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { sumOf } from '../../helpers/prom-samples.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const id = (sa: string): string => `spiffe://cluster.local/ns/default/sa/${sa}`;

/** B's address on the network is the second pod's: 198.18.10.3. */
const B = '198.18.10.3';

const B_RESOURCES = `apiVersion: security.mesh.io/v1
kind: PeerAuthentication
metadata: {name: httpbin, namespace: default}
spec:
  selector: {matchLabels: {app: httpbin}}
  mtls: {mode: STRICT}
  portLevelMtls:
    9080: {mode: PERMISSIVE}
    9081: {mode: PERMISSIVE}
---
apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: only-sleep, namespace: default}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: ALLOW
  rules:
  - from:
    - source: {principals: ["cluster.local/ns/default/sa/sleep"]}
    to:
    - operation: {ports: ["8080", "8081", "7070"]}
  - to:
    - operation: {ports: ["9080", "9081"]}
`;

/** A reaches B through a ServiceEntry and a DestinationRule that asks for ISTIO_MUTUAL. */
const A_RESOURCES = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: httpbin, namespace: default}
spec:
  hosts: [httpbin.default.svc.cluster.local]
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
  host: httpbin.default.svc.cluster.local
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
`;

/** The ingress gateway routes /gw to B's PERMISSIVE port; auto mTLS (the pod network) makes that mutual TLS. */
const GATEWAY_RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: ingressgateway, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
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
`;

/** B refuses what a client asks for by the name `denied.example` (its TLS ClientHello's SNI). */
const DENY_SNI = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-sni, namespace: default}
spec:
  selector: {matchLabels: {app: httpbin}}
  action: DENY
  rules:
  - when: [{key: connection.sni, values: ["denied.example"]}]
`;

/** C knows the mesh by address: auto mTLS for the whole pod network. */
const C_MESH_CONFIG = 'autoMtlsCidrs: [198.18.10.0/24]\n';

/** A TLS 1.2/1.3 application data record header: encrypted bytes crossed. */
const TLS_APPLICATION_DATA = Buffer.from([0x17, 0x03, 0x03]);

/** Writes a certificate set as a sidecar's mounted files (./etc/certs in its directory), readable by its uid. */
async function mount(dir: string, set: WorkloadCertSet): Promise<void> {
  await writeCertFiles(join(dir, 'etc', 'certs'), set);
  for (const f of readdirSync(join(dir, 'etc', 'certs'))) chownSync(join(dir, 'etc', 'certs', f), 1337, 1337);
}

interface HttpAnswer { readonly status: number; readonly body: string }

/** B's app on 8080 (the echo server), started in B's namespace before its sidecar. */
const echoApp8080 = (p: MeshPodNamespace): Promise<void> =>
  untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '8080', 'httpbin']));

/** One GET from inside a pod namespace that must get an answer (captured outbound when the pod has a sidecar). */
const getFrom = (from: MeshPodNamespace, url: string): HttpAnswer =>
  (JSON.parse(from.exec(process.execPath, [join(FIXTURES, 'http-requests.mjs'), JSON.stringify([{ url }])]).stdout) as HttpAnswer[])[0]!;

describe('mutual TLS between two sidecars, in network namespaces', { skip: netnsSkip }, () => {
  let net: MeshNetwork;
  let ca: TestCa;
  let a: SidecarPod<MeshPodNamespace>;
  let b: SidecarPod<MeshPodNamespace>;
  let c: SidecarPod<MeshPodNamespace>;
  let d: MeshPodNamespace;
  let g: SidecarPod<MeshPodNamespace>;
  let aCert: WorkloadCertSet;
  let bLog: string[] = [];

  const meshedPod = async (sa: string, labels: string, resources: string, extra: Record<string, string> = {},
    prepare?: (ns: MeshPodNamespace) => Promise<void>): Promise<{ pod: SidecarPod<MeshPodNamespace>; cert: WorkloadCertSet }> => {
    const cert = await issueWorkloadCert(ca, { spiffeId: id(sa) });
    const pod = await startSidecarPod<MeshPodNamespace>({
      namespace: () => net.addPod(),
      files: { 'etc/mesh/pod/labels': labels, 'etc/mesh/resources/mesh.yaml': resources, ...extra },
      env: ['POD_NAMESPACE=default', `SERVICE_ACCOUNT=${sa}`, 'FILE_MOUNTED_CERTS=true'],
      prepare: async (p) => { await prepare?.(p); },
      beforeStart: (dir) => mount(dir, cert),
    });
    return { pod, cert };
  };

  /** An HTTP request from inside a pod namespace (its app, captured outbound when it has a sidecar). */
  const call = (from: MeshPodNamespace, url: string): HttpAnswer => {
    const r = from.exec(process.execPath, [join(FIXTURES, 'http-requests.mjs'), JSON.stringify([{ url }])], { allowFailure: true });
    if (r.exitCode !== 0) return { status: 0, body: r.stderr };
    return (JSON.parse(r.stdout) as HttpAnswer[])[0]!;
  };

  /** A TCP exchange from inside a pod: the app's greeting, then the echo of `line`; '' when the connection was refused or reset. */
  const tcp = (from: MeshPodNamespace, port: number, line: string): string => {
    const script = `const s = require('net').connect(${port}, '${B}'); let d = ''; let sent = false;
      s.on('data', (c) => { d += c; if (!sent && d.includes('\\n')) { sent = true; s.write(${JSON.stringify(`${line}\n`)}); } else if (sent && d.includes(${JSON.stringify(line)})) s.end(); });
      s.on('error', () => {}); s.on('close', () => process.stdout.write(d)); setTimeout(() => s.destroy(), 5000).unref();`;
    return from.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
  };

  before(async () => {
    net = createMeshNetwork();
    ca = await createRootCa();
    ({ pod: a, cert: aCert } = await meshedPod('sleep', 'app="sleep"\n', A_RESOURCES));
    ({ pod: b } = await meshedPod('httpbin', 'app="httpbin"\n', `${B_RESOURCES}---\n${DENY_SNI}`, {}, async (p) => {
      const app8080 = p.start('env', ['ECHO_LOG=1', process.execPath, join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '8080', 'httpbin']);
      app8080.stdout!.setEncoding('utf8').on('data', (s: string) => { bLog.push(...s.split('\n').filter((l) => l !== '')); });
      await new Promise<void>((resolve) => { const t = setInterval(() => { if (bLog.some((l) => l.startsWith('listening'))) { clearInterval(t); resolve(); } }, 20); });
      await untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'httpbin-permissive']));
      await untilFirstOutput(p.start(process.execPath, [H2_APPS, '0.0.0.0', 'httpbin'])); // gRPC on 7070
    }));
    assert.equal(b.pod.address, B);
    ({ pod: c } = await meshedPod('other', 'app="other"\n', '', { 'etc/mesh/config/mesh': C_MESH_CONFIG }));
    d = net.addPod(); // no sidecar: a plaintext client from elsewhere
    const gCert = await issueWorkloadCert(ca, { spiffeId: 'spiffe://cluster.local/ns/mesh-system/sa/ingressgateway' });
    g = await startSidecarPod<MeshPodNamespace>({
      namespace: () => net.addPod(),
      files: { 'etc/mesh/pod/labels': 'mesh="ingressgateway"\n', 'etc/mesh/resources/gateway.yaml': GATEWAY_RESOURCES, 'etc/mesh/config/mesh': C_MESH_CONFIG },
      env: ['POD_NAMESPACE=mesh-system', 'SERVICE_ACCOUNT=ingressgateway', 'FILE_MOUNTED_CERTS=true'],
      args: ['router'],
      beforeStart: (dir) => mount(dir, gCert),
    });
  });

  after(() => {
    for (const p of [a, b, c, g]) p?.close();
    net?.close();
  });

  it('A calls B over HTTP: the wire carries TLS only, B\'s app gets plaintext and Istio\'s XFCC', async () => {
    bLog = [];
    const capture = await net.capture(b.pod);
    const answer = call(a.pod, `http://${B}:8080/headers?marker=plaintext-must-not-cross`);
    const wire = await capture.stop();
    assert.equal(answer.status, 200, answer.body);
    const seen = JSON.parse(answer.body) as { headers: Record<string, string> };
    const xfcc = seen.headers['x-forwarded-client-cert'] ?? '';
    const hash = createHash('sha256').update(new X509Certificate(aCert.chainPem).raw).digest('hex');
    assert.equal(xfcc, `By=${id('httpbin')};Hash=${hash};Subject="";URI=${id('sleep')}`);
    assert.ok(bLog.some((l) => l.includes('plaintext-must-not-cross')), 'B\'s app saw the request in plaintext');
    assert.ok(wire.packets >= 6, `the capture saw the connection (${wire.packets} packets)`);
    assert.ok(wire.file.includes(Buffer.from('istio-http/1.1')), 'a mesh ALPN in the ClientHello');
    assert.ok(wire.file.includes(TLS_APPLICATION_DATA), 'TLS application data records');
    assert.equal(wire.file.includes(Buffer.from('plaintext-must-not-cross')), false, 'no plaintext of the request on the wire');
    assert.equal(wire.file.includes(Buffer.from('GET /headers')), false);
  });

  it('A talks raw TCP to B (the app speaks first): TLS on the wire, the bytes arrive', async () => {
    const capture = await net.capture(b.pod);
    const got = tcp(a.pod, 8081, 'tcp-marker-1234');
    const wire = await capture.stop();
    assert.match(got, /httpbin-tcp-hello from/);
    assert.match(got, /tcp-marker-1234/);
    assert.ok(wire.packets >= 6, `the capture saw the connection (${wire.packets} packets)`);
    assert.ok(wire.file.includes(Buffer.from('\x05istio')), 'the mesh ALPN istio in the ClientHello');
    // Offered first, as Istio's sidecars do for TCP: B selects it and the two run the TCP metadata exchange.
    assert.ok(wire.file.includes(Buffer.from('\x13istio-peer-exchange\x05istio')), 'istio-peer-exchange, then istio');
    assert.ok(wire.file.includes(TLS_APPLICATION_DATA), 'TLS application data records');
    assert.equal(wire.file.includes(Buffer.from('tcp-marker-1234')), false);
    assert.equal(wire.file.includes(Buffer.from('httpbin-tcp-hello')), false);
  });

  it('A calls B over gRPC (HTTP/2 inside the mutual TLS, ALPN istio-h2): judged per call, C\'s call is PERMISSION_DENIED', async () => {
    const grpc = (from: MeshPodNamespace, text: string): GrpcResult => grpcCallsIn(from, `${B}:7070`, [{ method: 'Ping', text }])[0]!;
    const capture = await net.capture(b.pod);
    const ok = grpc(a.pod, 'grpc-marker-must-not-cross');
    const wire = await capture.stop();
    assert.equal(ok.code, 0, ok.details);
    assert.deepEqual(ok.texts, ['httpbin: grpc-marker-must-not-cross']);
    assert.ok(wire.file.includes(Buffer.from('istio-h2')), 'the HTTP/2 mesh ALPN in the ClientHello');
    assert.equal(wire.file.includes(Buffer.from('grpc-marker-must-not-cross')), false, 'no plaintext of the call on the wire');
    const denied = grpc(c.pod, 'from-c');
    assert.equal(denied.code, 7, `PERMISSION_DENIED expected: ${JSON.stringify(denied)}`);
    assert.equal(denied.details, 'RBAC: access denied');
    const stats = (await runCli(['request', 'GET', 'stats'], { prefix: ['ip', 'netns', 'exec', b.pod.name] })).stdout;
    assert.match(stats, /^http\.inbound\.grpc\.status_0: [1-9]/m);
    assert.match(stats, /^http\.inbound\.grpc\.status_7: [1-9]/m);
  });

  it('STRICT resets a plaintext client from another namespace; PERMISSIVE serves it', () => {
    const strict = call(d, `http://${B}:8080/`);
    assert.equal(strict.status, 0, `a plaintext request to a STRICT port was answered: ${strict.body}`);
    const permissive = call(d, `http://${B}:9080/`);
    assert.equal(permissive.status, 200, permissive.body);
    assert.match(permissive.body, /httpbin-permissive saw/);
  });

  it('TLS carried as bytes (PERMISSIVE, no mesh ALPN): connection.sni is its ClientHello\'s SNI, a DENY on it closes the connection', () => {
    // D's TLS client reaches B's plain HTTP app on 9080 through B's sidecar: allowed, the app answers
    // the ClientHello with a plaintext 400 ("wrong version number"); denied, nothing comes back.
    const hello = (servername: string): string =>
      d.exec('timeout', ['5', 'openssl', 's_client', '-connect', `${B}:9080`, '-servername', servername, '-quiet'], { input: '', allowFailure: true }).stderr;
    assert.match(hello('allowed.example'), /wrong version number/);
    const denied = hello('denied.example');
    assert.doesNotMatch(denied, /wrong version number/, denied);
    assert.match(denied, /errno=104|unexpected eof|Connection reset/i, denied);
  });

  it('source.principals: A (sleep) is allowed, C (other) over mTLS is denied, for HTTP and TCP', () => {
    const denied = call(c.pod, `http://${B}:8080/`);
    assert.equal(denied.status, 403, denied.body);
    assert.equal(tcp(c.pod, 8081, 'from-c'), '', 'a TCP connection from C is closed before the app says anything');
    assert.equal(call(a.pod, `http://${B}:8080/`).status, 200);
  });

  it('the ingress gateway holds an identity and reaches B over mutual TLS (auto mTLS)', () => {
    const answer = call(g.pod, 'http://127.0.0.1:8080/headers');
    assert.equal(answer.status, 200, answer.body);
    const xfcc = (JSON.parse(answer.body) as { headers: Record<string, string> }).headers['x-forwarded-client-cert'] ?? '';
    assert.match(xfcc, /URI=spiffe:\/\/cluster\.local\/ns\/mesh-system\/sa\/ingressgateway$/);
  });

  it('a DestinationRule SIMPLE: A\'s plaintext call to an external service leaves its sidecar as TLS, verified', async () => {
    // The external service: HTTPS on D (no sidecar), a certificate for ext.example.com of a root of its own.
    const extRoot = await createRootCa();
    const ext = await issueWorkloadCert(extRoot, { spiffeId: null, dnsNames: ['ext.example.com'], subject: 'CN=ext.example.com' });
    const dir = mkdtempSync(join(tmpdir(), 'pa-ext-'));
    try {
      writeFileSync(join(dir, 'cert.pem'), ext.chainPem);
      writeFileSync(join(dir, 'key.pem'), ext.keyPem);
      const server = d.start(process.execPath, ['-e', `require('https').createServer({ cert: require('fs').readFileSync('${dir}/cert.pem'), key: require('fs').readFileSync('${dir}/key.pem') },
        (q, r) => r.end('ext over TLS, SNI ' + q.socket.servername + '\\n')).listen(8443, () => console.log('listening'))`]);
      await untilFirstOutput(server);
      // The port is declared HTTP, what the app speaks (Istio's TLS origination): one declared TLS would be
      // relayed as bytes (inside the TLS all the same), and a failed handshake would reset the client, not answer 503.
      writeFileSync(join(a.dir, 'etc', 'mesh', 'resources', 'ext.yaml'), `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: default}
spec:
  hosts: [ext.example.com]
  addresses: [${d.address}]
  ports: [{number: 8443, name: http, protocol: HTTP}]
  location: MESH_EXTERNAL
  resolution: STATIC
  endpoints: [{address: ${d.address}}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: ext, namespace: default}
spec:
  host: ext.example.com
  trafficPolicy:
    tls: {mode: SIMPLE, caCertificates: ${join(a.dir, 'ext-root.pem')}}
`);
      writeFileSync(join(a.dir, 'ext-root.pem'), ext.rootPem);
      let answer: HttpAnswer = { status: 0, body: '' };
      for (let i = 0; i < 30 && answer.status !== 200; i++) { // the resources are re-read after a short debounce
        await new Promise((resolve) => setTimeout(resolve, 200));
        answer = call(a.pod, `http://${d.address}:8443/`);
      }
      assert.equal(answer.status, 200, answer.body);
      assert.match(answer.body, /ext over TLS, SNI ext\.example\.com/);
      // The same call to a server whose certificate the rule's root did not sign: 503, never plaintext.
      writeFileSync(join(a.dir, 'ext-root.pem'), (await createRootCa()).rootPem);
      writeFileSync(join(a.dir, 'etc', 'mesh', 'resources', 'ext.yaml'), readFileSync(join(a.dir, 'etc', 'mesh', 'resources', 'ext.yaml'), 'utf8').replace('name: ext,', 'name: ext-2,')); // a change, so the resources are read again
      let refused: HttpAnswer = answer;
      for (let i = 0; i < 30 && refused.status === 200; i++) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        refused = call(a.pod, `http://${d.address}:8443/`);
      }
      assert.equal(refused.status, 503, refused.body);
      assert.match(refused.body, /transport failure reason: TLS_error/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** Writes a resource file into A, runs `check` until it holds (the resources are re-read after a debounce), then removes the file. */
  const withResourcesOfA = async (name: string, text: string, check: () => void): Promise<void> => {
    const file = join(a.dir, 'etc', 'mesh', 'resources', name);
    writeFileSync(file, text);
    try {
      let last: unknown;
      for (let i = 0; i < 50; i++) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        try {
          check();
          return;
        } catch (err) {
          last = err;
        }
      }
      throw last;
    } finally {
      rmSync(file, { force: true });
    }
  };

  /** The XFCC B's app saw for A's request (undefined: it came in plaintext); the answer must be 200. */
  const xfccFromA = (url: string): string | undefined => {
    const answer = call(a.pod, url);
    assert.equal(answer.status, 200, answer.body);
    return (JSON.parse(answer.body) as { headers: Record<string, string> }).headers['x-forwarded-client-cert'];
  };

  it('a request routed to a subset uses the subset\'s tls; port-level tls is the service port\'s, the endpoint listening on its targetPort', async () => {
    // B's PERMISSIVE 9080 behind a virtual IP, on ports 80 and 81 (targetPort 9080): the rule says DISABLE,
    // its port 81 ISTIO_MUTUAL, its subset `mutual` ISTIO_MUTUAL; /headers/mutual is routed to the subset.
    await withResourcesOfA('subsets.yaml', `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: sub, namespace: default}
spec:
  hosts: [sub.default.svc.cluster.local]
  addresses: [240.240.0.20]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 9080}, {number: 81, name: http-81, protocol: HTTP, targetPort: 9080}]
  resolution: STATIC
  location: MESH_INTERNAL
  endpoints: [{address: ${B}, labels: {version: v1}}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: sub, namespace: default}
spec:
  host: sub.default.svc.cluster.local
  trafficPolicy:
    tls: {mode: DISABLE}
    portLevelSettings: [{port: {number: 81}, tls: {mode: ISTIO_MUTUAL}}]
  subsets:
  - {name: mutual, labels: {version: v1}, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: sub, namespace: default}
spec:
  hosts: [sub.default.svc.cluster.local]
  http:
  - match: [{uri: {prefix: /headers/mutual}}]
    route: [{destination: {host: sub.default.svc.cluster.local, subset: mutual}}]
  - route: [{destination: {host: sub.default.svc.cluster.local}}]
`, () => {
      assert.match(xfccFromA('http://240.240.0.20/headers/mutual') ?? '', /URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep$/, 'the subset\'s ISTIO_MUTUAL');
      assert.equal(xfccFromA('http://240.240.0.20/headers'), undefined, 'the rule\'s DISABLE for the service\'s own cluster');
      assert.match(xfccFromA('http://240.240.0.20:81/headers') ?? '', /URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep$/, 'port 81\'s ISTIO_MUTUAL');
    });
  });

  it('a WorkloadEntry\'s tlsMode label gives auto mTLS, and its serviceAccount is the identity B must prove', async () => {
    const resources = (serviceAccount: string): string => `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: vm, namespace: default}
spec:
  hosts: [vm.default.svc.cluster.local]
  addresses: [240.240.0.21]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 9080}]
  resolution: STATIC
  location: MESH_INTERNAL
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.mesh.io/v1
kind: WorkloadEntry
metadata: {name: vm-b, namespace: default}
spec:
  address: ${B}
  labels: {app: vm, security.mesh.io/tlsMode: mesh}
  serviceAccount: ${serviceAccount}
`;
    await withResourcesOfA('vm.yaml', resources('httpbin'), () => {
      assert.match(xfccFromA('http://240.240.0.21/headers') ?? '', /URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep$/);
    });
    // Another service account: B's certificate (sa/httpbin) does not name it, so A refuses B: 503, never plaintext.
    await withResourcesOfA('vm.yaml', resources('someone-else'), () => {
      const refused = call(a.pod, 'http://240.240.0.21/headers');
      assert.equal(refused.status, 503, refused.body);
      assert.match(refused.body, /TLS_error:ERR_TLS_CERT_ALTNAME_INVALID:.*none of spiffe:\/\/cluster\.local\/ns\/default\/sa\/someone-else/);
    });
  });

  it('a DestinationRule host meets a connection by the name the DNS proxy answered for its address', async () => {
    // A name server on the node answers *.peer.test with B's address; pod E resolves through its
    // sidecar's DNS proxy (captured), and its DestinationRule for *.peer.test asks for ISTIO_MUTUAL.
    const resolver = net.node.start('env', [`RESOLVER_A=${B}`, 'RESOLVER_AAAA=', process.execPath,
      join(repoRoot, 'test', 'integration', 'dns', 'fixtures', 'resolver.mjs'), NODE_V4]);
    await untilFirstOutput(resolver);
    const cert = await issueWorkloadCert(ca, { spiffeId: id('dns-client') });
    let etcDir = '';
    const e = await startSidecarPod<MeshPodNamespace>({
      namespace: () => {
        const ns = net.addPod();
        etcDir = join('/etc/netns', ns.name); // `ip netns exec` shows this as the pod's /etc/resolv.conf
        mkdirSync(etcDir, { recursive: true });
        writeFileSync(join(etcDir, 'resolv.conf'), `nameserver ${NODE_V4}\noptions timeout:2\n`);
        return ns;
      },
      files: { 'etc/mesh/pod/labels': 'app="dns-client"\n', 'etc/mesh/resources/mesh.yaml': `apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: peer-test, namespace: default}
spec:
  host: "*.peer.test"
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
` },
      env: ['POD_NAMESPACE=default', 'SERVICE_ACCOUNT=dns-client', 'FILE_MOUNTED_CERTS=true', 'MESH_META_DNS_CAPTURE=true'],
      iptablesArgs: ['--redirect-dns'],
      beforeStart: (dir) => mount(dir, cert),
    });
    try {
      const xfccOf = (url: string): string | undefined => {
        const answer = call(e.pod, url);
        assert.equal(answer.status, 200, answer.body);
        return (JSON.parse(answer.body) as { headers: Record<string, string> }).headers['x-forwarded-client-cert'];
      };
      // By address, before the pod resolved anything: nothing names the destination, so plaintext.
      assert.equal(xfccOf(`http://${B}:9080/headers`), undefined, 'plaintext while no name is known');
      // By name: resolved through the DNS proxy, which remembers the name for the address.
      assert.match(xfccOf('http://httpbin.peer.test:9080/headers') ?? '', /URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/dns-client$/);
      // And the next connection to the bare address is known by that name too (TCP, no Host to go by).
      const answer = call(e.pod, `http://${B}:9080/headers`);
      assert.match((JSON.parse(answer.body) as { headers: Record<string, string> }).headers['x-forwarded-client-cert'] ?? '', /sa\/dns-client$/);
    } finally {
      e.close();
      if (etcDir) rmSync(etcDir, { recursive: true, force: true });
    }
  });

  it('B\'s /stats counts the handshakes and the refused plaintext; /certs and cert_expiry_seconds describe the certificate', async () => {
    const stats = await runCli(['request', 'GET', 'stats'], { prefix: ['ip', 'netns', 'exec', b.pod.name] });
    const value = (name: string): number => Number(new RegExp(`${name.replace(/\./g, '\\.')}: (\\d+)`).exec(stats.stdout)?.[1] ?? -1);
    assert.ok(value('listener.0.0.0.0_15006.mtls.handshake') >= 2, stats.stdout);
    assert.ok(value('listener.0.0.0.0_15006.mtls.plaintext_refused') >= 1, stats.stdout);
    const proxyMetrics = b.pod.exec('curl', ['-s', 'http://127.0.0.1:15090/stats/prometheus']).stdout;
    const requests = (labels: Record<string, string>): number => sumOf(proxyMetrics, 'mesh_requests_total', { reporter: 'destination', request_protocol: 'http', ...labels });
    assert.ok(requests({ response_code: '200', response_flags: '-', connection_security_policy: 'mutual_tls', source_principal: id('sleep') }) >= 1, proxyMetrics);
    assert.ok(requests({ response_code: '403', response_flags: 'RBAC', connection_security_policy: 'mutual_tls', source_principal: id('other') }) >= 1, proxyMetrics);
    assert.ok(requests({ response_code: '200', response_flags: '-', connection_security_policy: 'none', source_principal: 'unknown' }) >= 1, proxyMetrics);
    const certs = await runCli(['request', 'GET', 'certs'], { prefix: ['ip', 'netns', 'exec', a.pod.name] });
    const dump = JSON.parse(certs.stdout) as { identity: string; certificates: { cert_chain: { serial_number: string }[] }[] };
    assert.equal(dump.identity, id('sleep'));
    assert.equal(dump.certificates[0]!.cert_chain[0]!.serial_number, aCert.serial.toLowerCase());
    const metrics = a.pod.exec('curl', ['-s', 'http://127.0.0.1:15020/stats/prometheus']).stdout;
    const expiry = Number(/^cert_expiry_seconds\{[^}]*\} (\S+)$/m.exec(metrics)?.[1]);
    const want = (Date.parse(new X509Certificate(aCert.chainPem).validTo) - Date.now()) / 1000;
    assert.ok(Math.abs(expiry - want) < 10, `cert_expiry_seconds ${expiry}, the certificate says ${want}`);
  });

  it('A\'s mounted certificate replaced while running: the next connection presents the new one', async () => {
    const next = await issueWorkloadCert(ca, { spiffeId: id('sleep') });
    await mount(a.dir, next);
    const hash = createHash('sha256').update(new X509Certificate(next.chainPem).raw).digest('hex');
    let xfcc = '';
    for (let i = 0; i < 50 && !xfcc.includes(hash); i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      // A new upstream connection each time: `connection: close` to B's sidecar is per request, the pool keys on the serial.
      const answer = call(a.pod, `http://${B}:8080/headers`);
      xfcc = (JSON.parse(answer.body) as { headers: Record<string, string> }).headers['x-forwarded-client-cert'] ?? '';
    }
    assert.ok(xfcc.includes(`Hash=${hash}`), `B never saw the new certificate: ${xfcc}`);
  });
});

describe('mutual TLS: what the inbound side refuses, readiness without a certificate', { skip: netnsSkip }, () => {
  let net: MeshNetwork;
  let ca: TestCa;
  let b: SidecarPod<MeshPodNamespace>;
  let d: MeshPodNamespace;
  let files: string;

  /**
   * openssl s_client from D to B:8080 with a client certificate and a mesh ALPN: what came back.
   * `extra`: more s_client arguments (`-servername`); `input`: what to send (an HTTP/1.1 request).
   */
  const opensslGet = (cert: WorkloadCertSet, name: string, extra: readonly string[] = [],
    input = 'GET /openssl HTTP/1.1\r\nHost: httpbin\r\nConnection: close\r\n\r\n'): { stdout: string; stderr: string } => {
    const dir = join(files, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'cert.pem'), cert.chainPem);
    writeFileSync(join(dir, 'key.pem'), cert.keyPem);
    writeFileSync(join(dir, 'root.pem'), cert.rootPem);
    // -ign_eof: after the request, read on until the server closes (Connection: close); `timeout` bounds it.
    const r = d.exec('timeout', ['10', 'openssl', 's_client', '-connect', `${b.pod.address}:8080`, '-alpn', 'istio-http/1.1', '-quiet', '-ign_eof',
      '-cert', join(dir, 'cert.pem'), '-key', join(dir, 'key.pem'), '-CAfile', join(dir, 'root.pem'), ...extra],
    { input, allowFailure: true });
    return r;
  };

  before(async () => {
    net = createMeshNetwork();
    ca = await createRootCa();
    files = mkdtempSync(join(tmpdir(), 'pa-mtls-clients-'));
    const cert = await issueWorkloadCert(ca, { spiffeId: id('httpbin') });
    b = await startSidecarPod<MeshPodNamespace>({
      namespace: () => net.addPod(),
      files: { 'etc/mesh/pod/labels': 'app="httpbin"\n', 'etc/mesh/resources/mesh.yaml': `${B_RESOURCES.split('---')[0]!}---\n${DENY_SNI}` },
      env: ['POD_NAMESPACE=default', 'SERVICE_ACCOUNT=httpbin', 'FILE_MOUNTED_CERTS=true'],
      prepare: echoApp8080,
      beforeStart: (dir) => mount(dir, cert),
    });
    d = net.addPod();
  });

  after(() => {
    b?.close();
    net?.close();
    if (files) rmSync(files, { recursive: true, force: true });
  });

  it('a client nobody here wrote (openssl s_client) with a mesh certificate is served', async () => {
    const out = opensslGet(await issueWorkloadCert(ca, { spiffeId: id('sleep') }), 'good');
    assert.match(out.stdout, /HTTP\/1\.1 200/, out.stderr);
    assert.match(out.stdout, /httpbin saw .* GET \/openssl/);
  });

  it('connection.sni is the SNI of the client\'s ClientHello: a DENY on it refuses that name, over HTTP and TCP, and lets others through', async () => {
    const cert = await issueWorkloadCert(ca, { spiffeId: id('sleep') });
    const denied = opensslGet(cert, 'sni-denied', ['-servername', 'denied.example']);
    assert.match(denied.stdout, /^HTTP\/1\.1 403 /, denied.stderr);
    assert.match(denied.stdout, /RBAC: access denied/);
    assert.match(opensslGet(cert, 'sni-denied-case', ['-servername', 'DENIED.example']).stdout, /^HTTP\/1\.1 403 /, 'in any case');
    const other = opensslGet(cert, 'sni-other', ['-servername', 'allowed.example']);
    assert.match(other.stdout, /^HTTP\/1\.1 200 /, other.stderr);
    assert.match(other.stdout, /httpbin saw .* GET \/openssl/);
    // Bytes that are not HTTP inside the mutual TLS: judged once as TCP, with the same SNI. The app
    // (an HTTP server) answers them with a 400 when they reach it.
    const junk = 'not http\r\n\r\n';
    assert.equal(opensslGet(cert, 'sni-denied-tcp', ['-servername', 'denied.example'], junk).stdout, '', 'closed before the app says anything');
    assert.match(opensslGet(cert, 'sni-other-tcp', ['-servername', 'allowed.example'], junk).stdout, /^HTTP\/1\.1 400 /);
  });

  it('a client certificate of another trust domain, an expired one, one of another root, or none: refused', async () => {
    const hour = 3_600_000;
    const foreign = await createRootCa();
    const cases: [string, WorkloadCertSet][] = [
      ['other-domain', await issueWorkloadCert(ca, { spiffeId: 'spiffe://other.example/ns/default/sa/sleep' })],
      ['expired', await issueWorkloadCert(ca, { spiffeId: id('sleep'), notBefore: new Date(Date.now() - 3 * hour), notAfter: new Date(Date.now() - hour) })],
      ['other-root', await issueWorkloadCert(foreign, { spiffeId: id('sleep') })],
    ];
    for (const [name, cert] of cases) {
      const r = opensslGet(cert, name);
      assert.doesNotMatch(r.stdout, /HTTP\/1\.1/, name);
      // Refused by the handshake (an alert, or the connection closed under it), not unreachable.
      assert.doesNotMatch(r.stderr, /Connection refused|connect:errno/, `${name}: ${r.stderr}`);
    }
    const none = d.exec('timeout', ['10', 'openssl', 's_client', '-connect', `${b.pod.address}:8080`, '-alpn', 'istio-http/1.1', '-quiet', '-ign_eof'],
      { input: 'GET / HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n', allowFailure: true });
    assert.doesNotMatch(none.stdout, /HTTP\/1\.1/, 'no client certificate');
    assert.doesNotMatch(none.stderr, /Connection refused|connect:errno/, none.stderr);
  });

  it('STRICT without a certificate: not ready, saying why, until the mounted files appear', async () => {
    const late = await startSidecarPod<MeshPodNamespace>({
      namespace: () => net.addPod(),
      files: { 'etc/mesh/pod/labels': 'app="httpbin"\n', 'etc/mesh/resources/mesh.yaml': B_RESOURCES.split('---')[0]! },
      env: ['POD_NAMESPACE=default', 'SERVICE_ACCOUNT=late', 'FILE_MOUNTED_CERTS=true'],
      waitReady: false,
    });
    try {
      const waitFor = (seconds: number) => runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', String(seconds)], { prefix: ['ip', 'netns', 'exec', late.pod.name] });
      assert.notEqual((await waitFor(3)).code, 0, 'ready without the certificate STRICT needs');
      const ready = late.pod.exec('curl', ['-s', 'http://127.0.0.1:15021/healthz/ready'], { allowFailure: true }).stdout;
      assert.match(ready, /no workload certificate, required by PeerAuthentication default\/httpbin \(STRICT\)/);
      const cert = await issueWorkloadCert(ca, { spiffeId: id('late') });
      await mount(late.dir, cert);
      const wait = await waitFor(10);
      assert.equal(wait.code, 0, `${wait.stderr}\n${late.stderr()}`);
    } finally {
      late.close();
    }
  });
});

describe('identity from Istio\'s CA API, renewed while traffic flows', { skip: netnsSkip }, () => {
  let net: MeshNetwork;
  let a: SidecarPod<MeshPodNamespace>;
  let b: SidecarPod<MeshPodNamespace>;
  let caLog: string[] = [];
  let rootPem = '';
  const TTL_SECONDS = 6;

  const certsOf = async (pod: SidecarPod<MeshPodNamespace>): Promise<{ identity: string; serial: string }> => {
    const r = await runCli(['request', 'GET', 'certs'], { prefix: ['ip', 'netns', 'exec', pod.pod.name] });
    const dump = JSON.parse(r.stdout) as { identity: string; certificates: { cert_chain: { serial_number: string }[] }[] };
    return { identity: dump.identity, serial: dump.certificates[0]!.cert_chain[0]!.serial_number };
  };

  const caPod = (sa: string, labels: string, resources: string, prepare?: (p: MeshPodNamespace) => Promise<void>) => startSidecarPod<MeshPodNamespace>({
    namespace: () => net.addPod(),
    files: {
      'etc/mesh/pod/labels': labels, 'etc/mesh/resources/mesh.yaml': resources,
      'var/run/secrets/tokens/istio-token': 'mesh-test-token\n', 'var/run/secrets/istio/root-cert.pem': rootPem,
    },
    env: ['POD_NAMESPACE=default', `SERVICE_ACCOUNT=${sa}`, `CA_ADDR=${NODE_V4}:15012`, `SECRET_TTL=${TTL_SECONDS}s`, 'ECC_SIGNATURE_ALGORITHM=ECDSA'],
    ...(prepare ? { prepare } : {}),
  });

  before(async () => {
    net = createMeshNetwork();
    const rootDir = mkdtempSync(join(tmpdir(), 'pa-ca-root-'));
    try {
      const ca = net.node.start(process.execPath, [join(FIXTURES, 'test-ca.mjs'), '--listen', `${NODE_V4}:15012`,
        '--root-out', join(rootDir, 'root-cert.pem'), '--token', 'mesh-test-token', '--log']);
      ca.stdout!.setEncoding('utf8').on('data', (s: string) => { caLog.push(...s.split('\n').filter((l) => l !== '')); });
      await untilFirstOutput(ca);
      rootPem = readFileSync(join(rootDir, 'root-cert.pem'), 'utf8');
    } finally {
      rmSync(rootDir, { recursive: true, force: true });
    }
    a = await caPod('sleep', 'app="sleep"\n', A_RESOURCES);
    b = await caPod('httpbin', 'app="httpbin"\n', B_RESOURCES.split('---')[0]!, echoApp8080);
    assert.equal(b.pod.address, B);
  });

  after(() => {
    a?.close();
    b?.close();
    net?.close();
    caLog = [];
  });

  it('each sidecar asks the CA for its SPIFFE id, and A reaches STRICT B over mutual TLS', async () => {
    assert.equal((await certsOf(a)).identity, id('sleep'));
    assert.equal((await certsOf(b)).identity, id('httpbin'));
    const answer = getFrom(a.pod, `http://${B}:8080/headers`);
    assert.equal(answer.status, 200, answer.body);
    assert.match(answer.body, /URI=spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep/);
    const calls = caLog.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(calls.length >= 2, caLog.join('\n'));
  });

  it(`with SECRET_TTL=${TTL_SECONDS}s the certificate is renewed (a new serial), and new connections use it`, async () => {
    const first = await certsOf(a);
    let now = first;
    for (let i = 0; i < 60 && now.serial === first.serial; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      now = await certsOf(a);
    }
    assert.notEqual(now.serial, first.serial, 'no renewal within 15 s');
    assert.equal(getFrom(a.pod, `http://${B}:8080/`).status, 200);
  });
});

describe('mutual TLS through an intermediate CA, with keys in their legacy PEM forms', { skip: netnsSkip }, () => {
  // As with Istio's plugged-in CA or cert-manager: the leaves are signed by an intermediate, each
  // cert-chain.pem sends leaf + intermediate, root-cert.pem holds the root only; and the keys are
  // what those tools write by default: PKCS#1 for RSA (`BEGIN RSA PRIVATE KEY`), SEC1 for EC.
  let net: MeshNetwork;
  let a: SidecarPod<MeshPodNamespace>;
  let b: SidecarPod<MeshPodNamespace>;
  let aCert: WorkloadCertSet;

  const legacyKey = (set: WorkloadCertSet, type: 'pkcs1' | 'sec1'): WorkloadCertSet =>
    ({ ...set, keyPem: createPrivateKey(set.keyPem).export({ format: 'pem', type }) as string });

  before(async () => {
    net = createMeshNetwork();
    const intermediate = await createIntermediateCa(await createRootCa());
    aCert = legacyKey(await issueWorkloadCert(intermediate, { spiffeId: id('sleep'), keyType: 'rsa-2048' }), 'pkcs1');
    const bCert = legacyKey(await issueWorkloadCert(intermediate, { spiffeId: id('httpbin'), keyType: 'ecdsa-p384' }), 'sec1');
    assert.match(aCert.keyPem, /BEGIN RSA PRIVATE KEY/);
    assert.match(bCert.keyPem, /BEGIN EC PRIVATE KEY/);
    const pod = (sa: string, labels: string, resources: string, cert: WorkloadCertSet, prepare?: (p: MeshPodNamespace) => Promise<void>) =>
      startSidecarPod<MeshPodNamespace>({
        namespace: () => net.addPod(),
        files: { 'etc/mesh/pod/labels': labels, 'etc/mesh/resources/mesh.yaml': resources },
        env: ['POD_NAMESPACE=default', `SERVICE_ACCOUNT=${sa}`, 'FILE_MOUNTED_CERTS=true'],
        ...(prepare ? { prepare } : {}),
        beforeStart: (dir) => mount(dir, cert),
      });
    a = await pod('sleep', 'app="sleep"\n', A_RESOURCES, aCert);
    b = await pod('httpbin', 'app="httpbin"\n', B_RESOURCES.split('---')[0]!, bCert, echoApp8080);
    assert.equal(b.pod.address, B);
  });

  after(() => {
    a?.close();
    b?.close();
    net?.close();
  });

  it('A reaches STRICT B: each side sends its intermediate and verifies the other\'s to the root', () => {
    const answer = getFrom(a.pod, `http://${B}:8080/headers`);
    assert.equal(answer.status, 200, answer.body);
    const xfcc = (JSON.parse(answer.body) as { headers: Record<string, string> }).headers['x-forwarded-client-cert'] ?? '';
    const hash = createHash('sha256').update(new X509Certificate(aCert.chainPem).raw).digest('hex');
    assert.equal(xfcc, `By=${id('httpbin')};Hash=${hash};Subject="";URI=${id('sleep')}`);
  });
});
