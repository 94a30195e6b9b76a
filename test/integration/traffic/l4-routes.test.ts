// VirtualService tcp and tls routes end to end in a pod (capture rules, the sidecar as uid 1337):
// connections carried as TCP go where their tcp route's weights say, chosen once per connection (a
// long connection keeps its endpoint across a configuration change); sourceLabels and port judge the
// route for this workload; TLS to a port declared TLS is routed by the ClientHello's server name
// (openssl s_client -servername) and relayed whole to the chosen endpoint, which terminates it; a
// server name no route matches, or none, gets the connection closed (NR in the access log).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { startSidecarPod, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { waitFor } from '../../helpers/wait-for.js';

const FIXTURES = join(repoRoot, 'test', 'fixtures');
const DB = '198.18.1.10';
const DB_A = '198.18.1.11';
const DB_B = '198.18.1.12';
const API = '198.18.1.20';
const API_V1 = '198.18.1.21';
const API_V2 = '198.18.1.22';

const ENTRIES = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec:
  hosts: [db.example.com]
  addresses: [${DB}]
  ports: [{number: 5432, name: pg, protocol: TCP}, {number: 5433, name: unset}]
  resolution: STATIC
  endpoints: [{address: ${DB_A}, labels: {v: a}}, {address: ${DB_B}, labels: {v: b}}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: db, namespace: default}
spec:
  host: db.example.com
  subsets: [{name: a, labels: {v: a}}, {name: b, labels: {v: b}}]
---
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.com]
  addresses: [${API}]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: STATIC
  endpoints: [{address: ${API_V1}, labels: {v: v1}}, {address: ${API_V2}, labels: {v: v2}}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: api, namespace: default}
spec:
  host: api.example.com
  subsets: [{name: v1, labels: {v: v1}}, {name: v2, labels: {v: v2}}]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.com, "*.api.example.com"]
  tls:
  - match: [{sniHosts: [v2.api.example.com], port: 443}]
    route: [{destination: {host: api.example.com, subset: v2}}]
  - match: [{sniHosts: [api.example.com, "*.api.example.com"]}]
    route: [{destination: {host: api.example.com, subset: v1}}]
`;

/** A TLS entry without addresses (an external name, as egress entries are written): its endpoints are the TLS servers too. */
const EXTERNAL = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: default}
spec:
  hosts: [ext.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: STATIC
  endpoints: [{address: ${API_V1}, labels: {v: v1}}, {address: ${API_V2}, labels: {v: v2}}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: ext, namespace: default}
spec:
  host: ext.example.com
  subsets: [{name: v1, labels: {v: v1}}, {name: v2, labels: {v: v2}}]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: ext, namespace: default}
spec:
  hosts: [ext.example.com]
  tls:
  - match: [{sniHosts: [ext.example.com]}]
    route: [{destination: {host: ext.example.com, subset: v2}}]
`;

/** The db routes: 5432 split by `weightA` / 100 - weightA; 5433 (sniffed) to b, past a route for other workloads. */
const dbRoutes = (weightA: number): string => `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: db, namespace: default}
spec:
  hosts: [db.example.com]
  tcp:
  - match: [{port: 5432, destinationSubnets: [${DB}/32]}]
    route:
    - {destination: {host: db.example.com, subset: a}, weight: ${weightA}}
    - {destination: {host: db.example.com, subset: b}, weight: ${100 - weightA}}
  - match: [{port: 5433, sourceLabels: {app: other}}]
    route: [{destination: {host: db.example.com, subset: a}}]
  - match: [{port: 5433}]
    route: [{destination: {host: db.example.com, subset: b}}]
`;

const APPS_ON_PEER = [
  ...[5432, 5433].flatMap((port) => [{ address: DB_A, port, kind: 'tag', name: 'a' }, { address: DB_B, port, kind: 'tag', name: 'b' }]),
  // The service's own address answers too: what a connection that kept its original destination would reach.
  ...[5432, 5433].map((port) => ({ address: DB, port, kind: 'tag', name: 'original' })),
];

