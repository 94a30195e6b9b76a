// `/clusters` end to end: a sidecar in a pod namespace with a STATIC ServiceEntry (two endpoints on
// the peer) and a DestinationRule with outlierDetection; requests from the app to the service's
// address go through the cluster; `pilot-agent request GET /clusters` shows both endpoints in
// Envoy's line format, their counts the process's (two workers: shared memory), and `/stats`,
// `/config_dump` (clusters and the mesh routes in force) and the Prometheus series agree.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { repoRoot } from '../../helpers/repo.js';
import { runCli } from '../../helpers/run-cli.js';
import { startSidecarPod, untilFirstOutput, type SidecarPod } from '../../helpers/sidecar-pod.js';
import { sumOf } from '../../helpers/prom-samples.js';

const VIP = '198.18.0.100';
const E1 = '198.18.0.11';
const E2 = '198.18.0.12';
const PORT = 9080;
const CLUSTER = 'outbound|9080||reviews.default.svc.cluster.local';
const REQUESTS = 10;

const RESOURCES = `apiVersion: networking.mesh.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews.default.svc.cluster.local]
  addresses: [${VIP}]
  ports: [{number: ${PORT}, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: ${E1}, locality: us-east1/us-east1-b}, {address: ${E2}, weight: 3}]
---
apiVersion: networking.mesh.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews.default.svc.cluster.local
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 3, interval: 1s, baseEjectionTime: 30s}
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{sourceLabels: {app: other}}]
    route: [{destination: {host: reviews}}]
  - route: [{destination: {host: reviews, port: {number: ${PORT}}}}]
---
apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: reviews-edge, namespace: default}
spec:
  hosts: [reviews.example.com]
  gateways: [mesh-system/gw]
  http:
  - route: [{destination: {host: reviews}}]
`;

