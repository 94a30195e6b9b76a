// `pilot-agent proxy router` serving a TCP server and a TLS PASSTHROUGH server (Istio's gateway
// semantics): TCP connections go where the port's tcp route's weights say, chosen once per
// connection, to the endpoints of a ServiceEntry's subset clusters; TLS is never terminated: the
// ClientHello's server name (openssl s_client -servername) picks the tls route, and the backend
// terminates the client's own TLS (it answers with the server name it saw); a server name no route
// matches, or none, gets the connection closed (NR); AuthorizationPolicy judges the connections with
// TCP semantics (connection.sni, destination.port: RBAC); the access log, /debug/decisions and /stats
// record them.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIXTURES, startGatewayPod, type GatewayPod } from '../../helpers/gateway.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { waitFor } from '../../helpers/wait-for.js';

const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: public, namespace: edge}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 9000, name: db, protocol: TCP}
    hosts: ["*"]
  - port: {number: 9001, name: nothing, protocol: MYSQL}
    hosts: [nothing.example.org]
  - port: {number: 9002, name: guarded, protocol: TCP}
    hosts: ["*"]
  - port: {number: 8443, name: tls, protocol: TLS}
    hosts: ["*.example.com"]
    tls: {mode: PASSTHROUGH}
---
apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: edge}
spec:
  hosts: [db.example.com]
  ports: [{number: 5432, name: pg, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 127.0.0.11, labels: {v: a}}, {address: 127.0.0.12, labels: {v: b}}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: db, namespace: edge}
spec:
  host: db.example.com
  subsets: [{name: a, labels: {v: a}}, {name: b, labels: {v: b}}]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: db, namespace: edge}
spec:
  hosts: [db.example.com]
  gateways: [public]
  tcp:
  - match: [{port: 9002}]
    route: [{destination: {host: db.example.com, subset: b}}]
  - match: [{port: 9000}]
    route:
    - {destination: {host: db.example.com, subset: a}, weight: 80}
    - {destination: {host: db.example.com, subset: b}, weight: 20}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: api, namespace: edge}
spec:
  hosts: ["*.example.com"]
  gateways: [public]
  tls:
  - match: [{sniHosts: [v2.api.example.com]}]
    route: [{destination: {host: 127.0.0.22, port: {number: 443}}}]
  - match: [{sniHosts: ["*.api.example.com"]}]
    route: [{destination: {host: 127.0.0.21, port: {number: 443}}}]
`;

/** TCP connections judged on what the connection shows: the SNI, the port. */
const POLICY = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: by-connection, namespace: edge}
spec:
  action: DENY
  rules:
  - when: [{key: connection.sni, values: [denied.api.example.com]}]
  - when: [{key: destination.port, values: ["9002"]}]
`;

const TAG_APPS = [{ address: '127.0.0.11', port: 5432, kind: 'tag', name: 'a' }, { address: '127.0.0.12', port: 5432, kind: 'tag', name: 'b' }];

/** `n` connections to 127.0.0.1:port one after the other, each sending a line; the apps' tags counted (`closed`, `error CODE` too). */
const COUNT_TAGS = `const net = require('node:net');
  const [port, n] = process.argv.slice(1).map(Number);
  const counts = {};
  const one = (i) => {
    if (i === n) { process.stdout.write(JSON.stringify(counts)); return; }
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    s.on('connect', () => s.end('\\x00not http\\n'));
    s.on('data', (d) => { got += d; });
    // Closed by the gateway: a FIN, or a reset (it had unread bytes of ours).
    s.on('error', (e) => { got = e.code === 'ECONNRESET' ? '' : 'error ' + e.code + ':'; });
    s.on('close', () => { const tag = got === '' ? 'closed' : got.slice(0, got.indexOf(':')); counts[tag] = (counts[tag] || 0) + 1; one(i + 1); });
  };
  one(0);`;