/** From inside the pod: `n` connections to host:port one after the other, each sending a line; the apps' tags counted. */
const COUNT_TAGS = `const net = require('node:net');
  const [host, port, n] = process.argv.slice(1).map((v, i) => (i === 0 ? v : Number(v)));
  const counts = {};
  const one = (i) => {
    if (i === n) { process.stdout.write(JSON.stringify(counts)); return; }
    const s = net.connect(port, host);
    let got = '';
    s.on('connect', () => s.end('\\x00not http\\n'));
    s.on('data', (d) => { got += d; });
    s.on('error', (e) => { got = 'error ' + e.code + ':'; });
    s.on('close', () => { const tag = got.slice(0, got.indexOf(':')); counts[tag] = (counts[tag] || 0) + 1; one(i + 1); });
  };
  one(0);`;

describe('VirtualService tcp and tls routes at the sidecar', { skip: netnsSkip }, () => {
  let sp: SidecarPod;
  let apps: ChildProcess | undefined;
  let tlsServers: ChildProcess | undefined;

  const countTags = (host: string, port: number, n: number): Record<string, number> =>
    JSON.parse(sp.pod.exec(process.execPath, ['-e', COUNT_TAGS, host, String(port), String(n)]).stdout) as Record<string, number>;
  /** What the endpoint said over TLS (openssl's exit code is 1 either way once the server closes: not compared). */
  const sClient = (serverName: string | undefined, address = API): string => {
    const r = sp.pod.exec('timeout', ['5', 'openssl', 's_client', '-connect', `${address}:443`, '-quiet',
      ...(serverName === undefined ? ['-noservername'] : ['-servername', serverName])], { input: '', allowFailure: true });
    return r.stdout.trim();
  };

  before(async () => {
    sp = await startSidecarPod({
      files: {
        'etc/mesh/pod/labels': 'app="client"\n',
        'etc/mesh/config/mesh': 'accessLogFile: /dev/stdout\n',
        'etc/mesh/resources/entries.yaml': ENTRIES,
        'etc/mesh/resources/external.yaml': EXTERNAL,
        'etc/mesh/resources/db-routes.yaml': dbRoutes(80),
      },
      env: ['POD_NAMESPACE=default', 'FILE_DEBOUNCE_DURATION=50ms'],
      prepare: async (pod) => {
        for (const address of [DB, DB_A, DB_B, API, API_V1, API_V2]) pod.peer.exec('ip', ['addr', 'add', `${address}/24`, 'dev', 'peer0']);
        apps = pod.peer.start(process.execPath, [join(FIXTURES, 'protocol-apps.mjs'), JSON.stringify(APPS_ON_PEER)]);
        tlsServers = pod.peer.start(process.execPath, [join(FIXTURES, 'tls-name-servers.mjs'), join(FIXTURES, 'localhost.crt'), join(FIXTURES, 'localhost.key'),
          API_V1, 'v1', API_V2, 'v2']);
        for (const child of [apps, tlsServers]) {
          let out = '';
          child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
          await waitFor('the apps listening', () => out.includes('listening') || undefined, 15_000);
        }
      },
    });
  });
  after(() => sp?.close());

  it('tcp: weights are chosen per connection (80/20 over 200 connections)', async () => {
    const counts = countTags(DB, 5432, 200);
    // Binomial(200, 0.8): sd ≈ 5.7; 160 ± 28 is 4.9 sd each way: a false failure ≈ 1e-6 (< 1e-4). The
    // service's own balancing (no route) would give about 100 each.
    assert.equal((counts['a'] ?? 0) + (counts['b'] ?? 0), 200, `${JSON.stringify(counts)}\n${sp.stderr()}`);
    assert.ok(Math.abs((counts['a'] ?? 0) - 160) <= 28, JSON.stringify(counts));
    // The access log (written in batches) names the subset cluster each connection went to.
    await waitFor('both clusters in the access log', () => (/outbound\|5432\|a\|db\.example\.com/.test(sp.stdout())
      && /outbound\|5432\|b\|db\.example\.com/.test(sp.stdout()) ? true : undefined), 3000)
      .catch(() => assert.fail(`the access log does not name both clusters:\n${sp.stdout().slice(0, 2000)}`));
  });

  it('tcp on a sniffed port: the route for this workload\'s labels and port (a route for other labels is passed over)', () => {
    assert.deepEqual(countTags(DB, 5433, 10), { b: 10 });
  });

  it('a long connection keeps its endpoint when the weights change; new connections follow the new weights', async () => {
    // A held connection: its first line is answered by the endpoint it got; the second is sent after the change.
    const held = sp.pod.start(process.execPath, ['-e', `const s = require('node:net').connect(5432, '${DB}');
      let got = ''; s.on('connect', () => s.write('\\x00first\\n')); s.on('data', (d) => { got += d; process.stdout.write(d); });
      process.stdin.once('data', () => s.end('second\\n')); s.on('close', () => { console.log('|closed'); process.exit(0); });`], { stdin: true });
    let out = '';
    held.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
    try {
      await waitFor('the first answer', () => /^[ab]:/.test(out) || undefined, 5000);
      const first = out.slice(0, 1);
      const other = first === 'a' ? 'b' : 'a';
      writeFileSync(join(sp.dir, 'etc/mesh/resources/db-routes.yaml'), dbRoutes(other === 'a' ? 100 : 0));
      await waitFor('new connections on the other subset', () => (countTags(DB, 5432, 5)[other] === 5 ? true : undefined), 10_000);
      held.stdin!.write('go\n');
      await waitFor('the held connection closed', () => out.includes('|closed') || undefined, 5000);
      assert.equal(out, `${first}:\x00first\nsecond\n|closed\n`, 'the same endpoint answered both lines');
      assert.deepEqual(countTags(DB, 5432, 20), { [other]: 20 });
    } finally {
      held.kill();
      writeFileSync(join(sp.dir, 'etc/mesh/resources/db-routes.yaml'), dbRoutes(80));
    }
  });

  it('tls: the server name picks the route (exact before wildcard); the TLS reaches the endpoint whole', () => {
    assert.equal(sClient('v2.api.example.com'), 'v2 v2.api.example.com', sp.stderr());
    assert.equal(sClient('api.example.com'), 'v1 api.example.com');
    assert.equal(sClient('x.api.example.com'), 'v1 x.api.example.com');
  });

  it('tls to an entry without addresses: the server name picks the route at its endpoints\' addresses; another name keeps the original destination', () => {
    assert.equal(sClient('ext.example.com', API_V1), 'v2 ext.example.com');
    assert.equal(sClient('other.example.org', API_V1), 'v1 other.example.org');
  });

  it('tls: a server name no route matches, and no server name at all, get the connection closed, NR in the access log', async () => {
    for (const name of ['other.example.org', undefined]) {
      assert.equal(sClient(name), '', `${name ?? 'no SNI'}: nothing from any endpoint`);
    }
    await waitFor('the access log lines', () => (/ NR .*other\.example\.org|other\.example\.org.* NR /.test(sp.stdout()) ? true : undefined), 3000)
      .catch(() => assert.fail(`no NR line naming the server name:\n${sp.stdout()}`));
  });

  it('tls: a ClientHello in more than 64 pieces is taken as none (closed): each piece re-reads what came before', () => {
    const whole = sp.pod.exec(process.execPath, [join(FIXTURES, 'client-hello-sender.mjs'), API, '443', 'whole']).stdout;
    assert.ok(Number(whole) > 0, `the endpoint's ServerHello came back for the whole hello: ${whole}`);
    assert.equal(sp.pod.exec(process.execPath, [join(FIXTURES, 'client-hello-sender.mjs'), API, '443', 'trickled']).stdout, '0');
  });
});
