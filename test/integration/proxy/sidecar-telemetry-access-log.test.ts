// Telemetry resources switching the sidecar's access log at run time, as in a pod: the pod's rules
// applied by `pilot-agent mesh-iptables` (REDIRECT), the sidecar as uid 1337, a mesh config that
// leaves the log off (no accessLogFile, Istio's default for a sidecar) but sets its encoding (JSON).
// Telemetry files written while it runs turn the log on (Istio's built-in `envoy` provider: stdout,
// the mesh config's format), then off for one direction, and their removal gives the mesh config's
// setting back, each without a restart. Outbound (CLIENT) and inbound (SERVER) requests, and a TCP
// connection, are made after each change; the lines are read from the sidecar's stdout, where only
// the access log writes (the agent's own log goes to stderr here). Beside an accessLogFile: a
// direction a Telemetry turns on goes to stdout (Istio's envoy provider), the other stays in the
// file, and an entry naming no provider changes nothing (Istio without defaultProviders).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip, PEER_V4, POD_V4, type Namespace } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { startSidecarPod, statusFrom, tcpFrom, untilFirstOutput, writeResources, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const APP = join(repoRoot, 'test', 'fixtures', 'echo-app.mjs');
const RESOURCES = 'etc/mesh/resources/r.yaml';

const telemetry = (name: string, namespace: string, spec: string): string =>
  `---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: ${name}, namespace: ${namespace}}\nspec:\n${spec}`;
/** The mesh turns the log on (the root namespace's Telemetry without a selector). */
const MESH_ON = telemetry('mesh-default', 'mesh-system', '  accessLogging: [{providers: [{name: envoy}]}]\n');
/** This workload's own Telemetry turns SERVER (inbound) off. */
const WEB_SERVER_OFF = telemetry('web-quiet', 'default',
  '  selector: {matchLabels: {app: web}}\n  accessLogging: [{providers: [{name: envoy}], disabled: true, match: {mode: SERVER}}]\n');

const fetchFrom = (ns: Namespace, url: string): number => statusFrom(ns, url);


/** An HTTP/2 request without TLS (h2c, prior knowledge): its status. */
function h2From(ns: Namespace, url: string): string {
  return ns.exec('curl', ['-s', '--max-time', '5', '-o', '/dev/null', '-w', '%{http_code}', '--http2-prior-knowledge', url], { allowFailure: true }).stdout;
}