describe('pilot-agent proxy router: TCP and TLS PASSTHROUGH servers', { skip: netnsSkip }, () => {
  let pod: GatewayPod;
  let apps: ChildProcess | undefined;
  let tlsServers: ChildProcess | undefined;

  const countTags = async (port: number, n: number): Promise<Record<string, number>> => {
    const r = await pod.exec(process.execPath, ['-e', COUNT_TAGS, String(port), String(n)], 60_000);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as Record<string, number>;
  };
  /** What the backend said over the client's TLS; empty: the gateway closed the connection. */
  const sClient = async (serverName: string | undefined): Promise<string> => {
    const r = await pod.exec('timeout', ['5', 'openssl', 's_client', '-connect', '127.0.0.1:8443', '-quiet',
      ...(serverName === undefined ? ['-noservername'] : ['-servername', serverName])]);
    return r.stdout.trim();
  };
  const logged = (what: string, pattern: RegExp): Promise<unknown> => waitFor(what, () => (pattern.test(pod.output()) ? true : undefined), 3000)
    .catch(() => assert.fail(`the access log has no line for ${what} (${String(pattern)}):\n${pod.output().slice(-3000)}`));

  before(async () => {
    pod = await startGatewayPod({
      resources: { 'edge.yaml': RESOURCES, 'policy.yaml': POLICY },
      namespace: 'edge',
      prepare: async (p) => {
        apps = await p.start([join(FIXTURES, 'protocol-apps.mjs'), JSON.stringify(TAG_APPS)]);
        tlsServers = await p.start([join(FIXTURES, 'tls-name-servers.mjs'), join(FIXTURES, 'localhost.crt'), join(FIXTURES, 'localhost.key'), '127.0.0.21', 'v1', '127.0.0.22', 'v2']);
      },
    });
  });
  after(() => {
    apps?.kill('SIGKILL');
    tlsServers?.kill('SIGKILL');
    pod?.close();
  });

  it('listens on the TCP (MYSQL too) and TLS PASSTHROUGH ports, and says which of them no route serves', () => {
    assert.match(pod.output(), /listening on TCP port 9000 for edge\/public/);
    assert.match(pod.output(), /listening on TCP port 9001 for edge\/public/);
    assert.match(pod.output(), /listening on TLS port 8443 for edge\/public/);
    assert.match(pod.output(), /gateway edge\/public: server 1 on port 9001 \(MYSQL\): no tcp route of a VirtualService bound to it applies; its connections are closed \(NR\)/);
  });

  it('tcp: weights are chosen per connection (80/20 over 200 connections), to the subsets\' endpoints', async () => {
    const counts = await countTags(9000, 200);
    // Binomial(200, 0.8): sd ≈ 5.7; 160 ± 28 is 4.9 sd each way: a false failure ≈ 1e-6 (< 1e-4).
    // Balancing across both endpoints with no route would give about 100 each.
    assert.equal((counts['a'] ?? 0) + (counts['b'] ?? 0), 200, `${JSON.stringify(counts)}\n${pod.output().slice(-3000)}`);
    assert.ok(Math.abs((counts['a'] ?? 0) - 160) <= 28, JSON.stringify(counts));
    await logged('the a cluster', /outbound\|5432\|a\|db\.example\.com/);
    await logged('the b cluster', /outbound\|5432\|b\|db\.example\.com/);
  });

  it('tls: the server name picks the route (exact before *.suffix) and the backend terminates the client\'s own TLS', async () => {
    assert.equal(await sClient('v2.api.example.com'), 'v2 v2.api.example.com');
    assert.equal(await sClient('x.api.example.com'), 'v1 x.api.example.com');
    assert.match(await sClient('X.API.example.com'), /^v1 x\.api\.example\.com$/i, 'names compare case-insensitively');
    await logged('a routed TLS connection with its server name', /"127\.0\.0\.22:443" outbound\|443\|\|127\.0\.0\.22 .* v2\.api\.example\.com /);
  });

  it('tls: a server name no route matches, or none, is closed (NR); so is a TCP port no route serves', async () => {
    assert.equal(await sClient('www.example.com'), '', 'within the server\'s hosts, but no sniHosts take it');
    assert.equal(await sClient(undefined), '');
    assert.deepEqual(await countTags(9001, 1), { closed: 1 });
    await logged('the unrouted server name', / 0 NR - filter_chain_not_found "-" \d+ 0 0 - "-" "-" "-" "-" "-" - - 127\.0\.0\.1:8443 \S+ www\.example\.com .* route="no route: no tls route of this port matches server name www\.example\.com"/);
  });

  it('tls: a ClientHello in more than 64 pieces is taken as none (closed, NR): each piece re-reads what came before', async () => {
    const whole = await pod.exec(process.execPath, [join(FIXTURES, 'client-hello-sender.mjs'), '127.0.0.1', '8443', 'whole']);
    assert.ok(Number(whole.stdout) > 0, `the backend's ServerHello came back for the whole hello: ${whole.stdout} ${whole.stderr}`);
    const trickled = await pod.exec(process.execPath, [join(FIXTURES, 'client-hello-sender.mjs'), '127.0.0.1', '8443', 'trickled']);
    assert.equal(trickled.stdout, '0', trickled.stderr);
    await logged('the trickled hello', /NR - filter_chain_not_found .* route="no route: no tls route of this port matches a connection that is not TLS"/);
  });

  it('AuthorizationPolicy judges connections with TCP semantics: connection.sni, destination.port (RBAC)', async () => {
    assert.equal(await sClient('denied.api.example.com'), '');
    assert.equal(await sClient('allowed.api.example.com'), 'v1 allowed.api.example.com');
    assert.deepEqual(await countTags(9002, 2), { closed: 2 });
    await logged('the denied server name', /RBAC - rbac_access_denied_matched_policy\[ns\[edge\]-policy\[by-connection\]-rule\[0\]\] .* denied\.api\.example\.com .* authz="denied by DENY policy edge\/by-connection rule 0" route="edge\/api tls\[1\]"/);
    await logged('the denied port', /RBAC - rbac_access_denied_matched_policy\[ns\[edge\]-policy\[by-connection\]-rule\[1\]\] .* 127\.0\.0\.1:9002 /);
  });

  it('/debug/decisions records each connection (route, cluster, flag); /stats counts them', async () => {
    const r = await pod.ns.runCli(['request', 'GET', '/debug/decisions?limit=500']);
    assert.equal(r.code, 0, r.stderr);
    const decisions = (JSON.parse(r.stdout) as { decisions: Record<string, unknown>[] }).decisions;
    const tls = decisions.filter((d) => d['listener'] === 'gateway_8443');
    assert.ok(tls.some((d) => d['method'] === 'TLS' && d['authority'] === 'v2.api.example.com' && d['route'] === 'edge/api tls[0]'
      && d['upstream'] === '127.0.0.22:443' && d['flag'] === undefined), JSON.stringify(tls));
    assert.ok(tls.some((d) => d['authority'] === 'denied.api.example.com' && d['flag'] === 'RBAC' && String(d['authz']).startsWith('denied')), JSON.stringify(tls));
    assert.ok(tls.some((d) => d['authority'] === 'www.example.com' && d['flag'] === 'NR'), JSON.stringify(tls));
    const tcp = decisions.filter((d) => d['listener'] === 'gateway_9000');
    assert.ok(tcp.length >= 200 && tcp.every((d) => d['method'] === 'TCP' && d['route'] === 'edge/db tcp[1]'), JSON.stringify(tcp.slice(0, 3)));
    assert.ok(tcp.some((d) => d['cluster'] === 'outbound|5432|a|db.example.com' && /^127\.0\.0\.11:5432$/.test(String(d['upstream']))));
    const s = await pod.ns.runCli(['request', 'GET', '/stats']);
    const stats = new Map([...s.stdout.matchAll(/^(\S+): (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
    assert.ok((stats.get('tcp.inbound.downstream_cx_total') ?? 0) >= 204, s.stdout);
    assert.ok((stats.get('tcp.inbound.rbac.denied') ?? 0) >= 3, s.stdout);
    assert.ok((stats.get('tcp.inbound.no_filter_chain_match') ?? 0) >= 3, s.stdout);
  });
});