describe('admin /clusters with a ServiceEntry and a DestinationRule', { skip: netnsSkip }, () => {
  let sp: SidecarPod | undefined;
  before(async () => {
    sp = await startSidecarPod({
      files: { 'etc/mesh/pod/labels': 'app="productpage"\n', 'etc/mesh/resources/reviews.yaml': RESOURCES },
      env: ['POD_NAMESPACE=default'],
      prepare: async (pod) => {
        for (const a of [E1, E2]) pod.peer.exec('ip', ['addr', 'add', `${a}/24`, 'dev', 'peer0']);
        await untilFirstOutput(pod.peer.start(process.execPath, [join(repoRoot, 'test', 'fixtures', 'http-server.mjs'), '--port', String(PORT)]));
      },
    });
    const specs = Array.from({ length: REQUESTS }, () => ({ url: `http://${VIP}:${PORT}/echo` }));
    const r = sp.pod.exec(process.execPath, [join(repoRoot, 'test', 'fixtures', 'http-requests.mjs'), JSON.stringify(specs)]);
    const answers = JSON.parse(r.stdout) as { status: number }[];
    assert.deepEqual(answers.map((a) => a.status), specs.map(() => 200), r.stdout);
  });
  after(() => sp?.close());

  const request = async (path: string): Promise<string> => {
    const r = await runCli(['request', 'GET', path], { prefix: ['ip', 'netns', 'exec', sp!.pod.name] });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };

  it('GET /clusters shows both endpoints in Envoy\'s line format, with the process\'s counts', async () => {
    const text = await request('/clusters');
    const lines = text.split('\n');
    for (const expected of [
      'PassthroughCluster::observability_name::PassthroughCluster',
      `${CLUSTER}::observability_name::${CLUSTER}`,
      `${CLUSTER}::outlier::success_rate_average::-1`,
      `${CLUSTER}::default_priority::max_connections::4294967295`,
      `${CLUSTER}::high_priority::max_connections::1024`,
      `${CLUSTER}::added_via_api::true`,
      `${CLUSTER}::${E1}:${PORT}::rq_active::0`,
      `${CLUSTER}::${E1}:${PORT}::rq_error::0`,
      `${CLUSTER}::${E1}:${PORT}::health_flags::healthy`,
      `${CLUSTER}::${E1}:${PORT}::weight::1`,
      `${CLUSTER}::${E1}:${PORT}::region::us-east1`,
      `${CLUSTER}::${E1}:${PORT}::zone::us-east1-b`,
      `${CLUSTER}::${E2}:${PORT}::rq_active::0`,
      `${CLUSTER}::${E2}:${PORT}::health_flags::healthy`,
      `${CLUSTER}::${E2}:${PORT}::weight::3`,
    ]) assert.ok(lines.includes(expected), `missing "${expected}" in\n${text}`);
    const count = (host: string, stat: string): number => {
      const m = new RegExp(`^${CLUSTER.replace(/[|.]/g, '\\$&')}::${host.replace(/\./g, '\\.')}:${PORT}::${stat}::(\\d+)$`, 'm').exec(text);
      assert.ok(m, `no ${stat} for ${host}`);
      return Number(m[1]);
    };
    assert.equal(count(E1, 'rq_total') + count(E2, 'rq_total'), REQUESTS);
    assert.equal(count(E1, 'rq_success') + count(E2, 'rq_success'), REQUESTS);
    // Every request went to the cluster: the passthrough cluster (the original destination) had none of them.
    const passthrough = (stat: string): number => Number(new RegExp(`^PassthroughCluster::original destination:0::${stat}::(\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
    assert.deepEqual([passthrough('rq_total'), passthrough('cx_total'), passthrough('cx_active')], [0, 0, 0], text);
    for (const line of lines.filter((l) => l.startsWith(`${CLUSTER}::`))) {
      assert.match(line, /^outbound\|9080\|\|reviews\.default\.svc\.cluster\.local::[^:]/, line);
    }
  });

  it('GET /clusters?format=json lists the same endpoints', async () => {
    const json = JSON.parse(await request('/clusters?format=json')) as {
      cluster_statuses: { name: string; host_statuses?: { address: { socket_address: { address: string; port_value: number } }; weight: number }[] }[];
    };
    const c = json.cluster_statuses.find((s) => s.name === CLUSTER);
    assert.ok(c, JSON.stringify(json));
    assert.deepEqual(c.host_statuses!.map((h) => [h.address.socket_address.address, h.address.socket_address.port_value, h.weight]), [[E1, PORT, 1], [E2, PORT, 3]]);
  });

  it('GET /stats, /config_dump and /stats/prometheus agree', async () => {
    assert.match(await request(`/stats?filter=${encodeURIComponent('upstream_rq_total$')}`), new RegExp(`^cluster\\.${CLUSTER.replace(/[|.]/g, '\\$&')}\\.upstream_rq_total: ${REQUESTS}$`, 'm'));
    assert.match(await request('/stats?filter=membership_healthy'), /^cluster\.outbound\|9080\|\|reviews\.default\.svc\.cluster\.local\.membership_healthy: 2$/m);
    const dump = JSON.parse(await request('/config_dump')) as { clusters: { name: string; type: string; rule?: string; endpoints?: { address: string; health: string }[] }[] };
    const c = dump.clusters.find((x) => x.name === CLUSTER);
    assert.ok(c, JSON.stringify(dump.clusters));
    assert.equal(c.type, 'EDS');
    assert.equal(c.rule, 'DestinationRule default/reviews');
    assert.deepEqual(c.endpoints!.map((e) => [e.address, e.health]), [[E1, 'HEALTHY'], [E2, 'HEALTHY']]);
    // The sidecar's routes: the mesh VirtualServices as it applies them (hosts expanded, the route
    // whose only match is for other workloads dropped); the gateway-bound one is not among them.
    const routes = (JSON.parse(await request('/config_dump')) as { routes: { meta: { name: string }; hosts: string[]; http: unknown[] }[] }).routes;
    assert.deepEqual(routes.map((r) => [r.meta.name, r.hosts, r.http.length]), [['reviews', ['reviews.default.svc.cluster.local'], 1]]);
    const prom = await request('/stats/prometheus');
    assert.match(prom, new RegExp(`^mesh_cluster_upstream_rq_total\\{cluster_name="${CLUSTER.replace(/[|.]/g, '\\$&')}"\\} ${REQUESTS}$`, 'm'));
    assert.ok(sumOf(prom, 'mesh_requests_total', { reporter: 'source', response_code: '200', destination_service: 'reviews.default.svc.cluster.local' }) >= REQUESTS, prom);
  });
});