describe('Telemetry accessLogging switches the sidecar\'s access log at run time', { skip: netnsSkip }, () => {
  let sp: SidecarPod;

  const resources = (text: string): Promise<void> => writeResources(sp, RESOURCES, text);
  /** The access log records on stdout (JSON lines: the mesh config's encoding). */
  const records = (): Record<string, unknown>[] => sp.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const recordOf = (path: string): Record<string, unknown> | undefined => records().find((r) => r['path'] === path);
  const tcpRecords = (port: number): Record<string, unknown>[] => records().filter((r) => r['method'] === null && r['downstream_local_address'] === `${POD_V4}:${port}`);

  /** An outbound and an inbound request named after `step`; the lines the log got for them within `wait` ms. */
  async function requests(step: string, wait: number): Promise<{ client: Record<string, unknown> | undefined; server: Record<string, unknown> | undefined }> {
    assert.equal(fetchFrom(sp.pod, `http://${PEER_V4}:8080/${step}-out`), 200);
    assert.equal(fetchFrom(sp.pod.peer, `http://${POD_V4}:9080/${step}-in`), 200);
    const both = () => (recordOf(`/${step}-out`) && recordOf(`/${step}-in`) ? true : undefined);
    const deadline = Date.now() + wait;
    while (Date.now() < deadline && !both()) await new Promise((resolve) => setTimeout(resolve, 50));
    return { client: recordOf(`/${step}-out`), server: recordOf(`/${step}-in`) };
  }

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="web"\n',
        'etc/mesh/config/mesh': 'accessLogEncoding: JSON\n',
        'etc/mesh/resources/r.yaml': '',
      },
      env: ['POD_NAMESPACE=default'],
      prepare: async (p) => {
        await untilFirstOutput(p.peer.start(process.execPath, [APP, PEER_V4, '8080', 'peer']));
        await untilFirstOutput(p.start(process.execPath, [APP, '0.0.0.0', '9080', 'app']));
      },
    });
  });
  after(() => sp?.close());

  it('no Telemetry: the mesh config leaves the log off, nothing is written', async () => {
    const got = await requests('none', 700); // the log is written in batches: time enough for a line to show
    assert.deepEqual(got, { client: undefined, server: undefined });
    assert.equal(sp.stdout(), '');
  });

  it('the root namespace\'s Telemetry turns it on for both directions: JSON lines (the mesh config\'s encoding) on stdout', async () => {
    await resources(MESH_ON);
    const got = await requests('mesh-on', 5_000);
    assert.equal(got.client?.['upstream_cluster'], 'PassthroughCluster', JSON.stringify(got.client));
    assert.equal(got.client?.['response_code'], 200);
    assert.equal(got.client?.['downstream_local_address'], `${PEER_V4}:8080`);
    assert.equal(got.server?.['upstream_cluster'], 'InboundPassthroughCluster', JSON.stringify(got.server));
    assert.equal(got.server?.['downstream_local_address'], `${POD_V4}:9080`);
    // A connection carried as TCP is logged too (inbound, to the app's TCP port), and an HTTP/2 stream (h2c, outbound).
    assert.match(tcpFrom(sp.pod.peer, POD_V4, 9081), /ping/);
    assert.equal(h2From(sp.pod, `http://${PEER_V4}:8080/mesh-on-h2`), '200');
    await waitFor('the TCP line', () => (tcpRecords(9081).length > 0 ? true : undefined), 5_000);
    await waitFor('the HTTP/2 line', () => (recordOf('/mesh-on-h2')?.['protocol'] === 'HTTP/2' ? true : undefined), 5_000);
  });

  it('the workload\'s own Telemetry turns SERVER off over the root\'s on: outbound lines go on, inbound ones stop', async () => {
    await resources(MESH_ON + WEB_SERVER_OFF);
    const tcpBefore = tcpRecords(9081).length;
    const got = await requests('server-off', 1_500);
    assert.equal(got.client?.['upstream_cluster'], 'PassthroughCluster', JSON.stringify(got.client));
    assert.equal(got.server, undefined, 'no inbound line while SERVER is off');
    assert.match(tcpFrom(sp.pod.peer, POD_V4, 9081), /ping/);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(tcpRecords(9081).length, tcpBefore, 'no inbound TCP line either');
  });

  it('the Telemetries removed: the mesh config\'s setting (off) is back, without a restart', async () => {
    const pid = sp.sidecar.pid;
    await resources('');
    assert.equal(h2From(sp.pod, `http://${PEER_V4}:8080/removed-h2`), '200');
    const got = await requests('removed', 700);
    assert.deepEqual(got, { client: undefined, server: undefined });
    assert.equal(recordOf('/removed-h2'), undefined);
    assert.equal(sp.sidecar.pid, pid);
    assert.equal(sp.sidecar.exitCode, null);
    // And on again: the same sidecar switches back.
    await resources(MESH_ON);
    const again = await requests('again', 5_000);
    assert.ok(again.client !== undefined && again.server !== undefined, sp.stdout());
  });
});

