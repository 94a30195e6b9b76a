// Two meshed pods and their sidecars, end to end, on one network (mesh-network.ts): A (service
// account `sleep`) calls B (`httpbin`) over HTTP and raw TCP; what crosses the wire between them is
// TLS (a capture on the bridge holds no plaintext of the request), and B's app gets plaintext with
// Istio's x-forwarded-client-cert. B's PeerAuthentication is STRICT on 8080 (a plaintext client from
// another namespace is reset) and PERMISSIVE on 9080 (served); its AuthorizationPolicy lets
// `sleep` through and refuses C (`other`, a meshed pod of another service account). Certificates
// are mounted files (FILE_MOUNTED_CERTS) signed by a root made here; A's are replaced while it
// runs and the next connection shows the new one. cert_expiry_seconds matches the certificate.
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { chownSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createRootCa, issueWorkloadCert, writeCertFiles, type TestCa, type WorkloadCertSet } from '../../helpers/mesh-certs.js';
import { createMeshNetwork, type MeshNetwork, type MeshPodNamespace } from '../../helpers/mesh-network.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';

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
    - operation: {ports: ["8080", "8081"]}
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
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 8081, name: tcp, protocol: TCP}]
  resolution: STATIC
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

/** C knows the mesh by address: auto mTLS for the whole pod network. */
const C_MESH_CONFIG = 'autoMtlsCidrs: [198.18.10.0/24]\n';

/** A TLS 1.2/1.3 application data record header: encrypted bytes crossed. */
const TLS_APPLICATION_DATA = Buffer.from([0x17, 0x03, 0x03]);

interface HttpAnswer { readonly status: number; readonly body: string }

describe('mutual TLS between two sidecars, in network namespaces', { skip: netnsSkip }, () => {
  let net: MeshNetwork;
  let ca: TestCa;
  let a: SidecarPod<MeshPodNamespace>;
  let b: SidecarPod<MeshPodNamespace>;
  let c: SidecarPod<MeshPodNamespace>;
  let d: MeshPodNamespace;
  let aCert: WorkloadCertSet;
  let bLog: string[] = [];

  /** Writes a certificate set as the sidecar's mounted files, readable by its uid. */
  const mount = async (dir: string, set: WorkloadCertSet): Promise<void> => {
    await writeCertFiles(join(dir, 'etc', 'certs'), set);
    for (const f of readdirSync(join(dir, 'etc', 'certs'))) chownSync(join(dir, 'etc', 'certs', f), 1337, 1337);
  };

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
      s.on('error', () => {}); s.on('close', () => process.stdout.write(d)); setTimeout(() => s.destroy(), 5000);`;
    return from.exec(process.execPath, ['-e', script], { allowFailure: true }).stdout;
  };

  before(async () => {
    net = createMeshNetwork();
    ca = await createRootCa();
    ({ pod: a, cert: aCert } = await meshedPod('sleep', 'app="sleep"\n', A_RESOURCES));
    ({ pod: b } = await meshedPod('httpbin', 'app="httpbin"\n', B_RESOURCES, {}, async (p) => {
      const app8080 = p.start('env', ['ECHO_LOG=1', process.execPath, join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '8080', 'httpbin']);
      app8080.stdout!.setEncoding('utf8').on('data', (s: string) => { bLog.push(...s.split('\n').filter((l) => l !== '')); });
      await new Promise<void>((resolve) => { const t = setInterval(() => { if (bLog.some((l) => l.startsWith('listening'))) { clearInterval(t); resolve(); } }, 20); });
      await untilFirstOutput(p.start(process.execPath, [join(FIXTURES, 'echo-app.mjs'), '0.0.0.0', '9080', 'httpbin-permissive']));
    }));
    assert.equal(b.pod.address, B);
    ({ pod: c } = await meshedPod('other', 'app="other"\n', '', { 'etc/mesh/config/mesh': C_MESH_CONFIG }));
    d = net.addPod(); // no sidecar: a plaintext client from elsewhere
  });

  after(() => {
    for (const p of [a, b, c]) p?.close();
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
    assert.ok(wire.file.includes(Buffer.from('istio-peer-exchange')), 'a mesh ALPN in the ClientHello');
    assert.ok(wire.file.includes(TLS_APPLICATION_DATA), 'TLS application data records');
    assert.equal(wire.file.includes(Buffer.from('tcp-marker-1234')), false);
    assert.equal(wire.file.includes(Buffer.from('httpbin-tcp-hello')), false);
  });

  it('STRICT resets a plaintext client from another namespace; PERMISSIVE serves it', () => {
    const strict = call(d, `http://${B}:8080/`);
    assert.equal(strict.status, 0, `a plaintext request to a STRICT port was answered: ${strict.body}`);
    const permissive = call(d, `http://${B}:9080/`);
    assert.equal(permissive.status, 200, permissive.body);
    assert.match(permissive.body, /httpbin-permissive saw/);
  });

  it('source.principals: A (sleep) is allowed, C (other) over mTLS is denied, for HTTP and TCP', () => {
    const denied = call(c.pod, `http://${B}:8080/`);
    assert.equal(denied.status, 403, denied.body);
    assert.equal(tcp(c.pod, 8081, 'from-c'), '', 'a TCP connection from C is closed before the app says anything');
    assert.equal(call(a.pod, `http://${B}:8080/`).status, 200);
  });

  it('B\'s /stats counts the handshakes and the refused plaintext; /certs and cert_expiry_seconds describe the certificate', async () => {
    const stats = await runCli(['request', 'GET', 'stats'], { prefix: ['ip', 'netns', 'exec', b.pod.name] });
    const value = (name: string): number => Number(new RegExp(`${name.replace(/\./g, '\\.')}: (\\d+)`).exec(stats.stdout)?.[1] ?? -1);
    assert.ok(value('listener.0.0.0.0_15006.mtls.handshake') >= 2, stats.stdout);
    assert.ok(value('listener.0.0.0.0_15006.mtls.plaintext_refused') >= 1, stats.stdout);
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