describe('Telemetry accessLogging beside the mesh config\'s accessLogFile', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  const file = (): string => (existsSync(join(sp.dir, 'access.log')) ? readFileSync(join(sp.dir, 'access.log'), 'utf8') : '');
  const resources = (text: string): Promise<void> => writeResources(sp, RESOURCES, text);
  /** Where the line of `path` went: the file, stdout, or nowhere (within `wait` ms). */
  async function whereLogged(path: string, wait: number): Promise<string> {
    const marker = `"GET ${path} HTTP/1.1"`;
    const deadline = Date.now() + wait;
    for (;;) {
      const where = [file().includes(marker) ? 'file' : '', sp.stdout().includes(marker) ? 'stdout' : ''].filter(Boolean).join('+');
      if (where !== '' || Date.now() > deadline) return where || 'nowhere';
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="web"\n',
        'etc/mesh/config/mesh': 'accessLogFile: ./access.log\n',
        'etc/mesh/resources/r.yaml': '',
      },
      writable: true, // the sidecar (uid 1337) creates the file in its working directory
      env: ['POD_NAMESPACE=default'],
      prepare: async (p) => {
        await untilFirstOutput(p.peer.start(process.execPath, [APP, PEER_V4, '8080', 'peer']));
        await untilFirstOutput(p.start(process.execPath, [APP, '0.0.0.0', '9080', 'app']));
      },
    });
  });
  after(() => sp?.close());

  it('a Telemetry turning CLIENT on writes it where Istio\'s envoy provider does (stdout); SERVER, undecided, stays in the file', async () => {
    assert.equal(fetchFrom(sp.pod, `http://${PEER_V4}:8080/plain-out`), 200);
    assert.equal(await whereLogged('/plain-out', 5_000), 'file');
    await resources(telemetry('ns', 'default', '  accessLogging: [{providers: [{name: envoy}], match: {mode: CLIENT}}]\n'));
    assert.equal(fetchFrom(sp.pod, `http://${PEER_V4}:8080/client-on-out`), 200);
    assert.equal(fetchFrom(sp.pod.peer, `http://${POD_V4}:9080/client-on-in`), 200);
    assert.equal(await whereLogged('/client-on-out', 5_000), 'stdout');
    assert.equal(await whereLogged('/client-on-in', 5_000), 'file');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.doesNotMatch(file(), /client-on-out/, 'one line, on stdout only');
  });

  it('an entry naming no provider changes nothing, as in Istio (a warning says so): the file keeps both directions', async () => {
    await resources(telemetry('ns', 'default', '  accessLogging: [{disabled: true}]\n'));
    assert.match(sp.stderr(), /spec\.accessLogging\[0\].*names no provider/);
    assert.equal(fetchFrom(sp.pod, `http://${PEER_V4}:8080/unnamed-out`), 200);
    assert.equal(fetchFrom(sp.pod.peer, `http://${POD_V4}:9080/unnamed-in`), 200);
    assert.equal(await whereLogged('/unnamed-out', 5_000), 'file');
    assert.equal(await whereLogged('/unnamed-in', 5_000), 'file');
  });
});

describe('the mesh config\'s defaultProviders.accessLogging: [envoy]', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  const resources = (text: string): Promise<void> => writeResources(sp, RESOURCES, text);
  const logged = (path: string): boolean => sp.stdout().includes(`"GET ${path} HTTP/1.1"`);
  async function both(step: string, wait: number): Promise<{ client: boolean; server: boolean }> {
    assert.equal(fetchFrom(sp.pod, `http://${PEER_V4}:8080/${step}-out`), 200);
    assert.equal(fetchFrom(sp.pod.peer, `http://${POD_V4}:9080/${step}-in`), 200);
    const deadline = Date.now() + wait;
    while (Date.now() < deadline && !(logged(`/${step}-out`) && logged(`/${step}-in`))) await new Promise((resolve) => setTimeout(resolve, 50));
    return { client: logged(`/${step}-out`), server: logged(`/${step}-in`) };
  }

  before(async () => {
    sp = await startSidecarPod({
      // accessLogFile "" (off, as Istio's default for a sidecar): the default provider logs all the same.
      files: { 'etc/mesh/pod/labels': 'app="web"\n', 'etc/mesh/config/mesh': 'accessLogFile: ""\ndefaultProviders: {accessLogging: [envoy], metrics: [prometheus]}\n', 'etc/mesh/resources/r.yaml': '' },
      env: ['POD_NAMESPACE=default'],
      prepare: async (p) => {
        await untilFirstOutput(p.peer.start(process.execPath, [APP, PEER_V4, '8080', 'peer']));
        await untilFirstOutput(p.start(process.execPath, [APP, '0.0.0.0', '9080', 'app']));
      },
    });
  });
  after(() => sp?.close());

  it('with no Telemetry, every direction is logged on stdout (Istio\'s envoy provider), and the mesh config draws no warning for it', async () => {
    assert.deepEqual(await both('default-on', 5_000), { client: true, server: true });
    assert.doesNotMatch(sp.stderr(), /defaultProviders/);
  });

  it('an entry naming no provider takes the default one: SERVER off', async () => {
    await resources(telemetry('ns', 'default', '  accessLogging: [{disabled: true, match: {mode: SERVER}}]\n'));
    const got = await both('unnamed-server-off', 1_500);
    assert.deepEqual(got, { client: true, server: false });
  });
});
